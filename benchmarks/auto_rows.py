"""Auto's rows of the item-5 table, rerun and compared with the logged CSVs (issue 18).

    python -m benchmarks.auto_rows

The default rule's iterations to error 1e-8 and 1e-10 on the 45 instances of item 5
(DPCP, ODL and l1 Procrustes; RSM and RSSM with l = 3, 5; seeds 1-5), run exactly as
`benchmarks.stepsizes` runs them (`run_rule`, the same budget and stops), against the
auto rows of the logs the tables in docs/stepsizes.md come from
(`benchmarks/results/stepsizes/stepsizes.csv`, with the later reruns in
``plateau_cut/``, ``cosine_gain/``, ``fast_cut/`` and ``early_freeze/`` taking
precedence). A change to the
solver that leaves every row the same leaves the table's Auto column, and so its ratios to the grid
rows, as logged; the grid itself is not rerun (about 15 minutes:
`benchmarks.stepsizes`). Iteration counts only: no timing, about 1 minute.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

LOGS = ("stepsizes.csv", "plateau_cut/stepsizes.csv", "cosine_gain/stepsizes.csv",
        "fast_cut/stepsizes.csv", "early_freeze/stepsizes.csv")
PROBLEMS = ("dpcp", "odl", "l1_procrustes")
METHODS = ("rsm", "rssm-l3", "rssm-l5")


def logged_rows(base: Path) -> dict:
    """(problem, seed, method) -> (iterations to 1e-8, to 1e-10) of the logged auto rows,
    later logs overriding earlier ones."""
    out = {}
    for name in LOGS:
        with open(base / name, newline="") as fh:
            for r in csv.DictReader(fh):
                if r["kind"] == "auto" and r["problem"] in PROBLEMS:
                    out[(r["problem"], int(r["seed"]), r["method"])] = (r["it_1e-08"],
                                                                        r["it_1e-10"])
    return out


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m benchmarks.auto_rows",
                            description=__doc__.split("\n\n")[0]).parse_args(argv)
    from benchmarks.stepsizes import _problems, first_at, run_rule
    from rssm.stepsizes import Auto

    logged = logged_rows(Path(__file__).parent / "results" / "stepsizes")
    probs = _problems()
    same = 0
    for name in PROBLEMS:
        build, epochs, exact = probs[name]
        for seed in range(1, 6):
            prob, x0 = build(seed)
            for key in METHODS:
                run = run_rule(prob, x0, key, Auto(), epochs, seed, exact=exact)
                now = tuple("" if hit is None else str(hit[0])
                            for hit in (first_at(run, 1e-8), first_at(run, 1e-10)))
                old = logged.get((name, seed, key))
                same += old == now
                print(f"{name} seed {seed} {key}: iterations to 1e-8 / 1e-10 now "
                      f"{'/'.join(now)}, logged {'/'.join(old) if old else '-'}"
                      + ("" if old == now else "  DIFFERENT"), flush=True)
    total = len(PROBLEMS) * 5 * len(METHODS)
    print(f"{same} of {total} rows as logged")
    return 0 if same == total else 1


if __name__ == "__main__":
    raise SystemExit(main())
