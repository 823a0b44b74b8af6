"""``python -m benchmarks.estimators --quick`` runs end to end (so the script cannot rot):
every section writes its CSV and figure, prints its table, and the numbers it measures on
the tiny sizes say what the full run says where it is clear-cut."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("skimage")


@pytest.fixture
def bench(benchmark_module):
    return benchmark_module("estimators")


def _read(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_quick_run_writes_tables_and_figures(bench, tmp_path, capsys):
    assert bench.main(["--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for name in ("subspace", "digits", "dictionary", "sparse_pca"):
        assert (tmp_path / f"{name}.csv").stat().st_size > 0
        assert (tmp_path / f"{name}.png").stat().st_size > 1000
    assert "## Robust subspace, synthetic" in out and "## Sparse PCA" in out

    sub = _read(tmp_path / "subspace.csv")
    at = {(r["method"], float(r["contamination"])): r for r in sub}
    # 60% outliers: DPCP stays on the subspace, PCA and the MCD scatter do not
    assert float(at[("rssm, geometric", 0.6)]["angle_deg"]) < 1.0
    assert float(at[("PCA", 0.6)]["angle_deg"]) > 2.0
    assert float(at[("MinCovDet PCA", 0.6)]["angle_deg"]) > 1.0
    assert float(at[("rssm, geometric", 0.6)]["auc"]) > 0.99

    wide = {r["method"]: r for r in _read(tmp_path / "wide.csv")}
    # 100 samples of 150 features: the fit in the samples' span is the fit in all features
    assert abs(float(wide["rssm"]["angle_deg"])
               - float(wide["rssm, all features"]["angle_deg"])) < 1e-6
    assert float(wide["rssm"]["angle_deg"]) < 1.0 and float(wide["rssm"]["auc"]) > 0.99

    dic = {r["method"]: r for r in _read(tmp_path / "dictionary.csv")}
    assert dic["DCT"]["orthogonal"] == "True" and dic["rssm ODL"]["orthogonal"] == "True"
    assert dic["DictionaryLearning"]["orthogonal"] == "False"
    assert math.isfinite(float(dic["rssm ODL"]["l1_at_0.1"]))

    spca = _read(tmp_path / "sparse_pca.csv")
    for r in spca:
        if r["method"].startswith("rssm"):
            assert float(r["orthogonality"]) < 1e-4  # orthonormal up to zero_tol
        assert 0.0 <= float(r["ev_ratio"]) <= 1.0 + 1e-12


def test_max_angle_and_interpolation(bench):
    import numpy as np

    from benchmarks import estimators_decomp as dec

    s = np.eye(3)[:, :2]
    u = np.array([[1.0, 0.0], [0.0, np.cos(0.3)], [0.0, np.sin(0.3)]])
    assert bench.max_angle(s, u) == pytest.approx(np.degrees(0.3))
    curve = np.array([[0.3, 1.0, 5.0], [0.1, 3.0, 9.0]])
    assert dec.at_level(curve, 0.2, 1) == pytest.approx(2.0)
    assert math.isnan(dec.at_level(curve, 0.05, 1))
    d = dec.dct_basis()
    np.testing.assert_allclose(d @ d.T, np.eye(64), atol=1e-12)
