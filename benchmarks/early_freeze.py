"""A freeze found early: the full bundle asked once the steps settle to 1e-2 ||X||_F
(issue 18, item 5; docs/convergence.md, "A freeze found early").

    python -m benchmarks.early_freeze [--seeds 8] [--cells odl:rssm-l5 ...]
    python -m benchmarks.early_freeze --calls
    python -m benchmarks.early_freeze --small-calls

RSSM's convergence test asks a bundle of `FULL_BUNDLE` full Riemannian subgradients
(`rssm.solvers.certificate.full_cancel`) whether a run whose steps settled froze. At
``tol`` that is late: a decay that froze at error 4e-3 on the paper's ODL (l = 5, seed 2)
crept on for 500 iterations before its steps were that short. This script runs the
default rule (`rssm.stepsizes.Auto`, as `benchmarks.stepsizes` runs it: the budget, the
stops and a target error of 5e-11) with the early ask off, and at the first iteration
whose last horizon of steps sums to at most L ||X||_F, for L = 1e-2 ... 1e-7, reads the
full bundle at that X with steps of L / (FULL_BUNDLE - 1), off the run.

A reading counts as *converging* where the run's error two levels later (L / 100; at the
run's end where it ended before) is at most a tenth of its error at L (a converging
run's falls about tenfold per level), and as *frozen* where it is not and the error at L
is above `FROZEN_ABOVE`; others are not counted. It prints every reading, then per level
the largest reading of the converging runs and the smallest of the frozen ones: a
threshold between the two tells them apart.

``--calls``: the default calls (the default tolerance, budget and verdict) on the same
cells and on ODL at l = 6 and 8, with the early ask and without it: iterations, verdict
and error of every call where they differ. ``--small-calls``: the same on the 180 default
calls of ``benchmarks.fast_cut --calls`` (l = 2 and 3, small problems). Iteration counts
only, no timing.
"""

from __future__ import annotations

import argparse
import contextlib
import math

import numpy as np

LEVELS = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7)
CELLS = ("odl:rssm-l3", "odl:rssm-l4", "odl:rssm-l5", "sparse_basis:rssm-l3",
         "sparse_basis:rssm-l5", "dpcp:rssm-l3", "dpcp:rssm-l5", "l1_procrustes:rssm-l3",
         "l1_procrustes:rssm-l5", "from_functions:rssm-l3", "from_functions:rssm-l5")
#: A reading counts as a freeze only at an error above this (below it, an error that no
#: longer falls is a run at its solution: the benchmark's runs stop at 5e-11).
FROZEN_ABOVE = 1e-6
#: ``--calls`` also runs the larger l of `benchmarks.default_verdicts`' ODL calls.
CALL_CELLS = CELLS + ("odl:rssm-l6", "odl:rssm-l8")


class _EarlyOff:
    """Within ``with``: no early ask (`EARLY_LEVELS` empty), as before it."""

    def __enter__(self):
        from rssm.solvers import certificate

        self._kept = certificate.EARLY_LEVELS
        certificate.EARLY_LEVELS = ()

    def __exit__(self, *exc):
        from rssm.solvers import certificate

        certificate.EARLY_LEVELS = self._kept


def readings(name: str, key: str, seed: int) -> tuple[int, float, list]:
    """One run without the early ask: (iterations, final error, [(L, iteration, error,
    reading)])."""
    import rssm
    from benchmarks.stepsizes import _method, _problems
    from rssm.solvers.certificate import FULL_BUNDLE, WINDOW, full_cancel
    from rssm.stepsizes import Auto
    from rssm.stopping import MinStepNorm

    build, epochs, _ = _problems()[name]
    prob, x0 = build(seed)
    method, ell = _method(key)
    horizon = WINDOW * (ell * (ell - 1) // 2)
    xs, steps, errs = {}, {}, {}

    def keep(pr):
        xs[pr.iteration] = np.array(pr.x)
        steps[pr.iteration] = pr.step_norm
        errs[pr.iteration] = pr.error

    with _EarlyOff():
        res = rssm.minimize(prob, x0, method=method, stepsize=Auto(), seed=seed, record=1,
                            max_iter=int(math.ceil(epochs * ell / 2)), target_error=5e-11,
                            stop=MinStepNorm(1e-13), options={"n_blocks": ell},
                            callback=keep)
    scale = math.sqrt(x0.shape[1])
    ks = sorted(steps)
    sn = np.array([s if s is not None and math.isfinite(s) else 0.0
                   for s in (steps[k] for k in ks)])
    out, left = [], list(LEVELS)
    for j in range(horizon, len(ks)):
        radius = float(sn[j - horizon + 1:j + 1].sum())
        while left and radius <= left[0] * scale:
            level = left.pop(0)
            k = ks[j]
            out.append((level, k, float(errs[k]),
                        full_cancel(prob, xs[k], length=level / (FULL_BUNDLE - 1))))
    return res.n_iter, float(res.error), out


def default_call(name: str, key: str, seed: int, early: bool):
    """The default call on that instance (no budget, no target): (iterations, reason,
    error)."""
    import rssm
    from benchmarks.stepsizes import _method, _problems

    prob, x0 = _problems()[name][0](seed)
    _, ell = _method(key)
    with contextlib.nullcontext() if early else _EarlyOff():
        res = rssm.minimize(prob, x0, method="rssm", seed=seed, options={"n_blocks": ell})
    return res.n_iter, res.stop_reason.value, float(res.error)


def calls(cells, seeds) -> None:
    same = rounding = changed = 0
    totals = [0, 0]
    for cell in cells:
        name, key = cell.split(":")
        for seed in seeds:
            off = default_call(name, key, seed, early=False)
            on = default_call(name, key, seed, early=True)
            totals[0] += off[0]
            totals[1] += on[0]
            if off == on:
                same += 1
                continue
            kind = "rounding" if off[:2] == on[:2] else "CHANGED"
            rounding += kind == "rounding"
            changed += kind == "CHANGED"
            print(f"{kind} {cell} seed {seed}: without {off[0]} its, {off[1]}, error "
                  f"{off[2]:.2g}; with {on[0]} its, {on[1]}, error {on[2]:.2g}", flush=True)
    print(f"# {same + rounding + changed} calls: {same} the same, {rounding} with the same "
          f"iterations and stop (the error differs by rounding), {changed} changed; "
          f"iterations in all {totals[0]} without the early ask, {totals[1]} with it")


def small_calls() -> None:
    """``--small-calls``: the 180 default RSSM calls of ``benchmarks.fast_cut --calls``
    (l = 2 and 3 on small l1 Procrustes, ODL, DPCP, the planted sparse basis with "auto",
    an l1 fit and sums of |<M_i, X>|), without the early ask and with it."""
    import warnings

    import rssm
    from benchmarks.fast_cut import each_call

    warnings.filterwarnings("ignore", message=".*has no partial subgradient")
    rows = []
    for name, ell, seed, run_seed, prob in each_call():
        out = []
        for early in (False, True):
            with contextlib.nullcontext() if early else _EarlyOff():
                r = rssm.minimize(prob, method="rssm", seed=run_seed,
                                  options={"n_blocks": ell})
            out.append((r.stop_reason.value, r.n_iter, float(r.fun)))
        rows.append(out)
        if out[0] != out[1]:
            print(f"{name}, l = {ell}, seed {seed}, run seed {run_seed}: without "
                  f"{out[0][0]} {out[0][1]} its, f {out[0][2]:.10g}; with {out[1][0]} "
                  f"{out[1][1]} its, f {out[1][2]:.10g}", flush=True)
    conv = [sum(r[i][0] == "converged" for r in rows) for i in (0, 1)]
    both = [r for r in rows if r[0][0] == r[1][0] == "converged"]
    budget = [r for r in rows if r[0][0] == r[1][0] != "converged"]
    print(f"# {len(rows)} calls, {sum(r[0] == r[1] for r in rows)} the same; converged "
          f"{conv[0]} without the early ask, {conv[1]} with it; iterations in all "
          f"{sum(r[0][1] for r in rows)} and {sum(r[1][1] for r in rows)}; converged both "
          f"ways: {sum(r[1][1] > 1.5 * r[0][1] for r in both)} more than 1.5x the "
          f"iterations, {sum(1.5 * r[1][1] < r[0][1] for r in both)} fewer than 1/1.5; on "
          f"the budget both ways: {sum(r[1][2] > r[0][2] for r in budget)} at a higher f, "
          f"{sum(r[1][2] < r[0][2] for r in budget)} at a lower one")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.early_freeze",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=8, help="seeds 1..N (default 8)")
    ap.add_argument("--cells", nargs="+", default=None,
                    help="problem:method (default: CELLS, with --calls CALL_CELLS)")
    ap.add_argument("--calls", action="store_true", help="the default-call comparison")
    ap.add_argument("--small-calls", action="store_true",
                    help="the same on the 180 calls of benchmarks.fast_cut --calls")
    args = ap.parse_args(argv)
    seeds = range(1, args.seeds + 1)
    if args.calls:
        calls(args.cells or list(CALL_CELLS), seeds)
        return 0
    if args.small_calls:
        small_calls()
        return 0
    ok: dict[float, list] = {lv: [] for lv in LEVELS}
    frozen: dict[float, list] = {lv: [] for lv in LEVELS}
    for cell in args.cells or list(CELLS):
        name, key = cell.split(":")
        for seed in seeds:
            n, final, rows = readings(name, key, seed)
            print(f"{cell} seed {seed} ({n} its, error {final:.1e}): " + " ".join(
                f"[{lv:.0e} k{k} error {e:.1e} read {c:.2f}]" for lv, k, e, c in rows),
                flush=True)
            err = {lv: e for lv, _, e, _ in rows}
            for lv, _, e, c in rows:
                later = err.get(lv / 100, final)
                if later <= 0.1 * e:
                    ok[lv].append((c, cell, seed))
                elif e > FROZEN_ABOVE:
                    frozen[lv].append((c, cell, seed))
    for lv in LEVELS:
        top = max(ok[lv], default=None)
        low = min(frozen[lv], default=None)
        print(f"# L = {lv:.0e}: converging runs {len(ok[lv])}, largest reading "
              + ("-" if top is None else f"{top[0]:.3f} ({top[1]} seed {top[2]})")
              + f"; frozen runs {len(frozen[lv])}, smallest reading "
              + ("-" if low is None else f"{low[0]:.3f} ({low[1]} seed {low[2]})"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
