"""The PyTorch optimizers on a GPU (`rssm.torch.RSM`, `rssm.torch.RSSM`): a check of what
docs/interop.md promises there (the parameter's own device and dtype, feasibility, the
same path as on the CPU, state dicts, host syncs per step) and their speed.

    python -m benchmarks.torch_cuda            # on a machine with CUDA; --device cpu to try it here

For float32 and float64, RSM and RSSM (l = 5) run the l1 Procrustes loss ||A W - B||_1
(A 4096 x 2048 Gaussian, B = A W*, W on St(2048, 256)) from the same orthonormal start on
the GPU and on the CPU, with the same block pairs (a CPU generator drives both), for 200
steps of a geometric step (mu0 / ||G_0||, beta 0.98): it prints the loss before and
after, ||W^T W - I||_max, the largest difference between the GPU's and the CPU's W after 5
and 200 steps, the host syncs of one step (``torch.cuda.set_sync_debug_mode``), and the
time per step on each device (CUDA events on the GPU; after 5 untimed steps). Then a
state-dict round trip on the GPU: 100 steps, saved, loaded into a new optimizer, 100 more,
against 200 uninterrupted (bitwise). Writes ``torch_cuda.json`` to ``--out``.

``--no-cpu --repeat N`` times the device's runs alone, best of N: what an A/B of two
trees on one warm machine needs (docs/interop.md: a lazily read subgradient norm, one
sync fewer per step, was measured that way and not kept).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path


def _problem(dtype, device, n=2048, p=256, m=4096, seed=0):
    import torch

    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, n, generator=g, dtype=torch.float64)
    w_star = torch.linalg.qr(torch.randn(n, p, generator=g, dtype=torch.float64))[0]
    w0 = torch.linalg.qr(torch.randn(n, p, generator=g, dtype=torch.float64))[0]
    b = a @ w_star
    return (a.to(device, dtype), b.to(device, dtype), w0.to(device, dtype),
            w_star.to(device, dtype))


def _run(method, dtype, device, steps, sync_probe=False):
    import torch

    import rssm.torch as rt
    from rssm.stepsizes import Geometric

    a, b, w0, w_star = _problem(dtype, device)
    w = torch.nn.Parameter(w0.clone())
    with torch.no_grad():
        loss0 = float((a @ w - b).abs().sum())
    g0 = torch.autograd.grad((a @ w - b).abs().sum(), w)[0]
    rule = Geometric(0.3 / float(g0.norm()), 0.98)
    cls = rt.RSSM if method == "rssm" else rt.RSM
    kw = {"n_blocks": 5, "generator": torch.Generator().manual_seed(1)} if method == "rssm" else {}
    opt = cls([w], lr=rule, **kw)

    def step():
        opt.zero_grad()
        loss = (a @ w - b).abs().sum()
        loss.backward()
        opt.step()

    snaps = {}
    times = []
    syncs = None
    for k in range(steps):
        if k == 5:
            snaps[5] = w.detach().to("cpu", torch.float64).clone()
        timed = k >= 5
        if timed and device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        if sync_probe and k == 7 and device == "cuda":
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                torch.cuda.set_sync_debug_mode("warn")
                step()
                torch.cuda.set_sync_debug_mode("default")
            syncs = sum("synchroniz" in str(x.message) for x in seen)
        else:
            step()
        if timed:
            if device == "cuda":
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end) / 1e3)
            else:
                times.append(time.perf_counter() - t0)
    snaps[steps] = w.detach().to("cpu", torch.float64).clone()
    with torch.no_grad():
        loss1 = float((a @ w - b).abs().sum())
        gram = w.T @ w
        feas = float((gram - torch.eye(gram.shape[0], dtype=dtype, device=device)).abs().max())
        dist = float(torch.linalg.matrix_norm(w @ w.T - w_star @ w_star.T) / math.sqrt(2))
    times.sort()
    return {"loss0": loss0, "loss": loss1, "feasibility": feas, "subspace_distance": dist,
            "step_s_median": times[len(times) // 2] if times else math.nan,
            "syncs_per_step": syncs}, snaps


def _round_trip(dtype, device, steps=200):
    import io

    import torch

    import rssm.torch as rt
    from rssm.stepsizes import Geometric

    a, b, w0, _ = _problem(dtype, device, n=512, p=64, m=1024)

    def fresh(w):
        return rt.RSSM([w], lr=Geometric(1e-4, 0.98), n_blocks=4,
                       generator=torch.Generator().manual_seed(3))

    def go(opt, w, k):
        for _ in range(k):
            opt.zero_grad()
            (a @ w - b).abs().sum().backward()
            opt.step()

    w = torch.nn.Parameter(w0.clone())
    opt = fresh(w)
    go(opt, w, steps)
    whole = w.detach().clone()
    w2 = torch.nn.Parameter(w0.clone())
    opt2 = fresh(w2)
    go(opt2, w2, steps // 2)
    buf = io.BytesIO()
    torch.save({"w": w2.detach(), "opt": opt2.state_dict()}, buf)
    buf.seek(0)
    saved = torch.load(buf, weights_only=False)
    w3 = torch.nn.Parameter(saved["w"].clone())
    opt3 = fresh(w3)
    opt3.load_state_dict(saved["opt"])
    go(opt3, w3, steps - steps // 2)
    return bool(torch.equal(whole, w3.detach()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.torch_cuda",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--out", default=".")
    ap.add_argument("--no-cpu", action="store_true",
                    help="the device's runs only (timings and syncs; no CPU runs, no diffs)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="time each device run this many times (the median of each run's "
                         "steps; their best is printed)")
    args = ap.parse_args(argv)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: nothing to check (use --device cpu to try the script)")
        return 0
    print(f"torch {torch.__version__}; "
          + (torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu only")
          + f"; CPU threads {torch.get_num_threads()}", flush=True)
    rows = []
    print("method | dtype | device | loss start -> end | subspace distance | "
          "||W^T W - I||_max | ms/step | syncs/step | max |W_dev - W_cpu| after 5 / "
          f"{args.steps}", flush=True)
    for dtype in (torch.float32, torch.float64):
        for method in ("rsm", "rssm"):
            dev, snaps_dev = _run(method, dtype, args.device, args.steps, sync_probe=True)
            for _ in range(args.repeat - 1):
                again, _ = _run(method, dtype, args.device, args.steps)
                dev["step_s_median"] = min(dev["step_s_median"], again["step_s_median"])
            name = str(dtype).replace("torch.", "")
            if args.no_cpu:
                print(f"{method} | {name} | {args.device} | {dev['loss0']:.4g} -> "
                      f"{dev['loss']:.4g} | {dev['subspace_distance']:.3g} | "
                      f"{dev['feasibility']:.2e} | {1e3 * dev['step_s_median']:.2f} | "
                      f"{dev['syncs_per_step']} |", flush=True)
                rows.append({"method": method, "dtype": name, args.device: dev})
                continue
            cpu, snaps_cpu = _run(method, dtype, "cpu", args.steps)
            diffs = [float((snaps_dev[k] - snaps_cpu[k]).abs().max()) for k in (5, args.steps)]
            for where, r in ((args.device, dev), ("cpu", cpu)):
                print(f"{method} | {name} | {where} | {r['loss0']:.4g} -> {r['loss']:.4g} | "
                      f"{r['subspace_distance']:.3g} | {r['feasibility']:.2e} | "
                      f"{1e3 * r['step_s_median']:.2f} | {r['syncs_per_step']} | "
                      + (f"{diffs[0]:.1e} / {diffs[1]:.1e}" if where == args.device else ""),
                      flush=True)
            rows.append({"method": method, "dtype": name, args.device: dev, "cpu": cpu,
                         "max_diff_5": diffs[0], f"max_diff_{args.steps}": diffs[1]})
    same = {str(dt).replace("torch.", ""): _round_trip(dt, args.device)
            for dt in (torch.float32, torch.float64)}
    print(f"state dict round trip on {args.device} (100 + 100 steps against 200): "
          f"bit-identical {same}", flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "torch_cuda.json").write_text(json.dumps(
        {"torch": torch.__version__, "rows": rows, "round_trip_identical": same}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
