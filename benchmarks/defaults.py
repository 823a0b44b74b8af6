"""What the default call costs (issue #18, "cheap by default" and "reproducible by default").

    python -m benchmarks.defaults [--quick] [--load] [--out benchmarks/results]

On the paper's DPCP instance (seed 1), for RSM and RSSM with l = 5 and 10, interleaved in
one process, default threads (nothing pinned), best of ``--rounds`` rounds:

* ``default``: ``rssm.minimize(prob, method=m)`` (only the method and its blocks set):
  the wall time of the whole call, and its ``Result.time`` (solver time);
* ``naive``: a plain NumPy loop of the same number of iterations, as a user would write it
  (Z = Yt^T X cached, the block's columns of Z refreshed after each RSSM step, polar by
  a thin SVD, no recording), one process, default threads.

It prints per-iteration times and the ratios the issue sets: default wall / its solver
time (goal <= 1.1) and default wall / naive (goal <= 0.9 for RSM, <= 0.8 for RSSM).

With ``--load`` it also starts one busy process (a pure-Python loop) and measures the
default call against ``threads=1`` under that load (goal: within 1.5x of one thread), and
checks that the bits do not change.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import time

import numpy as np

import rssm

PC = time.perf_counter
METHODS = (("rsm", None), ("rssm l=5", 5), ("rssm l=10", 10))
# Each timed call and each timed plain loop comes right after an untimed run of its own
# (``--cold`` turns this off). OpenBLAS's worker threads spin for a while after a
# multi-threaded product before they sleep (its THREAD_TIMEOUT); timed right after the
# plain loop's two-thread products, an rssm call shares the 2 cores with them for its
# first tens of milliseconds (measured: the default RSM call on the paper's DPCP took 211
# ms right after 20 two-thread products, 171-184 ms after another call of its own;
# ``--blas-burst``), while
# the plain loop timed right after rssm (whose workers block on a queue) finds nothing
# spinning. The untimed runs give each the same start: the state its own work leaves.


def _call(prob, method, ell, **kw):
    opts = {"n_blocks": ell} if ell else None
    t = PC()
    res = rssm.minimize(prob, method="rssm" if ell else "rsm", options=opts, **kw)
    return PC() - t, res


def _naive_rsm(yt: np.ndarray, x0: np.ndarray, iters: int, gamma: float) -> float:
    m = yt.shape[1]
    x = x0.copy()
    t = PC()
    for _ in range(iters):
        z = yt.T @ x                                   # m x p
        r = np.linalg.norm(z, axis=1)
        w = z / np.where(r > 0, r, 1.0)[:, None]
        g = (yt @ w) / m
        y = x.T @ g
        rg = g - x @ (0.5 * (y + y.T))
        u, _, vt = np.linalg.svd(x - gamma * rg, full_matrices=False)
        x = u @ vt
    return (PC() - t) / iters


def _naive_rssm(yt: np.ndarray, x0: np.ndarray, ell: int, iters: int, gamma: float,
                seed: int = 0) -> float:
    m = yt.shape[1]
    p = x0.shape[1]
    x = x0.copy()
    blocks = np.array_split(np.arange(p), ell)
    rng = np.random.default_rng(seed)
    z = yt.T @ x                                       # cached, m x p
    t = PC()
    for _ in range(iters):
        i, j = rng.choice(ell, size=2, replace=False)
        c = np.concatenate([blocks[i], blocks[j]])
        r = np.linalg.norm(z, axis=1)
        wc = z[:, c] / np.where(r > 0, r, 1.0)[:, None]
        gc = (yt @ wc) / m                             # partial subgradient, n x |C|
        xc = x[:, c]
        y = x.T @ gc
        yc = y[c]
        y[c] = 0.5 * (yc + yc.T)
        pg = gc - x @ y                                # partial Riemannian subgradient
        xi = xc - gamma * pg
        wproj = x.T @ xi
        wproj[c] = 0.0
        xi -= x @ wproj                                # project onto the block's tangent
        u, _, vt = np.linalg.svd(xi, full_matrices=False)
        x[:, c] = u @ vt
        z[:, c] = yt.T @ x[:, c]
    return (PC() - t) / iters


def _naive(yt: np.ndarray, x0: np.ndarray, ell: int | None, iters: int) -> float:
    """The plain loop of RSM (``ell`` None) or RSSM with ``ell`` blocks: seconds per it."""
    if ell is None:
        return _naive_rsm(yt, x0, iters, 1e-3)
    return _naive_rssm(yt, x0, ell, iters, 1e-3)


def measure(rounds: int, quick: bool, warm: bool = True) -> list[dict]:
    prob = (rssm.problems.DPCP.synthetic(n=60, d=6, n_inliers=600, n_outliers=1400, seed=1)
            if quick else rssm.problems.DPCP.synthetic(seed=1))
    x0 = prob.initial_point(0)
    rows = []
    best: dict[str, dict[str, float]] = {}
    for _ in range(rounds):
        for label, ell in METHODS:
            if warm:
                _call(prob, label, ell)
            wall, res = _call(prob, label, ell)
            n = max(res.n_iter, 1)
            if warm:
                _naive(prob.yt, x0, ell, n)
            naive = _naive(prob.yt, x0, ell, n)
            b = best.setdefault(label, {"wall": np.inf, "solver": np.inf, "naive": np.inf})
            b["wall"] = min(b["wall"], wall / n)
            b["solver"] = min(b["solver"], res.time / n)
            b["naive"] = min(b["naive"], naive)
            b["n_iter"] = n
            b["success"] = res.success
            b["error"] = res.error
    for label, _ in METHODS:
        b = best[label]
        rows.append({
            "method": label, "n_iter": b["n_iter"], "success": b["success"],
            "error": f"{b['error']:.2e}",
            "wall_ms_per_it": f"{1e3 * b['wall']:.3f}",
            "solver_ms_per_it": f"{1e3 * b['solver']:.3f}",
            "naive_ms_per_it": f"{1e3 * b['naive']:.3f}",
            "wall/solver": f"{b['wall'] / b['solver']:.3f}",
            "wall/naive": f"{b['wall'] / b['naive']:.3f}",
            "goal wall/naive": "0.9" if label == "rsm" else "0.8",
        })
    return rows


def blas_burst(reps: int = 6) -> None:
    """``--blas-burst``: the default RSM call timed right after 20 two-thread NumPy
    products (OpenBLAS's threads still spinning), after a 0.5 s rest, and right after
    another call of its own; best 3 of ``reps`` each, in ms."""
    prob = rssm.problems.DPCP.synthetic(seed=1)
    yt, x = prob.yt, prob.initial_point(0)

    def burst():
        for _ in range(20):
            np.matmul(yt, yt.T @ x)

    def call():
        t = PC()
        rssm.minimize(prob)
        return 1e3 * (PC() - t)

    call()
    after, rested, again = [], [], []
    for _ in range(reps):
        burst()
        after.append(call())
        burst()
        time.sleep(0.5)
        rested.append(call())
        again.append(call())
    for label, v in (("right after 20 two-thread products", after), ("after a 0.5 s rest", rested),
                     ("right after another call", again)):
        print(f"default RSM call, {label}: best 3 of {reps}: "
              + ", ".join(f"{t:.0f}" for t in sorted(v)[:3]) + " ms")


_BUSY = "import time\nt = time.time()\nwhile time.time() - t < 3600: pass\n"


def under_load(rounds: int, quick: bool) -> list[dict]:
    prob = (rssm.problems.DPCP.synthetic(n=60, d=6, n_inliers=600, n_outliers=1400, seed=1)
            if quick else rssm.problems.DPCP.synthetic(seed=1))
    busy = subprocess.Popen([sys.executable, "-c", _BUSY])
    rows = []
    try:
        time.sleep(0.5)
        for label, ell in METHODS:
            auto, one = np.inf, np.inf
            bits = set()
            for _ in range(rounds):
                w, r = _call(prob, label, ell, max_iter=60, tol=0)
                auto = min(auto, w / r.n_iter)
                bits.add(r.x.tobytes())
                w, r = _call(prob, label, ell, max_iter=60, tol=0, threads=1)
                one = min(one, w / r.n_iter)
                bits.add(r.x.tobytes())
            rows.append({"method": label, "auto_ms_per_it": f"{1e3 * auto:.3f}",
                         "one_thread_ms_per_it": f"{1e3 * one:.3f}",
                         "auto/one": f"{auto / one:.3f}", "goal": "1.5",
                         "same bits": len(bits) == 1})
    finally:
        busy.kill()
        busy.wait()
    return rows


def _print(rows: list[dict]) -> None:
    if not rows:
        return
    keys = list(rows[0])
    print(" | ".join(keys))
    for r in rows:
        print(" | ".join(str(r[k]) for k in keys))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.defaults", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a smaller DPCP, 2 rounds")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--load", action="store_true", help="also measure under one busy process")
    ap.add_argument("--cold", action="store_true",
                    help="no untimed run before each timed one (each then starts right "
                         "after the other's last product)")
    ap.add_argument("--out", default=None, help="folder for defaults.csv (and defaults_load.csv)")
    ap.add_argument("--blas-burst", action="store_true",
                    help="only: the default call right after multi-threaded NumPy products")
    args = ap.parse_args(argv)
    if args.blas_burst:
        blas_burst()
        return 0
    rounds = args.rounds or (2 if args.quick else 5)
    print(f"default threads; {rounds} rounds, best per method; load average "
          f"{os.getloadavg()[0]:.2f}")
    print("each timed call and loop right after an untimed one of its own"
          if not args.cold else "no untimed runs: each timed right after the other")
    rows = measure(rounds, args.quick, not args.cold)
    _print(rows)
    load_rows = under_load(rounds, args.quick) if args.load else []
    if load_rows:
        print("\nunder one busy process:")
        _print(load_rows)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        for name, rr in (("defaults.csv", rows), ("defaults_load.csv", load_rows)):
            if rr:
                with open(os.path.join(args.out, name), "w", newline="") as fh:
                    w = csv.DictWriter(fh, fieldnames=list(rr[0]))
                    w.writeheader()
                    w.writerows(rr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
