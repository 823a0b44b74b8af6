"""Invariants of the fast paths (fused steps, direct LAPACK calls, one-GEMM cache updates).

The speed-ups in `rssm.stiefel.submanifold_step`, `rssm.stiefel.full_step` and
`rssm.problems._data.DataOracle.update` must compute the same thing as the plain public
formulas, to rounding. Speed itself is measured by ``python -m benchmarks``, never here.
"""

from __future__ import annotations

import numpy as np
import pytest

import rssm
from rssm import stiefel
from rssm.blocks import Partition, UniformPairs
from rssm.solvers.rsm import RSMSolver
from rssm.solvers.rssm import RSSMSolver


def _pair_selectors(p: int) -> list:
    """A contiguous run, two runs (non-adjacent blocks) and all columns."""
    part = Partition.uniform(p, 4)
    return [part.columns(0, 1).selector, part.columns(0, 2).selector, slice(0, p)]


@pytest.mark.parametrize("which", [0, 1, 2])
def test_fused_block_step_equals_public_formulas(which: int) -> None:
    """submanifold_step == project_submanifold_block(X_C - gamma P(G_C)) to 1e-14."""
    rng = np.random.default_rng(7)
    n, p = 30, 20
    x = stiefel.random_point(n, p, rng)
    sel = _pair_selectors(p)[which]
    c = x[:, sel].shape[1]
    g = rng.standard_normal((n, c))
    gamma = 0.05
    x_before = x.copy()
    fused = stiefel.submanifold_step(x, sel, g, gamma)
    r = stiefel.block_tangent_projection(x, sel, g)
    plain = stiefel.project_submanifold_block(x, sel, x[:, sel] - gamma * r)
    assert np.array_equal(x, x_before)  # x is not modified
    assert np.max(np.abs(fused - plain)) <= 1e-14
    # The new block is orthonormal and orthogonal to the untouched columns.
    rest = np.setdiff1d(np.arange(p), np.arange(p)[sel])
    assert stiefel.feasibility(fused) <= 1e-14
    assert np.max(np.abs(x[:, rest].T @ fused), initial=0.0) <= 1e-14


def test_fused_full_step_equals_public_formulas() -> None:
    """full_step == retract(X, -gamma P_T(G)) to 1e-14."""
    rng = np.random.default_rng(8)
    x = stiefel.random_point(25, 12, rng)
    g = rng.standard_normal((25, 12))
    fused = stiefel.full_step(x, g, 0.1)
    plain = stiefel.retract(x, -0.1 * stiefel.tangent_projection(x, g))
    assert np.max(np.abs(fused - plain)) <= 1e-14


def test_direct_lapack_eigh_matches_numpy() -> None:
    """_eigh (dsyevd called directly) agrees with numpy.linalg.eigh: eigenvalues to 1e-13,
    and V diag(w) V^T reconstructs the matrix to 1e-13."""
    rng = np.random.default_rng(9)
    a = rng.standard_normal((40, 40))
    a = a + a.T
    w, v = stiefel._eigh(a)
    w_ref = np.linalg.eigvalsh(a)
    assert np.max(np.abs(w - w_ref)) <= 1e-13
    assert np.max(np.abs((v * w) @ v.T - a)) <= 1e-13


def test_polar_falls_back_to_svd_when_ill_conditioned() -> None:
    """The Gram route declines cond^2 > 10; polar still returns an orthonormal factor to
    1e-14 for cond = 1e6, equal to U V^T of the SVD to 1e-9."""
    rng = np.random.default_rng(10)
    u = stiefel.random_point(50, 6, rng)
    v = stiefel.random_point(6, 6, rng)
    xi = (u * np.logspace(0, -6, 6)) @ v.T
    assert stiefel._polar_gram(xi) is None
    q = stiefel.polar(xi)
    assert stiefel.feasibility(q) <= 1e-14
    assert np.max(np.abs(q - u @ v.T)) <= 1e-9


@pytest.mark.parametrize("name", ["dpcp", "odl"])
def test_one_gemm_cache_update_for_two_runs(name: str) -> None:
    """After a step on a pair of non-adjacent blocks (two runs, one GEMM into a scratch
    buffer), Z^T equals X^T Yt to 1e-13, the rows of the other blocks are bit-for-bit
    unchanged, and so are the columns of X outside C_ij."""
    if name == "dpcp":
        prob = rssm.problems.DPCP.synthetic(n=24, d=4, n_inliers=80, n_outliers=120, seed=3)
        x0 = prob.initial_point()
    else:
        prob = rssm.problems.ODL.synthetic(n=12, seed=4)
        x0 = prob.initial_point(np.random.default_rng(4))
    p = prob.shape[1]
    part = Partition.uniform(p, 4)
    solver = RSSMSolver(prob, x0, part, UniformPairs(), np.random.default_rng(0))
    # Force the pair {0, 2}: two runs.
    solver.selector.next_pair = lambda: (0, 2)
    cols = part.columns(0, 2)
    assert len(cols.runs) == 2
    rest = np.setdiff1d(np.arange(p), cols.index)
    x_before = solver.x.copy()
    zt_before = solver.oracle.zt.copy()
    solver.step(0.01)
    assert not np.array_equal(solver.x[:, cols.index], x_before[:, cols.index])
    assert np.array_equal(solver.x[:, rest], x_before[:, rest])
    assert np.array_equal(solver.oracle.zt[rest], zt_before[rest])
    assert np.max(np.abs(solver.oracle.zt - solver.x.T @ solver.oracle.yt)) <= 1e-13


def test_dpcp_block_norms_recomputed_not_differenced() -> None:
    """After 2000 RSSM steps the DPCP per-block squared row norms equal a from-scratch
    computation from the rows of each block to 1e-13 (they are recomputed, never updated
    by differences), and the cost equals f(X) to 1e-13 relative."""
    prob = rssm.problems.DPCP.synthetic(n=20, d=4, n_inliers=60, n_outliers=90, seed=5)
    part = Partition.uniform(prob.shape[1], 5)
    solver = RSSMSolver(prob, prob.initial_point(), part, UniformPairs(),
                        np.random.default_rng(1))
    for _ in range(2000):
        solver.step(1e-3)
    o = solver.oracle
    z = solver.x.T @ prob.yt
    ref = np.stack([np.sum(z[b] ** 2, axis=0) for b in part.blocks])
    assert np.max(np.abs(o.bn - ref)) <= 1e-13
    assert abs(o.cost() - prob.cost(solver.x)) <= 1e-13 * max(1.0, prob.cost(solver.x))


def test_flop_model_counts_what_is_computed() -> None:
    """The DPCP flop counts of one RSSM and one RSM step equal the sum of their parts:
    oracle GEMMs 2 m n c each, weights m c, statistics 2 m c + 2 m l, geometry
    8 n p c + 4 n c + c^2, polar 4 n c^2 + 11 c^3, and for the step-size rule the norms
    of the direction, 2 n c + 2 c^2 (RSSM); for RSM the same with c = p, l = 1, the
    tangent step 4 n p^2 + 4 n p and the norm 2 n p."""
    prob = rssm.problems.DPCP.synthetic(n=30, d=6, n_inliers=50, n_outliers=70, seed=2)
    n, p = prob.shape
    m = prob.m
    ell = 4
    part = Partition.uniform(p, ell)
    rs = RSSMSolver(prob, prob.initial_point(), part, UniformPairs(), np.random.default_rng(0))
    rs.selector.next_pair = lambda: (1, 3)
    c = part.columns(1, 3).size
    got = rs.step(0.01)
    want = (2 * m * n * c + m * c) + (2 * m * n * c + 2 * m * c + 2 * m * ell) \
        + 8 * n * p * c + 4 * n * c + c * c + 4 * n * c * c + 11 * c**3 + 2 * n * c + 2 * c * c
    assert got == pytest.approx(want, rel=1e-15)
    rm = RSMSolver(prob, prob.initial_point(), None, None, np.random.default_rng(0))
    got = rm.step(0.01)
    want = (2 * m * n * p + m * p) + (2 * m * n * p + 2 * m * p + 2 * m * 1) \
        + 4 * n * p * p + 4 * n * p + 4 * n * p * p + 11 * p**3 + 2 * n * p
    assert got == pytest.approx(want, rel=1e-15)


def test_benchmark_fused_data_pass_computes_the_same_product():
    """The chunked variant timed by ``python -m benchmarks`` (section 1b) computes the same
    G^T = (X_C^T Yt diag(s)) Yt^T as the two whole GEMMs, so the comparison is fair."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("bench_perf", root / "benchmarks" / "perf.py")
    suite = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite)
    yt = np.random.default_rng(3).standard_normal((30, 1100))
    run, ref = suite._data_pass(yt, 7, None)
    run()
    for chunk in (256, 512, 2048):
        fused, g = suite._data_pass(yt, 7, chunk)
        fused()
        np.testing.assert_allclose(g, ref, rtol=1e-12, atol=1e-9)


def test_the_convergence_test_solves_nothing_while_a_pair_is_unvisited(monkeypatch):
    """With many block pairs (l = 30: 435) one pair not drawn within the window made every
    iteration solve the least-norm problems of all the others and drop them (70 % of a
    default run's time, an audit measured); the unvisited pair is found first."""
    from rssm.solvers import certificate as cert_mod

    calls = []
    real = cert_mod.least_norm
    monkeypatch.setattr(cert_mod, "least_norm", lambda vecs: calls.append(1) or real(vecs))
    test = cert_mod.GoldsteinTest(1e-10, 4, n_pairs=3, window=2)
    rng = np.random.default_rng(0)
    for _ in range(test.horizon):                     # every pair visited, steps of 0
        for key in ((0, 1), (0, 2), (1, 2)):
            test.observe(key, rng.standard_normal((3, 2)), 1.0, 0.0)
    for i in range(test.horizon + 1):                 # pair (1, 2) leaves the window
        test.observe(((0, 1), (0, 2))[i % 2], rng.standard_normal((3, 2)), 1.0, 0.0)
    for i in range(10):
        test.observe(((0, 1), (0, 2))[i % 2], rng.standard_normal((3, 2)), 1.0, 0.0)
        assert test.evaluate() is None
    assert calls == []
    test.observe((1, 2), rng.standard_normal((3, 2)), 1.0, 0.0)
    assert test.evaluate() is not None and len(calls) == 3
