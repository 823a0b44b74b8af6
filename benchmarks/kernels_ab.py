"""Before / after per-iteration time of the geometry kernels, side by side in one process.

The "before" kernels are ``src/rssm/stiefel.py`` at a git ref (``git show
REF:src/rssm/stiefel.py``), loaded as a separate module; the "after" ones are the current
tree's. RSM and RSSM (l = 5, 10) run on the paper's DPCP (n = 100, d = 10: p = 90, 1500
inliers and 3500 outliers; Section 5.1) with the solvers pointed at one set of kernels and
then the other, in ABBA order over the repetitions, on the same data, start, seed and
step schedule (the paper's, which reads no f). Only the kernels differ; everything else
(oracle, loop, recording) is the current tree's, so the ratio isolates the kernel change.

    python -m benchmarks.kernels_ab [--before main] [--reps 7] [--threads 1] [--torch]

Prints the median solver time per iteration of each variant and the ratio after/before
with the range of the per-repetition ratios. The iterates of the two variants agree to
rounding (checked: the final costs are printed side by side). With ``--torch`` it also
times ``rssm.torch.RSSM.step`` (the geometry alone: fixed gradients, no autograd) of
``src/rssm/torch.py`` at the ref against the working tree's, on St(512, 256) with l = 8
in float32 and float64.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Names the solvers may reach in the kernels module.
KERNELS = ("block_descent_direction", "block_step", "descent_direction",
           "full_retraction_step", "polar", "_polar_gram")
#: Public kernel name -> its name in revisions from before the kernels were public.
OLD_NAMES = {"block_descent_direction": "_submanifold_direction",
             "block_step": "_submanifold_apply", "descent_direction": "_tangent_direction",
             "full_retraction_step": "_full_apply"}


def _load_before(ref: str):
    """The kernels module of git ref ``ref``, as a module named ``stiefel_before``."""
    text = subprocess.run(["git", "show", f"{ref}:src/rssm/stiefel.py"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout
    fd, path = tempfile.mkstemp(prefix="stiefel_before_", suffix=".py")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    spec = importlib.util.spec_from_file_location("stiefel_before", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    os.unlink(path)
    for new, old in OLD_NAMES.items():
        if not hasattr(mod, new) and hasattr(mod, old):
            setattr(mod, new, getattr(mod, old))
    return mod


def _point_solvers_at(kernels) -> None:
    """Make every solver module use ``kernels`` (a stiefel-like module)."""
    import rssm.stiefel as current

    for name, mod in list(sys.modules.items()):
        if not name.startswith("rssm.solvers") or mod is None:
            continue
        if getattr(mod, "stiefel", None) is not None and hasattr(mod.stiefel, "polar"):
            mod.stiefel = kernels
        for k in KERNELS:
            if getattr(mod, k, None) is getattr(current, k, object()):
                setattr(mod, k, getattr(kernels, k))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.kernels_ab",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default="main", help="git ref of the 'before' kernels")
    ap.add_argument("--reps", type=int, default=7, help="repetitions (ABBA order)")
    ap.add_argument("--threads", type=int, default=None,
                    help="BLAS threads for the whole run (default: the environment's)")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply the iteration counts (RSM 150, RSSM 400 and 600)")
    ap.add_argument("--torch", action="store_true",
                    help="also time rssm.torch.RSSM.step before and after")
    args = ap.parse_args(argv)
    if args.threads is not None:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(args.threads)
    import numpy as np

    import rssm
    import rssm.solvers.rsm  # noqa: F401 (loaded so that their references can be pointed)
    import rssm.solvers.rssm  # noqa: F401
    import rssm.stiefel as after
    from rssm.problems import DPCP
    from rssm.stepsizes import PaperSchedule

    before = _load_before(args.before)
    prob = DPCP.synthetic(seed=0)  # the paper's sizes
    x0 = prob.initial_point(np.random.default_rng([0, 1]))
    cases = [("RSM", "rsm", None, 150), ("RSSM l=5", "rssm", 5, 400),
             ("RSSM l=10", "rssm", 10, 600)]
    variants = {"before": before, "after": after}
    times = {(c[0], v): [] for c in cases for v in variants}
    costs = {}
    for rep in range(args.reps):
        order = ["before", "after"] if rep % 2 == 0 else ["after", "before"]
        for label, method, ell, iters in cases:
            for v in order:
                _point_solvers_at(variants[v])
                try:
                    res = rssm.minimize(
                        prob, x0, method=method, stepsize=PaperSchedule.dpcp(),
                        max_iter=max(10, int(iters * args.scale)), seed=0, record=10**9,
                        threads=None, options={"n_blocks": ell}
                    )
                finally:
                    _point_solvers_at(after)
                times[(label, v)].append(res.time / res.n_iter)
                costs[(label, v)] = res.fun
    print(f"paper DPCP (n=100, p=90, m=5000), {args.reps} reps, threads: "
          f"{args.threads or 'environment'}; before = {args.before}, after = working tree")
    print(f"{'case':<10} {'before ms/it':>13} {'after ms/it':>12} {'after/before':>13} "
          f"{'range':>15}  final cost before / after")
    for label, *_ in cases:
        b, a = times[(label, "before")], times[(label, "after")]
        ratios = [x / y for x, y in zip(a, b, strict=True)]
        print(f"{label:<10} {1e3 * statistics.median(b):>13.3f} "
              f"{1e3 * statistics.median(a):>12.3f} "
              f"{statistics.median(a) / statistics.median(b):>13.3f} "
              f"{min(ratios):>7.3f}-{max(ratios):<7.3f}  "
              f"{costs[(label, 'before')]:.12g} / {costs[(label, 'after')]:.12g}")
    if args.torch:
        _torch_ab(args)
    return 0


def _torch_ab(args) -> None:
    """rssm.torch.RSSM.step of the ref against the working tree's, interleaved."""
    import time

    import torch

    import rssm.torch as after

    text = subprocess.run(["git", "show", f"{args.before}:src/rssm/torch.py"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout
    fd, path = tempfile.mkstemp(prefix="torch_before_", suffix=".py")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    spec = importlib.util.spec_from_file_location("rssm_torch_before", path)
    before = importlib.util.module_from_spec(spec)
    sys.modules["rssm_torch_before"] = before  # its dataclass looks itself up there
    spec.loader.exec_module(before)
    os.unlink(path)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    n, p, ell, steps = 512, 256, 8, max(20, int(200 * args.scale))
    print(f"rssm.torch.RSSM.step, St({n}, {p}), l = {ell}, {steps} steps per timing, "
          f"{args.reps} reps (median ms/step)")
    for dtype in (torch.float32, torch.float64):
        gen = torch.Generator().manual_seed(0)
        grads = [torch.randn(n, p, dtype=dtype, generator=gen) for _ in range(16)]
        w0 = torch.nn.init.orthogonal_(torch.empty(n, p, dtype=torch.float64),
                                       generator=gen).to(dtype)
        per = {"before": [], "after": []}
        feas = {}
        for rep in range(args.reps):
            for name in (["before", "after"] if rep % 2 == 0 else ["after", "before"]):
                mod = before if name == "before" else after
                w = torch.nn.Parameter(w0.clone())
                opt = mod.RSSM([w], lr=0.01, n_blocks=ell, seed=0)
                t0 = time.perf_counter()
                for k in range(steps):
                    w.grad = grads[k % 16]
                    opt.step()
                per[name].append((time.perf_counter() - t0) / steps)
                feas[name] = after.feasibility(w)
        b, a = statistics.median(per["before"]), statistics.median(per["after"])
        print(f"  {str(dtype):<14} before {1e3 * b:8.3f}  after {1e3 * a:8.3f}  "
              f"after/before {a / b:6.3f}  feasibility before {feas['before']:.1e} "
              f"after {feas['after']:.1e}")


if __name__ == "__main__":
    sys.exit(main())
