"""``python -m benchmarks.smooth_rssm --quick`` runs end to end and shows what
docs/stepsizes.md says on its quick set: without the per-sweep hand-over no least-squares
Procrustes call converges, with it (at 1e-2 g_0, the default) all four do."""

from __future__ import annotations

import math


def test_quick_smooth_set_converges_with_the_hand_over_only(benchmark_module, capsys):
    bench = benchmark_module("smooth_rssm")
    before = bench.blockrule.SWEEP_VANISH
    assert bench.main(["--quick", "--thresholds", "inf", str(before)]) == 0
    out = capsys.readouterr().out
    assert "hand-over at never: 0 of 4 converge" in out
    assert f"hand-over at {before:g} g_0 (kept): 4 of 4 converge" in out
    assert bench.blockrule.SWEEP_VANISH == before and math.isfinite(before)
