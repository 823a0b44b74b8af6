"""The tables of ``python -m benchmarks.stepsizes --from-csv``: which grid point counts as
tuned on each seed, and the per-seed counts and ratios docs/stepsizes.md quotes."""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def stepsizes_bench(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    if not (ROOT / "benchmarks" / "stepsizes.py").exists():
        pytest.skip("benchmarks/ is not part of this checkout")
    import benchmarks.stepsizes as mod

    return mod


def _row(seed, kind, rule, t10, it10, method="rsm", err=1e-11):
    inf = math.inf
    return dict(problem="toy", seed=seed, method=method, kind=kind, rule=rule,
                final_error=err, iterations=100, time=9.0,
                **{"time_1e-08": t10 / 2 if t10 < inf else inf,
                   "iter_1e-08": it10 // 2 if it10 >= 0 else -1,
                   "time_1e-10": t10, "iter_1e-10": it10})


def test_from_csv_prints_per_seed_counts_and_ratios(stepsizes_bench, tmp_path, capsys):
    inf = math.inf
    rows = [
        # seed 1: auto 1.0 s; grid points 4.0 and 2.0 s (tuned = 2.0); Pymanopt 0.5 s
        _row(1, "auto", "Auto", 1.0, 50),
        _row(1, "grid", "geometric(1,0.9)", 4.0, 200),
        _row(1, "grid", "geometric(3,0.9)", 2.0, 100),
        _row(1, "pymanopt", "SteepestDescent", 0.5, 10),
        # seed 2: auto never reaches 1e-10; tuned 3.0 s; Pymanopt never
        _row(2, "auto", "Auto", inf, -1, err=0.5),
        _row(2, "grid", "geometric(1,0.9)", 3.0, 150),
        _row(2, "grid", "geometric(3,0.9)", inf, -1, err=1e-3),
        _row(2, "pymanopt", "SteepestDescent", inf, -1, err=2.0),
    ]
    path = tmp_path / "stepsizes.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert stepsizes_bench.main(["--from-csv", str(path)]) == 0
    out = capsys.readouterr().out
    per_seed = [ln for ln in out.splitlines() if ln.startswith("| toy | rsm | 1 / 2 / 1 of 2")]
    # auto/tuned 1.0 / 2.0 on seed 1 only; auto/Pymanopt 1.0 / 0.5
    assert per_seed == ["| toy | rsm | 1 / 2 / 1 of 2 | 0.50 | 2.00 |"]
    tuned = stepsizes_bench._tuned([stepsizes_bench._typed({k: str(v) for k, v in r.items()})
                                    for r in rows], 2)
    assert tuned["rule"] == "geometric(1,0.9)"
    # the median table: medians over 2 seeds take the upper one (inf for auto)
    med = [ln for ln in out.splitlines() if ln.startswith("| toy | rsm | ") and "of 2" not in ln]
    # auto: iterations (25, -) / (50, -) -> upper median "-"; tuned: (50, 75) / (100, 150)
    # -> 75 / 150 and 3.0 s; Pymanopt: (10, -) -> "-"
    assert med == ["| toy | rsm | - / - | - | 75 / 150 | 3 | - | - / - |"], out


def test_stepsizes_variants_sufficient_decrease_is_stricter(stepsizes_bench):
    """The sufficient-decrease variant starts like auto (the same first search) and then
    decides differently: the variants table compares real alternatives."""
    sys.modules.pop("benchmarks.stepsizes_variants", None)
    import numpy as np

    import benchmarks.stepsizes_variants as var
    import rssm

    prob = rssm.problems.DPCP.synthetic(n=20, d=2, n_inliers=100, n_outliers=60, seed=0)
    x0 = prob.initial_point(0)
    lengths = {}
    for name in ("auto (1.5 / 0.5)", "suff. decrease c=0.3"):
        rule = var._variants()[name]()
        seen = []

        def spy(k, ctx, rule=rule, seen=seen):
            g = rule(k, ctx)
            seen.append(rule._t)
            return g

        rssm.minimize(
            prob, x0, method="rssm", stepsize=spy, max_iter=30, seed=1, threads=None,
            options={"n_blocks": 2}
        )
        lengths[name] = np.array(seen)
    a, s = lengths["auto (1.5 / 0.5)"], lengths["suff. decrease c=0.3"]
    assert a[0] == s[0]                      # the same first search
    assert not np.array_equal(a, s)          # the stricter test changed some decision
