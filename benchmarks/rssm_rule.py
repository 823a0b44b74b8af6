"""The factors of Auto's RSSM success rule, side by side (issue 18, item 5; docs/stepsizes.md,
"the RSSM rule").

    python -m benchmarks.rssm_rule [--blocks 3 5] [--seeds 5] [--factors 1.5/0.5 1.3/0.6 ...]
    python -m benchmarks.rssm_rule --rsm [--factors 1.15/0.6/4 1.3/0.5/2 ...]
    python -m benchmarks.rssm_rule --scale gap [--blocks 3 4] [--factors 1.3/0.6]

For each number of blocks l, problem (the paper's DPCP and ODL, l1 Procrustes and the
from_functions example of docs/custom.md) and seed, RSSM runs from the benchmark's start
with `Auto(grow=g, shrink=s)` for each factor pair g/s, under the budget and stops of
`benchmarks.stepsizes.run_rule` (600 epochs, 800 for from_functions). Printed per line:
how many seeds reached error 1e-10, the median iterations there, the iterations per seed
(None: not reached) and the final errors. Iteration counts do not depend on the machine.
With ``--rsm`` it does the same for Auto's RSM rule (the success rule on the gap factor):
factors grow/shrink/window, on those problems and the planted sparse basis. With
``--scale gap`` RSSM runs Auto's RSM rule (the success rule on Polyak's factor kappa, the
gap estimated from the best cost) with the given factors: the "gap rule with RSSM's
factors" of docs/stepsizes.md. Where the CSV of `benchmarks.stepsizes` (``--grid-csv``)
holds the instance's geometric grid, the line also gives each seed's iterations over the
best grid point's (rejected trials of the first search counted as half an iteration).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

PROBLEMS = ("dpcp", "odl", "l1_procrustes", "from_functions")
FACTORS = ("1.5/0.5", "1.3/0.6", "1.4/0.6", "1.3/0.7", "1.2/0.5", "1.3/0.5")
RSM_FACTORS = tuple(f"{g}/{s}/{w}" for g in (1.15, 1.3) for s in (0.6, 0.5, 0.4)
                    for w in (4, 2, 1))


def main(argv: list[str] | None = None) -> int:
    from benchmarks.stepsizes import _problems, best_grid_points, first_at, run_rule
    from rssm.stepsizes import Auto

    ap = argparse.ArgumentParser(prog="python -m benchmarks.rssm_rule",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, nargs="*", default=[3, 5])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--factors", nargs="*", default=None)
    ap.add_argument("--problems", nargs="*", default=None)
    ap.add_argument("--rsm", action="store_true", help="Auto's RSM rule instead")
    ap.add_argument("--scale", choices=("length", "gap"), default=None,
                    help="what RSSM's success rule scales (default: Auto's choice)")
    ap.add_argument("--grid-csv", default="benchmarks/results/stepsizes/stepsizes.csv")
    args = ap.parse_args(argv)
    best = ({k: v[2] for k, v in best_grid_points(args.grid_csv).items()}
            if os.path.exists(args.grid_csv) else {})
    probs = _problems()
    factors = args.factors or list(RSM_FACTORS if args.rsm else FACTORS)
    problems = args.problems or list(PROBLEMS + (("sparse_basis",) if args.rsm else ()))
    for ell in ([1] if args.rsm else args.blocks):
        key = "rsm" if args.rsm else f"rssm-l{ell}"
        for name in problems:
            build, epochs, _ = probs[name]
            for fac in factors:
                vals = [float(v) for v in fac.split("/")]
                names = ("grow", "shrink", "window")
                params = dict(zip(names, vals, strict=False))
                if args.scale is not None and not args.rsm:
                    params["scale"] = args.scale
                its, errs, ratios = [], [], []
                for seed in range(1, args.seeds + 1):
                    prob, x0 = build(seed)
                    run = run_rule(prob, x0, key, Auto(**params), epochs, seed)
                    hit = first_at(run, 1e-10)
                    its.append(hit[0] if hit else None)
                    errs.append(f"{run['error'][-1]:.0e}")
                    grid = best.get((name, key, seed))
                    if grid is not None:
                        ratios.append(f"{(hit[0] + 0.5 * hit[1]) / grid:.2f}" if hit else "-")
                ok = [i for i in its if i is not None]
                med = f"{np.median(ok):.0f}" if ok else "-"
                vs = f" over best grid {' '.join(ratios)}" if ratios else ""
                print(f"{name} {key} {fac}: {len(ok)}/{len(its)} to 1e-10, median {med} "
                      f"its {its} final {errs}{vs}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
