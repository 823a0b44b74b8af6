"""DPCP and ODL (Section 5): oracles, incremental caches, subgradients, error measures,
synthetic instances and input validation."""

from __future__ import annotations

import math
import subprocess
import sys
import warnings

import numpy as np
import pytest

import rssm
from rssm import stiefel
from rssm.blocks import Partition
from rssm.problem import GenericOracle, Problem
from rssm.problems import DPCP, ODL, dictionary_error, subspace_distance


def _rel(a, b) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def _signed_permutation(n: int, seed: int) -> np.ndarray:
    r = np.random.default_rng(seed)
    return np.eye(n)[:, r.permutation(n)] * r.choice([-1.0, 1.0], size=n)


# --------------------------------------------------------------------------------------
# incremental caches (issue 2: match a from-scratch computation after 1e4 updates)
# --------------------------------------------------------------------------------------


def _data(problem) -> np.ndarray:
    return problem.yt if isinstance(problem, DPCP) else problem.y


def _check_oracle_against_scratch(problem, oracle, x, part, r, tol=1e-12):
    zt = x.T @ _data(problem)
    assert _rel(oracle.zt, zt) <= tol
    assert oracle.cost() == pytest.approx(problem.cost(x), rel=tol)
    g = problem.subgradient(x)
    assert _rel(oracle.subgradient(), g) <= tol
    i, j = sorted(r.choice(part.n_blocks, size=2, replace=False))
    cs = part.columns(int(i), int(j))
    assert _rel(oracle.partial_subgradient(cs), g[:, cs.index]) <= tol


@pytest.mark.parametrize("which", ["dpcp", "odl"])
@pytest.mark.parametrize("contiguous", [True, False])
def test_incremental_cache_matches_scratch_after_1e4_updates(
    which, contiguous, small_dpcp, small_odl
):
    """10^4 updates of random block pairs to random new values (the cache does not care
    whether X stays on the manifold), checked against scratch every 2500 updates."""
    problem = small_dpcp if which == "dpcp" else small_odl
    n, p = problem.shape
    r = np.random.default_rng(31 if contiguous else 32)
    if contiguous:
        part = Partition.uniform(p, 4)
    else:  # unequal, interleaved blocks: several runs per column set
        label = r.integers(0, 3, size=p)
        label[:3] = [0, 1, 2]
        part = Partition([np.flatnonzero(label == b) for b in range(3)], p)
    x = stiefel.random_point(n, p, r)
    oracle = problem.make_oracle(x, part)
    assert not isinstance(oracle, GenericOracle)
    pairs = [part.columns(i, j) for i in range(part.n_blocks) for j in range(i + 1, part.n_blocks)]
    picks = r.integers(0, len(pairs), size=10_000)
    scale = 1.0 / np.sqrt(n)
    for k, pick in enumerate(picks):
        cs = pairs[pick]
        x[:, cs.selector] = scale * r.standard_normal((n, cs.size))
        oracle.update(cs)
        if k % 2500 == 2499:
            _check_oracle_against_scratch(problem, oracle, x, part, r)
    # a full update and a refresh agree too
    x[...] = stiefel.random_point(n, p, r)
    oracle.update(None)
    _check_oracle_against_scratch(problem, oracle, x, part, r)
    x[...] = stiefel.random_point(n, p, r)
    oracle.refresh()
    _check_oracle_against_scratch(problem, oracle, x, part, r)


def test_dpcp_oracle_at_zero_rows():
    """0 lies in the subdifferential of ||.|| at 0: a row z_j = 0 contributes nothing."""
    r = np.random.default_rng(3)
    yt = np.concatenate([np.eye(6)[:, :1], r.standard_normal((6, 9))], axis=1)
    prob = DPCP(yt, 4)
    x = np.eye(6)[:, 1:5]  # orthogonal to the first data point: z_0 = 0 exactly
    g = prob.subgradient(x)
    z = yt[:, 1:].T @ x
    want = yt[:, 1:] @ (z / np.linalg.norm(z, axis=1, keepdims=True)) / 10
    np.testing.assert_allclose(g, want, rtol=1e-13, atol=1e-16)
    oracle = prob.make_oracle(x.copy(), Partition.uniform(4, 2))
    np.testing.assert_allclose(oracle.subgradient(), want, rtol=1e-13, atol=1e-16)
    assert oracle.cost() == pytest.approx(np.linalg.norm(z, axis=1).sum() / 10, rel=1e-14)


# --------------------------------------------------------------------------------------
# subgradients vs central finite differences at differentiable points
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_dpcp_subgradient_matches_finite_differences(seed, small_dpcp):
    r = np.random.default_rng(40 + seed)
    n, p = small_dpcp.shape
    x = r.standard_normal((n, p))  # f is defined on all of R^{n x p}
    assert np.min(np.linalg.norm(small_dpcp.yt.T @ x, axis=1)) > 1e-2  # no zero rows
    g = small_dpcp.subgradient(x)
    oracle = small_dpcp.make_oracle(x.copy(), Partition.uniform(p, 3))
    np.testing.assert_allclose(oracle.subgradient(), g, rtol=1e-12, atol=1e-15)
    h = 1e-5
    for _ in range(5):
        d = r.standard_normal((n, p))
        fd = (small_dpcp.cost(x + h * d) - small_dpcp.cost(x - h * d)) / (2 * h)
        assert fd == pytest.approx(np.sum(g * d), rel=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_odl_subgradient_matches_finite_differences(seed, small_odl):
    """f is linear on a segment that crosses no kink (no entry of Y^T X changes sign)."""
    r = np.random.default_rng(50 + seed)
    n, p = small_odl.shape
    x = stiefel.random_point(n, p, r)
    z = small_odl.y.T @ x
    # samples whose codes are all zero (y_j = 0) add a constant 0 to f; elsewhere no kink
    live = np.linalg.norm(small_odl.y, axis=0) > 0
    assert np.min(np.abs(z[live])) > 0  # differentiable point
    g = small_odl.subgradient(x)
    for _ in range(5):
        d = r.standard_normal((n, p))
        h = 0.1 * np.min(np.abs(z[live])) / np.max(np.abs(small_odl.y.T @ d))
        fd = (small_odl.cost(x + h * d) - small_odl.cost(x - h * d)) / (2 * h)
        assert fd == pytest.approx(np.sum(g * d), rel=1e-6)


def test_partial_riemannian_subgradient_is_derivative_along_the_block(small_dpcp):
    """d/dt f(X with X_C replaced by P_M(X_C + t v)) at 0 = <P_C(G_C), v> for v tangent
    to the submanifold block (eq. eq-partialRiemsubgrad)."""
    r = np.random.default_rng(60)
    n, p = small_dpcp.shape
    x = stiefel.random_point(n, p, r)
    part = Partition.uniform(p, 4)
    cs = part.columns(1, 3)
    sel = cs.selector
    oracle = small_dpcp.make_oracle(x.copy(), part)
    rg = stiefel.block_tangent_projection(x, sel, oracle.partial_subgradient(cs))
    v = stiefel.block_tangent_projection(x, sel, r.standard_normal((n, cs.size)))

    def f_along(t):
        y = x.copy()
        y[:, sel] = stiefel.project_submanifold_block(x, sel, x[:, sel] + t * v)
        return small_dpcp.cost(y)

    h = 1e-5
    fd = (f_along(h) - f_along(-h)) / (2 * h)
    assert fd == pytest.approx(np.sum(rg * v), rel=1e-6)


def test_partial_subgradient_is_the_full_one_restricted(small_dpcp, small_odl):
    """Prop. prop-structural for the problems' own methods, slices and index arrays."""
    r = np.random.default_rng(61)
    for problem in (small_dpcp, small_odl):
        n, p = problem.shape
        x = stiefel.random_point(n, p, r)
        g = problem.subgradient(x)
        idx = np.array([0, 2, 5])
        np.testing.assert_allclose(
            problem.partial_subgradient(x, idx), g[:, idx], rtol=1e-13, atol=1e-15
        )
        np.testing.assert_allclose(
            problem.partial_subgradient(x, slice(1, 4)), g[:, 1:4], rtol=1e-13, atol=1e-15
        )


# --------------------------------------------------------------------------------------
# a user problem with only cost and subgradient: the generic fallback
# --------------------------------------------------------------------------------------


class _Quadratic(Problem):
    """f(X) = ||A X||_F^2 / 2, smooth; gives only cost and subgradient."""

    def __init__(self, a):
        self.a = a
        self.shape = (a.shape[1], 3)

    def cost(self, x):
        return 0.5 * float(np.sum((self.a @ x) ** 2))

    def subgradient(self, x):
        return self.a.T @ (self.a @ x)


def test_generic_oracle_slices_full_subgradient():
    r = np.random.default_rng(62)
    prob = _Quadratic(r.standard_normal((6, 6)))
    x = stiefel.random_point(6, 3, r)
    part = Partition([[0, 2], [1]], 3)
    oracle = prob.make_oracle(x, part)
    assert isinstance(oracle, GenericOracle)
    cs = part.columns(0)
    np.testing.assert_array_equal(oracle.partial_subgradient(cs), prob.subgradient(x)[:, [0, 2]])
    assert oracle.cost() == prob.cost(x)
    assert not prob.has_error
    with pytest.raises(ValueError, match="ground truth"):
        prob.error(x)
    np.testing.assert_array_equal(prob.initial_point(), prob.initial_point(0))  # seeded default
    with pytest.raises(TypeError, match="Generator"):
        prob.initial_point(1.5)


# --------------------------------------------------------------------------------------
# DPCP error (Section 5.1): stable vs naive
# --------------------------------------------------------------------------------------


def _rotated_complement(n, d, angles, seed):
    """S = first d columns of a signed permutation P; X = P [e_{d..n-1}] with column k
    rotated by angles[k] towards e_k. Both exact in floating point, so the exact distance
    is sqrt(sum 4 sin^2(theta_k / 2))."""
    pm = _signed_permutation(n, seed)
    s = pm[:, :d]
    xa = np.eye(n)[:, d:].copy()
    for k, th in enumerate(angles):
        xa[:, k] = 0.0
        xa[d + k, k] = np.cos(th)
        xa[k, k] = np.sin(th)
    exact = float(np.sqrt(np.sum(4.0 * np.sin(np.asarray(angles) / 2.0) ** 2)))
    return s, pm @ xa, exact


def _naive_distance(s, x):
    p = x.shape[1]
    nuc = np.linalg.norm((np.eye(s.shape[0]) - s @ s.T) @ x, "nuc")
    return float(np.sqrt(max(0.0, 2.0 * (p - nuc))))


@pytest.mark.parametrize(
    "angles", [[1e-10], [3e-12, 1e-10, 2e-11], [1e-7], [1e-3, 2e-3], [0.3, 0.01]]
)
def test_dpcp_error_is_accurate_for_small_angles(angles):
    s, x, exact = _rotated_complement(12, 4, angles, seed=len(angles))
    assert subspace_distance(s, x) == pytest.approx(exact, rel=1e-15)
    prob = DPCP(np.ones((12, 3)), 8, subspace=s)
    assert prob.error(x) == pytest.approx(exact, rel=1e-15)


def test_naive_dpcp_error_fails_where_the_stable_one_does_not():
    s, x, exact = _rotated_complement(12, 4, [1e-10], seed=0)
    assert exact == pytest.approx(1e-10, rel=1e-15)
    assert abs(_naive_distance(s, x) - exact) / exact > 0.5  # all digits lost
    assert subspace_distance(s, x) == pytest.approx(exact, rel=1e-15)


@pytest.mark.parametrize("seed", range(3))
def test_dpcp_error_matches_definition_at_moderate_error(seed):
    """dist(X, S^perp) = min_R ||X - S^perp R|| with R from orthogonal Procrustes."""
    r = np.random.default_rng(70 + seed)
    n, d = 10, 3
    q = stiefel.random_point(n, n, r)
    s, s_perp = q[:, :d], q[:, d:]
    x = stiefel.polar(s_perp + 0.1 * r.standard_normal((n, n - d)))
    u, _, vt = np.linalg.svd(s_perp.T @ x)
    want = np.linalg.norm(x - s_perp @ (u @ vt))
    assert subspace_distance(s, x) == pytest.approx(want, rel=1e-12)
    assert _naive_distance(s, x) == pytest.approx(want, rel=1e-8)  # the naive form is fine here
    assert subspace_distance(s, s_perp @ stiefel.random_point(n - d, n - d, r)) <= 1e-14


# --------------------------------------------------------------------------------------
# ODL error (Section 5.2)
# --------------------------------------------------------------------------------------


def _odl_error_definition(x, x_star):
    """sum_i | max_j |x_i^T x*_j| - 1 |, as written in Section 5.2."""
    return float(np.sum(np.abs(np.max(np.abs(x.T @ x_star), axis=1) - 1.0)))


def test_odl_error_is_zero_at_signed_permutations(small_odl):
    x_star = small_odl.dictionary
    x = x_star @ _signed_permutation(x_star.shape[0], 5)
    assert small_odl.error(x) == 0.0
    assert small_odl.error(x_star) == 0.0


@pytest.mark.parametrize("seed", range(3))
def test_odl_error_matches_definition_at_moderate_error(seed, small_odl):
    r = np.random.default_rng(80 + seed)
    x_star = small_odl.dictionary
    x = stiefel.polar(x_star + 0.05 * r.standard_normal(x_star.shape)) @ _signed_permutation(
        8, seed
    )
    want = _odl_error_definition(x, x_star)
    assert 1e-4 < want < 1e-1
    assert small_odl.error(x) == pytest.approx(want, rel=1e-10)


@pytest.mark.parametrize("theta", [1e-9, 1e-4, 0.1])
def test_odl_error_small_rotation(theta):
    """Rotating columns 0 and 1 of X* by theta: err = 2 (1 - cos theta) = 4 sin^2(theta/2)."""
    x_star = _signed_permutation(6, 1)
    rot = np.eye(6)
    rot[:2, :2] = [[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]]
    x = x_star @ rot
    exact = 4.0 * np.sin(theta / 2) ** 2
    assert dictionary_error(x, x_star) == pytest.approx(exact, rel=1e-12)


# --------------------------------------------------------------------------------------
# synthetic instances and starting points
# --------------------------------------------------------------------------------------


def test_dpcp_synthetic_structure():
    prob = DPCP.synthetic(n=15, d=4, n_inliers=40, n_outliers=25, seed=3)
    n, p = prob.shape
    assert (n, p, prob.m) == (15, 11, 65)
    np.testing.assert_allclose(np.linalg.norm(prob.yt, axis=0), 1.0, rtol=0, atol=1e-14)
    s = prob.subspace
    assert stiefel.feasibility(s) <= 1e-14
    off = np.linalg.norm(prob.yt - s @ (s.T @ prob.yt), axis=0)
    assert np.sum(off < 1e-12) == 40  # inliers lie in span(S); outliers do not
    assert not np.all(off[:40] < 1e-12)  # columns were permuted
    again = DPCP.synthetic(n=15, d=4, n_inliers=40, n_outliers=25, seed=3)
    np.testing.assert_array_equal(again.yt, prob.yt)
    other = DPCP.synthetic(n=15, d=4, n_inliers=40, n_outliers=25, seed=4)
    assert not np.array_equal(other.yt, prob.yt)


def test_dpcp_synthetic_noise_moves_the_inliers_only():
    """``noise`` adds N(0, noise^2) to the inliers after everything else is drawn: 0 is
    the paper's instance bit for bit, the outliers and the subspace stay as they are, and
    the inliers' distance to the subspace is the noise's (about noise sqrt(n - d))."""
    kw = dict(n=15, d=4, n_inliers=400, n_outliers=250, seed=3)
    base = DPCP.synthetic(**kw)
    np.testing.assert_array_equal(DPCP.synthetic(**kw, noise=0.0).yt, base.yt)
    noisy = DPCP.synthetic(**kw, noise=1e-3)
    np.testing.assert_array_equal(noisy.subspace, base.subspace)
    s = base.subspace
    off = np.linalg.norm(base.yt - s @ (s.T @ base.yt), axis=0)
    inl = off < 1e-12
    assert inl.sum() == 400
    np.testing.assert_array_equal(noisy.yt[:, ~inl], base.yt[:, ~inl])
    moved = np.linalg.norm(noisy.yt[:, inl] - s @ (s.T @ noisy.yt[:, inl]), axis=0)
    assert np.median(moved) == pytest.approx(1e-3 * np.sqrt(11), rel=0.1)
    for bad in (-1e-3, float("nan"), "1e-3"):
        with pytest.raises((ValueError, TypeError), match="noise"):
            DPCP.synthetic(**kw, noise=bad)


def test_dpcp_spectral_start_minimizes_the_quadratic(small_dpcp):
    x0 = small_dpcp.initial_point()
    n, p = small_dpcp.shape
    assert x0.shape == (n, p) and stiefel.feasibility(x0) <= 1e-13
    w = np.linalg.eigvalsh(small_dpcp.yt @ small_dpcp.yt.T)
    assert np.sum((small_dpcp.yt.T @ x0) ** 2) == pytest.approx(np.sum(w[:p]), rel=1e-10)
    np.testing.assert_array_equal(small_dpcp.initial_point(np.random.default_rng(1)), x0)


def test_odl_synthetic_structure():
    prob = ODL.synthetic(n=9, theta=0.3, seed=4)
    assert prob.m == round(10 * 9**1.5) == 270
    assert prob.shape == (9, 9)
    x_star = prob.dictionary
    assert stiefel.feasibility(x_star) <= 1e-14
    codes = x_star.T @ prob.y
    zero = np.mean(np.abs(codes) < 1e-12)
    assert zero == pytest.approx(0.7, abs=0.05)  # 2430 entries: standard error 0.009
    x0 = prob.initial_point(np.random.default_rng(0))
    assert stiefel.feasibility(x0) <= 1e-14
    assert ODL.synthetic(n=5, m=17, seed=0).m == 17


def test_problems_from_user_data(rng):
    y = rng.standard_normal((6, 30))
    prob = DPCP.from_data(y, d=2)
    assert prob.shape == (6, 4) and not prob.has_error
    assert DPCP.from_data(y, p=3).shape == (6, 3)
    x = stiefel.random_point(6, 4, rng)
    assert prob.cost(x) == pytest.approx(np.mean(np.linalg.norm(y.T @ x, axis=1)), rel=1e-14)
    odl = ODL.from_data(y)
    assert odl.shape == (6, 6) and not odl.has_error
    x6 = stiefel.random_point(6, 6, rng)
    assert odl.cost(x6) == pytest.approx(np.abs(y.T @ x6).sum(), rel=1e-14)
    assert rssm.problems.REGISTRY["dpcp"] is DPCP and rssm.problems.REGISTRY["odl"] is ODL


# --------------------------------------------------------------------------------------
# bad input (issue 2, section 4)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_data_is_rejected(bad, rng):
    y = rng.standard_normal((5, 20))
    y[2, 7] = bad
    with pytest.raises(ValueError, match="yt.*NaN or infinite"):
        DPCP(y, 3)
    with pytest.raises(ValueError, match="y.*NaN or infinite"):
        ODL(y)
    with pytest.raises(ValueError, match="NaN or infinite"):
        DPCP.from_data(y, d=2)


def test_bad_problem_arguments(rng):
    y = rng.standard_normal((5, 20))
    # (an audit: "p must be <= n = 5", which 5 is not either)
    with pytest.raises(ValueError, match=r"p must be <= n - 1 = 4, got 6"):
        DPCP(y, 6)
    with pytest.raises(ValueError, match="p must be >= 1"):
        DPCP(y, 0)
    # p = n: every X gives the same cost; a run said "converged" at its start
    with pytest.raises(ValueError, match=r"p must be <= n - 1 = 4, got 5: .* d = n - p >= 1"):
        DPCP(y, 5)
    with pytest.raises(ValueError, match="d must be >= 1, got 0"):
        DPCP.from_data(y, d=0)
    with pytest.raises(TypeError, match="p must be an integer"):
        DPCP(y, "3")
    with pytest.raises(ValueError, match="yt must be 2-D"):
        DPCP(y[0], 3)
    with pytest.raises(TypeError, match="yt must hold real numbers"):
        DPCP(y + 1j, 3)
    with pytest.raises(ValueError, match="subspace has shape"):
        DPCP(y, 3, subspace=np.eye(4)[:, :2])
    with pytest.raises(ValueError, match="subspace is not on the Stiefel manifold"):
        DPCP(y, 3, subspace=2 * np.eye(5)[:, :2])
    with pytest.raises(ValueError, match="p = n - d"):
        DPCP(y, 3, subspace=np.eye(5)[:, :3])
    with pytest.raises(ValueError, match="exactly one of d"):
        DPCP.from_data(y, d=2, p=3)
    with pytest.raises(ValueError, match="n_inliers"):
        DPCP.synthetic(n=5, d=2, n_inliers=0, n_outliers=0, seed=0)
    with pytest.raises(ValueError, match="d must be <= n - 1 = 4"):
        DPCP.synthetic(n=5, d=5, seed=0)
    with pytest.raises(ValueError, match="dictionary is not on the Stiefel manifold"):
        ODL(y, dictionary=2 * np.eye(5))
    with pytest.raises(ValueError, match="theta must be <= 1"):
        ODL.synthetic(n=5, theta=1.5, seed=0)
    with pytest.raises(ValueError, match="theta must be > 0"):
        ODL.synthetic(n=5, theta=0.0, seed=0)
    with pytest.raises(TypeError, match="seed"):
        ODL.synthetic(n=5, seed="zero")
    with pytest.raises(ValueError, match="ground"):
        DPCP(y, 3).error(np.eye(5)[:, :3])


def test_odl_synthetic_with_few_samples_does_not_warn_about_its_own_layout():
    """The layout check guesses "samples as rows" when m < n; the synthetic instance is
    built with samples as columns, so it must not warn (`rssm solve odl --n 10 --m 3`
    printed the raw warning)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prob = ODL.synthetic(n=10, m=3, seed=0)
    assert prob.shape == (10, 10) and prob.m == 3


def test_integer_valued_floats_are_integers_everywhere(rng):
    """seed, threads and record take integer-valued floats as every integer argument does
    (before: refused, while max_iter=5.0 and n_blocks=2.0 were taken); 2.5 is refused."""
    prob = DPCP.synthetic(n=20, d=4, n_inliers=60, n_outliers=40, seed=11)
    a = rssm.minimize(prob, seed=2, threads=2, record=2, max_iter=10)
    b = rssm.minimize(prob, seed=2.0, threads=2.0, record=2.0, max_iter=10)
    c = rssm.minimize(prob, seed=np.float64(2), max_iter=10)
    np.testing.assert_array_equal(a.x, b.x)
    np.testing.assert_array_equal(a.x, c.x)
    for kw in (dict(seed=2.5), dict(threads=2.5), dict(record=2.5)):
        with pytest.raises(TypeError):
            rssm.minimize(prob, max_iter=3, **kw)


@pytest.mark.parametrize("build", [
    lambda y: rssm.problems.DPCP.from_data(y, d=2),
    lambda y: rssm.problems.ODL(y),
    lambda y: rssm.problems.L1Procrustes(y.T, np.ones((y.shape[1], 1))),
    lambda y: rssm.problems.SparsePCA(y.T, 2),
    lambda y: rssm.problems.CompositeProblem(y, 2, rssm.problems.NormLoss.norm()),
], ids=["dpcp", "odl", "l1_procrustes", "sparse_pca", "composite"])
def test_data_beyond_float64_squares_is_refused_when_the_problem_is_built(build):
    """At 1e155 the spectral starts and norms overflowed (a RuntimeWarning, then a run
    ending non_finite with f = inf although f was finite); at 1e-160 they underflowed to 0
    (DPCP read every sample as 0). Within [1e-150, 1e150] nothing changes."""
    y = np.random.default_rng(0).standard_normal((6, 40))
    for c in (1e155, 1e-160):
        with pytest.raises(ValueError, match=r"the largest entry is .* outside \[1e-150, "
                                             r"1e\+150\].*scale the data first"):
            build(y * c)
    # just beyond a bound, the value is not shown rounded onto it ("1e+150, outside")
    top = np.abs(y).max()
    with pytest.raises(ValueError, match=r"largest entry is 1\.0000001e\+150 in"):
        build(y / top * 1.0000001e150)
    # (sparse PCA, quadratic in the data, takes up to ||A||_F^2 = 1e152: below)
    big = 2.0**240 if "SparsePCA" in build.__code__.co_names else 2.0**400
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = rssm.minimize(build(y * big), max_iter=5)
    assert np.isfinite(res.fun)


def test_pandas_frames_of_nullable_numbers_are_read_as_their_numbers():
    # (an audit: Float64 and Int64 frames without a missing value were refused as "dtype
    # object", which np.asarray makes of them; the estimators took them)
    pd = pytest.importorskip("pandas")
    x = np.round(10 * np.random.default_rng(0).standard_normal((80, 6)))
    b = np.ones((80, 2))
    ref = rssm.minimize(rssm.problems.DPCP(x.T, 3), max_iter=20, seed=0)
    ref_l1 = rssm.minimize(rssm.problems.L1Procrustes(x, b), max_iter=20, seed=0)
    for dtype in ("Float64", "Int64", "float32"):
        df = pd.DataFrame(x).astype(dtype)
        res = rssm.minimize(rssm.problems.DPCP(df.T, 3), max_iter=20, seed=0)
        assert np.array_equal(res.x, ref.x)
        res = rssm.minimize(rssm.problems.L1Procrustes(df, b), max_iter=20, seed=0)
        assert np.array_equal(res.x, ref_l1.x)
    # a column that holds no numbers is named
    flagged = pd.DataFrame(x, columns=list("abcdef")).assign(f=x[:, 5] > 0)
    with pytest.raises(TypeError, match=r"a must hold real numbers .*its column 'f' has "
                                        r"dtype bool"):
        rssm.problems.L1Procrustes(flagged, np.zeros((80, 2)))


@pytest.mark.skipif(np.dtype(np.longdouble).itemsize <= 8,
                    reason="np.longdouble is float64 on this platform")
@pytest.mark.parametrize("build", [
    lambda y: rssm.problems.DPCP.from_data(y, d=2),
    lambda y: rssm.problems.ODL(y),
    lambda y: rssm.problems.CompositeProblem(y, 2, rssm.problems.NormLoss.norm()),
    lambda y: rssm.problems.DPCP(rssm.data.samples(y.T), 4),
], ids=["dpcp", "odl", "composite", "streamed"])
def test_longdouble_data_float64_cannot_hold_is_refused_not_read_as_zeros(build, tmp_path):
    # (an audit: 1e-400 in float128 was cast to all zeros, a "global minimizer (an exact
    # fit)" at iteration 0 with success True; 1e400 read as "480 NaN or infinite entries")
    y = np.random.default_rng(0).standard_normal((6, 40)).astype(np.longdouble)
    for c in ("1e-400", "1e400"):
        path = tmp_path / f"y{c}.npy"
        np.save(path, y * np.longdouble(c))
        for data in (y * np.longdouble(c), np.load(path, mmap_mode="r")):
            with pytest.raises(ValueError, match=r"holds float128 values whose largest "
                                                 r"magnitude, 3\.\d+e[-+]400, lies outside "
                                                 r"float64's range"):
                rssm.minimize(build(data), max_iter=5)
    res = rssm.minimize(build(y), max_iter=5, seed=0)     # in range: cast, as any dtype
    assert np.array_equal(res.x, rssm.minimize(build(y.astype(np.float64)), max_iter=5,
                                               seed=0).x)


def test_polar_of_a_matrix_far_from_unit_scale():
    """polar(c Xi) = polar(Xi): the starts' data products (the data's scale squared) are
    measured in units of their largest entry (at 1e150: "overflow encountered in dot")."""
    xi = np.random.default_rng(1).standard_normal((6, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for c in (1e200, 1e-200, 1e300):
            np.testing.assert_allclose(stiefel.polar(xi * c), stiefel.polar(xi), atol=1e-15)


def test_error_metrics_refuse_what_they_cannot_measure():
    """A zero or scaled X read as a perfect recovery (subspace_distance 0.0), 2 X gave
    dictionary_error 2.5 where its formula gives 5, fewer columns than the ground truth
    gave error 0 and a (5, 1) X broadcast against (5, 2); each is refused by name now.
    Lists are read as matrices, and a float32 ground truth is taken at float32's
    precision (as a float32 start)."""
    from rssm.problems import (
        L1Procrustes,
        PlantedSparseBasis,
        SparsePCA,
        signed_permutation_distance,
    )

    s, x = np.eye(4)[:, :1], np.eye(4)[:, 1:]
    for bad in (0 * x, 2 * x):
        with pytest.raises(ValueError, match=r"subspace_distance: the columns of x must "
                                             r"have unit norm"):
            subspace_distance(s, bad)
    with pytest.raises(ValueError, match=r"dictionary_error: the columns of x must"):
        dictionary_error(2 * np.eye(5), np.eye(5))
    with pytest.raises(ValueError, match=r"they need the same shape"):
        signed_permutation_distance(np.eye(5), np.eye(5)[:, :3])
    sp = SparsePCA.synthetic(n=20, r=3, m=40, support=3, seed=0)
    with pytest.raises(ValueError, match=r"x has shape \(20, 2\), expected \(20, 3\)"):
        sp.error(sp.loadings[:, :2])
    sb = PlantedSparseBasis.synthetic(n=8, p=3, m=200, seed=0)
    with pytest.raises(ValueError, match=r"expected \(8, 3\)"):
        sb.error(sb.x_true[:, :1])
    with pytest.raises(ValueError, match=r"expected \(5, 2\)"):
        L1Procrustes.synthetic(m=20, n=5, p=2, seed=0).error(np.eye(5)[:, :1])
    odl = ODL.synthetic(n=5, seed=0)
    assert odl.error(odl.dictionary.tolist()) < 1e-14
    d = DPCP.synthetic(n=12, d=3, n_inliers=100, n_outliers=100, seed=0)
    single = DPCP(d.yt, 9, d.subspace.astype(np.float32))
    assert stiefel.feasibility(single.subspace) < 1e-14
    assert np.abs(single.subspace - d.subspace).max() < 1e-6


@pytest.mark.parametrize("seed", range(4))
def test_signed_permutation_distance_matches_scipys_matching(seed):
    """The matching of `signed_permutation_distance` (its own Hungarian algorithm up to
    `SMALL_ASSIGNMENT` columns, so that a default call on sparse PCA does not import
    scipy.optimize) reaches the largest total weight scipy's does, ties and zero
    columns included, and the same distance bit for bit where the matching is unique."""
    from scipy.optimize import linear_sum_assignment

    from rssm.problems import signed_permutation_distance
    from rssm.problems.composite import SMALL_ASSIGNMENT, _max_assignment

    rng = np.random.default_rng(seed)
    for trial in range(300):
        n = int(rng.integers(1, SMALL_ASSIGNMENT + 1))
        w = np.abs(rng.standard_normal((n, n)))
        if trial % 3 == 0:
            w = np.round(w, 1)                        # ties
        if trial % 5 == 0:
            w[:, rng.integers(n)] = 0.0
        cols = _max_assignment(w)
        assert np.array_equal(np.sort(cols), np.arange(n))
        rows, ref = linear_sum_assignment(-w)
        assert w[np.arange(n), cols].sum() == pytest.approx(w[rows, ref].sum(), abs=1e-12)
    for n, p in ((20, 5), (40, 32), (60, 33)):
        x = stiefel.random_point(n, p, rng)
        y = stiefel.random_point(n, p, rng)
        c = x.T @ y
        rows, ref = linear_sum_assignment(-np.abs(c))
        s = np.sign(c[rows, ref])
        diff = x[:, rows] - y[:, ref] * s
        assert signed_permutation_distance(x, y) == float(np.sqrt(np.sum(diff * diff)))


def test_a_default_call_on_sparse_pca_does_not_import_scipy_optimize():
    """Importing scipy.optimize (for its matching, in the error of sparse PCA and the
    planted sparse basis) took 0.39 s, which the first default call paid: 0.64 s of wall
    time against 0.31 s of solver time."""
    code = ("import sys, rssm\n"
            "from rssm.problems import SparsePCA, PlantedSparseBasis\n"
            "rssm.minimize(SparsePCA.synthetic(n=30, r=3, m=60, support=4, seed=0))\n"
            "rssm.minimize(PlantedSparseBasis.synthetic(n=10, p=3, m=200, seed=0))\n"
            "print('scipy.optimize' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("t", [1e-150, 1e-160, 1e-200, 1e-300])
def test_subspace_distance_keeps_its_digits_below_the_square_roots_underflow(t):
    """An audit: the terms were squared before they were summed, and below about 1e-154
    the squares underflowed: a distance of 1e-200 read as 0.0."""
    s = np.array([[1.0], [0.0]])
    x = np.array([[np.sin(t)], [np.cos(t)]])
    assert subspace_distance(s, x) == pytest.approx(2.0 * np.sin(t / 2.0), rel=1e-15)


def test_error_metrics_refuse_repeated_columns_and_too_many_columns():
    """An audit: X made of copies of one unit vector read as a perfect recovery (2e-16
    and 0.0, where the distances they stand for are 2.35 and more)."""
    rng = np.random.default_rng(0)
    q = stiefel.random_point(8, 8, rng)
    s, s_perp = q[:, :3], q[:, 3:]
    rep = np.repeat(s_perp[:, :1], 5, axis=1)
    with pytest.raises(ValueError, match=r"subspace_distance: the columns of x must be "
                                         r"orthonormal .* columns \d and \d have inner "
                                         r"product 1"):
        subspace_distance(s, rep)
    with pytest.raises(ValueError, match=r"dictionary_error: the columns of x must be "
                                         r"orthonormal"):
        dictionary_error(np.repeat(q[:, :1], 8, axis=1), q)
    with pytest.raises(ValueError, match=r"x has 6 columns, more than n - d = 5"):
        subspace_distance(s, q[:, :6])
    # fewer columns than S^perp has: the distance of span X to S^perp, 0 inside it
    assert subspace_distance(s, s_perp[:, :2]) < 1e-15
    assert subspace_distance(s, stiefel.polar(s_perp[:, :2] + 0.1 * s[:, :2])) > 0.1


@pytest.mark.parametrize("make", [
    lambda: DPCP.synthetic(n=10, d=2, n_inliers=40, n_outliers=20, seed=0),
    lambda: ODL.synthetic(n=6, m=50, seed=0),
    lambda: rssm.problems.L1Procrustes.synthetic(n=8, p=3, seed=0),
    lambda: rssm.problems.SparsePCA.synthetic(n=8, r=2, support=3, seed=0),
])
def test_the_data_problems_methods_name_a_point_of_the_wrong_shape(make):
    """cost, subgradient and partial_subgradient of the built-in data problems refuse a
    point that is not an n x p real matrix with the message `error` gives. Before, X^T
    gave NumPy's matmul or broadcast errors, a 1-d X an IndexError, X with fewer columns
    the cost of those columns, and a complex X a ComplexWarning and its real part."""
    prob = make()
    n, p = prob.shape
    x = prob.initial_point(0)
    f = prob.cost(x)
    bad = [(x.T, "shape"), (x[:, :1] if p > 1 else np.hstack([x, x]), "shape"),
           (x[:, 0], "2-D"), (x + 0j, "real numbers")]
    for y, what in bad:
        if y.shape == (n, p):
            continue
        for call in (prob.cost, prob.subgradient, lambda z: prob.partial_subgradient(z, [0])):
            with pytest.raises((ValueError, TypeError), match=what):
                call(y)
    assert prob.cost(x.tolist()) == f          # a list of lists is read as the matrix
    assert math.isnan(prob.cost(np.full((n, p), np.nan)))


def test_sparse_pca_refuses_data_whose_squares_overflow_its_steps():
    """SparsePCA's cost and subgradient are quadratic in the data: 40 x 12 data with a
    largest entry of 1e77 (inside the problems' range [1e-150, 1e150]) was accepted and
    every run from a random start ended non_finite at iteration 0. Data whose sum of
    squares exceeds 1e152 are refused when the problem is built; 1e75 still runs."""
    a = np.random.default_rng(0).standard_normal((40, 12))
    a /= np.abs(a).max()
    x0 = stiefel.random_point(12, 3, np.random.default_rng(3))
    with pytest.raises(ValueError, match=r"a: the sum of the squares of its entries is "
                                         r"3\.27e\+155, above 1e\+152.*from_data"):
        rssm.problems.SparsePCA(a * 1e77, 3)
    with pytest.raises(ValueError, match=r"is inf \(entries that are infinite, or whose"):
        bad = a.copy()
        bad[0, 0] = np.inf
        rssm.problems.SparsePCA(rssm.data.samples(bad, check_finite=False), 3)
    # NaN data that the user let through go on to the run, which says so
    bad = a.copy()
    bad[3, 4] = np.nan
    nan_prob = rssm.problems.SparsePCA(rssm.data.samples(bad, check_finite=False), 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert rssm.minimize(nan_prob, max_iter=5).stop_reason == "non_finite"
    prob = rssm.problems.SparsePCA(a * 1e75, 3)
    for method in ("rsm", "rssm"):
        res = rssm.minimize(prob, x0=x0, method=method)
        assert res.success, res.message
        assert prob.explained_variance(res.x) > 0.49


# -- behaviour a mutation audit found unpinned (each assertion failed on a mutant) ------------
def test_subspace_distance_of_a_point_inside_s_is_its_largest_value():
    # X inside S (every principal angle to S^perp is pi/2): sqrt(2 q), never a rounding NaN
    # read as 0 (perfect recovery); the angle's cosine near 1 costs about sqrt(eps)
    rng = np.random.default_rng(0)
    for _ in range(100):
        s = np.linalg.qr(rng.standard_normal((12, 4)))[0]
        q = np.linalg.qr(rng.standard_normal((4, 4)))[0]
        assert subspace_distance(s, s @ q) == pytest.approx(math.sqrt(8.0), rel=1e-7)
        assert subspace_distance(s, s @ q[:, :2]) == pytest.approx(2.0, rel=1e-7)


def test_huber_norm_loss_values_and_continuity():
    loss = rssm.problems.NormLoss.huber(0.5)
    r = np.array([0.0, 0.25, 0.5, 2.0])
    np.testing.assert_allclose(loss.value(r), [0.0, 0.0625, 0.25, 1.75], rtol=1e-15)
    np.testing.assert_allclose(loss.derivative(r), [0.0, 0.5, 1.0, 1.0], rtol=1e-15)
    eps = 1e-9
    assert abs(loss.value(np.array([0.5 + eps]))[0] - 0.25) < 2 * eps


def test_sparse_pca_sparsity_counts_entries_strictly_below_tol():
    prob = rssm.problems.SparsePCA.synthetic(seed=0)
    x = np.array([[1e-5, 1.0], [0.0, 0.5]])
    assert prob.sparsity(x) == 0.25                 # 1e-5 is not below ZERO_TOL = 1e-5
    assert prob.sparsity(x, tol=2e-5) == 0.5
