"""Regression tests for the defects of issue #12 ("Found by trying to break it").

Each test names its item; each failed on the code before the fix.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import rssm
from rssm.blocks import Partition
from rssm.cli import main
from rssm.data.engine import ChunkSet
from rssm.diagnostics import check_subgradient
from rssm.problems import ODL, CompositeProblem, EntrywiseLoss, SparsePCA
from rssm.stopping import StopReason


# -- 1: the default number of blocks works for every p >= 2 ------------------------------------
@pytest.mark.parametrize("p", [2, 3, 4, 5, 7])
def test_default_n_blocks_is_min_5_p(p):
    prob = SparsePCA.synthetic(n=30, r=p, m=40, support=3, seed=0)
    res = rssm.minimize(prob, method="rssm", max_iter=10, seed=0)
    assert res.n_blocks == min(5, p)
    assert res.stop_reason is StopReason.MAX_ITER and res.n_iter == 10


def test_p1_with_rssm_names_rsm():
    prob = rssm.problems.PlantedSparseBasis.synthetic(n=6, p=1, m=60, seed=0)
    with pytest.raises(ValueError, match="method='rsm'"):
        rssm.minimize(prob, method="rssm", max_iter=3, seed=0)
    assert rssm.minimize(prob, method="rsm", max_iter=3, seed=0).n_iter == 3


@pytest.mark.parametrize("argv, l", [
    (["solve", "sparse_pca", "--r", "3", "--n", "30", "--m", "40", "--support", "3"], 3),
    (["solve", "odl", "--n", "4"], 4),
])
def test_cli_default_blocks_small_p(argv, l, capsys):
    assert main([*argv, "--method", "rssm", "--max-iter", "5"]) == 0
    assert f"RSSM (l={l}, uniform)" in capsys.readouterr().out


def test_cli_p1_names_method_rsm(capsys):
    rc = main(["solve", "sparse_basis", "--n", "6", "--p", "1", "--m", "60", "--method", "rssm",
               "--max-iter", "3"])
    err = capsys.readouterr().err
    assert rc == 2 and "--method rsm" in err and err.count("\n") == 1


# -- 2: check_subgradient exercises the contiguous blocks of the default partition -------------
def test_check_subgradient_catches_a_stale_contiguous_cache(monkeypatch):
    prob = ODL.synthetic(n=6, theta=0.3, seed=1)
    assert check_subgradient(prob, rng=0).ok
    # an oracle that never recomputes a contiguous run of rows (the path of
    # Partition.uniform's adjacent block pairs) keeps stale Z^T rows after a step
    # (the rows are recomputed per chunk by rssm.data.chunkset.ChunkSet since issue 19)
    monkeypatch.setattr(ChunkSet, "_recompute_rows", staticmethod(lambda ch, yt, x, run: None))
    caught = [not check_subgradient(prob, rng=s).ok for s in range(10)]
    assert all(caught), caught
    rep = check_subgradient(prob, rng=0)
    names = [it.name for it in rep.failures]
    assert any("contiguous" in n for n in names), str(rep)


# -- 3: an absolute floor for costs constant on the manifold ----------------------------------
def test_check_subgradient_constant_cost_is_ok():
    rng = np.random.default_rng(0)
    n = 8
    y = rng.standard_normal((n, 50))

    def cost(x):                         # DPCP's f at p = n: constant on O(n), P_T(G) ~ 0
        return float(np.linalg.norm(y.T @ x, axis=1).mean())

    def sub(x):
        z = y.T @ x
        return y @ (z / np.linalg.norm(z, axis=1, keepdims=True)) / y.shape[1]

    prob = rssm.Problem.from_functions(cost, sub, shape=(n, n))
    rep = check_subgradient(prob, rng=0)
    assert rep.ok, str(rep)
    # and a wrong subgradient there is still caught (P_T(G) far from 0)
    skew = np.triu(np.ones((n, n)), 1)
    skew -= skew.T  # G + X S with S skew: a tangent error of size ~ ||S|| ~ 7.5
    bad = rssm.Problem.from_functions(prob.cost, lambda X: prob.subgradient(X) + X @ skew,
                                      shape=(n, n), stepsize=1.0)
    assert not check_subgradient(bad, rng=0).ok


# -- 4 and 13: the callback sees the last row; Progress.x is a snapshot -----------------------
def test_callback_sees_the_non_finite_last_row():
    rng = np.random.default_rng(0)
    y = rng.standard_normal((6, 40))
    calls = {"n": 0}

    def cost(X):
        calls["n"] += 1
        return math.inf if calls["n"] >= 4 else float(np.abs(y.T @ X).sum())

    prob = rssm.Problem.from_functions(cost, lambda X: y @ np.sign(y.T @ X),
                                       lambda X, c: y @ np.sign(y.T @ X[:, c]),
                                       shape=(6, 3), stepsize=1e-3)
    seen = []
    res = rssm.minimize(
        prob,
            method="rssm", max_iter=30, record=3, seed=0,
        callback=lambda pr: seen.append(pr.iteration),
        options={"n_blocks": 3}
    )
    assert res.stop_reason is StopReason.NON_FINITE
    assert res.trace["iteration"].tolist() == [0, 3, 6, 9]
    assert seen == [0, 3, 6, 9]


def test_callback_sees_row_0_when_f_x0_is_not_finite():
    prob = rssm.Problem.from_functions(lambda X: math.nan, lambda X: X, shape=(4, 2),
                                       stepsize=1.0)
    seen = []
    res = rssm.minimize(
        prob, method="rssm", max_iter=5, seed=0, callback=lambda pr: seen.append(pr.iteration),
        options={"n_blocks": 2}
    )
    assert res.stop_reason is StopReason.NON_FINITE and seen == [0]


def test_progress_x_is_a_snapshot(small_odl):
    kept = []
    res = rssm.minimize(
        small_odl, max_iter=20, record=5, seed=0, callback=lambda pr: kept.append(pr.x)
    )
    assert len(kept) == 5
    # each stored x is the iterate of its row, not the final iterate
    for it, x in zip(res.trace["iteration"], kept, strict=True):
        assert small_odl.cost(x) == pytest.approx(res.trace["cost"][it // 5], rel=1e-12)
    assert not np.array_equal(kept[0], kept[-1])
    assert np.array_equal(kept[-1], res.x_last)
    assert not kept[0].flags.writeable


# -- 7: sizes too large to allocate ----------------------------------------------------------
@pytest.fixture
def memory_16gb(monkeypatch):
    """This machine has 16 GB, whatever it really has (the refusal must not depend on it)."""
    import rssm._validation as v

    monkeypatch.setattr(v, "physical_memory", lambda: 16e9)


def test_cli_too_large_is_one_line_exit_2(capsys, memory_16gb):
    rc = main(["solve", "odl", "--n", "3000", "--max-iter", "1"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith("rssm: error: ") and err.count("\n") == 1
    assert "3000" in err and "GB" in err


def test_library_refuses_before_allocating(memory_16gb):
    with pytest.raises(MemoryError, match=r"n x m = 3000 x 1643168"):
        ODL.synthetic(n=3000, seed=0)


# -- 8: sparse PCA with r > m ---------------------------------------------------------------
def test_sparse_pca_more_components_than_samples_starts():
    a = np.random.default_rng(0).standard_normal((5, 20))
    prob = SparsePCA.from_data(a, r=8)
    x0 = prob.initial_point(np.random.default_rng(0))
    assert x0.shape == (20, 8)
    assert np.abs(x0.T @ x0 - np.eye(8)).max() < 1e-12
    # Auto descends from this start in 20 iterations; SparsePCA's own default (a slowly
    # decaying geometric step, docs/stepsizes.md) may still be above it after 20
    res = rssm.minimize(prob, stepsize="auto", max_iter=20, seed=0)
    assert res.n_iter == 20 and res.fun <= res.trace["cost"][0]


# -- 9: sample weights of the wrong kind ------------------------------------------------------
@pytest.mark.parametrize("w", [np.ones(30) + 1j, np.array(["1"] * 30), np.ones(30, dtype=bool)])
def test_sample_weights_wrong_dtype_refused(w):
    y = np.random.default_rng(0).standard_normal((5, 30))
    with pytest.raises(TypeError, match="sample_weights"):
        CompositeProblem(y, 2, EntrywiseLoss.l1(), sample_weights=w, stepsize=1e-3)


def test_sample_weights_int_accepted():
    y = np.random.default_rng(0).standard_normal((5, 30))
    prob = CompositeProblem(y, 2, EntrywiseLoss.l1(), sample_weights=np.arange(30))
    assert prob.cw.dtype == np.float64


# -- 10: what a step-size callable may return ------------------------------------------------
@pytest.mark.parametrize("gamma", [np.int64(1), np.array(1e-3), 1, 1e-3, np.float32(1e-3)])
def test_stepsize_callable_real_numbers_accepted(small_odl, gamma):
    res = rssm.minimize(small_odl, stepsize=lambda k, ctx: gamma, max_iter=3, seed=0)
    assert res.n_iter == 3


@pytest.mark.parametrize("gamma", [True, np.bool_(True), np.array([1e-3]), 1j, "1"])
def test_stepsize_callable_non_numbers_refused(small_odl, gamma):
    with pytest.raises(ValueError, match="gamma_0"):
        rssm.minimize(small_odl, stepsize=lambda k, ctx: gamma, max_iter=3, seed=0)


# -- 11: a generator whose bit generator cannot spawn ----------------------------------------
def test_philox_generator_default_start(small_odl):
    runs = [rssm.minimize(small_odl, max_iter=5,
                          seed=np.random.Generator(np.random.Philox(key=5))) for _ in range(2)]
    assert runs[0].n_iter == 5
    np.testing.assert_array_equal(runs[0].x, runs[1].x)  # deterministic


# -- 14: selection checked for RSM too; a 2-D array partition ---------------------------------
def test_invalid_selection_refused_with_rsm(small_odl):
    with pytest.raises(ValueError, match="selection"):
        rssm.minimize(
            small_odl, method="rsm", max_iter=2, options={"selection": "bogus"}
        )


@pytest.mark.parametrize(("opts", "exc", "pattern"), [
    ({"n_blocks": "abc"}, TypeError, "n_blocks must be an integer"),
    ({"n_blocks": -7}, ValueError, r"n_blocks must be 1 \(RSM\) or satisfy 2 <= n_blocks "
                                   r"<= p \(RSSM\), got -7"),
    ({"n_blocks": 0}, ValueError, "got 0"),
    ({"partition": "zzz"}, TypeError, "partition must be a sequence"),
    ({"partition": [[0, 0]]}, ValueError, r"one block .* every column 0\.\.\d+ once"),
    ({"partition": [[0, 1], [1, 2]]}, ValueError, "exactly once"),
])
def test_rssm_options_are_checked_in_an_rsm_call(small_odl, opts, exc, pattern):
    # one options dict serves a loop over methods: RSSM's options are left out of an RSM
    # run, but a bad value among them is refused there too (it was ignored)
    with pytest.raises(exc, match=pattern):
        rssm.minimize(small_odl, method="rsm", max_iter=2, options=opts)
    p = small_odl.shape[1]
    res = rssm.minimize(small_odl, method="rsm", max_iter=2,
                        options={"n_blocks": 2, "partition": [list(range(p // 2)),
                                                              list(range(p // 2, p))]})
    assert res.n_blocks == 1
    # (n_blocks=4 beside that partition of 2 blocks is a contradiction, refused for both
    # methods since a user's audit: RSSM ran 2 blocks without a word)
    with pytest.raises(ValueError, match="n_blocks=4 and a partition of 2 blocks disagree"):
        rssm.minimize(small_odl, method="rsm", max_iter=2,
                      options={"n_blocks": 4, "partition": [list(range(p // 2)),
                                                            list(range(p // 2, p))]})
    # one block is what RSM is: a sweep over l = 1, 2, 4 with one dict (a regression of
    # the first version of this check refused it)
    for opts in ({"n_blocks": 1}, {"partition": [list(range(small_odl.shape[1]))]}):
        assert rssm.minimize(small_odl, method="rsm", max_iter=2, options=opts).n_iter == 2


def test_2d_array_partition(small_odl):
    part = np.arange(8).reshape(4, 2)
    res = rssm.minimize(
        small_odl, method="rssm", max_iter=4, seed=0, options={"partition": part}
    )
    assert res.n_blocks == 4
    assert [b.tolist() for b in res.partition] == part.tolist()
    assert Partition(part).n_blocks == 4
