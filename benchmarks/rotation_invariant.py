"""The default RSSM call on costs that ignore rotations (issue #18, items 3 and 6).

    python -m benchmarks.rotation_invariant [--rise 1e-4 1e-3 1e-2] [--quick]

f(XQ) = f(X) for every orthogonal Q sends `BlockRule` to its per-epoch branch (cosine
control). Near a smooth or blunt minimizer that branch hands over to the success rule
once the mean gradient estimate has fallen below `VANISH` g_0 and f rises by `RISE` of
its progress (docs/stepsizes.md, "A smooth minimizer"). This runs
``rssm.minimize(prob, method="rssm", options={"n_blocks": l}, seed=s)`` with nothing else
set, l = 2-6 (l <= p), seeds 0-2, on 34 rotation-invariant problems (510 calls):

* DPCP on standardized iris (d = 1, 2), wine (d = 3, 8) and diabetes (d = 3, 6);
* five costs of X^T y_j or X^T A X through `rssm.Problem.from_functions`, each at
  (n, p, m) = (20, 6, 200), (30, 12, 300), (12, 8, 100) and data seeds 0, 1: -trace(X^T A X)
  (smooth), the mean Huber loss of ||X^T y_j|| (delta 0.1), log-sum-exp of ||X^T y_j||^2,
  the mean of ||X^T y_j|| and their maximum (nonsmooth), half of the y_j near an
  (n - p)-dimensional subspace.

For each ``--rise`` value (and the hand-over off, ``RISE = inf``, the rule before it) it
counts the calls that stop ``converged``, and against the hand-over off: verdicts gained
and lost, calls that converge both ways in more than 1.5x or fewer than 1/1.5 of the
iterations, and calls that end on their budget both ways at a higher f. Iteration counts
do not depend on the machine's load; no timing is taken (about 3 minutes per value here).
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings

import numpy as np

import rssm
import rssm.stepsizes.blockrule as blockrule

SIZES = ((20, 6, 200), (30, 12, 300), (12, 8, 100))
KINDS = ("trace", "huber", "lse", "sumnorm", "maxnorm")


def _weights(kind: str, z: np.ndarray, m: int) -> np.ndarray:
    """d(cost)/d(Z) for Z = X^T Y (p x m), for the costs of Y's columns."""
    r = np.linalg.norm(z, axis=0)
    if kind == "huber":
        delta = 0.1
        return z * np.where(r <= delta, 1.0 / delta, 1.0 / np.maximum(r, 1e-300)) / m
    if kind == "lse":
        q = r * r
        e = np.exp(q - q.max())
        return 2.0 * z * (e / e.sum())
    if kind == "sumnorm":
        return np.where(r > 0, z / np.where(r > 0, r, 1.0), 0.0) / m
    out = np.zeros_like(z)                                   # maxnorm
    j = int(np.argmax(r))
    if r[j] > 0:
        out[:, j] = z[:, j] / r[j]
    return out


def custom(kind: str, n: int, p: int, m: int, seed: int) -> rssm.Problem:
    """One of the five costs (module docstring) as `Problem.from_functions`."""
    rng = np.random.default_rng(seed)
    if kind == "trace":
        b = rng.standard_normal((n, n))
        a = b @ b.T / n
        return rssm.Problem.from_functions(
            lambda x: float(-np.trace(x.T @ a @ x)), lambda x: -2.0 * a @ x,
            lambda x, c: -2.0 * a @ x[:, c], shape=(n, p), name=kind)
    y = rng.standard_normal((n, m))
    s = np.linalg.qr(rng.standard_normal((n, n - p)))[0]
    y[:, : m // 2] = s @ rng.standard_normal((n - p, m // 2)) \
        + 0.01 * rng.standard_normal((n, m // 2))

    def cost(x):
        r = np.linalg.norm(x.T @ y, axis=0)
        if kind == "huber":
            return float(np.where(r <= 0.1, r * r / 0.2, r - 0.05).sum() / m)
        if kind == "lse":
            q = r * r
            return float(q.max() + np.log(np.exp(q - q.max()).sum()))
        return float(r.sum() / m) if kind == "sumnorm" else float(r.max())

    def grad(x):
        return y @ _weights(kind, x.T @ y, m).T

    def partial(x, c):
        return y @ _weights(kind, x.T @ y, m)[c].T

    return rssm.Problem.from_functions(cost, grad, partial, shape=(n, p), name=kind)


def real(name: str, d: int) -> rssm.Problem:
    """DPCP on a standardized scikit-learn table (constant columns dropped)."""
    from sklearn import datasets

    x = {"iris": datasets.load_iris, "wine": datasets.load_wine,
         "diabetes": datasets.load_diabetes}[name]().data
    x = x[:, x.std(0) > 0]
    x = (x - x.mean(0)) / x.std(0)
    return rssm.problems.DPCP(x.T, p=x.shape[1] - d)


def problems(quick: bool) -> list[tuple[str, object]]:
    """(label, build) of the 34 problems (6 with ``quick``)."""
    out = [(f"dpcp {name} d={d}", lambda name=name, d=d: real(name, d))
           for name, ds in (("iris", (1, 2)), ("wine", (3, 8)), ("diabetes", (3, 6)))
           for d in ds]
    out += [(f"{kind} {n}x{p} m={m} data {s}",
             lambda kind=kind, n=n, p=p, m=m, s=s: custom(kind, n, p, m, s))
            for kind in KINDS for (n, p, m) in SIZES for s in (0, 1)]
    return out[:1] + out[6:11] if quick else out


def run(rise: float, quick: bool, **constants: float) -> dict:
    """(problem, l, seed) -> (converged, iterations, f) with ``RISE = rise`` and the other
    module constants of `rssm.stepsizes.blockrule` given (``NEG_GAIN=1.0``, ...)."""
    saved = blockrule.RISE
    saved_constants = {k: getattr(blockrule, k) for k in constants}
    blockrule.RISE = rise
    for k, v in constants.items():
        setattr(blockrule, k, v)
    out = {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for label, build in problems(quick):
                prob = build()
                for ell in range(2, min(6, prob.shape[1]) + 1):
                    for seed in (0, 1, 2) if not quick else (0,):
                        res = rssm.minimize(prob, method="rssm", options={"n_blocks": ell},
                                            seed=seed)
                        out[(label, ell, seed)] = (bool(res.success), int(res.n_iter),
                                                   float(res.fun))
    finally:
        blockrule.RISE = saved
        for k, v in saved_constants.items():
            setattr(blockrule, k, v)
    return out


def compare(base: dict, new: dict) -> dict:
    """Counts of `new` against `base` (module docstring)."""
    c = dict.fromkeys(("converged", "gained", "lost", "slower", "faster", "higher"), 0)
    for key, (ok, its, f) in new.items():
        ok0, its0, f0 = base[key]
        c["converged"] += ok
        c["gained"] += ok and not ok0
        c["lost"] += ok0 and not ok
        if ok and ok0:
            c["slower"] += its > 1.5 * its0
            c["faster"] += its < its0 / 1.5
        if not ok and not ok0:
            c["higher"] += f > f0 + 1e-9 * abs(f0)
    return c


def counts_text(c: dict) -> str:
    """The counts of `compare` in words (shared with `benchmarks.cosine_gain`)."""
    return (f"{c['gained']} gained, {c['lost']} lost, {c['slower']} more than 1.5x the "
            f"iterations, {c['faster']} fewer than 1/1.5, {c['higher']} on the budget both "
            "ways at a higher f")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.rotation_invariant",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--rise", nargs="*", type=float, default=[blockrule.RISE])
    ap.add_argument("--quick", action="store_true", help="6 problems, seed 0 (seconds)")
    args = ap.parse_args(argv)
    base = run(math.inf, args.quick)
    print(f"hand-over off (RISE = inf): {sum(v[0] for v in base.values())} of {len(base)} "
          "calls converge", flush=True)
    for rise in args.rise:
        c = compare(base, run(rise, args.quick))
        print(f"RISE = {rise:g}: {c['converged']} of {len(base)} converge; against the "
              f"hand-over off: {counts_text(c)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
