"""The training batches of `xhc train` / `xhc launch`, reproduced in Python.

A copy of runtime/data/corpus.cc (LoadCorpus: globs sorted, fortune(6) `X.dat` index files and
duplicate real paths dropped, bytes concatenated, every (1/val_fraction)-th block held out for
validation) and runtime/data/sampler.cc (BatchSampler::Train: the rows of micro-batch mb at
step s are windows whose starts are SplitMix64 hashes of (seed, s, mb, row)). The benchmark
does not trust this copy: a row whose first losses differ from ours is reported invalid.
"""

import glob
import os

import numpy as np

_M64 = (1 << 64) - 1


def mix64(x):
    """base/hash.cc Mix64 (SplitMix64's finalizer), on Python ints modulo 2^64."""
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def _split_block_size(total_bytes, stride):
    block = 4096
    while block > 64 and total_bytes // block < 8 * stride:
        block //= 2
    return block


def load_train_corpus(patterns, val_fraction=0.05):
    """The training split of LoadCorpus, as a uint8 array."""
    files = []
    for pattern in patterns:
        matched = sorted(p for p in glob.glob(pattern) if os.path.isfile(p))
        if not matched:
            raise ValueError(f"data.train: '{pattern}' matches no file")
        files.extend(matched)
    names = set(files)
    seen, chunks = set(), []
    for f in files:
        if f.endswith(".dat") and f[:-4] in names:
            continue
        real = os.path.realpath(f)
        if real in seen:
            continue
        seen.add(real)
        with open(f, "rb") as fh:
            chunks.append(fh.read())
    data = b"".join(chunks)
    stride = max(2, round(1.0 / val_fraction))
    block = _split_block_size(len(data), stride)
    train = [data[b:b + block] for b in range(0, len(data), block)
             if (b // block) % stride != stride - 1]
    return np.frombuffer(b"".join(train), dtype=np.uint8)


def train_microbatch(data, seed, batch, seq_len, step, microbatch):
    """(inputs, targets) int64 [batch, seq_len] of BatchSampler::Train(step, microbatch)."""
    key = mix64(seed ^ mix64((step * 0x10001 + microbatch) & _M64))
    num_starts = len(data) - seq_len
    inputs = np.empty((batch, seq_len), dtype=np.int64)
    targets = np.empty((batch, seq_len), dtype=np.int64)
    for b in range(batch):
        start = mix64(key ^ mix64(b + 1)) % num_starts
        window = data[start:start + seq_len + 1].astype(np.int64)
        inputs[b], targets[b] = window[:-1], window[1:]
    return inputs, targets


def train_step_batch(data, seed, batch, seq_len, step, microbatches):
    """A whole step: the micro-batches stacked in order, [microbatches * batch, seq_len]."""
    parts = [train_microbatch(data, seed, batch, seq_len, step, mb) for mb in range(microbatches)]
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
