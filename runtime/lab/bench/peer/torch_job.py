"""The PyTorch side of the peer benchmark: the same job as `xhc train` / `xhc launch`.

    python torch_job.py single   --init DIR --config F --steps S --out F.json
    python torch_job.py pipeline --init DIR --config F --steps S --out F.json
                                 --schedule 1f1b|zbv|dualpipev --rank R --world 2 --port P

The model is python/xhc_torch.py's XhcModel (the spec's model in plain eager torch ops),
started from our seeded init (`xhc train --steps 0` checkpoint); the batches are ours
(xhc_data.py); the optimizer is ours (runtime/train/optimizer.cc, kernels/cpu/nn/adamw.cc):
AdamW (betas, eps from the config; decoupled decay on rank-2 weights except embed.weight and
the MLP convolutions), linear warm-up then cosine to min_lr_ratio·lr, and clipping by the
global gradient norm over every stage (min(1, clip / (norm + 1e-6))). Gradients are the mean
over the step's micro-batches (scale_grads=True in torch.distributed.pipelining). Writes
per-step losses and wall times as JSON.
"""

import argparse
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "..", "python"))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import yaml  # noqa: E402

import xhc_data  # noqa: E402
import xhc_torch  # noqa: E402


class Job:
    """The config's train/optim/data blocks with runtime/common/config.h's defaults."""

    def __init__(self, path):
        with open(path) as f:
            doc = yaml.safe_load(f)
        self.model_cfg = xhc_torch.ModelConfig(doc.get("model"), path)
        o, t, d = doc.get("optim") or {}, doc.get("train") or {}, doc.get("data") or {}
        self.lr = float(o.get("lr", 3e-3))
        self.warmup = int(o.get("warmup_steps", 20))
        self.min_lr_ratio = float(o.get("min_lr_ratio", 0.1))
        self.betas = (float(o.get("beta1", 0.9)), float(o.get("beta2", 0.95)))
        self.eps = float(o.get("eps", 1e-8))
        self.weight_decay = float(o.get("weight_decay", 0.1))
        self.grad_clip = float(o.get("grad_clip", 1.0))
        self.total_steps = int(t.get("steps", 200))
        self.batch = int(t.get("batch_size", 8))
        self.microbatches = int(t.get("microbatches", 4))
        self.seed = int(t.get("seed", 1234))
        train = d.get("train", ["/usr/share/games/fortunes/*"])
        self.data_patterns = [train] if isinstance(train, str) else list(train)
        self.val_fraction = float(d.get("val_fraction", 0.05))

    def lr_at(self, step):
        """kernels/cpu/nn/adamw.cc LrAt (0-based step)."""
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        min_lr = self.min_lr_ratio * self.lr
        if step >= self.total_steps or self.total_steps <= self.warmup:
            return min_lr
        ratio = (step - self.warmup) / (self.total_steps - self.warmup)
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (self.lr - min_lr)


def decays(name, p):
    return p.dim() == 2 and name != "embed.weight" and ".conv." not in name


def make_optimizer(job, named_params):
    named_params = list(named_params)
    groups = [{"params": [p for n, p in named_params if decays(n, p)],
               "weight_decay": job.weight_decay},
              {"params": [p for n, p in named_params if not decays(n, p)], "weight_decay": 0.0}]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=job.lr, betas=job.betas,
                             eps=job.eps)


def clip_and_step(job, opt, params, step, group=None):
    """Global-norm clipping (sum of squares over every rank's stages), then AdamW."""
    sq = torch.zeros((), dtype=torch.float64)
    for p in params:
        if p.grad is not None:
            sq += p.grad.double().pow(2).sum()
    if group is not None:
        dist.all_reduce(sq, group=group)
    norm = math.sqrt(float(sq))
    coef = min(1.0, job.grad_clip / (norm + 1e-6)) if job.grad_clip > 0 else 1.0
    if coef < 1.0:
        for p in params:
            if p.grad is not None:
                p.grad.mul_(coef)
    for g in opt.param_groups:
        g["lr"] = job.lr_at(step)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return norm


# --------------------------------------------------------------------------------------------
# One pipeline stage: the spec model's sublayers [2*l0, 2*l1), with the embedding on stage 0
# and the head, final norm and LM head on the last; it owns only its own parameters.

class StageModule(xhc_torch.XhcModel):
    def __init__(self, cfg, layer_begin, layer_end, first, last):
        torch.nn.Module.__init__(self)
        self.cfg, self.first, self.last = cfg, first, last
        self.q_begin, self.q_end = 2 * layer_begin, 2 * layer_end
        names = {f"layers.{l}." for l in range(layer_begin, layer_end)}
        ends = (["embed."] if first else []) + \
            (["head_hc.", "final_norm.", "lm_head."] if last else [])
        self._shapes = {n: s for n, s in xhc_torch.parameter_shapes(cfg).items()
                        if any(n.startswith(p) for p in list(names) + ends)}
        for name, shape in self._shapes.items():
            *path, leaf = name.split(".")
            node = self
            for part in path:
                if part not in node._modules:
                    node.add_module(part, xhc_torch._Node())
                node = node._modules[part]
            node.register_parameter(leaf, torch.nn.Parameter(torch.zeros(shape)))

    def forward(self, x):
        cfg = self.cfg
        N, C = cfg.n_streams, cfg.d_model
        if self.first:
            B, T = x.shape
            X = self.p("embed.weight")[x][:, :, None, :].expand(B, T, N, C).contiguous()
        else:
            X = x
        for q in range(self.q_begin, self.q_end):
            if cfg.type == "vanilla":
                X = X + self._sublayer_fn(q, X[:, :, 0])[:, :, None]
            elif cfg.type in ("xhc", "mhc"):
                X = self._xhc_sublayer(q, X)
            else:
                raise ValueError(f"residual type {cfg.type} is not benchmarked")
        if not self.last:
            return X
        B, T = X.shape[:2]
        if N > 1:
            h = self._maps_in("", X.reshape(B, T, N * C), "head_hc.")
            y = torch.einsum("btn,btnc->btc", h, X)
        else:
            y = X[:, :, 0]
        z = xhc_torch._rmsnorm(y, self.p("final_norm.weight"), cfg.norm_eps)
        return z @ self.p("lm_head.weight").t()


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def run_single(args, job):
    torch.set_num_threads(args.threads)
    model = xhc_torch.load(args.init)
    data = xhc_data.load_train_corpus(job.data_patterns, job.val_fraction)
    opt = make_optimizer(job, model.named_parameters())
    params = list(model.parameters())
    M = job.microbatches
    losses, times = [], []
    for step in range(args.steps):
        t0 = time.perf_counter()
        total = 0.0
        for mb in range(M):
            x, y = xhc_data.train_microbatch(data, job.seed, job.batch, job.model_cfg.seq_len,
                                             step, mb)
            loss = model.loss(torch.from_numpy(x), torch.from_numpy(y))
            (loss / M).backward()
            total += float(loss)
        clip_and_step(job, opt, params, step)
        times.append(time.perf_counter() - t0)
        losses.append(total / M)
    return {"losses": losses, "step_s": times, "torch": torch.__version__,
            "threads": torch.get_num_threads()}


def stage_layout(schedule, world, n_layers):
    """(stage indices of each rank, layers of each stage): 1F1B one stage per rank; ZB-V and
    DualPipeV two per rank in a V (rank r holds r and 2*world-1-r), like ours."""
    if schedule == "1f1b":
        per_rank = [[r] for r in range(world)]
    else:
        per_rank = [[r, 2 * world - 1 - r] for r in range(world)]
    num_stages = sum(len(s) for s in per_rank)
    bounds = [round(i * n_layers / num_stages) for i in range(num_stages + 1)]
    return per_rank, [(bounds[s], bounds[s + 1]) for s in range(num_stages)]


def run_pipeline(args, job):
    from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleDualPipeV,
                                              ScheduleZBVZeroBubble)
    torch.set_num_threads(args.threads)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(args.port)
    dist.init_process_group("gloo", rank=args.rank, world_size=args.world)
    cfg = job.model_cfg
    per_rank, layers = stage_layout(args.schedule, args.world, cfg.n_layers)
    num_stages = len(layers)
    _, tensors = xhc_torch.read_checkpoint(args.init)
    modules, stages = [], []
    for s in per_rank[args.rank]:
        mod = StageModule(cfg, *layers[s], first=s == 0, last=s == num_stages - 1)
        mod.load_tensors(tensors, origin=args.init)
        modules.append(mod)
        stages.append(PipelineStage(mod, s, num_stages, torch.device("cpu")))
    kind = {"1f1b": Schedule1F1B, "zbv": ScheduleZBVZeroBubble, "dualpipev": ScheduleDualPipeV}
    cls = kind[args.schedule]
    M = job.microbatches
    sched = cls(stages[0] if args.schedule == "1f1b" else stages, n_microbatches=M,
                loss_fn=loss_fn, scale_grads=True)
    has_first = any(m.first for m in modules)
    has_last = any(m.last for m in modules)
    data = xhc_data.load_train_corpus(job.data_patterns, job.val_fraction)
    named = [(n, p) for m in modules for n, p in m.named_parameters()]
    opt = make_optimizer(job, named)
    params = [p for _, p in named]
    losses, times = [], []
    for step in range(args.steps):
        x, y = xhc_data.train_step_batch(data, job.seed, job.batch, cfg.seq_len, step, M)
        dist.barrier()
        t0 = time.perf_counter()
        mb_losses = []
        inputs = (torch.from_numpy(x),) if has_first else ()
        if has_last:
            sched.step(*inputs, target=torch.from_numpy(y), losses=mb_losses)
        else:
            sched.step(*inputs)
        clip_and_step(job, opt, params, step, group=dist.group.WORLD)
        times.append(time.perf_counter() - t0)
        if has_last:
            losses.append(sum(float(l) for l in mb_losses) / M)
    dist.barrier()
    dist.destroy_process_group()
    return {"losses": losses, "step_s": times, "torch": torch.__version__,
            "threads": torch.get_num_threads(), "rank": args.rank,
            "stages": per_rank[args.rank], "layers": [layers[s] for s in per_rank[args.rank]]}


def main(argv):
    ap = argparse.ArgumentParser(prog="torch_job.py")
    ap.add_argument("mode", choices=["single", "pipeline"])
    ap.add_argument("--init", required=True, help="checkpoint of our seeded init")
    ap.add_argument("--config", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", required=True)
    ap.add_argument("--schedule", choices=["1f1b", "zbv", "dualpipev"])
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--port", type=int, default=29500)
    args = ap.parse_args(argv)
    job = Job(args.config)
    result = run_single(args, job) if args.mode == "single" else run_pipeline(args, job)
    with open(args.out, "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
