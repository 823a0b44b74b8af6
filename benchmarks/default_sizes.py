"""What the default call costs beyond the paper's instance (issue #18, "cheap by default").

    python -m benchmarks.default_sizes [--large] [--rounds 3] [--phases] [CASE ...]

`benchmarks.defaults` checks the issue's goals (wall / solver time <= 1.1, wall / plain
loop <= 0.9 for RSM) on the paper's DPCP instance. This script measures the same two
ratios for the default call ``rssm.minimize(prob)`` (nothing set) on other sizes a user
brings: small and large DPCP, a thin DPCP subspace, ODL at three sizes, l1 Procrustes.
Per case, in one process and interleaved: an untimed call, a timed call, an untimed plain
loop, a timed plain loop; best of ``--rounds``, default threads (nothing pinned).

The plain loops: DPCP's is `benchmarks.defaults._naive_rsm`; ODL's and l1 Procrustes' are
the same RSM iteration on Z = Y^T X (minus B), G = Y sign(Z) / m, polar by a thin SVD.
They start from the problem's own start, computed before the clock, with a fixed step
(the cost of an iteration does not depend on it); the default call's wall time includes
its start (DPCP's spectral start reads the whole data once).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import rssm
from benchmarks.defaults import _naive_rsm

PC = time.perf_counter

CASES = {
    "dpcp n30 d3 m900": lambda: rssm.problems.DPCP.synthetic(
        n=30, d=3, n_inliers=270, n_outliers=630, seed=1),
    "dpcp n50 d45 m2000": lambda: rssm.problems.DPCP.synthetic(
        n=50, d=45, n_inliers=600, n_outliers=1400, seed=1),
    "dpcp n200 d20 m10000": lambda: rssm.problems.DPCP.synthetic(
        n=200, d=20, n_inliers=3000, n_outliers=7000, seed=1),
    "odl n20": lambda: rssm.problems.ODL.synthetic(n=20, seed=1),
    "odl n60": lambda: rssm.problems.ODL.synthetic(n=60, seed=1),
    "odl n120": lambda: rssm.problems.ODL.synthetic(n=120, seed=1),
    "l1_procrustes": lambda: rssm.problems.L1Procrustes.synthetic(seed=1),
}
LARGE = {
    "dpcp n500 d50 m20000": lambda: rssm.problems.DPCP.synthetic(
        n=500, d=50, n_inliers=6000, n_outliers=14000, seed=1),
}


def _plain_sign_loop(yt: np.ndarray, x0: np.ndarray, iters: int, gamma: float,
                     bt: np.ndarray | None = None) -> float:
    """Seconds per RSM iteration of f = ||Y^T X - B||_1 / m, as a user would write it."""
    x = x0.copy()
    m = yt.shape[1]
    b = None if bt is None else bt.T
    t = PC()
    for _ in range(iters):
        z = yt.T @ x
        if b is not None:
            z -= b
        g = (yt @ np.sign(z)) / m
        s = x.T @ g
        u, _, vt = np.linalg.svd(x - gamma * (g - x @ (0.5 * (s + s.T))), full_matrices=False)
        x = u @ vt
    return (PC() - t) / iters


def _plain(prob, x0: np.ndarray, iters: int) -> float:
    if isinstance(prob, rssm.problems.DPCP):
        return _naive_rsm(prob.yt, x0, iters, 1e-3)
    if isinstance(prob, rssm.problems.ODL):
        return _plain_sign_loop(prob.y, x0, iters, 1e-3)
    return _plain_sign_loop(prob.yt, x0, iters, 1e-3, prob.bt)


def _call(prob):
    t = PC()
    res = rssm.minimize(prob)
    return PC() - t, res


def measure(name: str, make, rounds: int) -> dict:
    """Best-of-``rounds`` milliseconds per iteration and the two ratios for one case."""
    prob = make()
    x0 = prob.initial_point(0)
    wall = solver = plain = np.inf
    for _ in range(rounds):
        _call(prob)
        w, res = _call(prob)
        n = max(res.n_iter, 1)
        _plain(prob, x0, n)
        p = _plain(prob, x0, n)
        wall, solver, plain = min(wall, w / n), min(solver, res.time / n), min(plain, p)
    return {"case": name, "n_iter": res.n_iter, "success": res.success,
            "wall": 1e3 * wall, "solver": 1e3 * solver, "plain": 1e3 * plain,
            "wall/solver": wall / solver, "wall/plain": wall / plain}


def phases(name: str, make, reps: int) -> str:
    """Milliseconds per default call spent in its start (outside the call: the same
    `initial_point` it computes), the convergence test's checks at a verdict
    (`bundle_probe`, `probe`, `zigzag`, `full_cancel`) and `Auto`'s first-step search
    (`first_search`), timed by wrappers around those functions (so slightly slower)."""
    import functools

    import rssm.solvers.certificate as cert
    import rssm.solvers.loop as loop
    import rssm.stepsizes._common as common
    import rssm.stepsizes.auto as auto

    spent: dict[str, float] = {}
    saved = []

    def timed(mod, fname):
        f = getattr(mod, fname)
        saved.append((mod, fname, f))

        @functools.wraps(f)
        def g(*a, **k):
            t = PC()
            try:
                return f(*a, **k)
            finally:
                spent[fname] = spent.get(fname, 0.0) + PC() - t
        return g

    for fname in ("bundle_probe", "probe", "zigzag", "full_cancel"):
        g = timed(cert, fname)
        setattr(cert, fname, g)
        if hasattr(loop, fname):
            saved.append((loop, fname, getattr(loop, fname)))
            setattr(loop, fname, g)
    g = timed(common, "first_search")
    common.first_search = g
    saved.append((auto, "first_search", auto.first_search))
    auto.first_search = g
    try:
        prob = make()
        rssm.minimize(prob)
        spent.clear()
        wall = solver = start = 0.0
        for _ in range(reps):
            t = PC()
            prob.initial_point(0)
            start += PC() - t
            w, res = _call(prob)
            wall, solver = wall + w, solver + res.time
    finally:
        for mod, fname, f in saved:
            setattr(mod, fname, f)
    parts = ", ".join(f"{k} {1e3 * v / reps:.3g}" for k, v in sorted(spent.items()))
    return (f"{name}: ms per call (mean of {reps}): wall {1e3 * wall / reps:.4g}, solver "
            f"{1e3 * solver / reps:.4g}, start {1e3 * start / reps:.3g}, {parts}; "
            f"{res.n_iter} iterations")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", help="names from the list below (default: all)")
    ap.add_argument("--large", action="store_true", help="add DPCP n = 500, m = 20000 "
                    "(about 3 minutes)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--phases", action="store_true", help="instead: where each call's time "
                    "goes (the start, the verdict's checks, Auto's first-step search)")
    args = ap.parse_args(argv)
    cases = dict(CASES, **(LARGE if args.large else {}))
    names = args.cases or list(cases)
    if args.phases:
        for name in names:
            print(phases(name, cases[name], 1 if name in LARGE else 20), flush=True)
        return
    print(f"default threads; best of {args.rounds} rounds; ms per iteration; goals on the "
          "paper's instance: wall/solver <= 1.1, wall/plain <= 0.9 (RSM, the default)")
    print("case | n_iter | success | wall | solver | plain loop | wall/solver | wall/plain")
    for name in names:
        r = measure(name, cases[name], args.rounds)
        print(f"{r['case']} | {r['n_iter']} | {r['success']} | {r['wall']:.4g} | "
              f"{r['solver']:.4g} | {r['plain']:.4g} | {r['wall/solver']:.3f} | "
              f"{r['wall/plain']:.3f}", flush=True)


if __name__ == "__main__":
    main()
