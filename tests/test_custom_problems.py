"""Bring-your-own objectives: Problem.from_functions / from_torch / from_jax,
CompositeProblem, and the check_subgradient diagnostic."""

from __future__ import annotations

import re
import sys
import warnings

import numpy as np
import pytest

import rssm
from rssm import stiefel
from rssm.diagnostics import check_subgradient
from rssm.problem import FullSubgradientWarning, FunctionProblem
from rssm.problems import DPCP, ODL, CompositeProblem, EntrywiseLoss, NormLoss
from rssm.stepsizes import Geometric
from rssm.stopping import StopReason


def _procrustes_data(seed: int = 0, m: int = 300, n: int = 20, p: int = 5):
    """A, B = A X* + 10% gross errors, X*: an l1 Procrustes instance with known solution."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, n))
    xs = stiefel.random_point(n, p, rng)
    b = a @ xs + 10.0 * rng.standard_normal((m, p)) * (rng.random((m, p)) < 0.1)
    return a, b, xs


def _functions(a, b):
    def cost(x):
        return np.abs(a @ x - b).sum()

    def subgradient(x):
        return a.T @ np.sign(a @ x - b)

    def partial(x, cols):
        return a.T @ np.sign(a @ x[:, cols] - b[:, cols])

    return cost, subgradient, partial


# -- from_functions ---------------------------------------------------------------------
def test_from_functions_converges_to_planted_solution():
    a, b, xs = _procrustes_data()
    cost, sub, part = _functions(a, b)
    prob = rssm.Problem.from_functions(cost, sub, part, shape=(20, 5),
                                       stepsize=Geometric(3e-3, 0.95),
                                       error=lambda x: np.linalg.norm(x - xs))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FullSubgradientWarning)  # a partial oracle: no warning
        res = rssm.minimize(
            prob, method="rssm", max_iter=1000, seed=1, options={"n_blocks": 5}
        )
    assert res.error < 1e-7
    assert res.fun == pytest.approx(np.abs(a @ xs - b).sum(), rel=1e-9)
    assert res.selection == "uniform"


def test_from_functions_without_partial_warns_once_and_matches_partial_run():
    a, b, _ = _procrustes_data(seed=2)
    cost, sub, part = _functions(a, b)
    step = Geometric(3e-3, 0.95)
    slow = rssm.Problem.from_functions(cost, sub, shape=(20, 5), stepsize=step)
    fast = rssm.Problem.from_functions(cost, sub, part, shape=(20, 5), stepsize=step)
    with pytest.warns(FullSubgradientWarning, match="full subgradient"):
        r1 = rssm.minimize(
            slow, method="rssm", max_iter=50, seed=3, options={"n_blocks": 5}
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error", FullSubgradientWarning)  # second run: silent
        rssm.minimize(
            slow, method="rssm", max_iter=5, seed=3, options={"n_blocks": 5}
        )
        rssm.minimize(slow, method="rsm", max_iter=5, seed=3)  # RSM needs no partial oracle
    r2 = rssm.minimize(
        fast, method="rssm", max_iter=50, seed=3, options={"n_blocks": 5}
    )
    # Slicing a full subgradient and the partial callable give the same columns.
    np.testing.assert_allclose(r1.x, r2.x, rtol=0, atol=1e-12)


def test_from_functions_runs_auto_unless_given_a_stepsize():
    a, b, _ = _procrustes_data()
    cost, sub, part = _functions(a, b)
    prob = rssm.Problem.from_functions(cost, sub, part, shape=(20, 5))
    res = rssm.minimize(prob, max_iter=5, seed=0)
    assert res.n_iter == 5 and res.stepsize["rule"] == "Auto"
    res = rssm.minimize(prob, stepsize=1e-4, max_iter=5, seed=0)
    assert res.n_iter == 5 and res.stepsize == {"rule": "Constant", "c": 1e-4}


def test_from_functions_validates_inputs_and_outputs():
    a, b, _ = _procrustes_data()
    cost, sub, part = _functions(a, b)
    with pytest.raises(TypeError, match="cost must be callable"):
        rssm.Problem.from_functions(1.0, sub, shape=(20, 5))
    with pytest.raises(TypeError, match="partial_subgradient must be callable"):
        rssm.Problem.from_functions(cost, sub, "no", shape=(20, 5))
    with pytest.raises(TypeError, match="shape must be a pair"):
        rssm.Problem.from_functions(cost, sub, shape=20)
    with pytest.raises(ValueError, match=r"shape\[1\] \(p\) must be <= 20"):
        rssm.Problem.from_functions(cost, sub, shape=(20, 21))
    bad = rssm.Problem.from_functions(cost, lambda x: sub(x)[:, :2], shape=(20, 5))
    x = stiefel.random_point(20, 5, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"subgradient returned an array of shape \(20, 2\)"):
        bad.subgradient(x)
    badc = rssm.Problem.from_functions(lambda x: np.ones(3), sub, shape=(20, 5))
    with pytest.raises(TypeError, match="cost must return a real number"):
        badc.cost(x)
    assert isinstance(bad, FunctionProblem) and not bad.has_error
    with pytest.raises(ValueError, match="no ground truth"):
        bad.error(x)
    # a flag or a complex number is not f(X); a complex subgradient is not one of a real f
    # (before: True was taken as 1.0, the complex parts were dropped with a warning per call)
    for out, kind in ((True, "bool"), (np.bool_(False), "bool"), (1 + 0j, "complex"),
                      (np.array(2.0 + 0j), "ndarray")):
        odd = rssm.Problem.from_functions(lambda x, out=out: out, sub, shape=(20, 5))
        with pytest.raises(TypeError, match=f"cost must return a real number, got {kind}"):
            odd.cost(x)
    cplx = rssm.Problem.from_functions(cost, lambda x: sub(x) * (1 + 1j), shape=(20, 5))
    with pytest.raises(TypeError, match="subgradient must return real numbers, got an array "
                                        "of dtype complex128"):
        cplx.subgradient(x)
    listed = rssm.Problem.from_functions(cost, lambda x: sub(x).tolist(), shape=(20, 5))
    assert listed.subgradient(x).dtype == np.float64       # lists of reals still serve
    # a mask returned by mistake ran to "converged" before (bool was taken as 0/1)
    mask = rssm.Problem.from_functions(cost, lambda x: sub(x) > 0, shape=(20, 5))
    with pytest.raises(TypeError, match=r"got an array of dtype bool \(a mask, not a "
                                        r"subgradient"):
        rssm.minimize(mask, seed=0)
    # a forgotten return, a sparse matrix: named, not "an array of dtype object" (an audit)
    none = rssm.Problem.from_functions(cost, lambda x: None, shape=(20, 5))
    with pytest.raises(TypeError, match=r"subgradient returned None, not an array \(a "
                                        r"missing return\?\)"):
        rssm.minimize(none, seed=0)
    import scipy.sparse as sp
    sparse = rssm.Problem.from_functions(cost, lambda x: sp.csr_matrix(sub(x)), shape=(20, 5))
    with pytest.raises(TypeError, match=r"subgradient returned a sparse matrix \(csr_matrix\)"
                                        r"; return a dense NumPy array"):
        sparse.subgradient(x)


@pytest.mark.parametrize("method", ["rsm", "rssm"])
@pytest.mark.parametrize("where", ["cost", "subgradient", "partial_subgradient"])
def test_a_function_that_changes_x_in_place_cannot_move_the_iterate(method, where):
    """A cost with ``X -= X.mean(0)`` inside changed the solver's iterate: the run ended
    max_iter with feasibility 0.19 (RSSM) and no word. Each function now gets its own copy
    of X: one that scribbles on it after use gives the run of the clean functions, bit for
    bit, and a finite-difference subgradient that perturbs X and puts it back runs."""
    a, b, _ = _procrustes_data()
    cost, sub, part = _functions(a, b)

    def spoil(fn):
        def inner(x, *args):
            out = fn(x, *args)
            x *= 2.0                       # the user's slip, after using X
            return out
        return inner

    fns = {"cost": cost, "subgradient": sub, "partial_subgradient": part}
    clean = rssm.Problem.from_functions(cost, sub, part, shape=(20, 5))
    fns[where] = spoil(fns[where])
    spoilt = rssm.Problem.from_functions(fns["cost"], fns["subgradient"],
                                         fns["partial_subgradient"], shape=(20, 5))
    ref = rssm.minimize(clean, method=method, seed=0, max_iter=60)
    res = rssm.minimize(spoilt, method=method, seed=0, max_iter=60)
    assert res.feasibility < 1e-12
    assert res.n_iter == ref.n_iter and np.array_equal(res.x, ref.x)

    def fd_subgradient(x, h=1e-7):          # central differences, X restored in place
        g = np.empty_like(x)
        for i in range(x.shape[0]):
            for j in range(x.shape[1]):
                x[i, j] += h
                up = cost(x)
                x[i, j] -= 2 * h
                g[i, j] = (up - cost(x)) / (2 * h)
                x[i, j] += h
        return g

    fd = rssm.Problem.from_functions(cost, fd_subgradient, shape=(20, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FullSubgradientWarning)
        out = rssm.minimize(fd, method=method, seed=0, max_iter=20)
    assert out.feasibility < 1e-12 and out.fun <= cost(fd.initial_point(0))


# -- composite objectives ---------------------------------------------------------------
def test_composite_reproduces_dpcp_and_odl():
    dp = DPCP.synthetic(n=12, d=3, n_inliers=60, n_outliers=40, seed=4)
    cdp = CompositeProblem(dp.yt, dp.p, NormLoss.norm(), sample_weights=np.full(dp.m, 1.0 / dp.m))
    od = ODL.synthetic(n=8, seed=5)
    cod = CompositeProblem(od.y, od.p, EntrywiseLoss.l1())
    for ref, comp in ((dp, cdp), (od, cod)):
        x0 = stiefel.random_point(*ref.shape, np.random.default_rng(6))
        assert comp.cost(x0) == pytest.approx(ref.cost(x0), rel=1e-13)
        np.testing.assert_allclose(comp.subgradient(x0), ref.subgradient(x0), rtol=0, atol=1e-12)
        step = Geometric(1e-2, 0.95)
        for kw in (dict(n_blocks=3), dict(method="rsm")):
            r_ref = rssm.minimize(ref, x0, stepsize=step, max_iter=60, seed=7, **kw)
            r_comp = rssm.minimize(comp, x0, stepsize=step, max_iter=60, seed=7, **kw)
            np.testing.assert_allclose(r_comp.x, r_ref.x, rtol=0, atol=1e-10)
            assert r_comp.fun == pytest.approx(r_ref.fun, rel=1e-10)
            assert np.linalg.norm(r_comp.x - x0) > 1e-2  # the runs moved


@pytest.mark.parametrize(
    "loss",
    [EntrywiseLoss.l1(), EntrywiseLoss.huber(0.3), NormLoss.norm(), NormLoss.huber(0.5)],
    ids=lambda l: l.name,
)
@pytest.mark.parametrize("with_offset", [False, True])
def test_composite_oracles_agree(loss, with_offset):
    rng = np.random.default_rng(8)
    y = rng.standard_normal((9, 70))
    off = rng.standard_normal((70, 4)) if with_offset else None
    prob = CompositeProblem(y, 4, loss, offset=off, sample_weights=rng.random(70), l1_penalty=0.1)
    report = check_subgradient(prob, rng=np.random.default_rng(9))
    assert report.ok, str(report)


def test_composite_incremental_oracle_stays_exact_over_a_run():
    """The cache after 400 RSSM steps equals a from-scratch evaluation (no drift)."""
    rng = np.random.default_rng(10)
    prob = CompositeProblem(rng.standard_normal((15, 200)), 10, NormLoss.huber(0.2),
                            offset=rng.standard_normal((200, 10)), stepsize=Geometric(5e-3, 0.99))
    res = rssm.minimize(
        prob, method="rssm", max_iter=400, seed=11, record=400, options={"n_blocks": 4}
    )
    # res.fun is the oracle's cached cost; prob.cost recomputes from scratch.
    assert res.fun == pytest.approx(prob.cost(res.x), rel=1e-12)
    assert res.fun < 0.9 * res.trace["cost"][0]


def test_composite_validation():
    y = np.ones((4, 6))
    with pytest.raises(TypeError, match="loss must be an EntrywiseLoss or a NormLoss"):
        CompositeProblem(y, 2, "l1")
    with pytest.raises(ValueError, match=r"offset has shape \(6, 3\)"):
        CompositeProblem(y, 2, EntrywiseLoss.l1(), offset=np.zeros((6, 3)))
    # the message says what is wrong with the weights (before: always their shape)
    for w, what in ((-np.ones(6), r"got 6 negative \(the least -1\)"),
                    (np.r_[np.nan, np.ones(5)], "got 1 NaN or infinite"),
                    (np.ones(5), r"got shape \(5,\)")):
        with pytest.raises(ValueError, match="sample_weights must be 6 finite non-negative "
                                             r"numbers \(one per column of y\), " + what):
            CompositeProblem(y, 2, EntrywiseLoss.l1(), sample_weights=w)
    with pytest.raises(ValueError, match="l1_penalty must be >= 0"):
        CompositeProblem(y, 2, EntrywiseLoss.l1(), l1_penalty=-1.0)
    with pytest.raises(ValueError, match="delta must be > 0"):
        EntrywiseLoss.huber(0.0)


def test_composite_flop_model_is_proportional_to_columns():
    rng = np.random.default_rng(12)
    prob = CompositeProblem(rng.standard_normal((30, 100)), 12, EntrywiseLoss.l1())
    x = stiefel.random_point(30, 12, rng)
    oracle = prob.make_oracle(x.copy(), rssm.Partition.uniform(12, 4))
    # 2 m n c for the GEMM plus m c for the weights: linear in c, and p columns = full.
    assert oracle.flops_partial(3) == pytest.approx(2 * 100 * 30 * 3 + 100 * 3)
    assert oracle.flops_partial(12) == pytest.approx(oracle.flops_subgradient())
    assert oracle.flops_update(3) == pytest.approx(2 * 100 * 30 * 3)


# -- check_subgradient --------------------------------------------------------------------
def test_check_subgradient_on_st_1_1_checks_what_there_is():
    # St(1, 1) = {-1, 1} has no tangent directions (an audit: "xi contains 1 NaN or
    # infinite entries", from a division by the zero norm of a tangent vector)
    good = rssm.Problem.from_functions(lambda x: float(abs(x[0, 0] - 0.3)),
                                       lambda x: np.sign(x - 0.3), shape=(1, 1))
    report = check_subgradient(good, rng=np.random.default_rng(0))
    assert report.ok and "no tangent directions" in str(report)
    assert report.items[0].max_error == 0.0
    bad = rssm.Problem.from_functions(lambda x: float(abs(x[0, 0] - 0.3)),
                                      lambda x: np.sign(x - 0.3),
                                      partial_subgradient=lambda x, c: -np.sign(x[:, c] - 0.3),
                                      shape=(1, 1))
    assert not check_subgradient(bad, rng=np.random.default_rng(0)).ok


def test_check_subgradient_names_the_wrong_oracle():
    a, b, _ = _procrustes_data()
    cost, sub, part = _functions(a, b)
    good = rssm.Problem.from_functions(cost, sub, part, shape=(20, 5))
    rep = check_subgradient(good, rng=0)
    assert rep.ok, str(rep)
    assert rep["subgradient vs finite differences of cost"].max_error < 1e-7

    wrong_scale = rssm.Problem.from_functions(cost, lambda x: 0.5 * sub(x), shape=(20, 5))
    rep = check_subgradient(wrong_scale, rng=0)
    assert [f.name for f in rep.failures] == [
        "subgradient vs finite differences of cost",
        "subgradient vs finite differences of cost, at a second point"]
    assert "DISAGREES" in str(rep) and "problem.subgradient(X) is not a derivative" in str(rep)

    wrong_partial = rssm.Problem.from_functions(
        cost, sub, lambda x, c: part(x, c)[:, ::-1], shape=(20, 5))
    rep = check_subgradient(wrong_partial, rng=0)
    names = {f.name for f in rep.failures}
    assert "partial_subgradient vs columns of subgradient" in names
    assert "subgradient vs finite differences of cost" not in names


def test_check_subgradient_catches_a_stale_cache():
    class Stale(CompositeProblem):
        def make_oracle(self, x, partition):
            oracle = super().make_oracle(x, partition)
            oracle.update = lambda cols: None  # forgets to refresh Z^T
            return oracle

    rng = np.random.default_rng(13)
    prob = Stale(rng.standard_normal((8, 50)), 4, EntrywiseLoss.l1())
    rep = check_subgradient(prob, rng=1)
    assert {f.name for f in rep.failures} == {
        "oracle cost vs cost",
        "oracle subgradient vs subgradient",
        "oracle partial_subgradient vs columns of subgradient (after updates)",
        "oracle after RSSM steps on contiguous blocks vs a from-scratch oracle",
        "oracle partial_subgradient over RSSM steps with no full call between (as a run)",
    }
    assert "incremental update leaves stale" in str(rep)


def test_check_subgradient_catches_a_user_cache_that_a_full_call_refreshes():
    """A user's audit: a norm loss whose partial oracle keeps the squared row norms per
    column and recomputes only the columns asked (stale for the columns moved since), with
    the full subgradient written as the partial of every column (which refreshes the
    cache). Every check called the full subgradient before each partial one, so "all
    oracles agree", while in a run the partials were off by up to 6e-2."""
    rng = np.random.default_rng(0)
    n, p, m = 20, 6, 500
    y = rng.standard_normal((n, m))
    memo = {}

    def partial(x, cols):
        if "sq" not in memo:
            memo["sq"] = (y.T @ x) ** 2
        zc = y.T @ x[:, cols]
        memo["sq"][:, cols] = zc ** 2            # the columns outside cols may have moved
        return y @ (zc / np.sqrt(memo["sq"].sum(axis=1))[:, None])

    prob = rssm.Problem.from_functions(
        lambda x: float(np.linalg.norm(y.T @ x, axis=1).sum()),
        lambda x: partial(x, slice(None)), partial, shape=(n, p))
    rep = check_subgradient(prob, rng=0)
    assert [f.name for f in rep.failures] == [
        "oracle partial_subgradient over RSSM steps with no full call between (as a run)"]
    assert rep.failures[0].max_error > 1e-4
    # the same partial with a correct cache (all columns recomputed) passes every check
    memo.clear()

    def fresh(x, cols):
        z = y.T @ x
        return y @ (z / np.linalg.norm(z, axis=1)[:, None])[:, cols]

    good = rssm.Problem.from_functions(
        lambda x: float(np.linalg.norm(y.T @ x, axis=1).sum()),
        lambda x: fresh(x, slice(None)), fresh, shape=(n, p))
    assert check_subgradient(good, rng=0).ok


def test_check_subgradient_keeps_the_one_time_warning():
    a, b, _ = _procrustes_data()
    cost, sub, _ = _functions(a, b)
    prob = rssm.Problem.from_functions(cost, sub, shape=(20, 5), stepsize=1e-4)
    check_subgradient(prob, rng=0)
    with pytest.warns(FullSubgradientWarning):
        rssm.minimize(prob, method="rssm", max_iter=2, seed=0)


def test_check_subgradient_validates():
    with pytest.raises(TypeError, match="problem must be an rssm Problem"):
        check_subgradient("dpcp")
    prob = ODL.synthetic(n=4, seed=0)
    with pytest.raises(ValueError, match="n_directions must be >= 1"):
        check_subgradient(prob, rng=0, n_directions=0)


# -- autodiff bridges -------------------------------------------------------------------
def _numpy_reference():
    rng = np.random.default_rng(14)
    y = rng.standard_normal((10, 80))
    prob = CompositeProblem(y, 4, NormLoss.norm())
    x = stiefel.random_point(10, 4, rng)
    return y, prob, x


def test_from_torch_matches_numpy_and_shares_memory():
    torch = pytest.importorskip("torch")
    y, ref, x = _numpy_reference()
    yt = torch.from_numpy(y)
    prob = rssm.Problem.from_torch(lambda X: torch.linalg.norm(yt.T @ X, dim=1).sum(),
                                   shape=(10, 4), stepsize=Geometric(1e-2, 0.95))
    assert prob.cost(x) == pytest.approx(ref.cost(x), rel=1e-13)
    g = prob.subgradient(x)
    assert g.dtype == np.float64
    np.testing.assert_allclose(g, ref.subgradient(x), rtol=0, atol=1e-12)
    assert check_subgradient(prob, rng=0).ok
    # torch.from_numpy shares the iterate's buffer: no copy on the way in.
    seen = []
    p2 = rssm.Problem.from_torch(lambda X: (seen.append(X.data_ptr()), X.abs().sum())[1],
                                 shape=(10, 4))
    p2.subgradient(x)
    assert seen[-1] == x.ctypes.data
    with pytest.warns(FullSubgradientWarning):
        res = rssm.minimize(
            prob, method="rssm", max_iter=100, seed=0, options={"n_blocks": 2}
        )
    assert res.fun < res.trace["cost"][0]


def test_from_torch_gradients_are_whole_arrays_and_any_strides_are_taken():
    # autograd hands back X.sum()'s gradient broadcast (strides (0, 0)): Tensor.numpy()
    # made a writable array whose entries share one cell, and an in-place change wrote
    # them all; a start with negative strides (x[:, ::-1]) raised torch's error
    pytest.importorskip("torch")
    x = stiefel.random_point(4, 2, np.random.default_rng(0))
    prob = rssm.Problem.from_torch(lambda X: X.sum(), shape=(4, 2))
    g = prob.subgradient(x)
    assert 0 not in g.strides
    g += x
    np.testing.assert_array_equal(g, 1.0 + x)
    np.testing.assert_array_equal(prob.subgradient(x), np.ones((4, 2)))
    flipped = x[:, ::-1]
    ref = rssm.Problem.from_torch(lambda X: X.abs().sum(), shape=(4, 2))
    np.testing.assert_array_equal(ref.subgradient(flipped), np.sign(flipped))


def test_from_torch_runs_give_the_same_bits_whatever_torchs_own_thread_count():
    # (an audit: torch.set_num_threads(2) or MKL_NUM_THREADS=2 gave other bits, and 6 s
    # where one thread took 0.8 s: torch's intra-op pool was not held with the BLAS pools)
    torch = pytest.importorskip("torch")
    data = rssm.problems.DPCP.synthetic(n=20, d=3, n_inliers=40000, n_outliers=20000, seed=0)
    y = torch.from_numpy(data.yt)
    prob = rssm.Problem.from_torch(lambda X: torch.linalg.vector_norm(y.T @ X, dim=1).mean(),
                                   shape=data.shape)
    before = torch.get_num_threads()
    seen, xs = [], []
    try:
        for k in (2, 1):
            torch.set_num_threads(k)
            res = rssm.minimize(prob, method="rsm", seed=1, max_iter=40,
                                callback=lambda p: seen.append(torch.get_num_threads()))
            xs.append(res.x)
            assert torch.get_num_threads() == k          # given back as it was
    finally:
        torch.set_num_threads(before)
    assert set(seen) == {1}
    assert np.array_equal(xs[0], xs[1])


def test_from_torch_rejects_non_scalar_cost():
    torch = pytest.importorskip("torch")
    prob = rssm.Problem.from_torch(lambda X: torch.abs(X), shape=(3, 2))
    with pytest.raises(TypeError, match="must return a scalar torch.Tensor"):
        prob.cost(np.eye(3, 2))


def test_from_torch_errors_and_edges_a_user_meets():
    """A float32 cost says that X is float64 (before: torch's "expected m1 and m2 to have
    the same dtype"); a cost that reads a tensor with grad but not X has subgradient 0
    (before: torch's "appears to not have been used in the graph"); a cost that divides
    X in place when called without grad leaves the iterate alone (before: feasibility
    0.75 after 50 iterations)."""
    torch = pytest.importorskip("torch")
    a32 = torch.ones(40, 6)
    prob = rssm.Problem.from_torch(lambda X: (a32 @ X).abs().sum(), shape=(6, 2))
    with pytest.raises(TypeError, match=r"X, a torch\.float64 tensor .* A\.double\(\)"):
        rssm.minimize(prob, max_iter=3)
    w = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
    free = rssm.Problem.from_torch(lambda X: 2 * w.sum(), shape=(6, 2))
    np.testing.assert_array_equal(free.subgradient(np.eye(6, 2)), np.zeros((6, 2)))
    a64 = torch.from_numpy(np.random.default_rng(0).standard_normal((40, 6)))

    def halves(x):
        y = x.clone() if x.requires_grad else x
        y /= 2.0
        return (a64 @ y).abs().sum()

    res = rssm.minimize(rssm.Problem.from_torch(halves, shape=(6, 2)), max_iter=50, seed=0)
    assert res.feasibility < 1e-14


def test_from_jax_matches_numpy():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    y, ref, x = _numpy_reference()
    prob = rssm.Problem.from_jax(lambda X: jnp.linalg.norm(y.T @ X, axis=1).sum(), shape=(10, 4))
    assert prob.cost(x) == pytest.approx(ref.cost(x), rel=1e-13)
    g = prob.subgradient(x)
    assert g.dtype == np.float64
    np.testing.assert_allclose(g, ref.subgradient(x), rtol=0, atol=1e-12)
    assert check_subgradient(prob, rng=0).ok
    assert not jax.config.jax_enable_x64  # float64 only inside the bridge


def test_from_jax_reads_the_data_of_its_cost_and_gradient_at_the_same_time():
    """JAX reads the arrays a cost closes over when it traces it. The cost and the
    gradient were traced apart, each at its first call: data changed in between gave a
    cost of the old data and a gradient of the new (a user's audit: Y *= 2 after a first
    cost). Both are traced at the first evaluation of either, so they agree."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    y = np.random.default_rng(0).standard_normal((8, 60))
    ref = rssm.Problem.from_functions(lambda x: float(np.abs(y.T @ x).sum()),
                                      lambda x: y @ np.sign(y.T @ x), shape=(8, 3))
    x = ref.initial_point(1)

    def cost(X):
        return jnp.abs(y.T @ X).sum()

    for first in ("cost", "subgradient"):
        prob = rssm.Problem.from_jax(cost, shape=(8, 3))
        getattr(prob, first)(x)
        f, g = ref.cost(x), ref.subgradient(x)         # of the data at the first call
        y *= 2.0
        assert prob.cost(x) == pytest.approx(f, rel=1e-13)
        np.testing.assert_allclose(prob.subgradient(x), g, rtol=0, atol=1e-12)
        y /= 2.0
    # a new problem from the same function reads the data as they are then, cost and
    # gradient alike (JAX caches traces by function: a review found the second problem's
    # cost read the first one's data while its gradient read the new)
    first = rssm.Problem.from_jax(cost, shape=(8, 3))
    first.cost(x)
    y *= 2.0
    second = rssm.Problem.from_jax(cost, shape=(8, 3))
    assert second.cost(x) == pytest.approx(ref.cost(x), rel=1e-13)
    np.testing.assert_allclose(second.subgradient(x), ref.subgradient(x), rtol=0, atol=1e-12)
    y /= 2.0
    # a cost that is not a scalar or not real gets rssm's message from cost(), and a cost
    # JAX cannot differentiate still evaluates (the subgradient raises)
    for bad, words in ((lambda X: X, "must return a scalar, got shape (8, 3)"),
                       (lambda X: jnp.sum(X) * 1j, "must return a real scalar")):
        with pytest.raises(TypeError, match=re.escape(words)):
            rssm.Problem.from_jax(bad, shape=(8, 3)).cost(x)
    # a point of another shape is refused by name, and leaves the problem usable (the
    # first call's shape was compiled for good; a review)
    other = rssm.Problem.from_jax(cost, shape=(8, 3))
    with pytest.raises(ValueError, match=r"x has shape \(7, 3\), expected \(8, 3\)"):
        other.cost(x[:7])
    assert other.cost(x) == pytest.approx(ref.cost(x), rel=1e-13)
    with pytest.raises(ValueError, match=r"x has shape \(8, 2\), expected \(8, 3\)"):
        other.subgradient(x[:, :2])
    counts = rssm.Problem.from_jax(lambda X: jnp.sum(X > 0), shape=(8, 3))
    assert counts.cost(x) == float(np.sum(x > 0))
    with pytest.raises(TypeError):
        counts.subgradient(x)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="exception notes are Python 3.11+")
def test_an_error_inside_an_autodiff_cost_says_which_bridge_called_it():
    """A JAX cost given to from_torch raised "unsupported operand type(s) for @:
    'numpy.ndarray' and 'Tensor'", and NumPy inside a JAX cost JAX's tracer error, naming
    neither the bridge nor what X is there (a user's audit). The error is kept, with a
    note."""
    torch = pytest.importorskip("torch")
    jax = pytest.importorskip("jax")
    y = np.random.default_rng(0).standard_normal((6, 30))
    x = np.eye(6, 2)
    with pytest.raises(TypeError) as info:
        rssm.Problem.from_torch(lambda X: jax.numpy.abs(y.T @ X).sum(), shape=(6, 2)).cost(x)
    assert "(raised by the cost given to rssm.Problem.from_torch; X is a torch.float64 " \
           "tensor of shape (6, 2), as shape= gave)" in info.value.__notes__
    with pytest.raises(Exception) as info:
        rssm.Problem.from_jax(lambda X: float(np.abs(y.T @ np.asarray(X)).sum()),
                              shape=(6, 2)).subgradient(x)
    assert any("raised by the cost given to rssm.Problem.from_jax; X is a traced jax array"
               in note for note in info.value.__notes__)
    # one stored exception raised again and again carries the note once
    stored = ValueError("no")

    def raises(X):
        raise stored

    prob = rssm.Problem.from_torch(raises, shape=(6, 2))
    for _ in range(3):
        with pytest.raises(ValueError):
            prob.cost(x)
    assert len(stored.__notes__) == 1
    del torch


def test_autodiff_kink_conventions_documented():
    """The documented failure case: relu(t) - relu(-t) == t, but autodiff returns 0 at 0."""
    torch = pytest.importorskip("torch")
    prob = rssm.Problem.from_torch(
        lambda X: (torch.relu(X[0, 0]) - torch.relu(-X[0, 0])), shape=(2, 1))
    g = prob.subgradient(np.array([[0.0], [1.0]]))
    assert g[0, 0] == 0.0  # the Clarke subdifferential of t is {1}: not a Clarke subgradient


def test_a_float32_start_is_checked_at_its_precision_and_projected(small_dpcp):
    """An orthonormal matrix rounded to float32 is off St(n, p) by ~1e-7, above the
    float64 tolerance 1e-8 (before: always refused); it is accepted at float32's level and
    projected, so the run starts on the manifold. One that is really off is refused."""
    x0 = small_dpcp.initial_point(0)
    res = rssm.minimize(small_dpcp, x0.astype(np.float32), max_iter=3)
    assert res.feasibility < 1e-14
    np.testing.assert_allclose(res.trace["cost"][0], small_dpcp.cost(x0), rtol=1e-6)
    with pytest.raises(ValueError, match=r"exceeds the tolerance 1\.0e-05"):
        rssm.minimize(small_dpcp, (1.01 * x0).astype(np.float32), max_iter=3)
    with pytest.raises(ValueError, match=r"exceeds the tolerance 1\.0e-08"):
        rssm.minimize(small_dpcp, x0 + 1e-6, max_iter=3)


def test_a_start_off_the_manifold_within_the_check_is_projected():
    """A float64 start within the check's 1e-8 but off St(n, p) (a solution of DPCP scaled
    by 1 - 4e-9: off by 8e-9) was kept as is; DPCP's cost is homogeneous, so that start was
    below every feasible point and came back as the best point, off the manifold. It is
    projected now, as a float16 start (off by ~1e-3 after rounding: refused before) is;
    a start made by QR stays bit for bit."""
    prob = rssm.problems.DPCP.synthetic(n=6, d=2, n_inliers=30, n_outliers=20, seed=0)
    sol = rssm.minimize(prob, seed=0)
    for method in ("rsm", "rssm"):
        res = rssm.minimize(prob, sol.x * (1 - 4e-9), method=method, max_iter=50, seed=0)
        assert res.feasibility < 1e-14, (method, res.feasibility)
        assert res.fun == prob.cost(res.x)
    half = rssm.minimize(prob, sol.x.astype(np.float16), max_iter=0)
    assert half.feasibility < 1e-14
    np.testing.assert_allclose(half.fun, sol.fun, rtol=1e-2)
    x0 = prob.initial_point(0)
    assert np.array_equal(rssm.minimize(prob, x0, max_iter=0).x, x0)


def test_check_subgradient_reports_non_finite_oracles():
    """NaN or overflowing oracles are reported, not crashed on (before: LAPACK's "SVD did
    not converge"; a NaN cost read "OK" since max(0, nan) is 0; 1e200 times a subgradient
    read "all oracles agree")."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((100, 12)), rng.standard_normal((100, 4))

    def cost(x):
        return float(np.abs(a @ x - b).sum())

    def sub(x):
        return a.T @ np.sign(a @ x - b)

    def part(x, c):
        return a.T @ np.sign(a @ x[:, c] - b[:, c])

    def nan_part(x, c):
        return np.full_like(part(x, c), np.nan)

    cases = [
        (rssm.Problem.from_functions(cost, lambda x: np.full((12, 4), np.nan), shape=(12, 4)),
         "the oracles' values are finite", "48 NaN or infinite entries"),
        (rssm.Problem.from_functions(lambda x: np.nan, sub, shape=(12, 4)),
         "the oracles' values are finite", "cost(X) = nan"),
        (rssm.Problem.from_functions(lambda x: 1e200 * cost(x), lambda x: 1e200 * sub(x),
                                     shape=(12, 4)),
         "the oracles' values are finite", "overflows float64"),
        (rssm.Problem.from_functions(cost, sub, nan_part, shape=(12, 4)),
         "partial_subgradient vs columns of subgradient", "differs"),
    ]
    for prob, name, words in cases:
        report = check_subgradient(prob, rng=0)
        assert not report.ok and name in [it.name for it in report.failures]
        assert words in str(report)
    assert check_subgradient(rssm.Problem.from_functions(cost, sub, part, shape=(12, 4)),
                             rng=0).ok


def test_from_torch_warns_once_when_the_cost_does_not_reach_x():
    """A cost that detaches X (or goes through NumPy) has no path from X in torch's graph:
    its subgradient 0 made the run "converge" at once, silently; a warning says so now,
    once per problem."""
    torch = pytest.importorskip("torch")
    a = torch.randn(20, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    prob = rssm.Problem.from_torch(lambda x: (a @ x.detach()).abs().sum(), shape=(6, 2))
    with pytest.warns(UserWarning, match=r"does not depend on X through torch operations") \
            as seen:
        res = rssm.minimize(prob)
    assert sum("through torch operations" in str(w.message) for w in seen) == 1
    assert res.n_iter <= 2


def test_elementwise_losses_complex_autodiff_costs_and_wrong_shapes_are_named():
    """An EntrywiseLoss whose value summed its argument gave f = 69790.6 where f = 232.6
    (a scalar broadcast into the buffer), a derivative of the wrong shape broadcast too;
    complex autodiff costs said "float() argument must be ... not 'complex'";
    check_subgradient crashed on a transposed subgradient (the bug it is for) and on a
    cost returning a vector."""
    from rssm.diagnostics import check_subgradient
    from rssm.problems import CompositeProblem, EntrywiseLoss

    a = np.random.default_rng(0).standard_normal((40, 6))
    x = np.eye(6)[:, :2]
    with pytest.raises(ValueError, match=r"must act elementwise: given an array of shape "
                                         r"\(2, 40\) it returned shape \(\)"):
        CompositeProblem(a.T, 2, EntrywiseLoss(lambda t: np.abs(t).sum(), np.sign)).cost(x)
    with pytest.raises(ValueError, match=r"returned shape \(1, 40\)"):
        rssm.minimize(CompositeProblem(a.T, 2, EntrywiseLoss(np.abs,
                                                             lambda t: np.sign(t)[:1])),
                      max_iter=3)
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=r"from_torch must return a real scalar"):
        rssm.minimize(rssm.Problem.from_torch(lambda y: y.sum() * 1j, shape=(4, 2)),
                      max_iter=2)
    assert torch is not None

    class Transposed(rssm.Problem):
        shape = (6, 2)

        def cost(self, y):
            return float(np.abs(a @ y).sum())

        def subgradient(self, y):
            return (a.T @ np.sign(a @ y)).T

    report = check_subgradient(Transposed(), rng=0)
    assert not report.ok and "returned shape (2, 6)" in str(report)

    class VectorCost(Transposed):
        def cost(self, y):
            return np.abs(a @ y).sum(axis=0)

        def subgradient(self, y):
            return a.T @ np.sign(a @ y)

    report = check_subgradient(VectorCost(), rng=0)
    assert not report.ok and "cost(X) is a number" in str(report)


def test_the_full_subgradient_warning_points_at_the_users_call():
    """It pointed at rssm's own solvers/api.py (a fixed stacklevel, one frame short)."""
    a, b, _ = _procrustes_data()
    cost, sub, _ = _functions(a, b)
    prob = rssm.Problem.from_functions(cost, sub, shape=(20, 5))
    with pytest.warns(FullSubgradientWarning) as rec:
        rssm.minimize(prob, method="rssm", max_iter=3)
    assert [w.filename for w in rec if w.category is FullSubgradientWarning] == [__file__]


@pytest.mark.parametrize("make, pattern", [
    (lambda: rssm.problems.EntrywiseLoss(1, np.sign), "EntrywiseLoss: value must be a callable"),
    (lambda: rssm.problems.EntrywiseLoss(np.abs, None), "EntrywiseLoss: derivative must be a"),
    (lambda: rssm.problems.NormLoss("abs", None), "NormLoss: value must be a callable"),
    (lambda: rssm.problems.EntrywiseLoss(np.abs, np.sign, name=3), "name must be a str"),
])
def test_a_loss_of_non_callables_is_refused_where_it_is_made(make, pattern):
    """``EntrywiseLoss(1, 2)`` and ``NormLoss("abs", None)`` were accepted, and so was a
    CompositeProblem on them; rssm.minimize then failed deep in the kernels with "'int'
    object is not callable"."""
    with pytest.raises(TypeError, match=pattern):
        make()


# -- a researcher's own objective, an audit's findings (2026-11-26) --------------------------
def _l1_procrustes(seed=0, m=300, n=20, p=8):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, n))
    xs = stiefel.random_point(n, p, rng)
    b = a @ xs + 10 * rng.standard_normal((m, p)) * (rng.random((m, p)) < 0.1)
    return a, b, xs


def test_an_error_function_that_changes_its_argument_leaves_the_run_alone():
    """An `error=` that lines up column signs in place (`X *= sign`, a common pattern when
    the truth is known up to signs) was handed the run's own iterate: RSM ended with
    feasibility 1.0 and `fun` 1563.8 where cost(x) read 2861.2."""
    a, b, xs = _l1_procrustes()

    def pure(x):
        return float(np.linalg.norm(x * np.sign(np.sum(x * xs, axis=0)) - xs))

    def in_place(x):
        x *= np.sign(np.sum(x * xs, axis=0))
        x -= xs
        return float(np.linalg.norm(x))

    runs = []
    for err in (pure, in_place):
        prob = rssm.Problem.from_functions(lambda x: np.abs(a @ x - b).sum(),
                                           lambda x: a.T @ np.sign(a @ x - b),
                                           shape=(20, 8), error=err)
        runs.append(rssm.minimize(prob, method="rsm", seed=0))
    for res in runs:
        assert res.success and res.feasibility < 1e-14
        assert res.fun == np.abs(a @ res.x - b).sum() and res.error < 1e-9
    np.testing.assert_array_equal(runs[0].x, runs[1].x)


def test_check_subgradient_compares_partials_on_slices_past_the_first_column():
    """A partial subgradient wrong only on contiguous slices that do not start at column
    0 (it read B's first |C| columns) passed the check, whose only slice started at 0;
    RSSM's default blocks use such slices, and the run ended at error 1.4."""
    a, b, xs = _l1_procrustes()

    def partial(x, cols):
        if isinstance(cols, slice):
            k = cols.stop - cols.start
            return a.T @ np.sign(a @ x[:, cols] - b[:, :k])
        return a.T @ np.sign(a @ x[:, cols] - b[:, cols])

    prob = rssm.Problem.from_functions(lambda x: np.abs(a @ x - b).sum(),
                                       lambda x: a.T @ np.sign(a @ x - b), partial,
                                       shape=(20, 8))
    for seed in range(3):
        report = check_subgradient(prob, rng=seed)
        assert not report.ok
        assert "partial_subgradient vs columns of subgradient" in str(report)


def test_a_subclass_that_defines_error_has_one():
    """A `Problem` subclass with its own `error` (and no `has_error`) had it ignored: NaN
    errors, and target_error refused with "has none"."""
    a, b, xs = _l1_procrustes()

    class Mine(rssm.Problem):
        shape = (20, 8)

        def cost(self, x):
            return float(np.abs(a @ x - b).sum())

        def subgradient(self, x):
            return a.T @ np.sign(a @ x - b)

        def error(self, x):
            return float(np.linalg.norm(x - xs))

    prob = Mine()
    assert prob.has_error

    class NoTruth(Mine):
        error = rssm.Problem.error

    assert not NoTruth().has_error
    res = rssm.minimize(prob, method="rsm", seed=0, target_error=1e-6)
    assert res.stop_reason.value == "target_error" and res.error <= 1e-6
    assert np.isfinite(res.trace["error"]).all()


def test_check_subgradient_gives_the_oracles_their_own_copy():
    """A correct subgradient that zeroes its argument after use (harmless to a run, whose
    oracles get copies) was reported as four disagreements ("not a derivative", "stale
    or wrong cache"): the check handed its own points to the functions."""
    a, b, xs = _l1_procrustes()

    def scribbling(x):
        g = a.T @ np.sign(a @ x - b)
        x[:] = 0.0
        return g

    prob = rssm.Problem.from_functions(lambda x: np.abs(a @ x - b).sum(), scribbling,
                                       shape=(20, 8))
    for seed in range(3):
        assert check_subgradient(prob, rng=seed).ok


@pytest.mark.parametrize(("value", "what"), [(np.array([1.0]), "ndarray with shape (1,)"),
                                             ("x", "str"), (True, "bool")])
def test_an_error_function_that_returns_no_number_is_named(value, what):
    prob = rssm.Problem.from_functions(lambda x: float(np.abs(x).sum()), np.sign,
                                       shape=(5, 2), error=lambda x: value)
    with pytest.raises(TypeError, match=re.escape(f"error must return a real number, got {what}")):
        rssm.minimize(prob, method="rsm", max_iter=3)


def test_a_subclass_whose_error_defers_to_the_base_without_a_truth_runs():
    """The built-ins' pattern, `error` returning `super().error(x)` where an instance has no
    truth, without `has_error`: since a subclass's `error` counts as one, the first recorded
    row raised "has no ground truth" (a regression hunt); such an instance records NaN, and
    target_error is refused for it as for a problem without `error`."""
    a = np.random.default_rng(0).standard_normal((200, 8))

    class Fit(rssm.Problem):
        def __init__(self, truth=None):
            self.truth = truth

        shape = (8, 3)

        def cost(self, x):
            return float(np.abs(a @ x).sum())

        def subgradient(self, x):
            return a.T @ np.sign(a @ x)

        def error(self, x):
            if self.truth is None:
                return super().error(x)
            return float(np.linalg.norm(x @ x.T - self.truth @ self.truth.T))

    res = rssm.minimize(Fit(), method="rsm", seed=0, max_iter=50)
    assert res.n_iter == 50 and np.isnan(res.error) and np.isnan(res.trace["error"]).all()
    with pytest.raises(ValueError, match="target_error needs a ground truth"):
        rssm.minimize(Fit(), method="rsm", seed=0, target_error=1e-3)
    truth = stiefel.random_point(8, 3, np.random.default_rng(1))
    res = rssm.minimize(Fit(truth), method="rsm", seed=0, max_iter=50)
    assert np.isfinite(res.error) and np.isfinite(res.trace["error"]).all()


@pytest.mark.parametrize("spec", ["auto", "polyak_level", "backtracking"])
def test_a_problems_own_rule_in_two_threads_gives_the_bits_of_a_run_alone(spec):
    """`from_functions(stepsize=...)` keeps one rule object, which two runs in two threads
    stepped at once: both ended elsewhere than a run alone (f 1140.09 and 1140.46 against
    1143.45), where guarantees.md promises the bits of a run alone. A rule in use is now
    rebuilt for the second run; the first keeps the caller's object."""
    import threading

    y = np.random.default_rng(3).standard_normal((10, 400))
    prob = rssm.Problem.from_functions(lambda x: np.abs(y.T @ x).sum(),
                                       lambda x: y @ np.sign(y.T @ x),
                                       lambda x, c: y @ np.sign(y.T @ x[:, c]),
                                       shape=(10, 4), stepsize=spec)
    kw = {"method": "rssm", "options": {"n_blocks": 2}, "max_iter": 300, "seed": 4}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = rssm.minimize(prob, **kw)
        out = [None, None]
        barrier = threading.Barrier(2)

        def go(i):
            barrier.wait()
            out[i] = rssm.minimize(prob, **kw)

        threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for res in out:
        np.testing.assert_array_equal(res.x, alone.x)
        assert res.n_iter == alone.n_iter


def test_a_claim_left_by_an_interrupted_run_does_not_hide_the_rule_from_later_runs():
    """A Ctrl-C between a run's claim of its rule and its `try` left the rule claimed, and
    every later run in that thread worked on a copy: the caller's object (`restarts`,
    `handed_over`) was never updated again (a regression hunt). A claim by this thread, or
    by one that has ended, is taken over."""
    import threading

    from rssm.solvers import api

    class Counting(rssm.stepsizes.StepSize):
        calls = 0

        def __call__(self, k, ctx):
            self.calls += 1
            return 1e-3

    prob = rssm.problems.DPCP.synthetic(n=10, d=2, n_inliers=30, n_outliers=30, seed=0)
    rule = Counting()
    api._RULES_IN_USE[id(rule)] = -1                    # a claim of no living thread
    rssm.minimize(prob, stepsize=rule, max_iter=5, seed=0)
    assert rule.calls == 5 and id(rule) not in api._RULES_IN_USE
    assert threading.get_ident() != -1


def test_a_minimize_in_a_callback_with_the_outer_runs_rule_gets_its_own():
    """A callback that re-solves with `minimize` on the same problem (whose own rule is
    one object) stepped the outer run's rule and dropped its claim (an audit of this
    stop's first version): the outer run now keeps the bits of a run alone."""
    prob = rssm.problems.DPCP.synthetic(n=10, d=2, n_inliers=30, n_outliers=30, seed=0)
    inner = rssm.problems.DPCP.synthetic(n=10, d=2, n_inliers=30, n_outliers=30, seed=1)
    rule = rssm.stepsizes.AdaptiveGeometric()
    alone = rssm.minimize(prob, stepsize=rule, max_iter=60, seed=0, tol=0)

    def polish(progress):
        if progress.iteration in (20, 40):
            rssm.minimize(inner, stepsize=rule, max_iter=30, seed=0, tol=0)

    nested = rssm.minimize(prob, stepsize=rule, max_iter=60, seed=0, tol=0, record=1,
                           callback=polish)
    np.testing.assert_array_equal(nested.x, alone.x)


@pytest.mark.parametrize("p, m", [(1, 40), (3, 1)])
def test_an_offset_is_copied_whatever_its_shape(p, m):
    """An audit: with p = 1 or m = 1 the transposed offset was already contiguous and
    the problem kept the user's array: ``b += 100`` afterwards moved f (43.7 -> 3993)."""
    from rssm.problems import CompositeProblem, L1Procrustes, NormLoss

    rng = np.random.default_rng(0)
    y = rng.standard_normal((5, m))
    b = rng.standard_normal((m, p))
    x = rssm.stiefel.random_point(5, p, rng)
    probs = [CompositeProblem(y, p, NormLoss.norm(), offset=b)]
    if m > 1:
        probs.append(L1Procrustes(y.T, b))
    before = [pr.cost(x) for pr in probs]
    b += 100.0
    assert [pr.cost(x) for pr in probs] == before


def test_an_offset_or_weights_beyond_float64s_squares_are_refused():
    """An audit: an offset of 1e200 (or weights of 1e307) was accepted and f was inf at
    every point, the run stopping non_finite with no word on why."""
    from rssm.problems import CompositeProblem, NormLoss

    y = np.ones((5, 50))
    with pytest.raises(ValueError, match=r"offset: the largest entry is 1e\+200"):
        CompositeProblem(y, 2, NormLoss.norm(), offset=np.full((50, 2), 1e200))
    with pytest.raises(ValueError, match=r"sample_weights: the largest entry is 1e\+307"):
        CompositeProblem(y, 2, NormLoss.norm(), sample_weights=np.full(50, 1e307))


def test_a_subgradient_tensor_that_requires_grad_is_read_by_its_values():
    """An audit: from_functions' subgradient returning a torch tensor with requires_grad
    gave torch's "Can't call numpy() on Tensor that requires grad", which named neither
    the callable nor what to do; a plain tensor was already read. Its values are used."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    y = rng.standard_normal((8, 40))

    def cost(x):
        return float(np.abs(y.T @ x).sum())

    def plain(x):
        return y @ np.sign(y.T @ x)

    def tensor(x):
        return torch.from_numpy(plain(x)).requires_grad_(True)

    x0 = rssm.stiefel.polar(rng.standard_normal((8, 2)))
    a = rssm.minimize(rssm.Problem.from_functions(cost, plain, shape=(8, 2)), x0,
                      stepsize=1e-3, max_iter=20)
    b = rssm.minimize(rssm.Problem.from_functions(cost, tensor, shape=(8, 2)), x0,
                      stepsize=1e-3, max_iter=20)
    np.testing.assert_array_equal(a.x, b.x)


class _CostFailure(RuntimeError):
    """What a user's cost raises (a lost connection, a bug): not rssm's to swallow."""


@pytest.mark.parametrize(("method", "stepsize", "fail_at"), [
    ("rsm", "auto", 2), ("rsm", "auto", 4), ("rsm", "auto", 50), ("rssm", "auto", 10),
    ("rsm", "backtracking", 6), ("rssm", "backtracking", 9)])
def test_an_exception_from_the_cost_reaches_the_caller_wherever_rssm_called_it(
        method, stepsize, fail_at):
    """Before: a cost that raised while the step-size rule read f (`StepContext.cost`,
    `StepContext.trial`) ended the run `stalled`, "the default step-size rule raised ...",
    with the traceback dropped; on the first iteration a ZeroDivisionError became "stepsize
    could not compute gamma_0". Elsewhere the same error reached the caller (an audit: 19 of
    25 failing calls of the default call returned a Result)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((120, 10))
    b = a @ stiefel.random_point(10, 4, rng)
    calls = [0]

    def cost(x):
        calls[0] += 1
        if calls[0] == fail_at:
            raise _CostFailure(f"connection lost at call {fail_at}")
        return float(np.abs(a @ x - b).sum())

    prob = rssm.Problem.from_functions(
        cost, lambda x: a.T @ np.sign(a @ x - b),
        lambda x, c: a.T @ np.sign(a @ x[:, c] - b[:, c]), shape=(10, 4))
    with pytest.raises(_CostFailure, match=f"connection lost at call {fail_at}"):
        rssm.minimize(prob, method=method, stepsize=stepsize, seed=1)
    assert calls[0] == fail_at


def test_a_cost_that_divides_by_zero_on_the_first_step_is_not_called_a_bad_stepsize():
    calls = [0]

    def cost(x):
        calls[0] += 1
        return 1.0 / 0.0 if calls[0] == 2 else float(np.abs(x).sum())

    prob = rssm.Problem.from_functions(cost, np.sign, shape=(5, 2))
    with pytest.raises(ZeroDivisionError):
        rssm.minimize(prob, method="rsm", seed=0)


@pytest.mark.parametrize(("value", "what"), [
    ("1.5", "str"), (np.bool_(True), "bool"), (1 + 0j, "complex"), (None, "NoneType"),
    (np.ones(1), "ndarray with shape (1,)")])
def test_a_subclass_cost_that_returns_no_number_is_named(value, what):
    """Before: the subclass route (`rssm.Problem` with `cost` and `subgradient`) took text
    and flags as costs (f = 1363.68 from a string) and failed on None or a complex number
    with Python's bare float() message from inside rssm; `from_functions` refused all."""

    class Bad(rssm.Problem):
        shape = (5, 2)

        def cost(self, x):
            return value

        def subgradient(self, x):
            return np.sign(x)

    with pytest.raises(TypeError, match=re.escape(f"cost must return a real number, got {what}")):
        rssm.minimize(Bad(), method="rsm", max_iter=5, seed=0)


@pytest.mark.parametrize("how", ["recover", "own", "own from None"])
def test_a_rule_that_handles_the_costs_error_keeps_its_own_outcome(how):
    """The cost's error propagates only as itself: a rule that catches it and returns a
    step goes on, and a rule that raises an error of its own instead (even inside the
    `except`, or `from None`) ends the run `stalled`, naming the rule (a review of the
    first version, which propagated anything chained to the cost's error)."""
    state = {"armed": False, "fired": False}

    def cost(x):
        if state["armed"] and not state["fired"]:
            state["fired"] = True
            raise _CostFailure("once")
        return float(np.abs(x).sum())

    def rule(k, ctx):
        state["armed"] = k == 5
        try:
            ctx.trial(1e-3)        # a trial point: always one call of the cost
        except _CostFailure:
            if how == "own":
                raise ValueError("my rule gave up")  # noqa: B904 - the case under test
            if how == "own from None":
                raise ValueError("my rule gave up") from None
        finally:
            state["armed"] = False
        return 1e-3

    prob = rssm.Problem.from_functions(cost, np.sign, shape=(6, 2))
    res = rssm.minimize(prob, method="rsm", stepsize=rule, max_iter=20, tol=0, seed=0)
    if how == "recover":
        assert res.stop_reason is StopReason.MAX_ITER and res.n_iter == 20
    else:
        assert res.stop_reason is StopReason.STALLED
        assert "raised ValueError: my rule gave up" in res.message


def test_a_one_entry_array_of_any_library_is_not_taken_for_a_number():
    # real_value's promise ("an array with a dimension, even of one entry") held for
    # NumPy 2.4's arrays only: NumPy 2.2, pandas 2 and PyTorch convert a 1-entry array
    ones = [np.ma.masked_array([1.5]), np.array([[1.5]]), np.matrix([[1.5]])]
    pd = pytest.importorskip("pandas")
    ones.append(pd.Series([1.5]))
    for value in ones:
        prob = rssm.Problem.from_functions(lambda x, v=value: v, np.sign, shape=(5, 2))
        with pytest.raises(TypeError, match="cost must return a real number, got .* with "
                                            "shape"):
            rssm.minimize(prob, method="rsm", max_iter=3)
    for value in (np.float32(1.5), np.array(1.5), np.ma.masked_array(1.5), 3):
        prob = rssm.Problem.from_functions(lambda x, v=value: v, np.sign, shape=(5, 2))
        assert rssm.minimize(prob, method="rsm", max_iter=3).fun == float(value)
    torch = pytest.importorskip("torch")
    prob = rssm.Problem.from_functions(lambda x: torch.tensor([1.5]), np.sign, shape=(5, 2))
    with pytest.raises(TypeError, match=r"got Tensor with shape \(1,\)"):
        rssm.minimize(prob, method="rsm", max_iter=3)


def test_check_subgradient_fails_a_cost_that_turns_nan_once_x_moves():
    import warnings

    from rssm.diagnostics import check_subgradient

    a = np.random.default_rng(0).standard_normal((8, 8))
    a = a + a.T
    calls = [0]

    def cost(x):
        calls[0] += 1
        return float("nan") if calls[0] > 60 else float(np.trace(x.T @ a @ x))

    prob = rssm.Problem.from_functions(cost, lambda x: 2 * a @ x, shape=(8, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = check_subgradient(prob, rng=0)
    assert not rep.ok
    assert "DISAGREES" in rep["oracle cost vs cost"].line()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_check_subgradient_passes_the_built_in_odl_at_its_sizes(seed):
    """A user's audit: on ODL.synthetic(n=30) (49290 terms |x_i^T y_j|) the finite
    differences crossed a kink within 1e-6 on every seed tried and reported a correct
    subgradient as disagreeing (3e-5 to 7e-5; 1.8e-5 and 2.6e-5 at the paper's n = 60).
    The steps go down to 1e-8 now, where rounding is still far below the tolerance."""
    prob = rssm.problems.ODL.synthetic(n=30, seed=seed)
    rep = check_subgradient(prob, rng=seed)
    assert rep.ok, str(rep)
    assert rep["subgradient vs finite differences of cost"].max_error < 1e-6


def test_from_jax_notes_name_what_is_wrong_and_warn_of_a_constant_cost_and_float32_data():
    """An audit: every error raised while JAX traced the cost got the hint "no NumPy
    calls or float()", a shape mismatch included; a cost that does not depend on X (a
    constant, X under stop_gradient) stopped at once, "converged", without the warning
    from_torch gives; and float32 data (JAX's default jnp.asarray) passed without a word
    (recovery errors 3e-8 against 7e-13)."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x0 = rssm.stiefel.random_point(10, 4, np.random.default_rng(1))
    wide = np.ones((11, 30))
    with pytest.raises(TypeError) as info:
        rssm.Problem.from_jax(lambda X: jnp.abs(wide.T @ X).sum(), shape=(10, 4)).cost(x0)
    notes = " ".join(info.value.__notes__)
    assert "X is a float64 jax array of shape (10, 4), as shape= gave" in notes
    assert "no NumPy calls" not in notes
    def cut(X):
        return 2.0 + 0 * jax.lax.stop_gradient(X).sum()

    # (the review: the checks read the top level only, and a jitted cost hides its body
    # and its constants in a nested jaxpr)
    for const in (lambda X: 1.5, cut, jax.jit(cut), lambda X: jax.jit(cut)(X) + 1.0):
        with pytest.warns(UserWarning, match="does not depend on X through jax") as rec:
            res = rssm.minimize(rssm.Problem.from_jax(const, shape=(10, 4)), x0,
                                method="rsm", max_iter=20, seed=0)
        assert res.success and res.n_iter <= 1 and rec[0].filename == __file__
    x64 = getattr(jax, "enable_x64", None)
    if x64 is None:
        from jax.experimental import enable_x64 as x64
    with x64(False):
        y32 = jnp.asarray(np.random.default_rng(0).standard_normal((10, 30)))
    assert y32.dtype == jnp.float32
    def l1(X):
        return jnp.abs(y32.T @ X).sum()

    for cost in (l1, jax.jit(l1), lambda X: 2.0 * jax.jit(l1)(X)):
        with pytest.warns(UserWarning, match=r"closes over float32\[10, 30\] data"):
            rssm.Problem.from_jax(cost, shape=(10, 4)).cost(x0)
    y64 = np.random.default_rng(0).standard_normal((10, 30))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prob = rssm.Problem.from_jax(lambda X: jnp.abs(y64.T @ X).sum(), shape=(10, 4))
        prob.cost(x0)
        prob.subgradient(x0)
        # jitted and checkpointed costs that depend on X, a cond on X: no warning
        for fine in (jax.jit(lambda X: jnp.abs(y64.T @ X).sum()),
                     jax.checkpoint(lambda X: jnp.abs(X).sum()),
                     lambda X: jax.lax.cond(X[0, 0] > 0, jnp.sum, lambda x: -x.sum(), X)):
            rssm.Problem.from_jax(fine, shape=(10, 4)).cost(x0)
        # X cast to float32 by choice is the user's, as in from_torch
        rssm.Problem.from_jax(lambda X: jnp.abs(X.astype(jnp.float32)).sum().astype(
            jnp.float64), shape=(10, 4)).cost(x0)
