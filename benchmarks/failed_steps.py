"""How often a step increases f: along the best grid schedule and along Auto (issue 18,
item 5; docs/stepsizes.md, "Why a success rule lags the best schedule").

    python -m benchmarks.failed_steps [--seeds 5] [--csv benchmarks/results/stepsizes/stepsizes.csv]

A success rule (Auto's: grow the length, or Polyak's factor, after a step that decreased
f, shrink it after one that did not) settles where the fraction of failed steps is
log(grow) / (log(grow) + log(1 / shrink)), and it can only shorten its steps by failing.
This script measures the fraction the *best* schedule runs at. For every problem (the
paper's DPCP and ODL, l1 Procrustes), method (RSM; RSSM with l = 3, 5) and seed, it reads
the best geometric grid point of that instance from the CSV of `benchmarks.stepsizes`
(the fewest iterations to error 1e-10), runs it and Auto from the benchmark's start under
the benchmark's budget and stops, and prints, for each, the iterations to 1e-10 and the
fraction of iterations k with f(X_{k+1}) >= f(X_k) up to that point, in three thirds.
Iteration counts and fractions do not depend on the machine.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

CELLS = [(p, m) for p in ("dpcp", "odl", "l1_procrustes") for m in ("rsm", "rssm-l3", "rssm-l5")]
LEVEL = 1e-10


class _Costs:
    """Wraps a rule and records f(X_k) at every iteration (one cost read per iteration,
    which the data oracles serve from their caches)."""

    def __init__(self, rule):
        self.rule = rule
        self.costs: list[float] = []

    def reset(self):
        self.rule.reset()
        self.costs = []

    def describe(self):
        return self.rule.describe()

    def __call__(self, k, ctx):
        self.costs.append(ctx.cost)
        return self.rule(k, ctx)


def failed_steps(costs: list[float], n: int) -> np.ndarray:
    """Whether f(X_{k+1}) >= f(X_k), for the steps k < n whose both costs were read."""
    f = np.asarray(costs[: n + 1], dtype=float)
    return f[1:] >= f[:-1]


def thirds(failed: np.ndarray) -> list[float]:
    """The failed fraction over three consecutive thirds of the steps."""
    return [float(np.mean(part)) if part.size else float("nan")
            for part in np.array_split(failed, 3)]


def main(argv: list[str] | None = None) -> int:
    from benchmarks.stepsizes import _problems, best_grid_points, first_at, run_rule
    from rssm.stepsizes import Auto, Geometric

    ap = argparse.ArgumentParser(prog="python -m benchmarks.failed_steps",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--csv", default="benchmarks/results/stepsizes/stepsizes.csv")
    args = ap.parse_args(argv)
    best = best_grid_points(args.csv)
    probs = _problems()
    print("problem method seed rule: iterations to 1e-10, failed-step fraction by thirds")
    summary: dict[tuple[str, str, str], list[float]] = {}
    for name, key in CELLS:
        build, epochs, _ = probs[name]
        for seed in range(1, args.seeds + 1):
            if (name, key, seed) not in best:
                continue
            prob, x0 = build(seed)
            g0 = float(np.linalg.norm(prob.riemannian_subgradient(x0)))
            t, beta, _ = best[(name, key, seed)]
            for label, rule in ((f"grid t={t:g} beta={beta:g}", Geometric(t / g0, beta)),
                                ("auto", Auto())):
                wrapped = _Costs(rule)
                run = run_rule(prob, x0, key, wrapped, epochs, seed)
                hit = first_at(run, LEVEL)
                n = hit[0] if hit else len(wrapped.costs) - 1
                failed = failed_steps(wrapped.costs, n)
                fr = thirds(failed)
                kind = "grid" if label.startswith("grid") else "auto"
                summary.setdefault((name, key, kind), []).append(float(np.mean(failed)))
                print(f"{name} {key} {seed} {label}: {hit[0] if hit else None} its, "
                      + " ".join(f"{v:.2f}" for v in fr), flush=True)
    print("\nmedian over seeds of the failed-step fraction up to 1e-10 (or the budget):")
    for (name, key, kind), vals in summary.items():
        print(f"  {name} {key} {kind}: {np.median(vals):.2f} "
              f"(range {min(vals):.2f}-{max(vals):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
