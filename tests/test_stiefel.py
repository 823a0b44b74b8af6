"""Geometry of St(n, p) (`rssm.stiefel`) and the averaging operator of Section 4.1.

Every formula is checked against its definition in the paper, built densely here
(n x n projectors, explicit np x np operators), on small random instances with fixed
seeds. Tolerances are stated next to each assertion.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rssm import stiefel
from rssm.blocks import Partition

HYP = settings(max_examples=25, deadline=None, derandomize=True)


def _point(n: int, p: int, seed: int) -> np.ndarray:
    return stiefel.random_point(n, p, np.random.default_rng(seed))


def _random_partition(p: int, ell: int, rng: np.random.Generator) -> Partition:
    """A partition of range(p) into ell non-empty, generally unequal, non-contiguous blocks."""
    perm = rng.permutation(p)
    cuts = np.sort(rng.choice(np.arange(1, p), size=ell - 1, replace=False))
    return Partition([perm[a:b] for a, b in zip(np.r_[0, cuts], np.r_[cuts, p], strict=True)], p)


def _dense_block_tangent(x: np.ndarray, idx: np.ndarray, xi_c: np.ndarray) -> np.ndarray:
    """X_C skew(X_C^T xi_C) + (I - X X^T) xi_C with an explicit n x n projector."""
    xc = x[:, idx]
    return xc @ stiefel.skew(xc.T @ xi_c) + (np.eye(x.shape[0]) - x @ x.T) @ xi_c


def _rest(p: int, idx: np.ndarray) -> np.ndarray:
    return np.setdiff1d(np.arange(p), idx)


# --------------------------------------------------------------------------------------
# sym / skew / feasibility / check_point
# --------------------------------------------------------------------------------------


def test_sym_skew_split_a_matrix(rng):
    a = rng.standard_normal((5, 5))
    s, k = stiefel.sym(a), stiefel.skew(a)
    np.testing.assert_array_equal(s, s.T)
    np.testing.assert_array_equal(k, -k.T)
    np.testing.assert_allclose(s + k, a, rtol=0, atol=1e-15)


def test_feasibility_is_max_entry_of_gram_minus_identity():
    q = _point(7, 3, 0)
    assert stiefel.feasibility(q) <= 1e-15
    # (1.001 q)^T (1.001 q) - I = 0.002001 I up to rounding.
    assert stiefel.feasibility(1.001 * q) == pytest.approx(2.001e-3, rel=1e-12)


def test_check_point_says_how_far_off():
    q = _point(7, 3, 1)
    stiefel.check_point(q)  # on the manifold: no error
    with pytest.raises(ValueError, match=r"= 2\.001e-03") as info:
        stiefel.check_point(1.001 * q, atol=1e-8, name="x0")
    msg = str(info.value)
    assert "x0" in msg and "1.0e-08" in msg and "polar" in msg
    bad = q.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite entries"):
        stiefel.check_point(bad)


# --------------------------------------------------------------------------------------
# tangent projection onto T_X St(n, p)
# --------------------------------------------------------------------------------------


@HYP
@given(n=st.integers(2, 9), data=st.data(), seed=st.integers(0, 2**31))
def test_tangent_projection_is_the_orthogonal_projection(n, data, seed):
    p = data.draw(st.integers(1, n))
    r = np.random.default_rng(seed)
    x = stiefel.random_point(n, p, r)
    xi = r.standard_normal((n, p))
    t = stiefel.tangent_projection(x, xi)
    # tangent: X^T T is skew (eq. T_X St = {xi : sym(X^T xi) = 0})
    assert np.max(np.abs(stiefel.sym(x.T @ t))) <= 1e-13
    # idempotent
    np.testing.assert_allclose(stiefel.tangent_projection(x, t), t, rtol=0, atol=1e-13)
    # residual is normal: xi - T = X S with S symmetric
    res = xi - t
    assert np.max(np.abs((np.eye(n) - x @ x.T) @ res)) <= 1e-13
    assert np.max(np.abs(stiefel.skew(x.T @ res))) <= 1e-13
    # hence <T, xi - T> = 0
    assert abs(np.sum(t * res)) <= 1e-12 * (1 + np.sum(xi * xi))


# --------------------------------------------------------------------------------------
# block tangent projection (formula before Algorithm alg-RSSM)
# --------------------------------------------------------------------------------------


@HYP
@given(p=st.integers(2, 7), extra=st.integers(0, 4), seed=st.integers(0, 2**31), data=st.data())
def test_block_tangent_projection_matches_formula_and_is_tangent(p, extra, seed, data):
    n = p + extra
    r = np.random.default_rng(seed)
    x = stiefel.random_point(n, p, r)
    c = data.draw(st.integers(1, p))
    idx = np.sort(r.choice(p, size=c, replace=False))
    xi = r.standard_normal((n, c))
    got = stiefel.block_tangent_projection(x, idx, xi)
    np.testing.assert_allclose(got, _dense_block_tangent(x, idx, xi), rtol=0, atol=1e-13)
    # tangent to the submanifold block at X_C (eq. eq-TSsubmfdblk)
    rest = _rest(p, idx)
    if rest.size:
        assert np.max(np.abs(x[:, rest].T @ got)) <= 1e-13
    assert np.max(np.abs(stiefel.sym(x[:, idx].T @ got))) <= 1e-13
    # a projection: idempotent
    again = stiefel.block_tangent_projection(x, idx, got)
    np.testing.assert_allclose(again, got, rtol=0, atol=1e-13)


def test_block_tangent_projection_slice_equals_index_array():
    x = _point(9, 6, 3)
    xi = np.random.default_rng(4).standard_normal((9, 3))
    a = stiefel.block_tangent_projection(x, slice(2, 5), xi)
    b = stiefel.block_tangent_projection(x, np.arange(2, 5), xi)
    np.testing.assert_array_equal(a, b)


def test_block_tangent_projection_with_all_columns_is_tangent_projection():
    x = _point(8, 5, 5)
    xi = np.random.default_rng(6).standard_normal((8, 5))
    np.testing.assert_allclose(
        stiefel.block_tangent_projection(x, slice(0, 5), xi),
        stiefel.tangent_projection(x, xi),
        rtol=0,
        atol=1e-14,
    )


# --------------------------------------------------------------------------------------
# projection onto the submanifold block (lem-projsubmfdblk)
# --------------------------------------------------------------------------------------


def _closed_form_block_projection(x, idx, big_xi):
    """(I - X_-C X_-C^T) Xi [Xi^T (I - X_-C X_-C^T) Xi]^(-1/2), densely."""
    rest = _rest(x.shape[1], idx)
    proj = np.eye(x.shape[0]) - x[:, rest] @ x[:, rest].T
    m = big_xi.T @ proj @ big_xi
    w, v = np.linalg.eigh(m)
    return proj @ big_xi @ (v / np.sqrt(w)) @ v.T


@pytest.mark.parametrize("seed", range(6))
def test_project_submanifold_block_matches_lemma(seed):
    r = np.random.default_rng(100 + seed)
    n, p = 10, 7
    x = stiefel.random_point(n, p, r)
    c = int(r.integers(1, p))
    idx = np.sort(r.choice(p, size=c, replace=False))
    big_xi = x[:, idx] + 0.3 * r.standard_normal((n, c))
    got = stiefel.project_submanifold_block(x, idx, big_xi)
    np.testing.assert_allclose(
        got, _closed_form_block_projection(x, idx, big_xi), rtol=0, atol=1e-12
    )
    # lands in M_{X_-C}: orthonormal columns, orthogonal to the untouched ones
    assert stiefel.feasibility(got) <= 1e-14
    assert np.max(np.abs(x[:, _rest(p, idx)].T @ got)) <= 1e-14
    # and is the nearest point of M_{X_-C}: no random member of the block is closer
    dist = np.linalg.norm(big_xi - got)
    rest = _rest(p, idx)
    for _ in range(50):
        g = r.standard_normal((n, c))
        u = stiefel.polar(g - x[:, rest] @ (x[:, rest].T @ g))
        assert np.linalg.norm(big_xi - u) >= dist - 1e-12


def test_project_submanifold_block_shortcut_when_orthogonal_to_rest():
    """If X_-C^T Xi = 0 the projection is the polar factor of Xi (lem-projsubmfdblk)."""
    r = np.random.default_rng(7)
    x = stiefel.random_point(9, 6, r)
    idx = np.array([1, 4])
    rest = _rest(6, idx)
    g = r.standard_normal((9, 2))
    big_xi = g - x[:, rest] @ (x[:, rest].T @ g)
    np.testing.assert_allclose(
        stiefel.project_submanifold_block(x, idx, big_xi), stiefel.polar(big_xi), rtol=0, atol=1e-14
    )


# --------------------------------------------------------------------------------------
# polar factor and retraction
# --------------------------------------------------------------------------------------


def _with_singular_values(n, k, s, seed):
    r = np.random.default_rng(seed)
    u = stiefel.random_point(n, k, r)
    v = stiefel.random_point(k, k, r)
    return u, v, (u * s) @ v.T


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("cond", [1.0, 3.1, 1e4, 1e8])
def test_polar_is_accurate_for_any_conditioning(seed, cond):
    n, k = 30, 6
    s = np.logspace(0, -math.log10(cond), k)
    u, v, xi = _with_singular_values(n, k, s, seed)
    q = stiefel.polar(xi)
    assert stiefel.feasibility(q) <= 1e-14
    # equals the SVD polar factor U V^T; perturbation theory bounds the error by about
    # eps * cond(Xi) (the factor's condition number is 1 / sigma_min for ||Xi|| = 1).
    tol = 2e-15 * max(cond, 10.0)
    np.testing.assert_allclose(q, u @ v.T, rtol=0, atol=tol)
    uu, _, vvt = np.linalg.svd(xi, full_matrices=False)
    np.testing.assert_allclose(q, uu @ vvt, rtol=0, atol=tol)


def test_polar_of_a_point_is_the_point():
    x = _point(12, 5, 8)
    np.testing.assert_allclose(stiefel.polar(x), x, rtol=0, atol=1e-15)


@pytest.mark.parametrize("seed", range(3))
def test_retraction_is_second_order(seed):
    """||Retr_X(t u) - (X + t u)|| = (t^2 / 2) ||X u^T u|| + O(t^3) for tangent u."""
    r = np.random.default_rng(200 + seed)
    x = stiefel.random_point(10, 4, r)
    u = stiefel.tangent_projection(x, r.standard_normal((10, 4)))
    u /= np.linalg.norm(u)
    np.testing.assert_array_equal(stiefel.retract(x, np.zeros_like(x)), stiefel.polar(x))
    ts = np.array([1e-1, 1e-2, 1e-3])
    errs = np.array([np.linalg.norm(stiefel.retract(x, t * u) - (x + t * u)) for t in ts])
    slopes = np.diff(np.log(errs)) / np.diff(np.log(ts))
    assert np.all(np.abs(slopes - 2.0) < 0.05), slopes
    c = 0.5 * np.linalg.norm(x @ (u.T @ u))
    assert errs[-1] / ts[-1] ** 2 == pytest.approx(c, rel=1e-2)
    for t in ts:
        assert stiefel.feasibility(stiefel.retract(x, t * u)) <= 1e-14


# --------------------------------------------------------------------------------------
# random points
# --------------------------------------------------------------------------------------


@HYP
@given(n=st.integers(1, 12), data=st.data(), seed=st.integers(0, 2**31))
def test_random_point_is_on_the_manifold(n, data, seed):
    p = data.draw(st.integers(1, n))
    x = stiefel.random_point(n, p, np.random.default_rng(seed))
    assert x.shape == (n, p)
    assert stiefel.feasibility(x) <= 1e-14


def test_random_point_is_haar_like():
    """Moments of the Haar measure on St(4, 2): E X = 0, E X_ij^2 = 1/n, E (x_1^T e_1)^4 =
    3 / (n (n + 2)). With 4000 draws the standard errors are <= 0.008, 0.004, 0.003."""
    r = np.random.default_rng(9)
    n, p, draws = 4, 2, 4000
    xs = np.stack([stiefel.random_point(n, p, r) for _ in range(draws)])
    assert np.max(np.abs(xs.mean(axis=0))) < 0.04
    np.testing.assert_allclose((xs**2).mean(axis=0), 1.0 / n, atol=0.02)
    assert (xs[:, 0, 0] ** 4).mean() == pytest.approx(3.0 / (n * (n + 2)), abs=0.015)
    # invariance under a fixed rotation: Q X has the same moments (here: the sign of
    # x_11 is a fair coin, which a QR without sign fix would not give)
    assert abs(np.mean(np.sign(xs[:, 0, 0]))) < 0.06


def test_random_point_is_reproducible_and_needs_a_generator():
    a = stiefel.random_point(6, 3, np.random.default_rng(5))
    b = stiefel.random_point(6, 3, np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)
    with pytest.raises(TypeError, match="rng"):
        stiefel.random_point(6, 3, 5)
    with pytest.raises(ValueError, match="p <= n"):
        stiefel.random_point(3, 4, np.random.default_rng(0))


# --------------------------------------------------------------------------------------
# The averaging operator A_X (eq-scalingoperator), lem-selfadjoint, lem-commutative
# --------------------------------------------------------------------------------------


def _pairs(part: Partition):
    return list(itertools.combinations(range(part.n_blocks), 2))


def _lift(piece: np.ndarray, idx: np.ndarray, p: int) -> np.ndarray:
    """piece I_C^T: an n x |C| matrix placed in the columns C of an n x p zero matrix."""
    out = np.zeros((piece.shape[0], p))
    out[:, idx] = piece
    return out


def _averaging(x: np.ndarray, part: Partition, xi: np.ndarray) -> np.ndarray:
    """A_X(xi) = binom(l,2)^-1 sum_{i<j} (I - X_-ij X_-ij^T) xi_ij I_ij^T, from the definition."""
    n, p = x.shape
    out = np.zeros((n, p))
    for i, j in _pairs(part):
        idx = part.columns(i, j).index
        rest = _rest(p, idx)
        proj = np.eye(n) - x[:, rest] @ x[:, rest].T
        out += _lift(proj @ xi[:, idx], idx, p)
    return out / len(_pairs(part))


def _averaging_matrix(x: np.ndarray, part: Partition) -> np.ndarray:
    """A_X as an explicit (np x np) matrix acting on vec(xi) (row-major)."""
    n, p = x.shape
    cols = []
    for k in range(n * p):
        e = np.zeros(n * p)
        e[k] = 1.0
        cols.append(_averaging(x, part, e.reshape(n, p)).ravel())
    return np.array(cols).T


# (seed, n, p, l): unequal and non-contiguous blocks for every l in 2..5
AVG_CASES = [
    (s, n, p, ell)
    for ell in (2, 3, 4, 5)
    for s, (n, p) in enumerate([(7, 5), (8, 7), (9, 6)])
    if ell <= p
]


@pytest.mark.parametrize("seed,n,p,ell", AVG_CASES)
def test_averaging_operator_spectrum(seed, n, p, ell):
    """lem-selfadjoint: A_X is self-adjoint with eigenvalues 2/l, multiplicity
    (n-p)p + sum p_i^2, and 1/binom(l,2), multiplicity p^2 - sum p_i^2."""
    r = np.random.default_rng(1000 + seed)
    x = stiefel.random_point(n, p, r)
    part = _random_partition(p, ell, r)
    a = _averaging_matrix(x, part)
    assert np.max(np.abs(a - a.T)) <= 1e-14
    w = np.linalg.eigvalsh(0.5 * (a + a.T))
    hi, lo = 2.0 / ell, 1.0 / math.comb(ell, 2)
    sq = int(np.sum(part.sizes**2))
    mult_hi, mult_lo = (n - p) * p + sq, p * p - sq
    if ell == 2:  # both eigenvalues are 1
        np.testing.assert_allclose(w, 1.0, rtol=0, atol=1e-13)
        return
    assert np.sum(np.abs(w - hi) <= 1e-12) == mult_hi
    assert np.sum(np.abs(w - lo) <= 1e-12) == mult_lo
    assert mult_hi + mult_lo == n * p


@pytest.mark.parametrize("seed,n,p,ell", AVG_CASES)
def test_averaging_operator_coordinate_form(seed, n, p, ell):
    """eq-scaling-coordrep: A_X(xi) = X (binom(l,2)^-1 Q [.] X^T xi) + (2/l)(I - X X^T) xi
    with Q = J + (l - 2) I applied blockwise."""
    r = np.random.default_rng(2000 + seed)
    x = stiefel.random_point(n, p, r)
    part = _random_partition(p, ell, r)
    xi = r.standard_normal((n, p))
    label = np.empty(p, dtype=int)
    for b, blk in enumerate(part.blocks):
        label[blk] = b
    q = 1.0 + (ell - 2.0) * (label[:, None] == label[None, :])
    want = x @ ((q * (x.T @ xi)) / math.comb(ell, 2)) + (2.0 / ell) * (xi - x @ (x.T @ xi))
    np.testing.assert_allclose(_averaging(x, part, xi), want, rtol=0, atol=1e-13)


@pytest.mark.parametrize("seed,n,p,ell", AVG_CASES)
def test_average_of_lifted_partial_riemannian_subgradients(seed, n, p, ell):
    """lem-commutative, eq-commutative: binom(l,2)^-1 sum_ij P_ij(xi_ij) I_ij^T
    = A_X(P_T(xi)) = P_T(A_X(xi)), with P_ij = stiefel.block_tangent_projection."""
    r = np.random.default_rng(3000 + seed)
    x = stiefel.random_point(n, p, r)
    part = _random_partition(p, ell, r)
    xi = r.standard_normal((n, p))
    avg = np.zeros((n, p))
    for i, j in _pairs(part):
        cs = part.columns(i, j)
        avg += _lift(stiefel.block_tangent_projection(x, cs.selector, xi[:, cs.index]), cs.index, p)
    avg /= math.comb(ell, 2)
    a_pt = _averaging(x, part, stiefel.tangent_projection(x, xi))
    pt_a = stiefel.tangent_projection(x, _averaging(x, part, xi))
    np.testing.assert_allclose(avg, a_pt, rtol=0, atol=1e-13)
    np.testing.assert_allclose(pt_a, a_pt, rtol=0, atol=1e-13)


@pytest.mark.parametrize("seed,n,p,ell", AVG_CASES)
def test_averaging_commutes_with_each_lifted_block_projection(seed, n, p, ell):
    """eq-commutative1: P_ij(A_X(xi) I_ij) I_ij^T = A_X(P_ij(xi_ij) I_ij^T) for every pair."""
    r = np.random.default_rng(4000 + seed)
    x = stiefel.random_point(n, p, r)
    part = _random_partition(p, ell, r)
    xi = r.standard_normal((n, p))
    a_xi = _averaging(x, part, xi)
    for i, j in _pairs(part):
        cs = part.columns(i, j)
        idx = cs.index
        left = _lift(stiefel.block_tangent_projection(x, cs.selector, a_xi[:, idx]), idx, p)
        right = _averaging(
            x, part, _lift(stiefel.block_tangent_projection(x, cs.selector, xi[:, idx]), idx, p)
        )
        np.testing.assert_allclose(left, right, rtol=0, atol=1e-13)


@pytest.mark.parametrize("seed,n,p,ell", [c for c in AVG_CASES if c[3] >= 3])
def test_partial_subgradients_are_unbiased_in_the_averaging_metric(seed, n, p, ell):
    """lem-cindep with the explicit matrix of A_X: for uniform {i,j} and R_ij the lifted
    partial Riemannian subgradient, E <R_ij, eta>_{A^-1} = <P_T(G), eta> and
    E ||R_ij||^2_{A^-1} = ||P_T(G)||^2 (eq-cindepInnerProduct, eq-cindepNorm2)."""
    r = np.random.default_rng(5000 + seed)
    x = stiefel.random_point(n, p, r)
    part = _random_partition(p, ell, r)
    g, eta = r.standard_normal((n, p)), r.standard_normal((n, p))
    a_inv = np.linalg.inv(_averaging_matrix(x, part))
    inner, norm2 = 0.0, 0.0
    for i, j in _pairs(part):
        cs = part.columns(i, j)
        rij = _lift(stiefel.block_tangent_projection(x, cs.selector, g[:, cs.index]), cs.index, p)
        w = (a_inv @ rij.ravel()).reshape(n, p)
        inner += np.sum(w * eta)
        norm2 += np.sum(w * rij)
    inner /= math.comb(ell, 2)
    norm2 /= math.comb(ell, 2)
    rg = stiefel.tangent_projection(x, g)
    assert inner == pytest.approx(np.sum(rg * eta), rel=1e-11)
    assert norm2 == pytest.approx(np.sum(rg * rg), rel=1e-11)


def test_polar_is_orthonormal_at_every_scale_and_refuses_what_has_no_polar_factor():
    """Input of small scale (largest entry 1e-8.5 to 1e-2) lost its Gram diagonal in
    (g - 1) + 1 and came back off the manifold (feasibility 0.1 at 1e-8, also through
    project_submanifold_block); the zero matrix, n < k and NaN gave silent or raw
    answers; lists and integers failed."""
    a = np.random.default_rng(3).standard_normal((20, 5))
    ref = stiefel.polar(a)
    for c in (1e-1, 1e-3, 1e-5, 1e-7, 1e-8, 1e-9, 1e-12, 1e-20, 1e20):
        q = stiefel.polar(c * a)
        assert stiefel.feasibility(q) < 1e-14, c
        np.testing.assert_allclose(q, ref, atol=1e-13)
    x = stiefel.random_point(30, 6, np.random.default_rng(0))
    small = 1e-8 * np.random.default_rng(1).standard_normal((30, 2))
    assert stiefel.feasibility(stiefel.project_submanifold_block(x, np.array([1, 2]),
                                                                 small)) < 1e-14
    np.testing.assert_array_equal(stiefel.polar([[2, 0], [0, 3], [0, 0]]), np.eye(3, 2))
    for bad, match in ((np.zeros((5, 2)), "zero matrix"), (np.ones((2, 4)), "n >= k"),
                       (np.full((3, 2), np.nan), "NaN or infinite")):
        with pytest.raises(ValueError, match=match):
            stiefel.polar(bad)
    with pytest.raises(ValueError, match=r"has 1 NaN or infinite entries"):
        stiefel.check_point(np.array([[np.inf, 0.0], [0.0, 1.0]]))


@pytest.mark.parametrize("eps", [0.0, 1e-13, 1e-9])
def test_the_block_projection_stays_orthogonal_to_the_untouched_columns(eps):
    """`project_submanifold_block` (Lemma lem-projsubmfdblk, documented for users who build
    their own block method) called polar without the re-projection rounds of the solver's
    kernel: with (I - X_{-C} X_{-C}^T) Xi (nearly) rank deficient its result leaked into
    span(X_{-C}) by 0.99 (eps = 0), 1.4e-3 (1e-13), 5.6e-8 (1e-9), an audit measured."""
    rng = np.random.default_rng(0)
    x = stiefel.random_point(6, 4, rng)
    cols = np.array([0, 1])
    xi = np.column_stack([x[:, 0], x[:, 2] + eps * rng.standard_normal(6)])
    q = stiefel.project_submanifold_block(x, cols, xi)
    y = x.copy()
    y[:, cols] = q
    assert stiefel.feasibility(y) < 1e-14
    assert np.abs(np.delete(x, cols, axis=1).T @ q).max() < 1e-15


def test_the_step_kernels_compute_integer_and_low_precision_input_in_float64():
    """An integer point (np.eye(n, dtype=int)[:, :p]) was truncated by an in-place write:
    block_tangent_projection returned [[0, 1], [0, 0], [5, 7]] (not tangent) for
    [[0, 0.5], [-0.5, 0], [5, 7]], full_step raised NumPy's cast error, float16 LAPACK's."""
    x = np.eye(3, dtype=int)[:, :2]
    g = np.array([[0, 1], [0, 0], [5, 7]])
    p = stiefel.block_tangent_projection(x, [0, 1], g)
    np.testing.assert_array_equal(p, [[0.0, 0.5], [-0.5, 0.0], [5.0, 7.0]])
    assert p.dtype == np.float64
    xf, gf = x.astype(float), g.astype(float)
    for dt in (int, np.float32, np.float16):
        xx, gg = x.astype(dt), g.astype(dt)
        for got, want in ((stiefel.full_step(xx, gg, 0.1), stiefel.full_step(xf, gf, 0.1)),
                          (stiefel.submanifold_step(xx, [0, 1], gg, 0.1),
                           stiefel.submanifold_step(xf, [0, 1], gf, 0.1)),
                          (stiefel.tangent_projection(xx, gg),
                           stiefel.tangent_projection(xf, gf))):
            assert got.dtype == np.float64
            np.testing.assert_array_equal(got, want)   # exact inputs: the same bits
    with pytest.raises(TypeError, match="real numbers"):
        stiefel.tangent_projection(x.astype(complex), g)


def test_public_steps_name_a_wrong_shape_or_step():
    """An audit: retract and tangent_projection broadcast an xi of shape (6, 1) or (3,)
    beside an x of (6, 3) into a (6, 3) result without a word; full_step with gamma NaN
    and submanifold_step with a NaN G said only "SVD did not converge"."""
    rng = np.random.default_rng(0)
    x = stiefel.random_point(6, 3, rng)
    for f in (stiefel.retract, stiefel.tangent_projection):
        with pytest.raises(ValueError, match=r"xi must have shape \(6, 3\) beside x of "
                                             r"shape \(6, 3\), got \(6, 1\)"):
            f(x, np.ones((6, 1)))
        with pytest.raises(ValueError, match=r"xi must be 2-D"):
            f(x, np.ones(3))
    with pytest.raises(ValueError, match=r"gamma must be finite, got nan"):
        stiefel.full_step(x, np.ones((6, 3)), np.nan)
    # a 0-d array is its number (a review of the first version refused it)
    np.testing.assert_array_equal(stiefel.full_step(x, np.ones((6, 3)), np.array(0.1)),
                                  stiefel.full_step(x, np.ones((6, 3)), 0.1))
    with pytest.raises(TypeError, match=r"gamma must be a real number, got bool"):
        stiefel.submanifold_step(x, [0, 1], np.ones((6, 2)), True)
    with pytest.raises(ValueError, match=r"g contains 12 NaN or infinite entries"):
        stiefel.submanifold_step(x, [0, 1], np.full((6, 2), np.nan), 0.1)
    with pytest.raises(ValueError, match=r"g must have shape \(6, 2\) \(n x the columns "
                                         r"C\)"):
        stiefel.submanifold_step(x, [0, 1], np.ones((6, 3)), 0.1)
    with pytest.raises(ValueError, match=r"xi_c must have shape \(6, 1\)"):
        stiefel.block_tangent_projection(x, [2], np.ones((6, 2)))
    with pytest.raises(ValueError, match=r"big_xi must have shape \(6, 2\)"):
        stiefel.project_submanifold_block(x, slice(0, 2), np.ones((6, 3)))


def test_huge_steps_and_entries_raise_no_overflow_warning():
    """An audit: feasibility of an X with an entry of 1e200 (inf, right) and steps of
    gamma 1e300 (feasible results) warned "overflow encountered in matmul"."""
    import warnings

    rng = np.random.default_rng(0)
    x = stiefel.random_point(6, 3, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert stiefel.feasibility(np.array([[1e200], [0.0]])) == np.inf
        assert stiefel.feasibility(stiefel.full_step(x, rng.standard_normal((6, 3)),
                                                     1e300)) < 1e-14
        assert stiefel.feasibility(stiefel.submanifold_step(
            x, [0, 1], rng.standard_normal((6, 2)), 1e300)) < 1e-14


# -- behaviour a mutation audit found unpinned (each assertion failed on a mutant) ------------
def test_retractions_and_polar_factors_are_feasible_to_a_few_eps():
    # the Newton-Schulz route of moderate steps, and the Gram route of a polar factor
    # whose Gram eigenvalues differ by a factor 0.0225: both at the eps level (a looser
    # Newton-Schulz stop, 1e-7, or a Gram route kept down to a ratio 0.01, gave 4e-15 to
    # 6e-15)
    rng = np.random.default_rng(0)
    worst = 0.0
    for t in np.linspace(0.005, 0.3, 400):
        x = stiefel.random_point(30, 4, rng)
        xi = stiefel._tangent_projection(x, rng.standard_normal((30, 4)))
        xi *= t / np.linalg.norm(xi)
        worst = max(worst, stiefel.feasibility(stiefel.retract(x, xi)))
    assert worst < 2e-15
    worst = 0.0
    for _ in range(200):
        u = np.linalg.qr(rng.standard_normal((50, 2)))[0]
        v = np.linalg.qr(rng.standard_normal((2, 2)))[0]
        worst = max(worst, stiefel.feasibility(stiefel.polar(u @ np.diag([1.0, 0.15]) @ v.T)))
    assert worst < 3e-15
