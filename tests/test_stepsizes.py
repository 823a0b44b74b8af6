"""Step-size rules (`rssm.stepsizes`): values against the formulas of Section 5, epoch
semantics, validation."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rssm
from rssm.stepsizes import (
    Constant,
    Geometric,
    InverseSqrt,
    PaperSchedule,
    StepContext,
    StepSize,
    as_stepsize,
)

KS = [0, 1, 2, 5, 10, 50, 100, 1000, 10**4, 10**6]


def _paper_gamma(k, delta, a, rho, ell, method):
    """gamma_k = Delta_k / (sqrt(k+2) log(k+2)), Delta_k = Delta binom(l,2)^(a rho^k - 1)
    for RSSM and Delta for RSM (Section 5.1 and 5.2)."""
    dk = delta * math.comb(ell, 2) ** (a * rho**k - 1.0) if method == "rssm" else delta
    return dk / (math.sqrt(k + 2) * math.log(k + 2))


@pytest.mark.parametrize("ell", [2, 3, 5, 10])
@pytest.mark.parametrize(
    "preset,params",
    [(PaperSchedule.dpcp, (0.9, 2.0, 0.991)), (PaperSchedule.odl, (1e-3, 4.0, 0.995))],
)
def test_paper_schedule_values(preset, params, ell):
    rule = preset()
    assert (rule.delta, rule.a, rule.rho) == params
    for method in ("rssm", "rsm"):
        ctx = StepContext(method, ell if method == "rssm" else 1)
        for k in KS:
            assert rule(k, ctx) == pytest.approx(_paper_gamma(k, *params, ell, method), rel=1e-13)


def test_paper_dpcp_delta_spans_the_caption_range():
    """Caption of fig-rsr1: Delta_k = 0.9 binom(l,2)^(2 (0.991)^k - 1) lies in [0.02, 40.5]
    for l = 10, the ends reached at k = 0 and k -> infinity."""
    rule = PaperSchedule.dpcp()
    ctx = StepContext("rssm", 10)
    assert rule.delta_k(0, ctx) == pytest.approx(40.5, rel=1e-14)
    assert rule.delta_k(10**6, ctx) == pytest.approx(0.02, rel=1e-14)
    d = np.array([rule.delta_k(k, ctx) for k in range(0, 5000, 7)])
    assert np.all(np.diff(d[:100]) < 0) and np.all(np.diff(d) <= 0)
    assert d.max() <= 40.5 * (1 + 1e-14) and d.min() >= 0.02 * (1 - 1e-14)
    # RSM uses the constant Delta
    assert (
        rule.delta_k(0, StepContext("rsm", 1)) == rule.delta_k(10**5, StepContext("rsm", 1)) == 0.9
    )


def test_paper_schedule_without_exponent_is_plain():
    rule = PaperSchedule(0.5)
    ctx = StepContext("rssm", 5)
    assert rule.delta_k(0, ctx) == rule.delta_k(1000, ctx) == 0.5
    assert rule(0, ctx) == pytest.approx(0.5 / (math.sqrt(2) * math.log(2)), rel=1e-15)


@pytest.mark.parametrize("ell", [2, 3, 4, 10])
def test_geometric_decays_by_beta_per_epoch(ell):
    """An epoch is l/2 RSSM iterations (each moves about 2/l of the columns) or 1 RSM one."""
    rule = Geometric(0.2, 0.9)
    ctx = StepContext("rssm", ell)
    assert ctx.epoch == ell / 2
    assert rule(0, ctx) == 0.2
    for e in range(1, 6):
        if ell % 2 == 0:  # an integer number of iterations per epoch
            assert rule(e * ell // 2, ctx) == pytest.approx(0.2 * 0.9**e, rel=1e-14)
        assert rule(e * ell, ctx) == pytest.approx(0.2 * 0.81**e, rel=1e-14)
    # between epochs: continuous interpolation, decreasing
    vals = [rule(k, ctx) for k in range(20)]
    assert np.all(np.diff(vals) < 0)
    assert rule(1, ctx) == pytest.approx(0.2 * 0.9 ** (2.0 / ell), rel=1e-14)
    rsm = StepContext("rsm", 1)
    assert rsm.epoch == 1.0
    assert [rule(k, rsm) for k in range(3)] == pytest.approx([0.2, 0.18, 0.162], rel=1e-14)
    assert Geometric(0.3, 1.0)(10**6, ctx) == 0.3


def test_constant_and_inverse_sqrt():
    ctx = StepContext("rssm", 4)
    assert [Constant(0.07)(k, ctx) for k in (0, 1, 10**6)] == [0.07] * 3
    rule = InverseSqrt(0.5)
    assert [rule(k, ctx) for k in (0, 3, 99)] == pytest.approx([0.5, 0.25, 0.05], rel=1e-15)


def test_as_stepsize_accepts_rules_callables_numbers():
    rule = Geometric(0.1, 0.5)
    assert as_stepsize(rule) is rule
    const = as_stepsize(0.25)
    assert isinstance(const, Constant) and const.c == 0.25
    assert isinstance(as_stepsize(2), Constant)
    wrapped = as_stepsize(lambda k, ctx: 1.0 / (k + ctx.n_blocks))
    assert isinstance(wrapped, StepSize)
    assert wrapped(3, StepContext("rssm", 5)) == 0.125


def test_describe_reports_parameters():
    d = PaperSchedule.odl().describe()
    assert d == {"rule": "PaperSchedule", "delta": 1e-3, "a": 4.0, "rho": 0.995}
    assert Geometric(0.1, 0.5).describe() == {"rule": "Geometric", "mu0": 0.1, "beta": 0.5}
    assert "mu0=0.1" in repr(Geometric(0.1, 0.5))


def test_minimize_uses_the_given_rule(small_dpcp):
    """A rule that records its calls: k runs 0..max_iter-1 with the solver's context."""
    seen = []

    def rule(k, ctx):
        seen.append((k, ctx.method, ctx.n_blocks))
        return 1e-3

    rssm.minimize(
        small_dpcp, method="rssm", stepsize=rule, max_iter=6, seed=0, options={"n_blocks": 4}
    )
    assert seen == [(k, "rssm", 4) for k in range(6)]
    seen.clear()
    rssm.minimize(small_dpcp, method="rsm", stepsize=rule, max_iter=3, seed=0)
    assert seen == [(k, "rsm", 1) for k in range(3)]
    res = rssm.minimize(
        small_dpcp, method="rssm", max_iter=2, seed=0, options={"n_blocks": 4}
    )  # the default: auto
    assert res.stepsize["rule"] == "Auto"
    assert small_dpcp.reference_stepsize().describe() == PaperSchedule.dpcp().describe()


def test_context_exposes_the_direction(small_dpcp):
    """ctx.direction is this iteration's -P(G_C), read-only, on ctx.columns of the block
    pair ctx.pair; for RSM the whole -grad f(X_k)."""
    x0 = small_dpcp.initial_point(0)
    seen = []

    def rule(k, ctx):
        with pytest.raises(ValueError):
            ctx.direction[0, 0] = 1.0
        seen.append((ctx.direction.copy(), ctx.columns, ctx.pair, ctx.direction_norm))
        return 1e-3

    rssm.minimize(small_dpcp, x0, method="rsm", stepsize=rule, max_iter=1, seed=0)
    d, cols, pair, norm = seen[0]
    np.testing.assert_allclose(d, -small_dpcp.riemannian_subgradient(x0), rtol=0, atol=1e-12)
    assert pair == () and np.array_equal(np.arange(16)[cols], np.arange(16))
    assert norm == pytest.approx(np.linalg.norm(d), rel=1e-12)
    seen.clear()
    rssm.minimize(small_dpcp, x0, method="rssm", stepsize=rule, max_iter=12, seed=0,
                  options={"n_blocks": 4})
    blocks = np.array_split(np.arange(16), 4)
    for d, cols, pair, norm in seen:
        i, j = pair
        assert 0 <= i < j < 4
        assert np.array_equal(np.arange(16)[cols], np.sort(np.r_[blocks[i], blocks[j]]))
        assert d.shape == (20, 8)
        assert norm == pytest.approx(np.linalg.norm(d), rel=1e-12)
    assert len({s[2] for s in seen}) > 1


# --------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make,exc,pattern",
    [
        (lambda: PaperSchedule(0.0), ValueError, "delta must be > 0"),
        (lambda: PaperSchedule(-1.0), ValueError, "delta must be > 0"),
        (lambda: PaperSchedule(math.nan), ValueError, "delta must be finite"),
        (lambda: PaperSchedule(math.inf), ValueError, "delta must be finite"),
        (lambda: PaperSchedule("0.9"), TypeError, "delta must be a real number"),
        (lambda: PaperSchedule(0.9, a=2.0), ValueError, "both a and rho"),
        (lambda: PaperSchedule(0.9, rho=0.9), ValueError, "both a and rho"),
        (lambda: PaperSchedule(0.9, 2.0, 1.5), ValueError, "rho must be <= 1"),
        (lambda: PaperSchedule(0.9, 2.0, 0.0), ValueError, "rho must be > 0"),
        (lambda: PaperSchedule(0.9, -1.0, 0.9), ValueError, "a must be >= 0"),
        (lambda: PaperSchedule(0.9, math.nan, 0.9), ValueError, "a must be finite"),
        (lambda: Geometric(0.0, 0.5), ValueError, "mu0 must be > 0"),
        (lambda: Geometric(math.inf, 0.5), ValueError, "mu0 must be finite"),
        (lambda: Geometric(0.1, 0.0), ValueError, "beta must be > 0"),
        (lambda: Geometric(0.1, 1.01), ValueError, "beta must be <= 1"),
        (lambda: Geometric(0.1, math.nan), ValueError, "beta must be finite"),
        (lambda: Constant(0), ValueError, "c must be > 0"),
        (lambda: Constant(-0.1), ValueError, "c must be > 0"),
        (lambda: Constant(math.nan), ValueError, "c must be finite"),
        (lambda: Constant(True), TypeError, "c must be a real number"),
        (lambda: InverseSqrt(-1.0), ValueError, "c must be > 0"),
        (lambda: InverseSqrt(None), TypeError, "c must be a real number"),
        (lambda: as_stepsize("fast"), ValueError, "stepsize: unknown step-size rule 'fast'"),
        (lambda: as_stepsize(None), TypeError, "stepsize must be a StepSize"),
    ],
)
def test_invalid_parameters_are_named(make, exc, pattern):
    with pytest.raises(exc, match=pattern):
        make()


@pytest.mark.parametrize("bad", [0.0, -1e-3, math.nan, math.inf, "0.1", None])
def test_a_callable_returning_a_bad_step_is_caught(bad, small_dpcp):
    """A user rule returning a non-positive or non-finite step never runs on with NaN:
    before the first step it is a bad argument (ValueError naming the step size); once
    the run has started, the run is kept and ends with ``stalled`` at that iteration."""
    with pytest.raises(ValueError, match=r"stepsize returned gamma_0 = .*finite real number > 0"):
        rssm.minimize(
            small_dpcp, method="rssm", stepsize=lambda k, ctx: bad, max_iter=10, seed=0,
            options={"n_blocks": 2}
        )
    res = rssm.minimize(
        small_dpcp,
            method="rssm", stepsize=lambda k, ctx: 1e-3 if k < 3 else bad, max_iter=10, seed=0,
        options={"n_blocks": 2}
    )
    assert res.stop_reason is rssm.StopReason.STALLED and res.n_iter == 3
    assert "gamma_3" in res.message
    assert res.trace["iteration"][-1] == 3 and np.isfinite(res.fun)


def test_geometric_restart_starts_again_slower_after_each_freeze():
    """Geometric(restart=True): at a change of ``ctx.escapes`` (a freeze the solver loop
    found) gamma starts again from mu0 with beta <- sqrt(beta); without a freeze, and with
    restart=False, it is mu0 beta^(k / epoch) to the bit; reset() forgets the restarts."""
    from types import SimpleNamespace

    ctx = SimpleNamespace(epoch=2.0, escapes=0)
    plain, again = Geometric(0.5, 0.81), Geometric(0.5, 0.81, restart=True)
    for k in range(6):
        assert again(k, ctx) == plain(k, ctx) == 0.5 * 0.81 ** (k / 2.0)
    ctx.escapes = 1
    assert again(6, ctx) == 0.5 and again(8, ctx) == pytest.approx(0.5 * 0.9)
    assert plain(8, ctx) == 0.5 * 0.81 ** 4
    ctx.escapes = 2
    assert again(10, ctx) == 0.5 and again(12, ctx) == pytest.approx(0.5 * 0.9 ** 0.5)
    again.reset()
    ctx.escapes = 0
    assert again(4, ctx) == 0.5 * 0.81 ** 2
    assert again.describe() == {"rule": "Geometric", "mu0": 0.5, "beta": 0.81, "restart": True}
    assert plain.describe() == {"rule": "Geometric", "mu0": 0.5, "beta": 0.81}
    with pytest.raises(TypeError, match="restart must be True or False"):
        Geometric(0.5, 0.81, restart="yes")


# -- behaviour a mutation audit found unpinned (each assertion failed on a mutant) ------------
def _gammas(rule, method, n_blocks, costs, shape):
    """The steps ``rule`` gives on a bare StepContext fed ``costs`` and unit estimates."""
    from rssm.stepsizes.context import StepContext

    now = [None]
    ctx = StepContext(method, n_blocks, shape, cost=lambda: now[0], trial=lambda g: 0.0)
    out = []
    for k, f in enumerate(costs):
        now[0] = f
        ctx.advance(k, direction_norm=1.0, grad_sq=1.0, direction=np.ones((shape[0], 2)))
        out.append(rule(k, ctx))
    return np.array(out)


def test_auto_holds_its_factor_after_patience_failures_in_a_row():
    # costs that only rise: patience = 2 shrinks twice (0.6), then holds
    g = _gammas(rssm.stepsizes.Auto(scale="length", patience=2), "rsm", 1,
                [1.0 + 0.1 * k for k in range(7)], (10, 3))
    np.testing.assert_allclose(g[1:] / g[:-1], [0.6, 0.6, 1, 1, 1, 1], rtol=1e-12)


@pytest.mark.parametrize(("n_blocks", "grow"), [(4, 1.3), (5, 1.4), (6, 1.4)])
def test_auto_length_rule_grows_faster_from_five_blocks(n_blocks, grow):
    from rssm.stepsizes.auto import MANY_BLOCKS, MANY_GROW

    assert (MANY_BLOCKS, MANY_GROW) == (5, 1.4)
    g = _gammas(rssm.stepsizes.Auto(scale="length", t0=1e-3), "rssm", n_blocks,
                [1.0 - 0.01 * k for k in range(6)], (10, 8))
    np.testing.assert_allclose(g[1:] / g[:-1], grow, rtol=1e-12)


def test_polyak_margins_decay_per_epoch_and_per_patience_pair_epochs():
    # RSSM, l = 4 (epoch 2 iterations, 6 pairs), f never falls: PolyakBest's margin is
    # delta_0 / (1 + k / epoch); PolyakLevel's halves after patience (2) x 6 iterations
    g = _gammas(rssm.stepsizes.PolyakBest(t0=0.01), "rssm", 4, [1.0] * 10, (10, 8))
    np.testing.assert_allclose(g / g[0], 1.0 / (1.0 + np.arange(10) / 2.0), rtol=1e-12)
    g = _gammas(rssm.stepsizes.PolyakLevel(t0=0.01), "rssm", 4, [1.0] * 30, (10, 8))
    np.testing.assert_allclose(g / g[0], 0.5 ** (np.arange(30) // 12), rtol=1e-12)


def test_a_trial_beyond_max_gamma_is_evaluated_at_max_gamma_and_equal_costs_do_not_decrease():
    from rssm.stepsizes.context import StepContext

    now = [1.0]
    ctx = StepContext("rsm", 1, (10, 3), cost=lambda: now[0], trial=lambda g: g)
    ctx.advance(0, direction_norm=2.0, grad_sq=4.0, max_gamma=3.0)
    assert ctx.trial(1e9) == 3.0 and ctx.trial(1e-3) == 1e-3
    assert ctx.cost == 1.0
    ctx.advance(1, direction_norm=2.0, grad_sq=4.0, direction=np.ones((10, 3)))
    assert ctx.decreased is False          # f(X_1) == f(X_0): "f(X_k) < f(X_{k-1})"
    now[0] = 0.5
    ctx.advance(2, direction_norm=2.0, grad_sq=4.0, direction=np.ones((10, 3)))
    assert ctx.decreased is True
