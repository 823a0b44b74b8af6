"""The floor under D_k in Auto's RSM rule, side by side (issue 18, item 5; docs/stepsizes.md,
"The floor under D_k").

    python -m benchmarks.drop_floor [--seeds 5] [--floors 0 0.4 0.5 0.6 0.7] [--starts 15]
    python -m benchmarks.drop_floor --start    # RSM's first iterations instead of floors
    python -m benchmarks.drop_floor --stall    # D_k in windows without a new best cost

Auto's RSM step is kappa (f - f_best + D_k) / g, D_k the decrease of the best cost over the
last 4 epochs. ``drop_floor`` q bounds how fast D_k may fall: D_k >= q^(1/epoch) D_{k-1}
(q = 0: no floor, the rule before). Two parts, RSM only, iteration counts (they do not
depend on the machine's load):

1. **Against the best grid point.** For the paper's DPCP and ODL, l1 Procrustes and the
   from_functions example, seeds 1-``--seeds``, from the start of `benchmarks.stepsizes`,
   under its budget and stops (`benchmarks.stepsizes.run_rule`): iterations to error 1e-10
   (rejected first-search trials counted as half an iteration) over those of the
   instance's best geometric grid point, read from ``--grid-csv`` (the CSV that
   `benchmarks.stepsizes` wrote). Printed: how many instances are within 1.5x, and the
   ratios.
2. **Cold and warm starts.** `rssm.minimize(prob, x0, method="rsm", stepsize=Auto(...))`
   with the defaults otherwise (the convergence test on, budget 3000 iterations) from the
   starts of DPCP, ODL, l1 Procrustes, from_functions and the planted sparse basis, seeds
   1-``--starts`` (cold), and from warm starts of the first four, seeds 1-5: a solution of
   a default RSM run moved by noise of relative size 1e-3, 1e-2, 1e-1 and put back on
   St(n, p) by the polar factor. Printed: runs that stop `converged` at error below 1e-8,
   and their median iterations.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np

PROBLEMS = ("dpcp", "odl", "l1_procrustes", "from_functions")
COLD = PROBLEMS + ("sparse_basis",)
FLOORS = (0.0, 0.4, 0.5, 0.6, 0.7)
NOISE = (1e-3, 1e-2, 1e-1)


#: ``--start``: the rules compared instead of floors (keys of `_start_rule`), each under
#: a code number so that the functions below serve all modes.
STARTS = {1.0: "success rule at the start (Auto(start_decay=None))",
          2.0: "halving when the search rejects the longest step",
          3.0: "halving when it does and rotation_sq is 0 (Auto's default, start_decay=0.5)"}
#: ``--stall``: D_k held in windows without a new best cost (the rule before) or falling
#: by the floor there (Auto now), each with and without the halving at the start.
STALLS = {1.0: "D_k held, success rule at the start (Auto before)",
          2.0: "D_k held, halving at the start",
          3.0: "D_k falls by the floor, success rule at the start",
          4.0: "D_k falls by the floor, halving at the start (Auto's default)"}
_MODE = {"start": False, "stall": False}


class _HeldDrop:
    """Mixin: D_k held at its last value in a window without a new best cost (Auto's
    `_track_best` before it fell by the floor there)."""

    def _track_best(self, ctx):
        hist = self._best_hist
        hist.append(self._f_best)
        span = max(1, math.ceil(self.window * ctx.epoch))
        while len(hist) > span + 1:
            hist.popleft()
        if len(hist) == span + 1 and hist[0] - self._f_best > 0:
            self._drop = max(hist[0] - self._f_best,
                             self._drop * self.drop_floor ** (1.0 / ctx.epoch))


def _stall_rule(code: float):
    from rssm.stepsizes import Auto

    class Held(_HeldDrop, Auto):
        pass

    decay = None if code in (1.0, 3.0) else 0.5
    return (Held if code <= 2.0 else Auto)(start_decay=decay)


def _start_rule(code: float):
    """The three starts of ``--start`` (RSM): the success rule at the start, the halving
    gated by the first search alone, and Auto as it is (gated by the search and by f's
    invariance under X -> XQ)."""
    from rssm.stepsizes import Auto
    from rssm.stepsizes._common import max_step_length

    if code == 1.0:
        return Auto(start_decay=None)
    if code == 3.0:
        return Auto()

    class SearchGate(Auto):
        def _first(self, ctx, f, g):
            t = super()._first(ctx, f, g)
            self._halve = t < (1.0 - 1e-12) * max_step_length(ctx)
            return t

        def __call__(self, k, ctx):
            if not self._started:
                gamma = super().__call__(k, ctx)
                self._halve = self._t < (1.0 - 1e-12) * max_step_length(ctx)
                return gamma
            return super().__call__(k, ctx)

    return SearchGate(start_decay=0.5)


def noisy_subspace(codes, seeds=(0, 1, 2), fractions=(0.3, 0.6, 0.8)) -> None:
    """``--start``, last part: DPCP with noisy inliers (the robust-subspace model of
    docs/estimators.md: n = 30, d = 5, 1000 unit-norm samples, inlier noise 1e-3), through
    `rssm.estimators.RobustSubspace` with each start rule: iterations, stop, largest
    principal angle to the planted subspace (degrees)."""
    from scipy.linalg import subspace_angles

    from rssm.estimators import RobustSubspace

    for frac in fractions:
        for seed in seeds:
            rng = np.random.default_rng(seed)
            n, d, m = 30, 5, 1000
            basis = np.linalg.qr(rng.standard_normal((n, d)))[0]
            k = int(round(frac * m))
            g = rng.standard_normal((m - k, d))
            inl = (g @ basis.T) / np.linalg.norm(g, axis=1)[:, None]
            inl += 1e-3 * rng.standard_normal((m - k, n))
            out = rng.standard_normal((k, n))
            out /= np.linalg.norm(out, axis=1)[:, None]
            x = np.vstack([inl, out])
            line = []
            for q in codes:
                est = RobustSubspace(n_components=d, stepsize=_rule(q)).fit(x)
                comp = est.components_.T if est.components_.shape[0] == d else est.components_
                ang = float(np.degrees(subspace_angles(comp, basis)).max())
                line.append(f"{q:g}: {est.stop_reason_} {est.n_iter_} {ang:.4f} deg")
            print(f"noisy subspace, {frac:.0%} outliers, seed {seed}: " + " | ".join(line),
                  flush=True)


def smooth_invariant(codes, trials: int = 8) -> None:
    """``--stall``, last part: a smooth f that ignores rotations, the Rayleigh quotient
    -tr(X^T A X) on St(60, 5) (A = B B^T / n + diag(0..3), B Gaussian), from a start
    1e-2 from its top eigenvectors, where the halving start is not what a smooth f needs:
    iterations to the default verdict per rule, and the error then."""
    import rssm

    rng = np.random.default_rng(0)
    n, p = 60, 5
    for trial in range(trials):
        b = rng.standard_normal((n, n))
        a = b @ b.T / n + np.diag(np.linspace(0.0, 3.0, n))
        top = np.linalg.eigh(a)[1][:, -p:]
        x0 = rssm.stiefel.polar(top + 1e-2 * rng.standard_normal((n, p)))
        prob = rssm.Problem.from_functions(
            lambda x, a=a: -np.trace(x.T @ a @ x), lambda x, a=a: -2.0 * a @ x,
            shape=(n, p), name="rayleigh",
            error=lambda x, top=top: float(np.linalg.norm(top @ top.T - x @ x.T)))
        line = []
        for q in codes:
            res = rssm.minimize(prob, x0, method="rsm", stepsize=_rule(q))
            line.append(f"{q:g}: {res.stop_reason.value} {res.n_iter} {prob.error(res.x):.0e}")
        print(f"smooth invariant (Rayleigh quotient), close start {trial}: " + " | ".join(line),
              flush=True)


def _label(q: float) -> str:
    if _MODE["stall"]:
        return f"rule {q:g} ({STALLS[q]})"
    return f"start {q:g} ({STARTS[q]})" if _MODE["start"] else f"floor {q:g}"


def _rule(q: float):
    from rssm.stepsizes import Auto

    if _MODE["stall"]:
        return _stall_rule(q)
    if _MODE["start"]:
        return _start_rule(q)
    return Auto(drop_floor=q if q > 0 else 1e-300)


def against_grid(floors, seeds, grid_csv) -> None:
    from benchmarks.stepsizes import _problems, best_grid_points, first_at, run_rule

    best = {k: v[2] for k, v in best_grid_points(grid_csv).items()}
    probs = _problems()
    inst = {(name, s): probs[name][0](s) for name in PROBLEMS for s in seeds}
    for q in floors:
        parts, within, total = [], 0, 0
        for name in PROBLEMS:
            ratios = []
            for s in seeds:
                prob, x0 = inst[(name, s)]
                run = run_rule(prob, x0, "rsm", _rule(q), probs[name][1], s)
                hit = first_at(run, 1e-10)
                b = best.get((name, "rsm", s))
                ratios.append((hit[0] + 0.5 * hit[1]) / b if hit and b else math.inf)
            ok = sum(r <= 1.5 for r in ratios)
            within += ok
            total += len(ratios)
            parts.append(f"{name} {ok}/{len(ratios)} " + " ".join(
                f"{r:.2f}" if math.isfinite(r) else "-" for r in ratios))
        print(f"{_label(q)}: within 1.5x of the best grid point on {within}/{total}: "
              + " | ".join(parts), flush=True)


def starts(floors, n_cold) -> None:
    import rssm
    from benchmarks.stepsizes import _problems
    from rssm import stiefel

    probs = _problems()
    cases = [(name, s, None) for name in COLD for s in range(1, n_cold + 1)]
    cases += [(name, s, e) for name in PROBLEMS for s in range(1, 6) for e in NOISE]
    tally = {(q, warm): [0, 0, []] for q in floors for warm in (False, True)}
    for name, s, noise in cases:
        prob, x0 = probs[name][0](s)
        if noise is not None:
            xs = rssm.minimize(prob, x0, method="rsm", seed=s, max_iter=3000).x
            rng = np.random.default_rng(s)
            scale = noise * math.sqrt(xs.shape[1] / xs.size)
            x0 = stiefel.polar(xs + scale * rng.standard_normal(xs.shape))
        line = []
        for q in floors:
            res = rssm.minimize(prob, x0, method="rsm", stepsize=_rule(q), seed=s,
                                max_iter=3000)
            err = prob.error(res.x)
            good = res.success and err < 1e-8
            t = tally[(q, noise is not None)]
            t[0] += good
            t[1] += 1
            if good:
                t[2].append(res.n_iter)
            line.append(f"{q:g}: {res.stop_reason.value} {res.n_iter} {err:.0e}")
        print(f"{name} seed {s} {'cold' if noise is None else f'warm {noise:g}'}: "
              + " | ".join(line), flush=True)
    for (q, warm), (good, n, its) in tally.items():
        med = f"{np.median(its):g}" if its else "-"
        print(f"{_label(q)}, {'warm' if warm else 'cold'} starts: converged at error below "
              f"1e-8 on {good}/{n}, median iterations {med}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.drop_floor",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--starts", type=int, default=15, help="cold-start seeds per problem")
    ap.add_argument("--floors", type=float, nargs="+", default=list(FLOORS))
    ap.add_argument("--grid-csv", default=os.path.join(
        os.path.dirname(__file__), "results", "stepsizes", "stepsizes.csv"))
    ap.add_argument("--skip-starts", action="store_true")
    ap.add_argument("--start", action="store_true",
                    help="compare RSM's start instead of floors: " + "; ".join(
                        f"{k:g} = {v}" for k, v in STARTS.items()))
    ap.add_argument("--stall", action="store_true",
                    help="compare D_k in windows without a new best cost: " + "; ".join(
                        f"{k:g} = {v}" for k, v in STALLS.items()))
    args = ap.parse_args(argv)

    if args.start and args.stall:
        ap.error("--start and --stall compare different rules; give one")
    if args.start:
        _MODE["start"] = True
        args.floors = list(STARTS)
    if args.stall:
        _MODE["stall"] = True
        args.floors = list(STALLS)
    bad = [] if args.start or args.stall else [q for q in args.floors if not 0 <= q <= 1]
    if bad:
        ap.error(f"--floors takes values in [0, 1] (0: no floor), got {bad}")
    print(f"# python -m benchmarks.drop_floor {' '.join(argv or sys.argv[1:])}".rstrip())
    against_grid(args.floors, range(1, args.seeds + 1), args.grid_csv)
    if not args.skip_starts:
        starts(args.floors, args.starts)
    if args.start or args.stall:
        noisy_subspace(args.floors)
    if args.stall:
        smooth_invariant(args.floors)
    return 0


if __name__ == "__main__":
    sys.exit(main())
