"""Adaptive step sizes (issue 11): the step-size protocol (direction first, then gamma),
the A_X^{-1}-norm estimate behind the block Polyak rule, Polyak, the tuning-free rules and
"auto", scale invariance, runs that stall instead of raising, MinStepNorm, and
`initial_point` for every registered problem."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.linalg import null_space

import rssm
from rssm import stiefel
from rssm.blocks import Partition, UniformPairs
from rssm.problems import DPCP, REGISTRY, CompositeProblem, NormLoss
from rssm.solvers import RSMSolver, RSSMSolver
from rssm.stepsizes import (
    AdaptiveGeometric,
    Auto,
    Backtracking,
    Geometric,
    Polyak,
    PolyakBest,
    PolyakLevel,
    StepContext,
)
from rssm.stopping import MinStepNorm, StopReason


@pytest.fixture(scope="module")
def dpcp():
    """DPCP on St(30, 25), 150 inliers and 100 outliers, with its optimal value f(S^perp)."""
    prob = DPCP.synthetic(n=30, d=5, n_inliers=150, n_outliers=100, seed=5)
    return prob, prob.cost(null_space(prob.subspace.T))


# -- the protocol ------------------------------------------------------------------------


@pytest.mark.parametrize("ell", [2, 3, 5])
def test_grad_sq_is_unbiased_over_pairs(dpcp, ell):
    """eq. eq-cindepNorm2: the mean over all binom(l, 2) pairs of the A_X^{-1}-norm of the
    lifted partial Riemannian subgradient equals ||grad f(X)||^2 (an identity at a fixed
    X, here to 1e-12), while the plain Frobenius norms average to much less (l >= 3)."""
    prob, _ = dpcp
    x = stiefel.random_point(*prob.shape, np.random.default_rng(ell))
    full = float(np.sum(prob.riemannian_subgradient(x) ** 2))
    part = Partition.uniform(prob.shape[1], ell)
    est, plain = [], []
    for i, j in itertools.combinations(range(ell), 2):
        solver = RSSMSolver(prob, x, part, UniformPairs(), np.random.default_rng(0))
        solver.selector.next_pair = lambda i=i, j=j: (i, j)
        d = solver.direction(solver.state)
        est.append(d.grad_sq)
        plain.append(d.norm_sq)
    assert np.mean(est) == pytest.approx(full, rel=1e-12)
    if ell >= 3:
        assert np.mean(plain) < 0.7 * full
    rsm = RSMSolver(prob, x, None, None, np.random.default_rng(0))
    d = rsm.direction(rsm.state)
    assert d.norm_sq == d.grad_sq == pytest.approx(full, rel=1e-12)


def test_split_step_matches_the_fused_step_bit_for_bit(dpcp):
    """direction() + apply(gamma) gives exactly the iterate of the fused step formulas."""
    prob, _ = dpcp
    x0 = prob.initial_point()
    part = Partition.uniform(prob.shape[1], 4)
    solver = RSSMSolver(prob, x0, part, UniformPairs(), np.random.default_rng(3))
    solver.selector.next_pair = lambda: (0, 2)
    cols = part.columns(0, 2)
    g = solver.oracle.partial_subgradient(cols)
    want = stiefel.submanifold_step(x0.copy(), cols.selector, g, 0.07)
    solver.step(0.07)
    np.testing.assert_array_equal(solver.x[:, cols.index], want)
    assert solver.step_norm == pytest.approx(np.linalg.norm(want - x0[:, cols.index]), rel=1e-12)
    rsm = RSMSolver(prob, x0, None, None, np.random.default_rng(0))
    want = stiefel.full_step(x0, rsm.oracle.subgradient(), 0.07)
    rsm.step(0.07)
    np.testing.assert_array_equal(rsm.x, want)


def test_context_offers_cost_norm_and_trial(dpcp):
    """A rule sees f(X_k), the direction's norm and a trial evaluation (a pure query: X_k
    does not move); a trial that is kept is the next iterate."""
    prob, _ = dpcp
    x0 = prob.initial_point()
    seen = []

    def rule(k, ctx):
        f = ctx.cost
        assert f == pytest.approx(prob.cost(ctx_x[0]), rel=1e-12)
        f_trial = ctx.trial(1e-3)
        assert ctx.cost == f  # f(X_k) is not the trial's value
        seen.append((k, ctx.direction_norm, ctx.grad_sq, f, f_trial, ctx.decreased))
        return 1e-3 if k % 2 == 0 else 2e-3

    ctx_x = [None]
    orig = RSSMSolver.direction

    def spy(self, state):
        ctx_x[0] = state.x.copy()
        return orig(self, state)

    RSSMSolver.direction = spy
    try:
        res = rssm.minimize(
            prob, x0,
                method="rssm", stepsize=rule, max_iter=6, seed=2, record=1, options={"n_blocks": 3}
        )
    finally:
        RSSMSolver.direction = orig
    assert [s[0] for s in seen] == list(range(6))
    assert all(s[1] > 0 and s[2] > 0 for s in seen)
    # iteration k's trial with gamma = 1e-3 was kept at even k: f(X_{k+1}) equals it
    for k in (0, 2, 4):
        assert seen[k + 1][3] == pytest.approx(seen[k][4], rel=1e-12)
    assert seen[0][5] is None and all(s[5] is not None for s in seen[1:])
    assert res.fun == pytest.approx(prob.cost(res.x), rel=1e-12)


def test_plain_callables_and_schedules_still_work(dpcp):
    """The old protocol: a callable (k, ctx) and ctx.method/n_blocks/epoch unchanged."""
    prob, _ = dpcp
    calls = []

    def rule(k, ctx):
        calls.append((k, ctx.method, ctx.n_blocks, ctx.epoch))
        return 0.01

    res = rssm.minimize(
        prob, method="rssm", stepsize=rule, max_iter=3, seed=0, options={"n_blocks": 4}
    )
    assert calls == [(k, "rssm", 4, 2.0) for k in range(3)] and res.n_iter == 3
    ctx = StepContext("rsm", 1)
    assert Geometric(0.5, 0.5)(2, ctx) == 0.125
    with pytest.raises(ValueError, match="only available during a run"):
        ctx.cost  # noqa: B018


def _fed(mean, ctx, values):
    out = []
    for v in values:
        ctx.grad_sq = v
        out.append(mean(ctx))
    return out


def test_the_windowed_gradient_mean_is_exact_after_a_fall_of_21_orders():
    """Issue 18: the mean of ||grad f||^2 estimates kept a running total, so after values
    near 1 the mean of a window holding only 1e-21 was rounding noise (5.6e-17 for RSM,
    the window of one value), and gamma ~ 1/mean blew up. The window is summed exactly."""
    from rssm.stepsizes._common import GradMean

    rsm = StepContext("rsm", 1)
    assert _fed(GradMean(), rsm, [1.0, 0.3, 1e-3, 1e-21])[-1] == 1e-21
    ctx = StepContext("rssm", 3)   # window of binom(3, 2) = 3 values
    vals = [1.0, 0.3, 1e-3, 1e-21, 2e-21, 3e-21, 5e-30]
    got = _fed(GradMean(), ctx, vals)
    for i, g in enumerate(got):
        window = vals[max(0, i - 2):i + 1]
        assert g == pytest.approx(math.fsum(window) / len(window), rel=1e-15, abs=0)
    assert got[5] == pytest.approx(2e-21, rel=1e-15)


def test_adaptive_rules_never_propose_a_step_longer_than_the_manifold():
    """Every adaptive rule caps gamma ||P(G_C)||_F at the diameter of the columns it moves
    (rssm.stepsizes.max_step_length), whatever the cost says."""
    from rssm.stepsizes import max_step_length

    class Ctx(StepContext):
        pass

    for method, ell in (("rsm", 1), ("rssm", 3)):
        for rule in (Polyak(-1e300), PolyakLevel(t0=1e6), PolyakBest(t0=1e6),
                     AdaptiveGeometric(t0=1e6), Auto(t0=1e6)):
            ctx = Ctx(method, ell, (10, 6))
            ctx._cost_fn = lambda: 1.0
            ctx._trial_fn = lambda gamma: 0.0      # every trial "decreases" f
            for k in range(3):
                ctx.advance(k, 1e-12, 1e-24)
                gamma = rule(k, ctx)
                assert gamma * 1e-12 <= max_step_length(ctx) * (1 + 1e-12), (rule, k)
    assert max_step_length(StepContext("rsm", 1, (10, 6))) == pytest.approx(2 * math.sqrt(6))
    assert max_step_length(StepContext("rssm", 3, (10, 6))) == pytest.approx(2 * math.sqrt(4))


# -- Polyak and the tuning-free rules ----------------------------------------------------


@pytest.mark.parametrize("method,ell,budget", [("rsm", 1, 60), ("rssm", 3, 150),
                                                ("rssm", 5, 300)])
def test_polyak_with_the_optimal_value_converges_linearly(dpcp, method, ell, budget):
    """Polyak's rule with f* (block rule for RSSM: the averaged A_X^{-1}-norm estimate)
    reaches error 1e-9 within the budget (measured: see docs/stepsizes.md)."""
    prob, f_star = dpcp
    res = rssm.minimize(
        prob, method=method, stepsize=Polyak(f_star), max_iter=budget, target_error=1e-9,
        seed=1, record=1, options={"n_blocks": max(ell, 2)}
    )
    assert res.stop_reason in (StopReason.TARGET_ERROR, StopReason.STALLED), res.message
    assert res.error <= 1e-9


def test_polyak_stalls_once_f_star_is_reached(dpcp):
    prob, f_star = dpcp
    res = rssm.minimize(prob, method="rsm", stepsize=Polyak(prob.cost(prob.initial_point())),
                        max_iter=10)
    assert res.stop_reason is StopReason.STALLED and res.n_iter == 0
    assert "f_star" in res.message
    with pytest.raises(ValueError, match="f_star must be finite"):
        Polyak(math.nan)
    with pytest.raises(ValueError, match="scale must be < 2"):
        Polyak(0.0, scale=2.0)


@pytest.mark.parametrize("rule", [Auto, PolyakLevel, PolyakBest, AdaptiveGeometric,
                                  Backtracking])
@pytest.mark.parametrize("method", ["rsm", "rssm"])
def test_tuning_free_rules_decrease_f(dpcp, rule, method):
    """Every candidate makes progress from the spectral start without any constant."""
    prob, f_star = dpcp
    x0 = prob.initial_point()
    res = rssm.minimize(
        prob, x0, method=method, stepsize=rule(), max_iter=150, seed=4, options={"n_blocks": 3}
    )
    assert res.stop_reason in (StopReason.MAX_ITER, StopReason.STALLED, StopReason.CONVERGED)
    assert res.fun - f_star < 0.5 * (prob.cost(x0) - f_star)


@pytest.mark.parametrize("rule", [PolyakLevel, PolyakBest, AdaptiveGeometric, Backtracking])
def test_every_tuning_free_candidate_is_invariant_to_scaling_f(rule):
    base = DPCP.synthetic(n=12, d=3, n_inliers=40, n_outliers=30, seed=9)
    m = base.m
    x0 = base.initial_point()
    runs = [rssm.minimize(
        CompositeProblem(base.yt, base.p, NormLoss.norm(),
                                           sample_weights=np.full(m, c / m)),
        x0, method="rssm", stepsize=rule(), max_iter=60, seed=2, options={"n_blocks": 3}
    )
            for c in (1.0, 1e-6, 1e6)]
    for r in runs[1:]:
        np.testing.assert_allclose(r.x, runs[0].x, rtol=0, atol=1e-9)


@pytest.mark.parametrize("scale", [1e-6, 1e6])
def test_auto_is_invariant_to_scaling_f(scale):
    """f -> c f (c = 1e-6, 1e6) leaves the "auto" iterates unchanged to rounding."""
    base = DPCP.synthetic(n=20, d=4, n_inliers=80, n_outliers=60, seed=8)
    m = base.m
    one = CompositeProblem(base.yt, base.p, NormLoss.norm(), sample_weights=np.full(m, 1 / m))
    scaled = CompositeProblem(base.yt, base.p, NormLoss.norm(),
                              sample_weights=np.full(m, scale / m))
    x0 = base.initial_point()
    for method, budget in (("rsm", 200), ("rssm", 300)):
        a = rssm.minimize(
            one, x0, method=method, max_iter=budget, seed=6, options={"n_blocks": 4}
        )
        b = rssm.minimize(
            scaled, x0, method=method, max_iter=budget, seed=6, options={"n_blocks": 4}
        )
        assert a.stepsize["rule"] == "Auto"
        assert b.fun == pytest.approx(scale * a.fun, rel=1e-9)
        np.testing.assert_allclose(b.x, a.x, rtol=0, atol=1e-9)
        assert base.error(a.x) < 1e-6


def test_auto_is_the_default_for_built_in_and_custom_problems(dpcp):
    prob, _ = dpcp
    assert rssm.minimize(prob, max_iter=2, seed=0).stepsize["rule"] == "Auto"
    assert rssm.minimize(prob, stepsize="auto", max_iter=2).stepsize["rule"] == "Auto"
    y = np.random.default_rng(0).standard_normal((8, 100))

    def cost(x):
        return np.abs(y.T @ x).sum()

    def sub(x):
        return y @ np.sign(y.T @ x)

    custom = rssm.Problem.from_functions(cost, sub, shape=(8, 4))
    res = rssm.minimize(custom, method="rsm", max_iter=30, seed=0)
    assert res.stepsize["rule"] == "Auto" and res.fun < res.trace["cost"][0]
    given = rssm.Problem.from_functions(cost, sub, shape=(8, 4), stepsize=1e-3)
    assert rssm.minimize(given, method="rsm", max_iter=3).stepsize == {"rule": "Constant",
                                                                        "c": 1e-3}
    with pytest.raises(ValueError, match="unknown step-size rule 'fast'; allowed: auto"):
        rssm.minimize(prob, stepsize="fast")


# -- runs that stall are kept ------------------------------------------------------------


def test_underflowing_geometric_step_stalls_at_iteration_405(small_dpcp):
    """Geometric(1, 0.01) with l = 5: gamma_k = 0.01^(k / 2.5) underflows to 0 at k = 405;
    the run returns its 405 iterations with ``stalled`` instead of raising."""
    res = rssm.minimize(small_dpcp, method="rssm", stepsize=Geometric(1.0, 0.01), max_iter=1000,
                        seed=0)
    assert res.stop_reason is StopReason.STALLED
    assert res.n_iter == 405
    assert "gamma_405 of the step-size rule Geometric(mu0=1, beta=0.01) reached 0" in res.message
    assert res.trace["iteration"][-1] == 405 and np.isfinite(res.fun)


def test_a_rule_that_raises_after_the_start_stalls_the_run(small_dpcp):
    def rule(k, ctx):
        if k == 7:
            raise RuntimeError("boom")
        return 1e-3

    res = rssm.minimize(small_dpcp, stepsize=rule, max_iter=20, seed=0)
    assert res.stop_reason is StopReason.STALLED and res.n_iter == 7
    assert "RuntimeError: boom" in res.message
    with pytest.raises(RuntimeError, match="boom"):  # before the first step: raised
        rssm.minimize(small_dpcp, stepsize=lambda k, ctx: rule(7, ctx), max_iter=20)


def test_min_step_norm_stops_on_a_short_step(small_dpcp):
    seen = []
    res = rssm.minimize(small_dpcp, stepsize=Geometric(0.05, 0.5), max_iter=500, seed=0,
                        stop=MinStepNorm(1e-6), callback=lambda p: seen.append(p.step_norm))
    assert res.stop_reason is StopReason.MIN_STEP and 0 < res.n_iter < 500
    assert "fell below 1e-06" in res.message
    assert seen[0] is None and seen[-1] < 1e-6 and all(s >= 1e-6 for s in seen[1:-1])
    with pytest.raises(ValueError, match="tol must be > 0"):
        MinStepNorm(0.0)


# -- initial points ----------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_problem_takes_no_seed_an_int_or_a_generator(name):
    cls = REGISTRY[name]
    small = {"dpcp": dict(n=10, d=2, n_inliers=30, n_outliers=20), "odl": dict(n=6),
             "sparse_pca": dict(n=20, r=2, m=30, support=4),
             "l1_procrustes": dict(m=40, n=6, p=3), "sparse_basis": dict(n=6, p=2, m=60)}
    prob = cls.synthetic(**small[name], seed=3)
    a = prob.initial_point()
    np.testing.assert_array_equal(a, prob.initial_point())
    np.testing.assert_array_equal(prob.initial_point(0), a)
    b = prob.initial_point(5)
    np.testing.assert_array_equal(b, prob.initial_point(np.random.default_rng([5, 1])))
    for x in (a, b):
        assert x.shape == prob.shape and stiefel.feasibility(x) < 1e-13
    with pytest.raises(TypeError, match="rng must be None, a non-negative int seed"):
        prob.initial_point("seed")
    with pytest.raises(ValueError, match="non-negative"):
        prob.initial_point(-1)


def test_custom_problems_take_a_seed_too():
    prob = CompositeProblem(np.random.default_rng(0).standard_normal((6, 40)), 3,
                            NormLoss.norm())
    np.testing.assert_array_equal(prob.initial_point(), prob.initial_point(0))
    fp = rssm.Problem.from_functions(lambda x: 0.0, np.zeros_like, shape=(5, 2))
    assert stiefel.feasibility(fp.initial_point(7)) < 1e-14
