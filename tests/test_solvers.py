"""RSSM and RSM (`rssm.minimize` and the solver objects): feasibility, untouched blocks,
l = 2 equivalence, recovery, reproducibility, non-finite iterates and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rssm
from rssm import stiefel
from rssm.blocks import Partition, UniformPairs
from rssm.problem import Problem
from rssm.solvers import RSMSolver, RSSMSolver
from rssm.stepsizes import Geometric
from rssm.stopping import StopReason
from rssm.trace import TRACE_COLUMNS


class RecordingPairs(UniformPairs):
    """The paper's uniform rule, remembering every pair it hands out."""

    def __init__(self):
        self.pairs: list[tuple[int, int]] = []

    def next_pair(self):
        pair = super().next_pair()
        self.pairs.append(pair)
        return pair


def _rssm_solver(problem, x0, part, seed=0, selector=None):
    rng = np.random.default_rng(seed)
    return RSSMSolver(problem, x0, part, selector or UniformPairs(), rng)


# --------------------------------------------------------------------------------------
# feasibility and untouched blocks
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["dpcp", "odl"])
def test_feasible_after_1e4_steps_and_untouched_blocks_bit_identical(which, small_dpcp, small_odl):
    """Constant step 0.05 (the iterate keeps moving for all 10^4 steps): after each step the
    columns outside C_ij are bit-for-bit unchanged, and ||X^T X - I||_max <= 1e-12 at the end."""
    problem = small_dpcp if which == "dpcp" else small_odl
    n, p = problem.shape
    # unequal, non-contiguous blocks
    r = np.random.default_rng(5)
    label = r.integers(0, 4, size=p)
    label[:4] = [0, 1, 2, 3]
    part = Partition([np.flatnonzero(label == b) for b in range(4)], p)
    sel = RecordingPairs()
    x0 = stiefel.random_point(n, p, r)
    solver = _rssm_solver(problem, x0, part, seed=6, selector=sel)
    cols = {
        (i, j): (part.columns(i, j).index, np.setdiff1d(np.arange(p), part.columns(i, j).index))
        for i in range(4)
        for j in range(i + 1, 4)
    }
    moved = 0
    for k in range(10_000):
        before = solver.x.copy()
        solver.step(0.05)
        touched, rest = cols[sel.pairs[k]]
        assert np.array_equal(solver.x[:, rest], before[:, rest]), f"step {k} moved other columns"
        moved += not np.array_equal(solver.x[:, touched], before[:, touched])
    assert moved == 10_000
    assert stiefel.feasibility(solver.x) <= 1e-12
    # every pair was drawn, about equally often (10^4 draws over 6 pairs: sd ~ 37)
    counts = np.bincount([i * 4 + j for i, j in sel.pairs], minlength=16)
    pair_counts = counts[[1, 2, 3, 6, 7, 11]]
    assert np.all(np.abs(pair_counts - 10_000 / 6) < 200), pair_counts


def test_minimize_feasibility_is_reported(small_dpcp):
    res = rssm.minimize(small_dpcp, method="rsm", stepsize=0.05, max_iter=2000, seed=0)
    assert res.feasibility == stiefel.feasibility(res.x) <= 1e-12
    res = rssm.minimize(
        small_dpcp, method="rssm", stepsize=0.05, max_iter=2000, seed=0, options={"n_blocks": 3}
    )
    assert res.feasibility == stiefel.feasibility(res.x) <= 1e-12


# --------------------------------------------------------------------------------------
# RSSM with l = 2 is RSM
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["dpcp", "odl"])
@pytest.mark.parametrize("gamma", [1e-3, 0.05, 0.3])
def test_rssm_with_two_blocks_is_rsm(which, gamma, small_dpcp, small_odl):
    problem = small_dpcp if which == "dpcp" else small_odl
    n, p = problem.shape
    x0 = stiefel.random_point(n, p, np.random.default_rng(7))
    # both a contiguous and an interleaved 2-block partition
    for part in (Partition.uniform(p, 2), Partition([range(0, p, 2), range(1, p, 2)], p)):
        a = _rssm_solver(problem, x0, part)
        b = RSMSolver(problem, x0, None, None, np.random.default_rng(0))
        a.step(gamma)
        b.step(gamma)
        np.testing.assert_allclose(a.x, b.x, rtol=0, atol=1e-14)
        # and both equal the formula polar(X - gamma P_T(G))
        g = problem.subgradient(x0)
        want = stiefel.polar(x0 - gamma * stiefel.tangent_projection(x0, g))
        np.testing.assert_allclose(b.x, want, rtol=0, atol=1e-14)


def test_rssm_step_matches_algorithm_formula(small_dpcp):
    """One step of Algorithm alg-RSSM written with the dense formulas of the paper."""
    n, p = small_dpcp.shape
    r = np.random.default_rng(8)
    x0 = stiefel.random_point(n, p, r)
    part = Partition([[0, 5, 9], [1, 2, 3, 4], [6, 7, 8, 10, 11, 12, 13, 14, 15]], p)
    sel = RecordingPairs()
    solver = _rssm_solver(small_dpcp, x0, part, seed=9, selector=sel)
    gamma = 0.2
    solver.step(gamma)
    idx = part.columns(*sel.pairs[0]).index
    rest = np.setdiff1d(np.arange(p), idx)
    g = small_dpcp.subgradient(x0)[:, idx]
    xc = x0[:, idx]
    rg = xc @ stiefel.skew(xc.T @ g) + (np.eye(n) - x0 @ x0.T) @ g
    big = xc - gamma * rg
    proj = np.eye(n) - x0[:, rest] @ x0[:, rest].T
    w, v = np.linalg.eigh(big.T @ proj @ big)
    want = proj @ big @ (v / np.sqrt(w)) @ v.T
    np.testing.assert_allclose(solver.x[:, idx], want, rtol=0, atol=1e-13)
    np.testing.assert_array_equal(solver.x[:, rest], x0[:, rest])


# --------------------------------------------------------------------------------------
# recovery of the ground truth
# --------------------------------------------------------------------------------------

# Step sizes: the paper's schedule (PaperSchedule.dpcp/.odl) needs far more than 10^4
# iterations at these sizes to reach 1e-6, so the recovery tests use geometric decay,
# which converges linearly on these sharp problems.
DPCP_STEP = Geometric(0.1, 0.9)
ODL_STEP = Geometric(0.03, 0.97)


@pytest.fixture(scope="module")
def dpcp30():
    return rssm.problems.DPCP.synthetic(n=30, d=3, n_inliers=300, n_outliers=200, seed=1)


@pytest.mark.parametrize("method,ell", [("rssm", 3), ("rssm", 5), ("rsm", 1)])
def test_dpcp_recovers_subspace(method, ell, dpcp30):
    """Spectral start; RSSM needs ~200-300 iterations, RSM ~130 (budget 3000)."""
    x0 = dpcp30.initial_point()
    assert dpcp30.error(x0) > 1e-2
    res = rssm.minimize(
        dpcp30, x0, method=method, stepsize=DPCP_STEP, max_iter=3000, max_time=30.0,
        target_error=1e-7, seed=2, record=10, options={"n_blocks": max(ell, 2)}
    )
    assert res.stop_reason is StopReason.TARGET_ERROR
    assert res.error < 1e-6
    assert dpcp30.error(res.x) == res.error
    assert res.feasibility <= 1e-12


@pytest.mark.parametrize("method,ell", [("rssm", 3), ("rssm", 5), ("rsm", 1)])
def test_odl_recovers_dictionary(method, ell):
    """Haar-random start; RSSM l=3 and RSM ~300 iterations, RSSM l=5 ~800 (budget 4000)."""
    prob = rssm.problems.ODL.synthetic(n=10, theta=0.3, seed=1)
    x0 = prob.initial_point(np.random.default_rng(1001))
    assert prob.error(x0) > 1.0
    res = rssm.minimize(
        prob, x0, method=method, stepsize=ODL_STEP, max_iter=4000, max_time=30.0,
        target_error=1e-7, seed=3, record=10, options={"n_blocks": max(ell, 2)}
    )
    assert res.stop_reason is StopReason.TARGET_ERROR
    assert res.error < 1e-6
    assert res.feasibility <= 1e-12


# --------------------------------------------------------------------------------------
# reproducibility
# --------------------------------------------------------------------------------------


def _same_result(a, b):
    np.testing.assert_array_equal(a.x, b.x)
    for col in TRACE_COLUMNS:
        if col != "time":
            np.testing.assert_array_equal(a.trace[col], b.trace[col])
    assert (a.fun, a.n_iter, a.flops, a.stop_reason, a.error) == (
        b.fun,
        b.n_iter,
        b.flops,
        b.stop_reason,
        b.error,
    )


@pytest.mark.parametrize("method", ["rssm", "rsm"])
def test_same_seed_same_result_bit_for_bit(method, small_odl):
    kw = dict(
        method=method, n_blocks=3, stepsize=Geometric(0.03, 0.97), max_iter=300, record_every=7
    )
    a = rssm.minimize(small_odl, seed=123, **kw)
    b = rssm.minimize(small_odl, seed=123, **kw)
    _same_result(a, b)
    c = rssm.minimize(small_odl, seed=np.random.default_rng(123), **kw)
    _same_result(c, rssm.minimize(small_odl, seed=np.random.default_rng(123), **kw))
    d = rssm.minimize(small_odl, seed=124, **kw)
    assert not np.array_equal(a.x, d.x)


def test_same_seed_same_pairs_different_seed_different_pairs(small_dpcp):
    x0 = small_dpcp.initial_point()
    kw = dict(method="rssm", options={"n_blocks": 4}, stepsize=0.01, max_iter=200)
    a = rssm.minimize(small_dpcp, x0, seed=5, **kw)
    b = rssm.minimize(small_dpcp, x0, seed=5, **kw)
    c = rssm.minimize(small_dpcp, x0, seed=6, **kw)
    _same_result(a, b)
    assert not np.array_equal(a.x, c.x)


# --------------------------------------------------------------------------------------
# user problems and partitions
# --------------------------------------------------------------------------------------


class _PlainDPCP(Problem):
    """DPCP given only as cost and full subgradient: exercises the generic oracle."""

    def __init__(self, inner):
        self.inner = inner
        self.shape = inner.shape

    def cost(self, x):
        return self.inner.cost(x)

    def subgradient(self, x):
        return self.inner.subgradient(x)


@pytest.mark.parametrize("method", ["rssm", "rsm"])
def test_generic_fallback_follows_the_incremental_oracle(method, small_dpcp):
    x0 = small_dpcp.initial_point()
    kw = dict(method=method, options={"n_blocks": 3}, stepsize=Geometric(0.05, 0.95),
              max_iter=300, seed=4, tol=0)
    fast = rssm.minimize(small_dpcp, x0, **kw)
    slow = rssm.minimize(_PlainDPCP(small_dpcp), x0, **kw)
    np.testing.assert_allclose(slow.x, fast.x, rtol=0, atol=1e-9)
    assert slow.fun == pytest.approx(fast.fun, rel=1e-10)
    assert math.isnan(slow.error) and np.all(np.isnan(slow.trace["error"]))


def test_user_partition_is_used(small_dpcp):
    blocks = [[0, 15], [1, 2, 3, 4, 5, 6, 7], [8, 9], [10, 11, 12, 13, 14]]
    res = rssm.minimize(
        small_dpcp, method="rssm", stepsize=0.02, max_iter=50, seed=0, options={"partition": blocks}
    )
    assert res.n_blocks == 4
    assert [b.tolist() for b in res.partition] == blocks
    assert res.feasibility <= 1e-13


def test_flop_model_ratio_is_about_two_over_l():
    """On the paper's DPCP instance the RSSM/RSM flop ratio per iteration is about 2/l
    (a fixed step: the default rule's first search adds the flops of its trials, a
    different number for each method, to these two iterations)."""
    prob = rssm.problems.DPCP.synthetic(seed=0)
    x0 = prob.initial_point()
    rule = Geometric(0.1, 0.9)
    rsm = rssm.minimize(prob, x0, method="rsm", stepsize=rule, max_iter=2, seed=0)
    for ell in (3, 5, 10):
        res = rssm.minimize(
            prob, x0, method="rssm", stepsize=rule, max_iter=2, seed=0, options={"n_blocks": ell}
        )
        ratio = (res.flops / res.n_iter) / (rsm.flops / rsm.n_iter)
        assert ratio == pytest.approx(2.0 / ell, rel=0.1), (ell, ratio)
        assert res.flops > 0


# --------------------------------------------------------------------------------------
# non-finite iterates
# --------------------------------------------------------------------------------------


class _NaNAfter(Problem):
    """f(X) = ||A X||_1 whose subgradient turns NaN from its (k+1)-th call on."""

    def __init__(self, a, p, k):
        self.a, self.k, self.calls = a, k, 0
        self.shape = (a.shape[1], p)

    def cost(self, x):
        return float(np.abs(self.a @ x).sum())

    def subgradient(self, x):
        self.calls += 1
        g = self.a.T @ np.sign(self.a @ x)
        if self.calls > self.k:
            g[0, 0] = np.nan
        return g


@pytest.mark.parametrize("method", ["rssm", "rsm"])
def test_non_finite_subgradient_stops_with_last_finite_point(method):
    a = np.random.default_rng(10).standard_normal((30, 8))
    x0 = stiefel.random_point(8, 6, np.random.default_rng(11))
    # stationarity=False: the problem counts its subgradient calls, and the recording
    # points' stationarity would call it too
    kw = dict(method=method, n_blocks=3, stepsize=0.01, seed=12, stationarity=False)
    res = rssm.minimize(_NaNAfter(a, 6, 5), x0, max_iter=100, **kw)
    assert res.stop_reason is StopReason.NON_FINITE
    assert not res.success
    assert res.n_iter == 5
    assert np.all(np.isfinite(res.x)) and res.feasibility <= 1e-13
    assert np.isfinite(res.fun)
    ref = rssm.minimize(_NaNAfter(a, 6, 10**9), x0, max_iter=5, **kw)
    np.testing.assert_array_equal(res.x, ref.x)
    assert "iteration 5" in res.message


def test_non_finite_cost_at_start_stops_at_once():
    class Bad(_NaNAfter):
        def cost(self, x):
            return math.inf

    a = np.random.default_rng(10).standard_normal((30, 8))
    x0 = stiefel.random_point(8, 6, np.random.default_rng(11))
    res = rssm.minimize(Bad(a, 6, 100), x0, stepsize=0.01, max_iter=10, seed=0)
    assert res.stop_reason is StopReason.NON_FINITE and res.n_iter == 0
    np.testing.assert_array_equal(res.x, x0)


# --------------------------------------------------------------------------------------
# bad input (issue 2, section 4)
# --------------------------------------------------------------------------------------


def test_x0_off_manifold_says_how_far(small_dpcp):
    x0 = small_dpcp.initial_point() * 1.001
    with pytest.raises(ValueError, match=r"x0 is not on the Stiefel manifold.*2\.001e-03"):
        rssm.minimize(small_dpcp, x0, max_iter=1)
    # a looser atol accepts it
    rssm.minimize(small_dpcp, x0, max_iter=1, atol=1e-2, seed=0)


@pytest.mark.parametrize(
    "kwargs,exc,pattern",
    [
        (dict(x0=np.eye(20)[:, :15]), ValueError, r"x0 has shape \(20, 15\), expected \(20, 16\)"),
        (dict(x0=np.eye(20)[:, :16].ravel()), ValueError, "x0 must be 2-D"),
        (dict(x0=np.full((20, 16), np.nan)), ValueError, "x0 contains 320 NaN"),
        (dict(x0="eye"), TypeError, "x0 must be a 2-D array"),
        (dict(n_blocks=1), ValueError, "n_blocks must satisfy 2 <= n_blocks <= p = 16, got 1"),
        (dict(n_blocks=17), ValueError, "n_blocks must satisfy 2 <= n_blocks <= p = 16, got 17"),
        (dict(n_blocks=2.5), TypeError, "n_blocks must be an integer"),
        (dict(method="sgd"), ValueError, r"method must be one of \['rsm', 'rssm'\], got 'sgd'"),
        (dict(method=3), ValueError, "method must be one of"),
        (dict(stepsize=0.0), ValueError, "stepsize: a constant step size must be a finite "
                                         "number > 0, got 0.0"),
        (dict(stepsize=-1.0), ValueError, "must be a finite number > 0, got -1.0"),
        (dict(stepsize=math.nan), ValueError, "must be a finite number > 0, got nan"),
        (dict(stepsize=math.inf), ValueError, "must be a finite number > 0, got inf"),
        (dict(stepsize="0.1"), ValueError, "unknown step-size rule '0.1'; allowed: auto"),
        (dict(stepsize=True), TypeError, "stepsize must not be a bool"),
        (dict(max_iter=-1), ValueError, "max_iter must be >= 0"),
        (dict(max_time=0.0), ValueError, "max_time must be > 0"),
        (dict(max_time=math.nan), ValueError, "max_time must be finite"),
        (dict(target_error=-1e-3), ValueError, "target_error must be >= 0"),
        (dict(record=0), ValueError, "record must be None, an int >= 1"),
        (dict(record=-1), ValueError, "record must be None, an int >= 1"),
        (dict(seed=-3), ValueError, "seed must be a non-negative integer"),
        (dict(seed="abc"), TypeError, "seed must be None"),
        (dict(selection="random"), ValueError, "selection must be one of"),
        (dict(partition=[[0, 1, 2]]), ValueError, "at least 2 blocks"),
        (dict(partition=[[0, 1], [1, 2]]), ValueError, "exactly once"),
        (dict(callback=3), TypeError, "callback must be callable"),
        (dict(stop="never"), TypeError, "stop must be a StoppingCriterion"),
        (dict(atol=0.0), ValueError, "atol must be > 0"),
    ],
)
def test_bad_arguments_are_named(kwargs, exc, pattern, small_dpcp):
    kwargs = {"max_iter": 1, "seed": 0, "method": "rssm", **kwargs}
    with pytest.raises(exc, match=pattern):
        rssm.minimize(small_dpcp, **kwargs)


def test_a_bad_record_every_names_the_record_option():
    with pytest.raises(ValueError, match=r"Record\(every=...\) must be >= 1, got 0"):
        rssm.Record(every=0)


def test_bad_problem_and_missing_defaults(small_dpcp):
    with pytest.raises(TypeError, match="problem must be an rssm Problem"):
        rssm.minimize(np.eye(3))
    a = np.random.default_rng(0).standard_normal((5, 4))
    no_step = _NaNAfter(a, 2, 10**9)
    # no default step size of its own: "auto"
    assert rssm.minimize(
        no_step, method="rssm", seed=0, max_iter=1, options={"n_blocks": 2}
    ).stepsize["rule"] == "Auto"
    with pytest.raises(ValueError, match="target_error needs a ground truth"):
        rssm.minimize(
            no_step, method="rssm", stepsize=0.1, seed=0, max_iter=1, target_error=1e-3,
            options={"n_blocks": 2}
        )
    one_col = _NaNAfter(a, 1, 10**9)
    with pytest.raises(ValueError, match="p >= 2"):
        rssm.minimize(one_col, method="rssm", stepsize=0.1, seed=0, max_iter=1)
    assert rssm.minimize(one_col, method="rsm", stepsize=0.1, seed=0, max_iter=3).n_iter == 3
    with pytest.raises(ValueError, match="partition covers 3 columns but the problem has p=16"):
        rssm.minimize(
            small_dpcp, method="rssm", max_iter=1, options={"partition": Partition([[0], [1, 2]])}
        )


def test_method_name_is_case_insensitive(small_dpcp):
    res = rssm.minimize(small_dpcp, method="RSM", stepsize=0.01, max_iter=2, seed=0)
    assert res.method == "rsm" and res.n_blocks == 1 and res.partition is None


def test_default_start_is_independent_of_an_instance_drawn_with_the_same_seed():
    """ODL.synthetic(seed=s) draws X* first from default_rng(s); minimize(seed=s) with no
    x0 must not draw its Haar start from the same stream (it would start at X*)."""
    for s in (0, 1, 7):
        prob = rssm.problems.ODL.synthetic(n=6, seed=s)
        res = rssm.minimize(prob, seed=s, max_iter=1, stepsize=1e-3)
        assert res.trace["error"][0] > 0.1, s


def test_clip_steps_false_runs_the_rules_steps_as_they_are():
    """options={"clip_steps": False}: Algorithm alg-RSSM to the letter. The loop shortens
    no step (``n_clipped`` 0), and one step equals the dense submanifold step with the
    rule's gamma; with the default a long step is shortened to the block's diameter."""
    import rssm
    from rssm import stiefel

    prob = rssm.problems.ODL.synthetic(n=12, seed=0)
    x0 = prob.initial_point(np.random.default_rng(1))
    gamma = 5.0                                     # gamma ||P(G_C)|| far beyond 2 sqrt(c)
    for method, opts in (("rsm", {}), ("rssm", {"n_blocks": 3})):
        free = rssm.minimize(prob, x0, method=method, stepsize=gamma, max_iter=1, tol=0,
                             seed=0, options={**opts, "clip_steps": False}, record=1)
        capped = rssm.minimize(prob, x0, method=method, stepsize=gamma, max_iter=1, tol=0,
                               seed=0, options=opts, record=1)
        assert free.n_clipped == 0 and capped.n_clipped == 1
        assert free.feasibility < 1e-13 and capped.feasibility < 1e-13
        if method == "rsm":
            g = prob.subgradient(x0)
            ref = stiefel.full_retraction_step(x0, stiefel.descent_direction(x0, g), gamma)
            np.testing.assert_allclose(free.x_last, ref, atol=1e-13)
        assert np.abs(free.x_last - capped.x_last).max() > 1e-3
    with pytest.raises(TypeError, match=r"clip_steps must be True or False"):
        rssm.minimize(prob, options={"clip_steps": 1})


def test_clip_steps_is_recorded_and_a_named_spec_runs_where_the_problems_rule_cannot_be_built():
    """Result.clip_steps says whether steps were clipped (n_clipped 0 alone could mean
    either); a named step spec on all-zero data, where the problem's own rule cannot be
    built (1 / ||A||^2: ZeroDivisionError), runs without it."""
    import json

    import rssm

    prob = rssm.problems.DPCP.synthetic(n=10, d=2, n_inliers=30, n_outliers=20, seed=0)
    res = rssm.minimize(prob, max_iter=3, options={"clip_steps": False})
    back = rssm.Result.from_dict(json.loads(json.dumps(res.to_dict())))
    assert res.clip_steps is False and back.clip_steps is False
    assert rssm.minimize(prob, max_iter=3).clip_steps is True
    a = np.zeros((30, 6))
    b = np.random.default_rng(0).standard_normal((30, 3))
    zero = rssm.problems.L1Procrustes(a, b)
    for spec in ("constant:c=0.01", {"rule": "inverse_sqrt", "c": 0.01}):
        assert rssm.minimize(zero, stepsize=spec, max_iter=5).n_iter >= 1
    with pytest.raises(ValueError, match=r"needs"):
        rssm.minimize(zero, stepsize="geometric:mu0=0.1")


def test_a_start_accepted_with_a_loose_atol_is_recorded():
    """Recording the error at iteration 0 of a start accepted with atol=1e-3 (column
    norms 1.0001) raised from the error metric's unit-norm check."""
    import warnings

    import rssm

    prob = rssm.problems.DPCP.synthetic(n=20, d=3, n_inliers=60, n_outliers=40, seed=0)
    x0 = prob.initial_point() * 1.0001
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        res = rssm.minimize(prob, x0, atol=1e-3, max_iter=5)
    assert np.isfinite(res.trace["error"][0]) and res.n_iter == 5


@pytest.mark.parametrize("method", ["rssm", "rsm"])
def test_generators_in_the_same_state_give_the_same_bits(method, small_odl):
    """An audit: the start came from ``rng.spawn(1)``, which also depends on how many
    children the Generator's seed sequence spawned before; two Generators whose
    ``bit_generator.state`` was equal gave different runs (RSSM ended at f 1600.60 and
    1616.81), and one Generator spawned from before behaved as another seed."""
    kw = dict(method=method, options={"n_blocks": 3}, stepsize=Geometric(0.03, 0.97),
              max_iter=60)
    g1 = np.random.default_rng(3)
    g2 = np.random.Generator(np.random.PCG64())
    g2.bit_generator.state = g1.bit_generator.state
    g3 = np.random.default_rng(3)
    g3.spawn(2)                                  # the state is unchanged by a spawn
    runs = [rssm.minimize(small_odl, seed=g, **kw) for g in (g1, g2, g3)]
    _same_result(runs[0], runs[1])
    _same_result(runs[0], runs[2])
    # the call draws from the Generator: its next call is another run
    assert g1.bit_generator.state == g2.bit_generator.state
    assert not np.array_equal(rssm.minimize(small_odl, seed=g1, **kw).x, runs[0].x)
    # a start given: nothing is drawn for it (RSM then draws nothing at all)
    g = np.random.default_rng(3)
    state = g.bit_generator.state
    rssm.minimize(small_odl, small_odl.initial_point(0), method="rsm", seed=g,
                  stepsize=0.01, max_iter=5)
    assert g.bit_generator.state == state


def test_a_stop_criterion_without_a_limit_keeps_the_default_budget(small_dpcp):
    """An audit: any ``stop=`` took the default budget away: a criterion that never fires
    (a cost level not reached) ran for ever. A limit inside ``stop`` replaces it."""
    from rssm.stopping import MaxIterations, StoppingCriterion, StopReason

    class Never(StoppingCriterion):            # (but a safety net for the old code)
        def check(self, progress):
            return StopReason.CALLBACK if progress.iteration >= 3000 else None

        def message(self, progress):
            return ""

    kw = dict(method="rsm", stepsize=1e-3, tol=0, seed=0)
    never = Never()
    res = rssm.minimize(small_dpcp, stop=never, **kw)
    assert res.stop_reason.value == "max_iter" and res.n_iter == 1000
    res = rssm.minimize(small_dpcp, stop=never | MaxIterations(1500), **kw)
    assert res.stop_reason.value == "max_iter" and res.n_iter == 1500
    res = rssm.minimize(small_dpcp, stop=never & MaxIterations(20), **kw)
    assert res.n_iter == 1000                    # "&" with a level: no limit of its own


@pytest.mark.parametrize("ret", [np.array([False, False]), np.array([])])
def test_a_callback_returning_an_array_is_named(small_dpcp, ret):
    with pytest.raises(TypeError, match=r"callback returned an array of shape .* return "
                                        "True to stop the run, False or None to go on"):
        rssm.minimize(small_dpcp, callback=lambda progress: ret, max_iter=5, seed=0)


def test_selection_names_in_any_case(small_odl):
    kw = dict(method="rssm", max_iter=12, seed=0, stepsize=0.01)
    a = rssm.minimize(small_odl, options={"n_blocks": 3, "selection": "Cyclic"}, **kw)
    b = rssm.minimize(small_odl, options={"n_blocks": 3, "selection": "cyclic"}, **kw)
    _same_result(a, b)
    # "Uniform" is the paper's rule, as "uniform": no method asked for, RSM it is (a
    # review: it chose RSSM, which only a selection other than "uniform" asks for)
    for sel in ("uniform", "Uniform", "UNIFORM"):
        res = rssm.minimize(small_odl, options={"selection": sel}, max_iter=3, seed=0)
        assert res.method == "rsm", sel


def test_a_callback_returning_a_tensor_is_named(small_dpcp):
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=r"callback returned a Tensor, which is neither"):
        rssm.minimize(small_dpcp, callback=lambda progress: torch.tensor([False, False]),
                      max_iter=5, seed=0)


def test_a_run_without_an_iteration_budget_thins_its_trace(monkeypatch):
    """A user's audit of long runs: with ``max_time`` alone (no iteration budget) the
    default trace took a row every 10 iterations for as long as the run went, 50 000
    rows in a minute. The spacing now doubles after each THIN_ROWS rows (10 here, 1000
    by default), so the rows grow with the log of the iterations; ``record=`` given, or
    an iteration budget, keeps its spacing."""
    from rssm.solvers import record as record_mod
    from rssm.stopping import MaxIterations, StoppingCriterion, StopReason

    class At3000(StoppingCriterion):
        """A criterion of the user's that ends the run by itself (no iteration budget
        rssm can read, as with max_time alone)."""

        limits_run = True

        def check(self, progress):
            return StopReason.MAX_ITER if progress.iteration >= 3000 else None

    monkeypatch.setattr(record_mod, "THIN_ROWS", 10)
    prob = rssm.problems.DPCP.synthetic(n=8, d=2, n_inliers=30, n_outliers=20, seed=0)
    res = rssm.minimize(prob, stepsize=1e-3, tol=0, stop=At3000(), seed=0)
    its = np.asarray(res.trace["iteration"])
    assert res.n_iter == 3000 and its[-1] == 3000
    gaps = np.diff(its[:-1])
    assert gaps[0] == 10 and np.all(np.diff(gaps) >= 0)          # the spacing only grows
    assert set(gaps.tolist()) <= {10, 20, 40, 80, 160, 320}
    assert len(its) <= 6 * 10 + 2                                 # about 10 rows a doubling
    fixed = rssm.minimize(prob, stepsize=1e-3, tol=0, stop=At3000(), seed=0, record=10)
    assert len(fixed.trace["iteration"]) == 301
    budget = rssm.minimize(prob, stepsize=1e-3, tol=0, max_iter=3000, seed=0)
    assert len(budget.trace["iteration"]) == 201
    # a MaxIterations given in stop= is a budget too (a review found it thinned)
    for stop in (MaxIterations(3000), MaxIterations(3000) | At3000()):
        given = rssm.minimize(prob, stepsize=1e-3, tol=0, stop=stop, seed=0)
        assert len(given.trace["iteration"]) == 201
    np.testing.assert_array_equal(res.x, fixed.x)                 # recording moves nothing


def test_results_compare_by_value_arrays_and_nan_included():
    """`==` on two Results compares their data: a copy, a pickle and a JSON round trip
    are equal, a second run differs in its time, a changed entry of x makes them differ.
    Before, every comparison but a Result with itself raised NumPy's "truth value of an
    array ... is ambiguous" (the dataclass's own __eq__ compared arrays as tuple items)."""
    import copy
    import json
    import pickle

    prob = rssm.problems.DPCP.synthetic(n=20, d=2, n_inliers=100, n_outliers=50, seed=0)
    for method in ("rsm", "rssm"):
        res = rssm.minimize(prob, method=method, seed=0, max_iter=40)
        assert res == copy.deepcopy(res)
        assert res == pickle.loads(pickle.dumps(res))
        assert res == rssm.Result.from_dict(json.loads(json.dumps(res.to_dict(arrays=True))))
        again = rssm.minimize(prob, method=method, seed=0, max_iter=40)
        assert np.array_equal(again.x, res.x)
        assert (again == res) is (again.time == res.time)
        other = copy.deepcopy(res)
        other.x[0, 0] = np.nextafter(other.x[0, 0], 2.0)        # one unit in the last place
        assert res != other
        assert (res == "a result") is False
        with pytest.raises(TypeError, match="unhashable"):
            hash(res)


def test_misused_arguments_are_named_before_the_run():
    """Mistakes of a first hour (a user's audit): each is refused before any iteration with
    the argument, how rssm calls it, or the keyword meant. Before: Python's bare "takes 0
    positional arguments but 1 was given" at the first row, "got ABCMeta" for a class, and
    "unexpected keyword argument 'max_iters'" with no hint."""
    prob = rssm.problems.DPCP.synthetic(n=10, d=2, n_inliers=40, n_outliers=20, seed=0)
    cases = [
        (dict(callback=lambda: None), r"callback is called as callback\(progress\), but "
                                      r"<lambda>\(\) does not accept 1 positional argument"),
        (dict(callback=lambda x, k: None), r"<lambda>\(x, k\) does not accept"),
        (dict(observers=[rssm.Observer]),
         r"observers\[0\] .* got the class Observer itself \(pass an instance\)"),
        (dict(record=rssm.Record), r"got the class Record itself"),
        (dict(stop=rssm.stopping.MaxIterations), r"got the class MaxIterations itself"),
        (dict(stop=lambda p: True), r"a function of the progress goes in callback="),
        (dict(max_iters=10), r"'max_iters'; did you mean max_iter\?"),
        (dict(tolerance=1e-6), r"did you mean tol\?"),
        (dict(n_block=3), r"did you mean options=\{'n_blocks': \.\.\.\}\?"),
        (dict(stepsiz=0.1), r"did you mean stepsize\? \(minimize takes x0, method, stepsize"),
    ]
    for kw, match in cases:
        with pytest.raises(TypeError, match=match):
            rssm.minimize(prob, **kw)
    with pytest.raises(TypeError, match=r"got the class DPCP itself \(pass an instance\)"):
        rssm.minimize(rssm.problems.DPCP)
    with pytest.raises(TypeError, match=r"Record column 'a' is called as fn\(x\), but"):
        rssm.Record(columns={"a": lambda: 0.0})
    y = np.random.default_rng(0).standard_normal((10, 50))
    with pytest.raises(TypeError, match=r"partial_subgradient is called as "
                                        r"partial_subgradient\(x, cols\), but partial\(x\)"):
        def partial(x):
            return x
        rssm.Problem.from_functions(lambda x: float(np.abs(y.T @ x).sum()),
                                    lambda x: y @ np.sign(y.T @ x), partial, shape=(10, 3))
    with pytest.raises(TypeError, match=r"cost is called as cost\(x\), but"):
        rssm.Problem.from_functions(lambda: 0.0, lambda x: x, shape=(10, 3))
    # what takes more arguments with defaults, or *args, passes; so does a decorator's
    # wrapper (functools.wraps) that takes (x) around f(w, x): rssm calls the wrapper
    rssm.Problem.from_functions(lambda x, scale=1.0: 0.0, lambda *a: a[0], shape=(10, 3))
    import functools

    def with_weight(f):
        @functools.wraps(f)
        def wrapper(x):
            return f(2.0, x)
        return wrapper

    @with_weight
    def cost(w, x):
        return float(w * np.abs(y.T @ x).sum())

    @with_weight
    def sub(w, x):
        return w * (y @ np.sign(y.T @ x))

    res = rssm.minimize(rssm.Problem.from_functions(cost, sub, shape=(10, 3)), max_iter=5)
    assert res.n_iter == 5


@pytest.mark.parametrize("make", [
    lambda: rssm.problems.DPCP.synthetic(n=20, d=2, n_inliers=120, n_outliers=80, seed=1),
    lambda: rssm.problems.ODL.synthetic(n=8, seed=0),
    lambda: rssm.problems.L1Procrustes.synthetic(n=12, p=3, seed=2),
])
def test_the_traces_error_column_is_the_problems_error_at_each_row(make):
    """The recorder measures the built-ins' errors without re-checking the iterate (the
    checks of the metric's inputs were 50 of the 60 us of a row on a small DPCP): the
    column holds problem.error(X) at every recorded X, to the bit; a subclass whose
    `error` is its own is called for it."""
    prob = make()
    xs = []
    res = rssm.minimize(prob, record=1, max_iter=60,
                        callback=lambda progress: xs.append(progress.x.copy()))
    assert len(xs) == len(res.trace["error"])
    np.testing.assert_array_equal(res.trace["error"], [prob.error(x) for x in xs])

    class Mine(type(prob)):
        def error(self, x):
            return 7.0

    mine = prob.__class__.__new__(Mine)
    mine.__dict__.update(prob.__dict__)
    assert np.all(rssm.minimize(mine, record=1, max_iter=5).trace["error"] == 7.0)
    # an error set on the instance (or patched by a mock) is called too (a review: the
    # first version looked at the class only)
    import copy

    patched = copy.deepcopy(prob)
    patched.error = lambda x: 123.0
    res = rssm.minimize(patched, record=1, max_iter=5)
    assert np.all(res.trace["error"] == 123.0) and res.error == 123.0
    # a ground truth assigned after construction is measured as error measures it
    later = copy.deepcopy(prob)
    name = {"DPCP": "subspace", "ODL": "dictionary", "L1Procrustes": "x_true"}[
        type(prob).__name__]
    setattr(later, name, np.asfortranarray(getattr(prob, name)).astype(np.float32))
    xs.clear()
    res = rssm.minimize(later, record=1, max_iter=20,
                        callback=lambda progress: xs.append(progress.x.copy()))
    np.testing.assert_array_equal(res.trace["error"], [later.error(x) for x in xs])


@pytest.mark.parametrize("cap", [math.inf, (math.inf, 1.0), np.array([math.inf, 1.0])])
def test_a_rules_infinite_or_array_setting_survives_a_strict_json_round_trip(cap):
    # (an audit: an array setting with an inf broke strict JSON, and an inf or a tuple
    # came back as "inf" or a list, so the Result read back was not equal to the run's)
    import json

    from rssm.stepsizes import StepSize

    class Capped(StepSize):
        def __init__(self, c, cap):
            self.c, self.cap = c, cap

        def __call__(self, k, ctx):
            return min(self.c, float(np.min(self.cap)))

    prob = rssm.problems.DPCP.synthetic(n=20, d=2, n_inliers=50, n_outliers=20, seed=0)
    res = rssm.minimize(prob, stepsize=Capped(1e-3, cap), max_iter=5, seed=1)
    text = json.dumps(res.to_dict(arrays=True), allow_nan=False)
    back = rssm.Result.from_dict(json.loads(text))
    assert back == res
    assert json.loads(text)["stepsize"]["cap"] in ("inf", ["inf", 1.0])


def test_result_from_dict_names_what_is_not_to_dict_output():
    """A dict that is not `Result.to_dict` output got Python's KeyError or AttributeError
    from inside, and some values (n_iter "x", x None) made a Result that failed later (a
    user's audit); each is named now, and to_dict output still round-trips."""
    import json

    prob = rssm.problems.DPCP.synthetic(n=20, d=2, n_inliers=100, n_outliers=50, seed=0)
    res = rssm.minimize(prob, max_iter=20)
    good = json.loads(json.dumps(res.to_dict(arrays=True)))
    assert rssm.Result.from_dict(good) == res
    assert rssm.Result.from_dict(res.to_dict()).x.shape == res.x.shape
    with pytest.raises(TypeError, match="takes the dict Result.to_dict.. returns, got list"):
        rssm.Result.from_dict([])
    cases = [({}, "the dict has no 'fun', 'n_iter', 'time', 'flops', 'stop_reason'"),
             (dict(good, stop_reason="bogus"), r"stop_reason must be one of \['max_iter'"),
             (dict(good, n_iter="x"), "n_iter must be an integer, got 'x'"),
             (dict(good, x=[1.0, 2.0]), r"x must be a matrix \(n x p\)"),
             (dict(good, method=5), "method must be a str, got int")]
    for data, words in cases:
        with pytest.raises(ValueError, match=words):
            rssm.Result.from_dict(data)


# -- behaviour a mutation audit found unpinned (each assertion failed on a mutant) ------------
def test_seed_s_draws_the_block_pairs_from_default_rng_s_2():
    # `minimize`'s docstring: seed s draws the block pairs from default_rng([s, 2]), in
    # batches of 1024 uniform indices into the pair table (UniformPairs)
    from rssm.blocks import pair_table

    prob = rssm.problems.DPCP.synthetic(n=30, d=3, n_inliers=300, n_outliers=600, seed=0)
    ii, jj = pair_table(4)
    for s in (0, 7):
        pairs = []

        def rule(k, ctx, pairs=pairs):
            pairs.append(ctx.pair)
            return 1e-3

        rssm.minimize(prob, method="rssm", stepsize=rule, options={"n_blocks": 4},
                      max_iter=40, seed=s, tol=0)
        draws = np.random.default_rng([s, 2]).integers(0, ii.size, size=1024)[:40]
        assert pairs == [(int(ii[k]), int(jj[k])) for k in draws]


@pytest.mark.parametrize("method, options", [("rsm", {}), ("rssm", {"n_blocks": 3}),
                                              (None, {})])
@pytest.mark.parametrize("every", [None, 1])
def test_n_cost_counts_every_evaluation_of_the_users_cost(method, options, every):
    # Result.n_cost: "cost evaluations by the solver": the first search's trials, the
    # rule's reads, the verdict's probes and the recorded rows all call the user's f
    rng = np.random.default_rng(0)
    a = rng.standard_normal((40, 8))
    b = a @ np.linalg.qr(rng.standard_normal((8, 3)))[0]
    calls = [0]

    def f(x):
        calls[0] += 1
        return float(np.abs(a @ x - b).sum())

    prob = Problem.from_functions(f, lambda x: a.T @ np.sign(a @ x - b),
                                  lambda x, c: a.T @ np.sign(a @ x[:, c] - b[:, c]),
                                  shape=(8, 3))
    kw = {} if every is None else {"record": rssm.Record(every=every)}
    res = rssm.minimize(prob, method=method, options=options, seed=1, **kw)
    assert res.stop_reason is StopReason.CONVERGED
    assert res.n_cost == calls[0] > 0


def test_the_never_lower_advice_comes_from_ten_iterations_on():
    # a subgradient of the wrong sign: no iterate goes below f(x0); the advice is given to
    # runs of at least NEVER_LOWER_AFTER = 10 iterations (not to shorter ones)
    from rssm.solvers.loop import NEVER_LOWER_AFTER

    a = np.random.default_rng(0).standard_normal((20, 20))
    prob = Problem.from_functions(lambda x: float(np.abs(a @ x).sum()),
                                  lambda x: -(a.T @ np.sign(a @ x)), shape=(20, 3))
    assert NEVER_LOWER_AFTER == 10
    for budget, said in ((9, False), (10, True), (11, True)):
        res = rssm.minimize(prob, method="rsm", max_iter=budget, seed=1)
        assert res.stop_reason is StopReason.MAX_ITER and res.best_iteration == 0
        assert ("no iterate was below the start" in res.message) is said, budget


@pytest.mark.parametrize("n_blocks", [2, 3, 4])
def test_rssm_on_a_constant_cost_stops_after_two_sweeps_without_a_move(n_blocks):
    # docs/stepsizes.md, "Runs that stall are kept": after 2 binom(l, 2) iterations in a
    # row whose direction is 0 (and the full direction is 0 too), converged
    prob = Problem.from_functions(lambda x: float(np.sum(x * x)), lambda x: 2 * x,
                                  lambda x, c: 2 * x[:, c], shape=(12, 4))
    res = rssm.minimize(prob, method="rssm", options={"n_blocks": n_blocks}, max_iter=100,
                        seed=1)
    assert res.stop_reason is StopReason.CONVERGED
    assert res.n_iter == 2 * math.comb(n_blocks, 2)


def test_the_last_iterate_stays_feasible_after_steps_far_beyond_the_manifold():
    # clip_steps=False with a constant step of 1e8: the retraction's fallback re-projects,
    # so x_last, not only the returned best point, is on St(n, p) to rounding
    prob = rssm.problems.DPCP.synthetic(n=30, d=3, n_inliers=300, n_outliers=600, seed=0)
    res = rssm.minimize(prob, method="rssm", stepsize=rssm.stepsizes.Constant(1e8),
                        max_iter=200, seed=1, tol=0, options={"clip_steps": False})
    assert stiefel.feasibility(res.x_last) < 1e-14
    assert res.feasibility < 1e-14


def test_best_iteration_and_the_repr_say_which_iterate_x_is():
    # target_error returns the last iterate: best_iteration is its iteration, even where
    # an earlier iterate had a lower cost (the direction here climbs)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 8))
    a = a + a.T
    calls = [0]

    def error(x):
        calls[0] += 1
        return 1.0 if calls[0] <= 3 else 0.0

    prob = Problem.from_functions(lambda x: float(np.trace(x.T @ a @ x)),
                                  lambda x: -2 * a @ x, shape=(8, 3), error=error)
    res = rssm.minimize(prob, method="rsm", stepsize=1e-2, max_iter=200, target_error=0.5,
                        tol=0, seed=0)
    assert res.stop_reason is StopReason.TARGET_ERROR
    assert np.array_equal(res.x, res.x_last) and res.best_iteration == res.n_iter == 2
    assert "best iterate" not in repr(res)
    # the default call returning an earlier iterate says so in its repr
    prob = rssm.problems.DPCP.synthetic(n=20, d=10, n_inliers=150, n_outliers=80, seed=1)
    res = rssm.minimize(prob, method="rssm", seed=0, max_iter=4000)
    assert res.best_iteration < res.n_iter
    assert f"(best iterate, from iteration {res.best_iteration})" in repr(res)


def test_an_rssm_iteration_without_a_partial_oracle_counts_a_full_subgradient():
    # no partial_subgradient: each RSSM iteration computes the full one, and its flops
    # count as such (Result.flops, partial_subgradient_flops)
    import warnings

    a = np.random.default_rng(0).standard_normal((8, 8))
    a = a + a.T
    prob = Problem.from_functions(lambda x: float(np.trace(x.T @ a @ x)), lambda x: 2 * a @ x,
                                  shape=(8, 6), subgradient_flops=1000.0)
    assert prob.partial_subgradient_flops(2) == 1000.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = rssm.minimize(prob, method="rssm", max_iter=100, seed=0, tol=0)
        ref = rssm.minimize(prob, method="rsm", max_iter=100, seed=0, tol=0)
    assert res.flops >= 100 * 1000.0 and ref.flops >= 100 * 1000.0


def test_a_thinned_trace_keeps_its_rows_on_the_grid_of_their_spacing():
    # a trace without an iteration budget (max_time only) doubles its spacing every
    # THIN_ROWS rows; each doubling waits for an iteration on the new grid, so every row
    # is a multiple of the spacing that led to it (a mutant doubled off the grid and lost
    # the row at iteration 150 000 of a 200 000-iteration run)
    from types import SimpleNamespace

    from rssm.solvers.record import THIN_ROWS, TraceRecorder

    prob = Problem.from_functions(lambda x: 0.0, lambda x: 0 * x, shape=(2, 1))
    rec = TraceRecorder(prob, rssm.Record(), every=10, thin=True)
    st = SimpleNamespace(x=np.eye(2, 1), k=0, time=0.0, flops=0.0, step_norm=0.0,
                         best_fun=0.0, oracle=None, cost=lambda: 0.0)
    for k in range(200_001):
        if rec.due(k):
            st.k = k
            rec.record(st)
    its = rec.as_dict()["iteration"].astype(int)
    gaps = np.diff(its)
    assert np.all(gaps[1:] >= gaps[:-1]) and set(gaps) <= {10 * 2**j for j in range(12)}
    assert np.all(its[1:] % gaps == 0) and 150_000 in its
    assert len(its) < 6 * THIN_ROWS
