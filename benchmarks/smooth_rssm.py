"""RSSM's default rule on smooth costs whose least value is 0 (issue #18, item 6).

    python -m benchmarks.smooth_rssm [--thresholds 1e-3 1e-2 0.1 0.3] [--quick]

Least-squares Procrustes f(X) = ||A X - B||_F^2 with B = A X* (A = rng.standard_normal((2n,
n)), X* = qr(rng.standard_normal((n, p)))[0], rng = numpy.random.default_rng(seed); a
partial subgradient 2 A^T (A X_C - B_C)), smooth, f* = 0, rotations between blocks
mattering (`BlockRule`'s per-sweep branch). For (n, p) in (30, 2), (40, 5), (60, 10), l = 2
for p = 2 and l = 2, 3, p otherwise, seeds 1 and 2 (14 calls), it runs
``rssm.minimize(prob, method="rssm", options={"n_blocks": l}, seed=seed)`` with:

* the default rule at each ``--thresholds`` value of `rssm.stepsizes.blockrule.SWEEP_VANISH`
  (where the per-sweep branch hands over to Auto's success rule; ``inf`` never hands
  over, the rule before the hand-over);
* ``Auto(scale="length")`` (the success rule throughout) and ``Auto(scale="gap")``.

It prints, per rule, the calls that stop ``converged``, the errors ||X - X*||_F of those
that end on their budget, and the iterations of the converged ones (docs/stepsizes.md,
"Smooth costs whose least value is 0, with RSSM"). Iteration counts do not depend on the
machine's load; no timing is taken (about a minute here).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

import rssm
import rssm.stepsizes.blockrule as blockrule
from rssm.stepsizes import Auto

SIZES = ((30, 2), (40, 5), (60, 10))
SEEDS = (1, 2)


def problem(n: int, p: int, seed: int):
    """The least-squares Procrustes instance (and X*)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((2 * n, n))
    xs = np.linalg.qr(rng.standard_normal((n, p)))[0]
    b = a @ xs
    prob = rssm.Problem.from_functions(
        lambda x: float(((a @ x - b) ** 2).sum()), lambda x: 2 * a.T @ (a @ x - b),
        lambda x, c: 2 * a.T @ (a @ x[:, c] - b[:, c]), shape=(n, p),
        error=lambda x: float(np.linalg.norm(x - xs)))
    return prob


def cases(quick: bool) -> list[tuple[int, int, int, int]]:
    """(n, p, l, seed) of the calls."""
    out = []
    for n, p in SIZES[:2] if quick else SIZES:
        for ell in ([2] if p == 2 else [2, 3, p]):
            for seed in SEEDS[:1] if quick else SEEDS:
                out.append((n, p, ell, seed))
    return out


def run(rule: str, quick: bool = False) -> list[tuple[bool, int, float]]:
    """(converged, iterations, error) per call; ``rule`` "default", "length" or "gap"."""
    out = []
    for n, p, ell, seed in cases(quick):
        kw = {} if rule == "default" else {"stepsize": Auto(scale=rule)}
        res = rssm.minimize(problem(n, p, seed), method="rssm", options={"n_blocks": ell},
                            seed=seed, **kw)
        out.append((bool(res.success), int(res.n_iter), float(res.error)))
    return out


def summary(name: str, rows: list[tuple[bool, int, float]]) -> str:
    done = [k for ok, k, _ in rows if ok]
    left = [f"{e:.2g}" for ok, _, e in rows if not ok]
    its = f"{min(done)}-{max(done)}" if done else "-"
    return (f"{name}: {len(done)} of {len(rows)} converge; on the budget: "
            f"{', '.join(left) or 'none'}; iterations {its}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.smooth_rssm",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--thresholds", type=float, nargs="+",
                    default=[math.inf, 1e-3, 1e-2, 0.1, 0.3])
    ap.add_argument("--quick", action="store_true", help="(40, 5) and (30, 2), seed 1 only")
    args = ap.parse_args(argv)
    kept = blockrule.SWEEP_VANISH
    try:
        for thr in args.thresholds:
            blockrule.SWEEP_VANISH = 0.0 if math.isinf(thr) else thr
            tag = "never" if math.isinf(thr) else f"{thr:g} g_0"
            print(summary(f"default rule, hand-over at {tag}"
                          + (" (kept)" if thr == kept else ""), run("default", args.quick)),
                  flush=True)
    finally:
        blockrule.SWEEP_VANISH = kept
    for rule in ("length", "gap"):
        print(summary(f'Auto(scale="{rule}")', run(rule, args.quick)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
