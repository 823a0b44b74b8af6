"""Choosing n_blocks: cost per iteration and iterations to an accuracy against l.

    OPENBLAS_NUM_THREADS=1 python benchmarks/blocks.py [--seeds 2] [--out FILE.csv]

On the paper's DPCP (n=100, d=10, 1500 + 3500 points, p=90) and ODL (n=60, p=60,
m=4648) instances, for RSM and RSSM with l in {2, 3, 5, 10, 15, 30}: solver milliseconds
per iteration (all methods of a seed run back to back, on the same data and start), and
the iterations and epochs (l/2 RSSM iterations, 1 RSM iteration) until the error stays
below 1e-6 and 1e-8. Each method uses the geometric step size that the committed tuned
reproduction chose (docs/reproduction/results.json: mu0 = 0.3, beta = 0.9 per epoch for
DPCP; mu0 = 0.01, beta = 0.9 for ODL RSSM, 0.003 for ODL RSM), so l is the only thing that
changes. Prints one table and writes a CSV.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time

import numpy as np

import rssm
from rssm.stepsizes import Geometric

LEVELS = (1e-6, 1e-8)
BLOCKS = (None, 2, 3, 5, 10, 15, 30)  # None: RSM
MAX_EPOCHS = 600


def _instances():
    yield "dpcp", lambda s: rssm.problems.DPCP.synthetic(
        n=100, d=10, n_inliers=1500, n_outliers=3500, seed=s), lambda l: Geometric(0.3, 0.9)
    yield "odl", lambda s: rssm.problems.ODL.synthetic(n=60, seed=s), (
        lambda l: Geometric(0.003 if l is None else 0.01, 0.9))


def _reach(res, level: float) -> float:
    """First recorded iteration from which the error stays <= level (inf if none)."""
    err, it = res.trace["error"], res.trace["iteration"]
    above = np.flatnonzero(err > level)
    if above.size == 0:
        return float(it[0])
    if above[-1] + 1 >= err.size:
        return math.inf
    return float(it[above[-1] + 1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--out", default=None, help="CSV file (default: not written)")
    args = ap.parse_args(argv)
    rows = []
    for name, build, step in _instances():
        for seed in range(args.seeds):
            prob = build(seed)
            x0 = prob.initial_point(np.random.default_rng([seed, 1]))
            order = list(BLOCKS[seed % len(BLOCKS):] + BLOCKS[:seed % len(BLOCKS)])
            for l in order:
                epoch = 1.0 if l is None else l / 2.0
                kw = (dict(method="rsm") if l is None
                      else dict(method="rssm", options={"n_blocks": l}))
                t0 = time.perf_counter()
                res = rssm.minimize(
                    prob, x0, stepsize=step(l), max_iter=int(MAX_EPOCHS * epoch),
                    target_error=min(LEVELS) / 10, record=max(1, int(epoch)), seed=seed,
                    tol=0, **kw
                )
                wall = time.perf_counter() - t0
                row = {"problem": name, "seed": seed, "method": "rsm" if l is None else f"l={l}",
                       "ms_per_iter": 1e3 * res.time / max(res.n_iter, 1),
                       "flops_per_iter": res.flops / max(res.n_iter, 1),
                       "final_error": res.error, "wall": wall}
                for lev in LEVELS:
                    k = _reach(res, lev)
                    row[f"iters_to_{lev:g}"] = k
                    row[f"epochs_to_{lev:g}"] = k / epoch
                    row[f"ms_to_{lev:g}"] = k * row["ms_per_iter"]
                rows.append(row)
                print(f"{name} seed {seed} {row['method']:>5}: {row['ms_per_iter']:.3f} ms/it, "
                      + ", ".join(f"to {lev:g}: {row[f'iters_to_{lev:g}']:.0f} it "
                                  f"({row[f'epochs_to_{lev:g}']:.0f} epochs, "
                                  f"{row[f'ms_to_{lev:g}']:.0f} ms)" for lev in LEVELS),
                      flush=True)
    print("\nmedian over seeds")
    for name in ("dpcp", "odl"):
        for meth in ["rsm"] + [f"l={l}" for l in BLOCKS[1:]]:
            sel = [r for r in rows if r["problem"] == name and r["method"] == meth]
            med = {k: float(np.median([r[k] for r in sel])) for k in sel[0]
                   if k not in ("problem", "method", "seed")}
            print(f"{name} {meth:>5}: {med['ms_per_iter']:.3f} ms/it; to 1e-8: "
                  f"{med['iters_to_1e-08']:.0f} it, {med['epochs_to_1e-08']:.0f} epochs, "
                  f"{med['ms_to_1e-08']:.0f} ms")
    if args.out:
        with open(args.out, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
