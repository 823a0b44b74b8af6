"""``python -m benchmarks.rotation_invariant --quick`` runs end to end, and the hand-over
of `BlockRule`'s per-epoch branch on a smooth minimizer does what docs/stepsizes.md says
on its quick set: verdicts gained, none lost."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("sklearn")


@pytest.fixture
def bench(benchmark_module):
    return benchmark_module("rotation_invariant")


def test_quick_rotation_invariant_set_gains_verdicts_and_loses_none(bench, capsys):
    """DPCP on iris (d = 1) and -trace(X^T A X) at three sizes (27 default RSSM calls,
    seed 0): 22 converge with the hand-over off, all 27 with it (measured)."""
    base = bench.run(math.inf, True)
    counts = bench.compare(base, bench.run(bench.blockrule.RISE, True))
    assert sum(v[0] for v in base.values()) == 22
    assert counts["converged"] == 27 and counts["gained"] == 5 and counts["lost"] == 0
    assert bench.main(["--quick"]) == 0
    assert "27 of 27 converge" in capsys.readouterr().out
