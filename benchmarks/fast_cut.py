"""The faster decay after the plateau cut, against the best grid point on held-out seeds
(issue 18, item 5; docs/stepsizes.md, "Kept: a faster decay after the plateau cut, with
few blocks").

    python -m benchmarks.fast_cut [--seeds 12] [--cells l1_procrustes:rssm-l3 ...]
    python -m benchmarks.fast_cut --calls

`BlockRule`'s plateau cut (f above f_0 while a random start's steps are held at the cap)
fires on l1 Procrustes and on none of the benchmark's DPCP, ODL, from_functions or
planted sparse basis runs. After it, with at most `fast_blocks` blocks, the decay is
`fast_decay` per sweep until the freeze test first reads above `frozen`, then 0.7 per
sweep from the length that decay had reached. This script scores variants against the
best point of `benchmarks.stepsizes`' 54-point geometric grid on the same instance:
seeds 1-5 from the logged grid (`results/stepsizes/stepsizes.csv`), later seeds computed
here once and kept in `results/stepsizes/fast_cut/grid_best.json`. Iterations to error
1e-10, rejected trials counted as half an iteration (as `benchmarks.step_signals`);
iteration counts only, no timing. ``--calls``: default RSSM calls (the default tolerance
and budget, the certificate's verdict) at l = 2 and 3, seeds 0-5, on the problems where
the sweep branch runs, with the faster decay and without it (``fast_blocks=0``): every
call where they differ.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results" / "stepsizes"
CACHE = RESULTS / "fast_cut" / "grid_best.json"
CELLS = ("l1_procrustes:rssm-l2", "l1_procrustes:rssm-l3", "l1_procrustes:rssm-l4",
         "l1_procrustes:rssm-l5")


def _auto(**block):
    """`Auto` whose RSSM rule is ``BlockRule(**block)``."""
    from rssm.stepsizes import Auto, BlockRule

    class _Auto(Auto):
        def reset(self) -> None:
            super().reset()
            first = self._block._first_args
            self._block = BlockRule(**block)
            self._block._first_args = first

    return _Auto()


def _no_fall_back():
    from benchmarks.step_signals import PlateauSignal

    return PlateauSignal("rise", 0.6, 3)


VARIANTS = {
    "0.7 throughout (before)": lambda: _auto(fast_blocks=0),
    "0.6 up to l = 3 (kept)": lambda: _auto(),
    "0.6 up to l = 5": lambda: _auto(fast_blocks=5),
    "0.55 up to l = 3": lambda: _auto(fast_decay=0.55),
    "0.5 up to l = 3": lambda: _auto(fast_decay=0.5),
    "0.6 up to l = 3, no fall-back": _no_fall_back,
}


def grid_best(name, key, seed, prob, x0, epochs, logged, cache) -> float:
    """Fewest iterations to 1e-10 over the grid (logged for seeds 1-5, else computed)."""
    from benchmarks.stepsizes import BETAS, LENGTHS, first_at, run_rule
    from rssm.stepsizes import Geometric

    if (name, key, seed) in logged:
        return logged[(name, key, seed)]
    ck = f"{name}|{key}|{seed}"
    if ck not in cache:
        g0 = float(np.linalg.norm(prob.riemannian_subgradient(x0)))
        best = math.inf
        for b in BETAS:
            for t in LENGTHS:
                run = run_rule(prob, x0, key, Geometric(t / g0, b), epochs, seed,
                               None if math.isinf(best) else math.ceil(best))
                hit = first_at(run, 1e-10)
                if hit is not None and hit[0] < best:
                    best = hit[0]
        cache[ck] = best
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        CACHE.write_text(json.dumps(cache, indent=1, sort_keys=True))
    return cache[ck]


def _call_cases() -> dict:
    import rssm
    from rssm.problems import DPCP, ODL, L1Procrustes, PlantedSparseBasis

    def sum_abs_inner(seed, n=12, p=4, k=30):
        rng = np.random.default_rng(seed)
        m = rng.standard_normal((k, n, p))
        return rssm.Problem.from_functions(
            lambda x: float(np.abs(np.einsum("kij,ij->k", m, x)).sum()),
            lambda x: np.einsum("k,kij->ij", np.sign(np.einsum("kij,ij->k", m, x)), m),
            shape=(n, p), name="sum_abs_inner")

    def l1_fit(seed, rows=300, n=20, p=5):
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((rows, n))
        xs = rssm.stiefel.random_point(n, p, rng)
        b = a @ xs + 10 * rng.standard_normal((rows, p)) * (rng.random((rows, p)) < 0.1)
        return rssm.Problem.from_functions(
            lambda x: np.abs(a @ x - b).sum(), lambda x: a.T @ np.sign(a @ x - b),
            lambda x, c: a.T @ np.sign(a @ x[:, c] - b[:, c]), shape=(n, p), name="l1_fit",
            error=lambda x: float(np.linalg.norm(x - xs)))

    return {
        "l1 Procrustes 30 x 10": lambda s: L1Procrustes.synthetic(seed=s),
        "l1 Procrustes 20 x 5": lambda s: L1Procrustes.synthetic(m=200, n=20, p=5, seed=s),
        "l1 Procrustes 60 x 20": lambda s: L1Procrustes.synthetic(m=600, n=60, p=20, seed=s),
        "l1 Procrustes 12 x 6, 30 % outliers": lambda s: L1Procrustes.synthetic(
            m=200, n=12, p=6, outlier_fraction=0.3, seed=s),
        "ODL n = 20": lambda s: ODL.synthetic(n=20, seed=s),
        "ODL n = 30": lambda s: ODL.synthetic(n=30, seed=s),
        "ODL n = 60": lambda s: ODL.synthetic(n=60, seed=s),
        "planted sparse basis (auto)": lambda s: PlantedSparseBasis.synthetic(seed=s),
        "sum of |<M_i, X>|": sum_abs_inner,
        "l1 fit (from_functions)": l1_fit,
        "DPCP 30 x 27": lambda s: DPCP.synthetic(n=30, d=3, n_inliers=300, n_outliers=200,
                                                seed=s),
    }


def call_cases() -> list:
    """The 180 default calls of ``--calls`` (with l = 2 and 3, where l <= p): (name,
    build(problem seed) -> problem, [(problem seed, run seed), ...])."""
    import rssm

    cases = [(name, build, [(s, s) for s in range(6)]) for name, build in _call_cases().items()]
    small = [(s, x) for s in range(4) for x in range(3)]        # problem seed, run seed
    cases += [("l1 Procrustes 100 x 8 x 4", lambda s: rssm.problems.L1Procrustes.synthetic(
                  m=100, n=8, p=4, seed=s), small),
              ("sum of |<M_i, X>| on St(8, 4), 10 terms",
               lambda s: _call_cases()["sum of |<M_i, X>|"](s, n=8, p=4, k=10), small)]
    return cases


def each_call():
    """Yield (name, l, problem seed, run seed, problem) for the 180 calls of
    `call_cases` (l = 2 and 3, where l <= p)."""
    for name, build, pairs in call_cases():
        for ell in (2, 3):
            for seed, run_seed in pairs:
                prob = build(seed)
                if ell <= prob.shape[1]:
                    yield name, ell, seed, run_seed, prob


def calls() -> None:
    """``--calls``: the default RSSM calls with and without the faster decay, and with it
    but without `FAST_WATCH` (the fall-back to the slower decay's length at the time of
    the fall-back)."""
    import warnings

    import rssm
    from rssm.stepsizes import blockrule

    # (the sum of |<M_i, X>| has no partial subgradient: said once here, not per call)
    warnings.filterwarnings("ignore", message=".*has no partial subgradient")
    watch = blockrule.FAST_WATCH
    same = total = 0
    its = [0, 0, 0]
    for name, ell, seed, run_seed, prob in each_call():
        out = []
        for i, (block, level) in enumerate((({"fast_blocks": 0}, watch), ({}, watch),
                                            ({}, 2.0))):
            blockrule.FAST_WATCH = level
            try:
                r = rssm.minimize(prob, method="rssm", seed=run_seed,
                                  stepsize=_auto(**block), options={"n_blocks": ell})
            finally:
                blockrule.FAST_WATCH = watch
            its[i] += r.n_iter
            err = math.nan if r.error is None else r.error
            out.append(f"{r.stop_reason.value} {r.n_iter} its, error {err:.1e}, "
                       f"f {r.fun:.12g}")
        total += 1
        same += out[0] == out[1] == out[2]
        if not out[0] == out[1] == out[2]:
            print(f"{name}, l = {ell}, seed {seed}, run seed {run_seed}: 0.7 throughout "
                  f"{out[0]} | kept {out[1]} | without the watch {out[2]}", flush=True)
    print(f"{same} of {total} calls the same; iterations in all: 0.7 throughout {its[0]}, "
          f"kept {its[1]}, without the watch {its[2]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.fast_cut",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=12, help="seeds 1..N (default 12)")
    ap.add_argument("--cells", nargs="*", default=list(CELLS))
    ap.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--calls", action="store_true", help="the default-call comparison")
    args = ap.parse_args(argv)
    if args.calls:
        calls()
        return 0
    from benchmarks.stepsizes import _problems, best_grid_points, first_at, run_rule

    logged = {k: v[2] for k, v in best_grid_points(RESULTS / "stepsizes.csv").items()}
    cache = json.loads(CACHE.read_text()) if CACHE.exists() else {}
    probs = _problems()
    seeds = range(1, args.seeds + 1)
    for cell in args.cells:
        name, key = cell.split(":")
        build, epochs, _ = probs[name]
        work = {v: [] for v in args.variants}
        grids = []
        for seed in seeds:
            prob, x0 = build(seed)
            grids.append(grid_best(name, key, seed, prob, x0, epochs, logged, cache))
            for v in args.variants:
                hit = first_at(run_rule(prob, x0, key, VARIANTS[v](), epochs, seed), 1e-10)
                work[v].append(hit[0] + 0.5 * hit[1] if hit else math.inf)
        print(f"{cell}, seeds 1-{args.seeds}: best grid point {[int(g) for g in grids]}",
              flush=True)
        for v in args.variants:
            ratios = [w / g for w, g in zip(work[v], grids, strict=True)]
            held = ratios[5:]
            print(f"  {v}: within 1.5x {sum(r <= 1.5 for r in ratios)} of {len(ratios)} "
                  f"(seeds 1-5: {sum(r <= 1.5 for r in ratios[:5])}, later: "
                  f"{sum(r <= 1.5 for r in held)} of {len(held)}); reach 1e-10 "
                  f"{sum(math.isfinite(w) for w in work[v])}; ratios "
                  + " ".join("-" if math.isinf(r) else f"{r:.2f}" for r in ratios),
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
