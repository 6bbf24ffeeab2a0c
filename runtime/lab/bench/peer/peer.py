"""Peer benchmark: this runtime against PyTorch on the same job (docs/benchmarks.md, "Compared
with PyTorch").

    python peer.py --xhc bazel-bin/xhc --out DIR [--steps 4] [--big-steps 2] [--big-batch 1]
                   [--only vanilla mhc xhc] [--sizes 128 512]

For each model (vanilla, mhc, xhc at runtime/lab/bench/peer/small.yaml's size, and at d_model 512) and
each row (single process; 2-rank pipelines 1F1B, ZB-V, DualPipeV) it runs ours, then PyTorch
(torch_job.py), on the same config, init, batches and optimizer, checks that their first
per-step losses agree, and prints one JSON object and a markdown table.
"""

import argparse
import copy
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))

# Both sides compute the same float32 function in a different operation order (OpenBLAS and
# fused kernels here, eager torch there), so their losses differ by accumulated rounding; the
# first steps' per-step losses must agree to LOSS_RTOL (relative). Each row reports the worst
# difference it saw; a wrong batch, init weight or optimizer setting shows far above it.
LOSS_RTOL = 1e-4
SCHEDULES = [("1f1b", "Schedule1F1B"), ("zbv", "ScheduleZBVZeroBubble"),
             ("dualpipev", "ScheduleDualPipeV")]


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_config(base, residual, d_model, steps, batch, schedule=None):
    cfg = copy.deepcopy(base)
    model = cfg["model"]
    model["d_model"] = d_model
    if residual == "xhc":
        pass  # the quickstart's own residual block
    else:
        model["residual"] = {"type": residual}
    cfg["train"].update({"steps": steps, "batch_size": batch, "eval_every": 0})
    cfg["checkpoint"] = {"every": 0, "keep": 1}
    if schedule is None:
        cfg.pop("pipeline", None)
    else:
        cfg["pipeline"] = {"schedule": schedule, "workers": 2}
    return cfg


def write_yaml(cfg, path):
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)


def run(cmd, env_extra, log, timeout):
    env = dict(os.environ)
    env.update(env_extra)
    with open(log, "w") as out:
        t0 = time.time()
        proc = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                              timeout=timeout, cwd=ROOT)
    if proc.returncode != 0:
        with open(log) as f:
            tail = f.read()[-3000:]
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}; {log}:\n{tail}")
    return time.time() - t0


def read_metrics(run_dir):
    steps = []
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            rec = json.loads(line)
            if "loss" in rec and "step" in rec:
                steps.append(rec)
    return steps


def timing(step_s, tokens_per_step, skip):
    timed = step_s[skip:] or step_s
    med = statistics.median(timed)
    return {"step_s": round(med, 4), "tokens_per_s": round(tokens_per_step / med, 1),
            "timed_steps": len(timed)}


def torch_pipeline(py, init, cfg_path, steps, schedule, out_dir, timeout):
    port = free_port()
    procs, outs = [], []
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for rank in range(2):
        out = os.path.join(out_dir, f"torch_rank{rank}.json")
        log = open(os.path.join(out_dir, f"torch_rank{rank}.log"), "w")
        cmd = [py, os.path.join(HERE, "torch_job.py"), "pipeline", "--init", init,
               "--config", cfg_path, "--steps", str(steps), "--threads", "1", "--out", out,
               "--schedule", schedule, "--rank", str(rank), "--world", "2", "--port", str(port)]
        procs.append((subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                       cwd=ROOT), log))
        outs.append(out)
    deadline = time.time() + timeout
    failed = None
    for rank, (p, log) in enumerate(procs):
        try:
            rc = p.wait(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            rc = "timeout"
        log.close()
        if rc != 0 and failed is None:
            failed = (rank, rc)
    if failed:
        for p, _ in procs:
            if p.poll() is None:
                p.kill()
        rank, rc = failed
        with open(os.path.join(out_dir, f"torch_rank{rank}.log")) as f:
            tail = f.read()[-3000:]
        raise RuntimeError(f"torch pipeline rank {rank} ({schedule}) ended {rc}:\n{tail}")
    results = []
    for out in outs:
        with open(out) as f:
            results.append(json.load(f))
    losses = next(r["losses"] for r in results if r["losses"])
    # The step ends on every rank at the gradient-norm all-reduce; rank 0's clock is the step.
    return {"losses": losses, "step_s": results[0]["step_s"], "torch": results[0]["torch"],
            "threads": results[0]["threads"]}


def check_losses(ours, theirs, n):
    n = min(n, len(ours), len(theirs))
    rel = [abs(a - b) / max(abs(a), 1e-12) for a, b in zip(ours[:n], theirs[:n])]
    return {"steps": n, "ours": [round(x, 6) for x in ours[:n]],
            "torch": [round(x, 6) for x in theirs[:n]],
            "max_rel_diff": max(rel) if rel else None, "rtol": LOSS_RTOL,
            "agree": bool(rel) and max(rel) <= LOSS_RTOL}


def bench_model(args, base, residual, d_model, steps, batch, check):
    tag = f"{residual}_d{d_model}"
    out_dir = os.path.join(args.out, tag)
    os.makedirs(out_dir, exist_ok=True)
    tokens_per_step = batch * base["train"]["microbatches"] * base["model"]["seq_len"]
    single_cfg = os.path.join(out_dir, "single.yaml")
    write_yaml(make_config(base, residual, d_model, steps, batch), single_cfg)
    init = os.path.join(out_dir, "init")
    run([args.xhc, "train", "--config", single_cfg, "--steps", "0", "--out", init], {},
        os.path.join(out_dir, "init.log"), 300)
    init_ckpt = os.path.join(init, "checkpoints")
    rows = []

    def row(mode, ours_sched, torch_sched, ours_steps, ours_extra, theirs):
        chk = check_losses([s["loss"] for s in ours_steps], theirs["losses"], check)
        r = {"model": residual, "d_model": d_model, "mode": mode, "ours_schedule": ours_sched,
             "torch_schedule": torch_sched, "ranks": 1 if mode == "single" else 2,
             "threads_per_rank": args.single_threads if mode == "single" else 1,
             "steps": steps, "global_batch": batch * base["train"]["microbatches"],
             "tokens_per_step": tokens_per_step, "loss_check": chk,
             "valid": chk["agree"]}
        if chk["agree"]:
            r["ours"] = timing([s["step_s"] for s in ours_steps], tokens_per_step, args.skip)
            r["ours"].update(ours_extra)
            r["torch"] = timing(theirs["step_s"], tokens_per_step, args.skip)
            r["ratio"] = round(r["ours"]["tokens_per_s"] / r["torch"]["tokens_per_s"], 3)
        rows.append(r)
        status = f"{r['ratio']:.2f}x" if chk["agree"] else "INVALID (losses disagree)"
        print(f"  {tag} {mode} {ours_sched}: {status}; max rel loss diff "
              f"{chk['max_rel_diff']:.2e}", file=sys.stderr, flush=True)

    # Single process.
    ours_dir = os.path.join(out_dir, "ours_single")
    run([args.xhc, "train", "--config", single_cfg, "--out", ours_dir],
        {"OMP_NUM_THREADS": str(args.single_threads)}, os.path.join(out_dir, "ours_single.log"),
        1200)
    torch_out = os.path.join(out_dir, "torch_single.json")
    run([args.python, os.path.join(HERE, "torch_job.py"), "single", "--init", init_ckpt,
         "--config", single_cfg, "--steps", str(steps), "--threads", str(args.single_threads),
         "--out", torch_out], {"OMP_NUM_THREADS": str(args.single_threads)},
        os.path.join(out_dir, "torch_single.log"), 1200)
    with open(torch_out) as f:
        row("single", "xhc train", "eager", read_metrics(ours_dir), {}, json.load(f))

    # 2-rank pipelines, 1 thread per rank, gloo on both sides.
    for sched, torch_name in SCHEDULES:
        cfg_path = os.path.join(out_dir, f"{sched}.yaml")
        write_yaml(make_config(base, residual, d_model, steps, batch, sched), cfg_path)
        ours_dir = os.path.join(out_dir, f"ours_{sched}")
        run([args.xhc, "launch", "--config", cfg_path, "--workers", "2", "--out", ours_dir],
            {"OMP_NUM_THREADS": "1"}, os.path.join(out_dir, f"ours_{sched}.log"), 1200)
        ours_steps = read_metrics(ours_dir)
        skip = ours_steps[args.skip:] or ours_steps
        bubble = [statistics.mean(s["bubble"][r] for s in skip)
                  for r in range(len(ours_steps[0]["bubble"]))]
        theirs = torch_pipeline(args.python, init_ckpt, cfg_path, steps, sched, out_dir, 1200)
        row("pipeline", sched, torch_name, ours_steps,
            {"bubble_per_rank": [round(b, 4) for b in bubble]}, theirs)
    return rows


def table(rows):
    lines = ["| model | d_model | seqs/step | run | PyTorch | ours tok/s | PyTorch tok/s "
             "| ours ÷ PyTorch | ours bubble (rank 0, 1) | loss check (max rel diff) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        run_name = ("single process" if r["mode"] == "single"
                    else f"2 ranks, {r['ours_schedule']}")
        chk = f"{r['loss_check']['steps']} steps, {r['loss_check']['max_rel_diff']:.1e}"
        if not r["valid"]:
            lines.append(f"| {r['model']} | {r['d_model']} | {r['global_batch']} | {run_name} "
                         f"| {r['torch_schedule']} | invalid | invalid | — | — "
                         f"| {chk} (disagree) |")
            continue
        bubble = ", ".join(f"{b:.2f}" for b in r["ours"].get("bubble_per_rank", [])) or "—"
        lines.append(f"| {r['model']} | {r['d_model']} | {r['global_batch']} | {run_name} | "
                     f"{r['torch_schedule']} | "
                     f"{r['ours']['tokens_per_s']:.0f} | {r['torch']['tokens_per_s']:.0f} | "
                     f"**{r['ratio']:.2f}×** | {bubble} | {chk} |")
    return "\n".join(lines)


def main(argv):
    ap = argparse.ArgumentParser(prog="peer.py")
    ap.add_argument("--xhc", required=True, help="the xhc binary")
    ap.add_argument("--out", required=True, help="work directory")
    ap.add_argument("--python", default=sys.executable, help="interpreter with torch 2.x")
    ap.add_argument("--config", default=os.path.join(ROOT, "bench", "peer", "small.yaml"))
    ap.add_argument("--steps", type=int, default=4, help="steps at the config's d_model")
    ap.add_argument("--big-steps", type=int, default=2, help="steps at the other sizes")
    ap.add_argument("--big-batch", type=int, default=1,
                    help="sequences per micro-batch at the other sizes (the config's at its own)")
    ap.add_argument("--check", type=int, default=3, help="steps whose losses must agree")
    ap.add_argument("--skip", type=int, default=1, help="warm-up steps not timed")
    ap.add_argument("--single-threads", type=int, default=2)
    ap.add_argument("--only", nargs="*", default=["vanilla", "mhc", "xhc"])
    ap.add_argument("--sizes", nargs="*", type=int, default=None,
                    help="d_model values (default: the config's and 512)")
    args = ap.parse_args(argv)
    args.xhc = os.path.abspath(args.xhc)
    args.out = os.path.abspath(args.out)
    with open(args.config) as f:
        base = yaml.safe_load(f)
    sizes = args.sizes or [base["model"]["d_model"], 512]
    import torch  # the interpreter that runs this also runs torch_job.py by default
    t0 = time.time()
    rows = []
    for d_model in sizes:
        own = d_model == base["model"]["d_model"]
        steps = args.steps if own else args.big_steps
        batch = base["train"]["batch_size"] if own else args.big_batch
        for residual in args.only:
            rows.extend(bench_model(args, base, residual, d_model, steps, batch,
                                    min(args.check, steps)))
    report = {"cpu": cpu_name(), "cores": os.cpu_count(), "torch": torch.__version__,
              "config": os.path.relpath(args.config, ROOT),
              "microbatches": base["train"]["microbatches"], "seq_len": base["model"]["seq_len"],
              "loss_rtol": LOSS_RTOL, "timing": f"median step time over steps {args.skip + 1}.., "
              "tokens/s = tokens per step / that", "wall_s": round(time.time() - t0, 1),
              "rows": rows}
    print(json.dumps(report, indent=1))
    print()
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
