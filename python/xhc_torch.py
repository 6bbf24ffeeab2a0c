"""Load an xhc checkpoint into PyTorch as a torch.nn.Module.

    import xhc_torch
    model = xhc_torch.load("runs/quickstart")           # run dir, checkpoints/ or step dir
    logits = model(tokens)                               # tokens: int64 [B, T] -> [B, T, V]
    loss = model.loss(tokens, targets)                   # mean cross-entropy (spec section 2)
    loss.backward()                                      # fine-tune with any torch optimizer

The module computes the function of model-spec.md (every residual type: vanilla, hc, mhc
with or without convolutions, xhc, xhc_flash with windows of 2 or 4) with plain torch ops,
and its parameters carry the spec's global tensor names: model.state_dict() has exactly the
keys of the checkpoint (`layers.3.mlp_hc.res.weight`, ...), so save_safetensors() writes a
file that `xhc eval --weights` reads back. Checkpoints of any pipeline layout load: tensors
are found by name in whatever shards the manifest lists.

Also a command line mirroring `xhc eval`:
    python3 xhc_torch.py eval --checkpoint DIR --data FILE --batch B --seq-len T
                              [--dump-grads OUT.safetensors] [--dtype float32|float64]

Only the standard library, numpy and torch are used (safetensors is parsed with json +
struct; Debian's python3-torch, python3-yaml; python3-xxhash to verify shard checksums).
"""

import argparse
import json
import os
import struct
import sys
import warnings

import numpy as np
import torch
import torch.nn.functional as F
import yaml

__all__ = ["load", "XhcModel", "ModelConfig", "read_safetensors", "save_safetensors",
           "first_rows"]

_EPS = 1e-6  # rms / ln / Sinkhorn / Gram-Schmidt epsilon of the residual maps (spec 2, 4.2)


# --------------------------------------------------------------------------------------------
# Configuration (spec section 1), from the job config text the manifest stores.

class ModelConfig:
    """The `model:` block with the type-dependent defaults of model-spec.md section 1."""

    _MODEL_KEYS = {"vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff",
                   "seq_len", "rope_theta", "norm_eps", "residual"}
    _RESIDUAL_KEYS = {"type", "n_streams", "n_active", "n_fixed", "conv_kernels",
                      "gram_schmidt", "sinkhorn_iters", "window"}

    def __init__(self, model_block, origin="config"):
        m = model_block or {}
        if not isinstance(m, dict):
            raise ValueError(f"{origin}: model: is not a mapping")
        unknown = set(m) - self._MODEL_KEYS
        if unknown:
            raise ValueError(f"{origin}: unknown key model.{sorted(unknown)[0]}")
        self.vocab_size = int(m.get("vocab_size", 256))
        self.d_model = int(m.get("d_model", 256))
        self.n_layers = int(m.get("n_layers", 4))
        self.n_heads = int(m.get("n_heads", 4))
        self.n_kv_heads = int(m.get("n_kv_heads", 4))
        self.d_ff = int(m.get("d_ff", 0)) or ((4 * self.d_model + 63) // 64) * 64
        self.seq_len = int(m.get("seq_len", 128))
        self.rope_theta = float(m.get("rope_theta", 10000.0))
        self.norm_eps = float(m.get("norm_eps", 1e-6))
        r = m.get("residual") or {}
        unknown = set(r) - self._RESIDUAL_KEYS
        if unknown:
            raise ValueError(f"{origin}: unknown key model.residual.{sorted(unknown)[0]}")
        self.type = str(r.get("type", "xhc"))
        if self.type not in ("vanilla", "hc", "mhc", "xhc", "xhc_flash"):
            raise ValueError(f"{origin}: model.residual.type: unknown residual type "
                             f"'{self.type}' (expected vanilla, hc, mhc, xhc or xhc_flash)")
        default_n = {"vanilla": 1, "hc": 4, "mhc": 4}.get(self.type, 16)
        self.n_streams = 1 if self.type == "vanilla" else int(r.get("n_streams", default_n))
        self.n_active = int(r.get("n_active", 4))
        self.n_fixed = int(r.get("n_fixed", 2))
        if self.type == "hc" and "conv_kernels" in r:
            raise ValueError(f"{origin}: model.residual.conv_kernels: hc has no convolutions")
        default_conv = [4, 8, 12] if self.type in ("xhc", "xhc_flash") else []
        self.conv_kernels = [int(w) for w in r.get("conv_kernels", default_conv)]
        if self.type in ("hc", "vanilla"):
            self.conv_kernels = []
        self.gram_schmidt = bool(r.get("gram_schmidt", True))
        self.sinkhorn_iters = int(r.get("sinkhorn_iters", 20))
        self.window = int(r.get("window", 2))
        if self.type == "mhc":  # spec 4.3: all streams active, no router
            self.n_active, self.n_fixed = self.n_streams, self.n_streams
        self._validate(origin)

    def _validate(self, origin):
        def bad(key, why):
            raise ValueError(f"{origin}: model.{key}: {why}")
        if self.d_model % self.n_heads:
            bad("n_heads", f"{self.n_heads} heads do not divide d_model {self.d_model}")
        if self.n_heads % self.n_kv_heads:
            bad("n_kv_heads", f"{self.n_kv_heads} does not divide n_heads {self.n_heads}")
        if (self.d_model // self.n_heads) % 2:
            bad("n_heads", "the head dimension must be even (RoPE)")
        if self.type in ("xhc", "xhc_flash"):
            if self.n_streams < 2:
                bad("residual.n_streams", "must be >= 2 for xhc")
            if not 1 <= self.n_active <= self.n_streams:
                bad("residual.n_active", "must be in [1, n_streams]")
            if not 0 <= self.n_fixed <= self.n_active:
                bad("residual.n_fixed", "must be in [0, n_active]")
        if self.type == "xhc_flash":
            if self.window not in (2, 4):
                bad("residual.window", f"must be 2 or 4, got {self.window}")
            if (2 * self.n_layers) % self.window:
                bad("residual.window", "2 * n_layers must be divisible by the window")

    @property
    def head_dim(self):
        return self.d_model // self.n_heads

    @classmethod
    def from_yaml(cls, text, origin="config"):
        doc = yaml.safe_load(text) or {}
        if not isinstance(doc, dict):
            raise ValueError(f"{origin}: the top level must be a mapping")
        return cls(doc.get("model"), origin)


# --------------------------------------------------------------------------------------------
# Parameter names and shapes (spec sections 2-4 and 7; runtime/model/params.cc).

def _window_pos(cfg, layer, is_mlp):
    return (2 * layer + int(is_mlp)) % cfg.window if cfg.type == "xhc_flash" else 0


def _residual_shapes(cfg, layer, is_mlp):
    p = f"layers.{layer}.{'mlp' if is_mlp else 'attn'}_hc."
    N, C = cfg.n_streams, cfg.d_model
    if cfg.type == "hc":
        return {p + "pre.weight": [1, C], p + "pre.bias": [N], p + "pre.alpha": [],
                p + "res.weight": [N, C], p + "res.bias": [N * N], p + "res.alpha": [],
                p + "post.weight": [1, C], p + "post.bias": [N], p + "post.alpha": []}
    k = cfg.n_active
    K = 1 + len(cfg.conv_kernels) if is_mlp else 1
    pos = _window_pos(cfg, layer, is_mlp)
    flash = cfg.type == "xhc_flash"
    shapes = {}
    if cfg.type == "xhc" or (flash and pos == 0):
        shapes.update({p + "router.weight": [N, N * C], p + "router.bias": [N]})
    shapes.update({p + "pre.weight": [N, N * C], p + "pre.bias": [N], p + "pre.alpha": []})
    if not flash or pos == cfg.window - 1:
        shapes.update({p + "res.weight": [k * k, k * C], p + "res.bias": [k * k],
                       p + "res.alpha": []})
    shapes.update({p + "post.weight": [k * K, k * C], p + "post.bias": [k * K],
                   p + "post.alpha": []})
    if is_mlp:
        for j, width in enumerate(cfg.conv_kernels):
            shapes[f"{p}conv.{j}.weight"] = [width, C]
    return shapes


def parameter_shapes(cfg):
    """Every tensor of the full model, by spec name, in the runtime's order."""
    C, V, N, Fd = cfg.d_model, cfg.vocab_size, cfg.n_streams, cfg.d_ff
    H, Hkv, dh = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    shapes = {"embed.weight": [V, C]}
    for l in range(cfg.n_layers):
        p = f"layers.{l}."
        if cfg.type != "vanilla":
            shapes.update(_residual_shapes(cfg, l, False))
        shapes.update({p + "attn_norm.weight": [C], p + "attn.wq.weight": [H * dh, C],
                       p + "attn.wk.weight": [Hkv * dh, C], p + "attn.wv.weight": [Hkv * dh, C],
                       p + "attn.wo.weight": [C, H * dh]})
        if cfg.type != "vanilla":
            shapes.update(_residual_shapes(cfg, l, True))
        shapes.update({p + "mlp_norm.weight": [C], p + "mlp.w1.weight": [Fd, C],
                       p + "mlp.w3.weight": [Fd, C], p + "mlp.w2.weight": [C, Fd]})
    if N > 1:
        shapes.update({"head_hc.weight": [N, N * C], "head_hc.bias": [N], "head_hc.alpha": []})
    shapes.update({"final_norm.weight": [C], "lm_head.weight": [V, C]})
    return shapes


# --------------------------------------------------------------------------------------------
# safetensors (runtime/checkpoint/FORMAT.md): 8-byte LE header length, JSON header, raw data.

_DTYPES = {"F32": np.float32, "F64": np.float64}


def read_safetensors(path):
    """{name: numpy array} of a safetensors file (F32, or F64); errors name file and tensor."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: truncated safetensors file ({len(blob)} bytes)")
    (header_len,) = struct.unpack("<Q", blob[:8])
    if 8 + header_len > len(blob):
        raise ValueError(f"{path}: header of {header_len} bytes runs past the end of the file")
    try:
        header = json.loads(blob[8:8 + header_len].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: header is not JSON: {e}") from None
    data = memoryview(blob)[8 + header_len:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(info.get("dtype"))
        if dtype is None:
            raise ValueError(f"{path}: tensor {name}: dtype {info.get('dtype')} is not F32")
        begin, end = info["data_offsets"]
        shape = [int(d) for d in info["shape"]]
        count = int(np.prod(shape)) if shape else 1
        if end > len(data) or end - begin != count * np.dtype(dtype).itemsize:
            raise ValueError(f"{path}: tensor {name}: data_offsets {begin}..{end} do not fit "
                             f"shape {shape} in a data section of {len(data)} bytes")
        little = np.dtype(dtype).newbyteorder("<")
        out[name] = np.frombuffer(data[begin:end], dtype=little, count=count).reshape(shape).copy()
    return out


def save_safetensors(tensors, path):
    """Writes {name: tensor or array} as float32 safetensors, names sorted, like the runtime."""
    names = sorted(tensors)
    header, chunks, offset = {}, [], 0
    for name in names:
        t = tensors[name]
        arr = (t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t))
        raw = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in chunks:
            f.write(raw)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# --------------------------------------------------------------------------------------------
# Checkpoint directories (FORMAT.md): a step dir holds MANIFEST.json and its shards.

def resolve_step_dir(path):
    """Step directory of a run dir, a checkpoints/ root (via LATEST) or a step dir."""
    if os.path.isfile(os.path.join(path, "MANIFEST.json")):
        return path
    for root in (path, os.path.join(path, "checkpoints")):
        latest = os.path.join(root, "LATEST")
        if os.path.isfile(latest):
            with open(latest) as f:
                step = f.read().strip()
            step_dir = os.path.join(root, step)
            if not os.path.isfile(os.path.join(step_dir, "MANIFEST.json")):
                raise ValueError(f"{latest} names {step}, which has no MANIFEST.json")
            return step_dir
    raise ValueError(f"{path}: not a checkpoint (no MANIFEST.json, LATEST or checkpoints/LATEST)")


def _xxhash64(path):
    try:
        import xxhash  # Debian python3-xxhash
    except ImportError:
        return None
    h = xxhash.xxh64(seed=0)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_checkpoint(path):
    """(manifest dict, {name: array}) of a committed step; sizes, checksums and listed
    tensors are checked like the runtime's loader (errors name the file and tensor)."""
    step_dir = resolve_step_dir(path)
    manifest_path = os.path.join(step_dir, "MANIFEST.json")
    with open(manifest_path) as f:
        manifest = json.load(f)
    if manifest.get("format_version") != 1:
        raise ValueError(f"{manifest_path}: format_version {manifest.get('format_version')} "
                         "is not supported")
    tensors, unverified = {}, []
    for shard in manifest["shards"]:
        name = shard["file"]
        if not name or "/" in name or "\\" in name or name in (".", ".."):
            raise ValueError(f"{manifest_path}: shard file '{name}' is not a plain file name")
        file = os.path.join(step_dir, name)
        if not os.path.isfile(file):
            raise ValueError(f"{file}: shard listed in the manifest is missing")
        if os.path.getsize(file) != shard["bytes"]:
            raise ValueError(f"{file}: {os.path.getsize(file)} bytes, the manifest says "
                             f"{shard['bytes']}")
        digest = _xxhash64(file)
        if digest is None:
            unverified.append(name)
        elif digest != shard["xxhash64"]:
            raise ValueError(f"{file}: xxhash64 {digest} differs from the manifest's "
                             f"{shard['xxhash64']}")
        contents = read_safetensors(file)
        for tensor in shard["tensors"]:
            if tensor not in contents:
                raise ValueError(f"{file}: tensor {tensor} listed in the manifest is missing")
        tensors.update(contents)
    if unverified:
        warnings.warn(f"xhc_torch: python3-xxhash is not installed; checksums of "
                      f"{', '.join(unverified)} not verified (sizes were)")
    return manifest, tensors


# --------------------------------------------------------------------------------------------
# The model's pieces (spec sections 2-4), batched over tokens: X is [B, T, N, C].

def _rms(x):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + _EPS)


def _ln(x):
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).pow(2).mean(-1, keepdim=True)
    return (x - mean) * torch.rsqrt(var + _EPS)


def _rmsnorm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _sinkhorn(z, iters):
    """z [..., k, k]: exp(z - max), then `iters` x (columns, then rows) divided by sum + eps."""
    m = torch.exp(z - z.amax(dim=(-2, -1), keepdim=True))
    for _ in range(iters):
        m = m / (m.sum(-2, keepdim=True) + _EPS)
        m = m / (m.sum(-1, keepdim=True) + _EPS)
    return m


def _rope(x, theta):
    """x [B, T, H, dh], half-split convention, angles formed in double like the runtime."""
    T, dh = x.shape[1], x.shape[3]
    half = dh // 2
    inv_freq = theta ** (-2.0 * torch.arange(half, dtype=torch.float64) / dh)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    cos = torch.cos(angle).to(x.dtype)[None, :, None, :]
    sin = torch.sin(angle).to(x.dtype)[None, :, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def _select_active(s, m, k):
    """Spec 4.2 step 3: slots 0..m-1 are streams 0..m-1 (p = 1); slots m..k-1 the k-m streams
    i >= m with the highest s_i, descending, ties to the lower index (p = s_i, so the router
    gets gradient); the choice itself is not differentiated."""
    N = s.shape[-1]
    lead = s.shape[:-1]
    fixed = torch.arange(m, device=s.device).expand(*lead, m)
    order = torch.sort(s[..., m:].detach(), dim=-1, descending=True, stable=True).indices
    chosen = order[..., :k - m] + m
    idx = torch.cat([fixed, chosen], dim=-1)
    p = torch.cat([torch.ones(*lead, m, dtype=s.dtype, device=s.device),
                   torch.gather(s, -1, chosen)], dim=-1)
    assert idx.shape[-1] == k <= N
    return idx, p


def _gather_streams(X, idx):
    C = X.shape[-1]
    return torch.gather(X, 2, idx[..., None].expand(*idx.shape, C))


def _scatter_streams(X, idx, values):
    C = X.shape[-1]
    return X.scatter(2, idx[..., None].expand(*idx.shape, C), values)


class _Node(torch.nn.Module):
    """A plain container, so that parameter paths are the spec's dotted names."""


class XhcModel(torch.nn.Module):
    """The model of model-spec.md; state_dict() keys are the checkpoint's tensor names."""

    def __init__(self, cfg, dtype=torch.float32):
        super().__init__()
        self.cfg = cfg
        self._shapes = parameter_shapes(cfg)
        for name, shape in self._shapes.items():
            *path, leaf = name.split(".")
            node = self
            for part in path:
                if part not in node._modules:
                    node.add_module(part, _Node())
                node = node._modules[part]
            node.register_parameter(leaf, torch.nn.Parameter(torch.zeros(shape, dtype=dtype)))

    def p(self, name):
        return self.get_parameter(name)

    def has(self, name):
        return name in self._shapes

    # -- sublayer functions F (spec section 3), u is [B, T, C] --------------------------------

    def _attention(self, l, u):
        cfg, pre = self.cfg, f"layers.{l}."
        B, T, _ = u.shape
        H, Hkv, dh = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        a = _rmsnorm(u, self.p(pre + "attn_norm.weight"), cfg.norm_eps)
        q = (a @ self.p(pre + "attn.wq.weight").t()).view(B, T, H, dh)
        k = (a @ self.p(pre + "attn.wk.weight").t()).view(B, T, Hkv, dh)
        v = (a @ self.p(pre + "attn.wv.weight").t()).view(B, T, Hkv, dh)
        q, k = _rope(q, cfg.rope_theta), _rope(k, cfg.rope_theta)
        group = H // Hkv  # query head h reads kv head h / group
        k = k.repeat_interleave(group, dim=2)
        v = v.repeat_interleave(group, dim=2)
        scores = torch.einsum("bthd,bshd->bhts", q, k) / (dh ** 0.5)
        causal = torch.ones(T, T, dtype=torch.bool, device=u.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        att = torch.einsum("bhts,bshd->bthd", torch.softmax(scores, dim=-1), v)
        return att.reshape(B, T, H * dh) @ self.p(pre + "attn.wo.weight").t()

    def _mlp(self, l, u):
        pre = f"layers.{l}."
        a = _rmsnorm(u, self.p(pre + "mlp_norm.weight"), self.cfg.norm_eps)
        h = F.silu(a @ self.p(pre + "mlp.w1.weight").t()) * (a @ self.p(pre + "mlp.w3.weight").t())
        return h @ self.p(pre + "mlp.w2.weight").t()

    def _sublayer_fn(self, q, u):
        return self._mlp(q // 2, u) if q % 2 else self._attention(q // 2, u)

    # -- residual pieces (spec section 4) ----------------------------------------------------

    def _augment(self, prefix, out, is_mlp):
        """Write components [v_0 .. v_r] of spec 4.2 step 5: out [B, T, C] -> [B, T, K, C].
        Only MLP sublayers have convolutions (hc has none: its conv_kernels are empty)."""
        comps = [out]
        T = out.shape[1]
        for j, width in enumerate(self.cfg.conv_kernels if is_mlp else []):
            w = self.p(f"{prefix}conv.{j}.weight")  # [width, C]; causal, within one sequence
            padded = F.pad(out, (0, 0, width - 1, 0))
            g = sum(w[tau] * padded[:, width - 1 - tau:width - 1 - tau + T] for tau in range(width))
            if self.cfg.gram_schmidt:
                for v in comps:  # modified Gram-Schmidt, inner products over C
                    coef = (g * v).sum(-1, keepdim=True) / ((v * v).sum(-1, keepdim=True) + _EPS)
                    g = g - coef * v
            comps.append(g)
        return torch.stack(comps, dim=2)

    def _maps_in(self, prefix, flat, name):
        """sigma(alpha * (rms(flat) . W^T) + b) of the map `name` (pre or head_hc)."""
        z = _rms(flat) @ self.p(prefix + name + "weight").t()
        return torch.sigmoid(self.p(prefix + name + "alpha") * z + self.p(prefix + name + "bias"))

    def _route(self, prefix, flat):
        N = self.cfg.n_streams
        if not self.has(prefix + "router.weight"):  # mhc: every stream, weight 1
            lead = flat.shape[:-1]
            idx = torch.arange(N, device=flat.device).expand(*lead, N)
            return idx, torch.ones(*lead, N, dtype=flat.dtype, device=flat.device)
        s = torch.sigmoid(_ln(flat) @ self.p(prefix + "router.weight").t() +
                          self.p(prefix + "router.bias"))
        return _select_active(s, self.cfg.n_fixed, self.cfg.n_active)

    def _write(self, prefix, X, idx, p, aug, mix):
        """Spec 4.2 steps 6-8 (mix=True) or 4.5 step 3d (mix=False) on the active streams."""
        B, T, _, C = X.shape
        k, K = idx.shape[-1], aug.shape[2]
        Xa = _gather_streams(X, idx)  # [B, T, k, C]
        xa = _rms(Xa.reshape(B, T, k * C))
        zpost = self.p(prefix + "post.alpha") * (xa @ self.p(prefix + "post.weight").t()) + \
            self.p(prefix + "post.bias")
        hpost = (2 * torch.sigmoid(zpost)).view(B, T, k, K)
        written = p[..., None] * torch.einsum("btjr,btrc->btjc", hpost, aug)
        if mix:
            zres = self.p(prefix + "res.alpha") * (xa @ self.p(prefix + "res.weight").t()) + \
                self.p(prefix + "res.bias")
            hres = _sinkhorn(zres.view(B, T, k, k), self.cfg.sinkhorn_iters)
            Xa = torch.einsum("btij,btjc->btic", hres, Xa)
        return _scatter_streams(X, idx, Xa + written)

    def _xhc_sublayer(self, q, X):
        prefix = f"layers.{q // 2}.{'mlp' if q % 2 else 'attn'}_hc."
        B, T, N, C = X.shape
        flat = X.reshape(B, T, N * C)
        idx, p = self._route(prefix, flat)
        hpre = self._maps_in(prefix, flat, "pre.")
        out = self._sublayer_fn(q, torch.einsum("btn,btnc->btc", hpre, X))
        return self._write(prefix, X, idx, p, self._augment(prefix, out, q % 2 == 1), mix=True)

    def _flash_window(self, q0, X):
        """Spec 4.5: one routing decision and entry-time read maps for sublayers q0..q0+w-1."""
        w = self.cfg.window
        B, T, N, C = X.shape
        flat0 = X.reshape(B, T, N * C)
        prefixes = [f"layers.{q // 2}.{'mlp' if q % 2 else 'attn'}_hc." for q in range(q0, q0 + w)]
        idx, p = self._route(prefixes[0], flat0)
        hpres = [self._maps_in(pf, flat0, "pre.") for pf in prefixes]
        for pos, pf in enumerate(prefixes):
            out = self._sublayer_fn(q0 + pos, torch.einsum("btn,btnc->btc", hpres[pos], X))
            aug = self._augment(pf, out, (q0 + pos) % 2 == 1)
            X = self._write(pf, X, idx, p, aug, mix=pos == w - 1)
        return X

    def _hc_sublayer(self, q, X):
        """Spec 4.4: tanh maps from x~_i = rms(X[i]), unconstrained N x N mixing."""
        prefix = f"layers.{q // 2}.{'mlp' if q % 2 else 'attn'}_hc."
        N = X.shape[2]
        xt = _rms(X)  # [B, T, N, C]
        hpre = self.p(prefix + "pre.alpha") * torch.tanh(xt @ self.p(prefix + "pre.weight")[0]) + \
            self.p(prefix + "pre.bias")
        hpost = self.p(prefix + "post.alpha") * torch.tanh(xt @ self.p(prefix + "post.weight")[0]) \
            + self.p(prefix + "post.bias")
        dots = xt @ self.p(prefix + "res.weight").t()  # [B, T, i, a] = <res.weight[a], x~_i>
        hres = self.p(prefix + "res.alpha") * torch.tanh(dots.transpose(-1, -2)) + \
            self.p(prefix + "res.bias").view(N, N)  # [B, T, a, i]
        out = self._sublayer_fn(q, torch.einsum("btn,btnc->btc", hpre, X))
        return torch.einsum("btai,btic->btac", hres, X) + hpost[..., None] * out[:, :, None, :]

    # -- whole model (spec section 2) --------------------------------------------------------

    def forward(self, tokens):
        """tokens: integer [B, T] -> logits [B, T, V]."""
        cfg = self.cfg
        tokens = torch.as_tensor(tokens, dtype=torch.long)
        if tokens.dim() != 2:
            raise ValueError(f"tokens must be [B, T], got shape {list(tokens.shape)}")
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= cfg.vocab_size):
            raise ValueError(f"token ids must be in [0, {cfg.vocab_size})")
        B, T = tokens.shape
        N, C = cfg.n_streams, cfg.d_model
        e = self.p("embed.weight")[tokens]  # [B, T, C]
        X = e[:, :, None, :].expand(B, T, N, C).contiguous()
        q, num_sub = 0, 2 * cfg.n_layers
        while q < num_sub:
            if cfg.type == "vanilla":
                X = X + self._sublayer_fn(q, X[:, :, 0])[:, :, None]
            elif cfg.type == "hc":
                X = self._hc_sublayer(q, X)
            elif cfg.type == "xhc_flash":
                X = self._flash_window(q, X)
                q += cfg.window
                continue
            else:
                X = self._xhc_sublayer(q, X)
            q += 1
        if N > 1:
            h = self._maps_in("", X.reshape(B, T, N * C), "head_hc.")
            y = torch.einsum("btn,btnc->btc", h, X)
        else:
            y = X[:, :, 0]
        z = _rmsnorm(y, self.p("final_norm.weight"), cfg.norm_eps)
        return z @ self.p("lm_head.weight").t()

    def loss(self, tokens, targets):
        """Mean over all (b, t) of -log softmax(logits)[target] (spec 2 step 7)."""
        logits = self(tokens)
        targets = torch.as_tensor(targets, dtype=torch.long)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    def load_tensors(self, tensors, origin="checkpoint"):
        """Copies {spec name: array} into the parameters; every name and shape is checked."""
        for name, shape in self._shapes.items():
            if name not in tensors:
                raise ValueError(f"{origin}: tensor {name} is missing")
            value = np.asarray(tensors[name])
            if list(value.shape) != list(shape):
                raise ValueError(f"{origin}: tensor {name} has shape {list(value.shape)}, the "
                                 f"model needs {shape}")
            with torch.no_grad():
                self.p(name).copy_(torch.as_tensor(value))  # 0-d stays 0-d


def load(checkpoint_dir, dtype=torch.float32):
    """XhcModel of a committed checkpoint (run dir, checkpoints root or step directory), of any
    pipeline layout; `dtype` float64 evaluates the same weights in double."""
    manifest, tensors = read_checkpoint(checkpoint_dir)
    step_dir = resolve_step_dir(checkpoint_dir)
    cfg = ModelConfig.from_yaml(manifest["config_yaml"], os.path.join(step_dir, "MANIFEST.json"))
    model = XhcModel(cfg, dtype=dtype)
    model.load_tensors(tensors, origin=step_dir)
    model.step = int(manifest.get("step", 0))
    return model


def first_rows(path, batch, seq_len):
    """Spec 8: the first B*(T+1) bytes of `path` as B rows; (inputs, targets) [B, T] int64."""
    with open(path, "rb") as f:
        data = f.read(batch * (seq_len + 1))
    if len(data) < batch * (seq_len + 1):
        raise ValueError(f"--data {path} has {len(data)} bytes; B*(T+1) = "
                         f"{batch * (seq_len + 1)} needed")
    rows = torch.tensor(list(data), dtype=torch.long).view(batch, seq_len + 1)
    return rows[:, :-1].contiguous(), rows[:, 1:].contiguous()


def _main(argv):
    parser = argparse.ArgumentParser(prog="xhc_torch.py")
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("eval", help="loss (and gradients) of a batch, like `xhc eval`")
    ev.add_argument("--checkpoint", required=True, help="run, checkpoint root or step directory")
    ev.add_argument("--data", required=True, help="file whose first B*(T+1) bytes are evaluated")
    ev.add_argument("--batch", type=int, required=True)
    ev.add_argument("--seq-len", type=int, required=True)
    ev.add_argument("--dump-grads", help="write d loss / d parameter as float32 safetensors")
    ev.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    args = parser.parse_args(argv)
    if args.batch < 1 or args.seq_len < 1:
        parser.error("--batch and --seq-len must be >= 1")
    try:
        model = load(args.checkpoint, dtype=getattr(torch, args.dtype))
        inputs, targets = first_rows(args.data, args.batch, args.seq_len)
    except (OSError, ValueError) as e:
        print(f"xhc_torch.py eval: {e}", file=sys.stderr)
        return 1
    loss = model.loss(inputs, targets)
    if args.dump_grads:
        loss.backward()
        save_safetensors({n: p.grad if p.grad is not None else torch.zeros_like(p)
                          for n, p in model.named_parameters()}, args.dump_grads)
    print(json.dumps({"loss": float(loss)}))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
