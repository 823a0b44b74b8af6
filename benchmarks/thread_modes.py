"""Per-iteration time of the three thread settings of `rssm.minimize`, side by side.

    python -m benchmarks.thread_modes [--rounds 7] [--iters 200]

On the paper's DPCP and ODL instances (seed 1), RSM and RSSM with l = 5 and 10, a fixed
step (``Constant(1e-3)``, no convergence test, recording only the ends) is run with
``threads="auto"`` (the default: BLAS on one thread, the sample chunks on the chunk
workers; the same bits for any worker count), ``threads=None`` (the BLAS pools as they
are: NumPy's OpenBLAS pool, 2 threads here; bits may depend on the pool) and
``threads=1``, interleaved round by round in one process. Prints the median solver time
per iteration of each setting and the ratios auto / None and auto / 1, and whether
"auto" and 1 gave the same bits.

With ``--dispatch`` it times `rssm.threads.parallel_for` itself on two chunks: with an
empty task (the cost of handing a chunk to the second worker) and with one RSSM l = 10
product per chunk (18 x 100 by 100 x 2500, the paper's DPCP at two chunks), on the chunk
workers ("auto") and on one worker, beside the same product in one call on OpenBLAS's
own pool and on one BLAS thread.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import numpy as np

import rssm
from rssm.stepsizes import Constant

CASES = [("dpcp", "rsm", None), ("dpcp", "rssm", 5), ("dpcp", "rssm", 10),
         ("odl", "rsm", None), ("odl", "rssm", 5), ("odl", "rssm", 10)]
MODES = ("auto", None, 1)


def _problem(name: str):
    if name == "dpcp":
        return rssm.problems.DPCP.synthetic(seed=1)
    return rssm.problems.ODL.synthetic(seed=1)


def _run(prob, x0, method, ell, iters, threads):
    return rssm.minimize(prob, x0, method=method, stepsize=Constant(1e-3), max_iter=iters,
                         record=10**6, tol=0, threads=threads,
                         options={"n_blocks": ell} if ell else None)


def dispatch() -> None:
    """parallel_for on 2 chunks: empty tasks, then one thin product per chunk."""
    import time

    from rssm.threads import RunThreads, parallel_for

    rng = np.random.default_rng(0)
    data = [rng.random((100, 2500)) for _ in range(2)]
    x = rng.random((100, 18))
    out = [np.empty((18, 2500)) for _ in range(2)]

    def gemm(i):
        np.matmul(x.T, data[i], out=out[i])

    def empty(i):
        return None

    for name, fn in (("empty task", empty), ("18x100 @ 100x2500 per chunk", gemm)):
        for mode in ("auto", 1):
            with RunThreads(mode):
                for _ in range(200):
                    parallel_for(fn, 2)
                t = time.perf_counter()
                for _ in range(2000):
                    parallel_for(fn, 2)
                us = (time.perf_counter() - t) / 2000 * 1e6
            print(f"parallel_for, 2 chunks, {name}, threads={mode!r}: {us:.1f} us")
    # the same product in one call on OpenBLAS's own pool (what threads=None runs)
    from threadpoolctl import threadpool_limits

    whole = np.concatenate(data, axis=1)
    res = np.empty((18, 5000))
    for limit in (None, 1):
        with threadpool_limits(limits=limit):
            for _ in range(200):
                np.matmul(x.T, whole, out=res)
            t = time.perf_counter()
            for _ in range(2000):
                np.matmul(x.T, whole, out=res)
            us = (time.perf_counter() - t) / 2000 * 1e6
        label = "the pool as it is" if limit is None else "1 BLAS thread"
        print(f"one call 18x100 @ 100x5000, {label}: {us:.1f} us")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.thread_modes",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--dispatch", action="store_true", help="time parallel_for alone")
    args = ap.parse_args(argv)
    if args.dispatch:
        dispatch()
        return 0
    print(f"{args.rounds} rounds, {args.iters} iterations, load average "
          f"{os.getloadavg()[0]:.2f}; median solver ms per iteration")
    print("case | auto | None (pools as they are) | 1 | auto/None | auto/1 | auto == 1 bits")
    probs = {}
    for name, method, ell in CASES:
        if name not in probs:
            prob = _problem(name)
            probs[name] = (prob, prob.initial_point(0))
        prob, x0 = probs[name]
        times: dict = {m: [] for m in MODES}
        last = {}
        for m in MODES:
            _run(prob, x0, method, ell, 5, m)           # warm-up
        for _ in range(args.rounds):
            for m in MODES:
                res = _run(prob, x0, method, ell, args.iters, m)
                times[m].append(res.time / res.n_iter)
                last[m] = res.x
        med = {m: 1e3 * statistics.median(v) for m, v in times.items()}
        same = bool(np.array_equal(last["auto"], last[1]))
        label = f"{name} {method}" + (f" l={ell}" if ell else "")
        print(f"{label} | {med['auto']:.3f} | {med[None]:.3f} | {med[1]:.3f} | "
              f"{med['auto'] / med[None]:.3f} | {med['auto'] / med[1]:.3f} | {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
