"""Reliability: long runs stay feasible with exact caches, degenerate data runs or is
refused clearly, non-finite values stop the run with the last finite iterate, and a seed
gives bit-identical results (docs/guarantees.md)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import rssm
from rssm import stiefel
from rssm.blocks import Partition
from rssm.problems import DPCP, ODL
from rssm.stopping import StopReason

ROOT = Path(__file__).resolve().parents[1]
FEAS_TOL = 1e-12


def _load_long_run():
    spec = importlib.util.spec_from_file_location("long_run", ROOT / "benchmarks" / "long_run.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["long_run"] = mod
    spec.loader.exec_module(mod)
    return mod


long_run = _load_long_run()


# -- 1. feasibility and cache exactness over long runs -------------------------------------


@pytest.mark.parametrize("case", long_run.CASES[:2], ids=lambda c: c.label)
def test_ten_thousand_iterations_stay_feasible_and_exact(case):
    """10^4 RSSM iterations (n=20, p=12, l=4 and l=p): ||X^T X - I||_max <= 1e-12 after
    every step, caches within 1e-10 of a from-scratch recomputation every 100 steps."""
    rep = long_run.long_run(case, 10_000, check_every=100, seed=0)
    assert rep.iterations == 10_000 and rep.stop_reason == "max_iter"
    assert rep.n_checks == 101
    assert rep.max_feasibility <= FEAS_TOL
    assert rep.max_dev_zt <= 1e-10
    assert rep.max_dev_bn <= 1e-10
    assert rep.max_rel_dev_cost <= 1e-10
    assert rep.ok()


def test_long_run_check_detects_a_stale_cache():
    """The cache check is not vacuous: a cache left stale after a step is reported."""
    case = long_run.CASES[0]
    prob = long_run.make_problem(case, 0)
    x = prob.initial_point()
    part = Partition.uniform(prob.shape[1], case.n_blocks)
    oracle = prob.make_oracle(x, part)
    assert max(long_run.cache_deviations(oracle, prob, part).values()) <= 1e-15
    x[:, :3] = stiefel.polar(x[:, :3] + 1e-6)  # change columns without telling the oracle
    dev = long_run.cache_deviations(oracle, prob, part)
    assert dev["zt"] > 1e-8 and dev["cost"] > 1e-9


def test_long_run_script_runs_standalone():
    """`python benchmarks/long_run.py` works as a script (tiny run, one case)."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "long_run.py"),
         "--iters", "300", "--cases", "3"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "[ok] odl" in out.stdout and "all promises held" in out.stdout


@pytest.mark.slow
@pytest.mark.parametrize("case", long_run.CASES, ids=lambda c: c.label)
def test_a_million_iterations_stay_feasible_and_exact(case):
    """The full promise: 10^6 iterations (minutes per case; run with -m slow)."""
    rep = long_run.long_run(case, 1_000_000, check_every=100, seed=0)
    assert rep.iterations == 1_000_000
    assert rep.ok(), rep


# -- 2. degenerate data --------------------------------------------------------------------


def _run_checked(prob, x0=None, max_iter=300, **kw):
    """minimize with warnings as errors; checks feasibility at every recorded iterate and
    that the run used its whole budget."""
    res = _run_feasible(prob, x0, max_iter, **kw)
    assert res.stop_reason is StopReason.MAX_ITER, res.message
    assert res.n_iter == max_iter
    return res


def _run_feasible(prob, x0=None, max_iter=300, **kw):
    """`_run_checked` without the budget: the run may stop on its own."""
    worst = [0.0]

    def cb(progress):
        worst[0] = max(worst[0], stiefel.feasibility(progress.x))
        assert np.isfinite(progress.cost)
        return False

    kw.setdefault("stepsize", 0.05)
    kw.setdefault("tol", 0)             # run the whole budget
    opts = {k: kw.pop(k) for k in ("n_blocks", "partition") if k in kw}
    if opts:
        kw["options"] = opts
        kw.setdefault("method", "rssm")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a division by zero would warn
        res = rssm.minimize(
            prob, x0, max_iter=max_iter, seed=3, record=1, callback=cb, **kw
        )
    assert np.isfinite(res.fun) and np.isfinite(res.x).all()
    assert max(worst[0], res.feasibility) <= FEAS_TOL
    return res


def test_dpcp_rows_with_zero_projection_get_a_zero_subgradient():
    """Data points y_j with y_j^T X = 0: the subgradient of ||y_j^T X|| is taken as 0
    (0 is in the subdifferential of the norm at 0); no division by zero, no NaN."""
    n, p = 8, 3
    rng = np.random.default_rng(0)
    x0 = np.eye(n)[:, :p]
    ortho = np.zeros((n, 5))
    ortho[p:, :] = rng.standard_normal((n - p, 5))  # y_j in span(X)^perp: y_j^T X = 0
    generic = rng.standard_normal((n, 7))
    yt = np.concatenate([ortho, generic], axis=1)
    prob = DPCP(yt, p)
    part = Partition.uniform(p, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        oracle = prob.make_oracle(x0.copy(), part)
        g_inc = oracle.subgradient()
        g_ref = prob.subgradient(x0)
    assert np.all(oracle.inv_norm[:5] == 0.0)
    assert np.all(oracle.inv_norm[5:] > 0.0)
    # only the generic points contribute: G = (1/m) sum_j y_j (y_j^T X) / ||y_j^T X||
    z = generic.T @ x0
    expected = generic @ (z / np.linalg.norm(z, axis=1, keepdims=True)) / yt.shape[1]
    np.testing.assert_allclose(g_ref, expected, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(g_inc, expected, rtol=1e-13, atol=1e-15)
    for method in ("rssm", "rsm"):
        _run_checked(prob, x0, method=method, n_blocks=3)


def test_dpcp_data_of_zeros_is_refused_and_an_exact_fit_at_the_start_converges_there():
    """All-zero data make f = 0 at every X: nothing to fit. They ran, "converged" at the
    start (before that, RSM after one iteration and RSSM with l = 2 after two); since a
    user's audit (ODL.synthetic with a tiny theta drew Y = 0 and was called converged at
    error 3.4) they are refused. Data that x0 fits exactly still converge at the start, f
    being 0 to rounding there, the least value DPCP takes (`DataProblem._exact_fit_level`)."""
    with pytest.raises(ValueError, match="yt is all zeros: f is 0 at every X"):
        DPCP(np.zeros((6, 10)), 4)
    x0 = stiefel.random_point(6, 4, np.random.default_rng(1))
    rng = np.random.default_rng(2)
    yt = (np.eye(6) - x0 @ x0.T) @ rng.standard_normal((6, 10))     # X0^T y_j = 0
    prob = DPCP(yt, 4)
    for method in ("rssm", "rsm"):
        res = rssm.minimize(
            prob, x0, method=method, max_iter=50, seed=3, stepsize=0.05,
            options={"n_blocks": 2}
        )
        assert res.stop_reason is StopReason.CONVERGED and res.success, res.message
        assert res.n_iter == 0 and "is 0 to rounding" in res.message
        assert res.fun < 1e-14
        np.testing.assert_array_equal(res.x, x0)


def test_dpcp_duplicated_and_zero_columns_match_the_deduplicated_problem():
    """Duplicating every data point and appending zero columns rescales f by m/m' and
    changes nothing else: the same seed gives the same iterates up to rounding."""
    base = DPCP.synthetic(n=10, d=3, n_inliers=20, n_outliers=10, seed=4)
    yt = base.yt
    m = yt.shape[1]
    padded = np.concatenate([yt, yt, np.zeros((10, 6))], axis=1)
    dup = DPCP(padded, base.p)
    x0 = base.initial_point()
    scale = (2 * m + 6) / (2 * m)  # f_dup = f_base * 2m / (2m + 6); step compensates
    ra = _run_checked(base, x0, n_blocks=3, stepsize=0.02, max_iter=200)
    rb = _run_checked(dup, x0, n_blocks=3, stepsize=0.02 * scale, max_iter=200)
    np.testing.assert_allclose(rb.fun * scale, ra.fun, rtol=1e-10)
    np.testing.assert_allclose(rb.x, ra.x, rtol=0, atol=1e-9)


def test_p_equal_one_runs_with_rsm_and_is_refused_by_rssm():
    prob = DPCP.synthetic(n=6, d=5, n_inliers=20, n_outliers=10, seed=5)
    assert prob.shape == (6, 1)
    res = _run_checked(prob, method="rsm", stepsize=0.05, max_iter=100)
    assert res.error < res.trace["error"][0]
    with pytest.raises(ValueError, match=r"RSSM needs p >= 2 columns .* got p=1; use method='rsm'"):
        rssm.minimize(prob, method="rssm", max_iter=1)
    with pytest.raises(ValueError, match="a partition needs at least 2 blocks"):
        rssm.minimize(
            prob, method="rssm", max_iter=1, options={"partition": [[0]]}
        )


def _square_dpcp_cost(yt):
    """DPCP's cost (1/m) sum ||X^T y_j|| on St(n, n), on the same data oracle: DPCP itself
    refuses p = n (no subspace to find), where the cost is the same for every X."""
    from rssm.problems import NormLoss
    from rssm.problems.composite import CompositeProblem

    m = yt.shape[1]
    return CompositeProblem(yt, yt.shape[0], NormLoss.norm(), sample_weights=np.full(m, 1 / m))


def test_square_p_equal_n_keeps_the_constant_cost():
    """p = n: X is orthogonal and f(X) = (1/m) sum ||y_j|| for every X; RSSM and RSM stay
    on O(n) and keep that value to rounding."""
    rng = np.random.default_rng(6)
    yt = rng.standard_normal((7, 25))
    prob = _square_dpcp_cost(yt)
    assert prob.shape == (7, 7)
    f_const = np.linalg.norm(yt, axis=0).mean()
    x0 = stiefel.random_point(7, 7, rng)
    for kw in ({"method": "rssm", "n_blocks": 7}, {"method": "rssm", "n_blocks": 2},
               {"method": "rsm"}):
        res = _run_feasible(prob, x0, stepsize=0.3, max_iter=200, **kw)
        np.testing.assert_allclose(res.trace["cost"], f_const, rtol=1e-13)
        # its Riemannian subgradient is rounding noise: 0 to working precision
        assert res.success and "0 to working precision" in res.message, res.message


@pytest.mark.parametrize("n", [8, 10, 14])
@pytest.mark.parametrize("stepsize", ["auto", 1e16])
def test_square_p_equal_n_with_one_column_blocks_and_scale_free_steps_stays_feasible(
        n, stepsize):
    """f constant on O(n): its Riemannian subgradient is rounding noise, which the
    scale-free default step (and a huge constant one) turned into steps of length O(1);
    with one-column blocks each took the last one's rounding error along and RSSM walked
    off the manifold (feasibility 5e-6 at n = 8, 0.86 at n = 10 after 300 iterations).
    A direction at the rounding level of its subgradient is 0: no move, and the default
    run stops converged."""
    prob = _square_dpcp_cost(np.random.default_rng(0).standard_normal((n, 50)))
    f_const = float(prob.cost(prob.initial_point(0)))
    res = _run_feasible(prob, stepsize=stepsize, n_blocks=n)
    np.testing.assert_allclose(res.trace["cost"], f_const, rtol=1e-13)
    assert res.success and "0 to working precision" in res.message, res.message


@pytest.mark.parametrize(
    "partition",
    [
        None,  # n_blocks = p below: one column per block
        [[0], [1, 2, 3, 4, 5, 6], [7, 8]],  # unequal contiguous
        [[0, 4, 8], [1, 2], [3, 5, 6, 7]],  # unequal, non-contiguous
        [[0, 1, 2, 3], [4, 5, 6, 7, 8]],  # two blocks
    ],
    ids=["l=p", "unequal", "interleaved", "two-blocks"],
)
def test_block_layouts_stay_feasible_and_make_progress(partition):
    prob = DPCP.synthetic(n=12, d=3, n_inliers=60, n_outliers=40, seed=7)
    kw = {"n_blocks": 9} if partition is None else {"partition": partition}
    res = _run_checked(prob, stepsize=0.01, max_iter=400, **kw)
    assert res.n_blocks == (9 if partition is None else len(partition))
    assert res.trace["error"][0] > 0.14 and res.error < 0.002  # measured ~0.0017-0.0018


def test_n_blocks_two_equals_a_block_pair_covering_all_columns():
    """l = 2: every iteration updates C_12 = all columns; the iterate is feasible."""
    prob = DPCP.synthetic(n=10, d=2, n_inliers=40, n_outliers=20, seed=8)
    res = _run_checked(prob, n_blocks=2, stepsize=None, max_iter=200)
    assert res.n_blocks == 2


def test_odl_with_all_zero_code_columns():
    """ODL where a third of the samples have all-zero codes (y_j = 0): sign(0) = 0, the
    run is finite and feasible, and the cost equals that of the non-zero samples."""
    rng = np.random.default_rng(9)
    n = 6
    x_star = stiefel.random_point(n, n, rng)
    codes = rng.standard_normal((n, 90)) * (rng.random((n, 90)) < 0.3)
    codes[:, ::3] = 0.0
    prob = ODL(x_star @ codes, None, x_star)
    nz = ODL(x_star @ codes[:, np.any(codes != 0, axis=0)], None, x_star)
    for method in ("rssm", "rsm"):
        res = _run_checked(prob, method=method, n_blocks=3, stepsize=1e-3, max_iter=200)
        np.testing.assert_allclose(res.fun, nz.cost(res.x), rtol=1e-13)


# -- 4. non-finite values -----------------------------------------------------------------


class _Poisoned(rssm.Problem):
    """f(X) = ||A^T X||_1 with a subgradient (or cost) that turns NaN after some calls."""

    def __init__(self, a, p, bad_after, where="subgradient"):
        self.a = a
        self.shape = (a.shape[0], p)
        self.bad_after = bad_after
        self.where = where
        self.calls = 0

    def cost(self, x):
        if self.where == "cost" and self.calls >= self.bad_after:
            return float("nan")
        return float(np.abs(self.a.T @ x).sum())

    def subgradient(self, x):
        self.calls += 1
        g = self.a @ np.sign(self.a.T @ x)
        if self.where == "subgradient" and self.calls > self.bad_after:
            g[0, 0] = np.nan
        if self.where == "inf" and self.calls > self.bad_after:
            g[:] = np.inf
        return g


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("method", ["rssm", "rsm"])
@pytest.mark.parametrize("where", ["subgradient", "inf"])
def test_non_finite_subgradient_stops_with_the_last_finite_iterate(method, where):
    a = np.random.default_rng(10).standard_normal((8, 30))
    x0 = stiefel.random_point(8, 4, np.random.default_rng(11))
    # stationarity=False: _Poisoned counts its subgradient calls, and the stationarity of
    # each recording point would call it too
    good = rssm.minimize(
        _Poisoned(a, 4, 10**9), x0, method=method, stepsize=0.01, max_iter=7, seed=5, record=1,
        stationarity=False, options={"n_blocks": 2}
    )
    bad = rssm.minimize(
        _Poisoned(a, 4, 7, where), x0, method=method, stepsize=0.01, max_iter=50, seed=5,
        record=1, stationarity=False, options={"n_blocks": 2}
    )
    assert bad.stop_reason is StopReason.NON_FINITE and not bad.success
    assert bad.n_iter == 7 and "iteration 7" in bad.message
    np.testing.assert_array_equal(bad.x, good.x)  # bit-identical: the step was not applied
    assert bad.feasibility <= FEAS_TOL and np.isfinite(bad.fun)
    np.testing.assert_array_equal(bad.trace["iteration"], np.arange(8))
    np.testing.assert_array_equal(bad.trace["cost"], good.trace["cost"])


def test_non_finite_cost_read_by_the_default_rule_stops_non_finite():
    """The default rule reads f at every iterate; a cost that turns NaN mid-run ends the
    run `non_finite` (before: `stalled`, "a stall of the rule"), at the best finite
    iterate."""
    a = np.random.default_rng(0).standard_normal((20, 8))
    calls = [0]

    def cost(x):
        calls[0] += 1
        return np.nan if calls[0] > 30 else float(np.abs(a @ x).sum())

    prob = rssm.Problem.from_functions(cost, lambda x: a.T @ np.sign(a @ x), shape=(8, 3))
    res = rssm.minimize(prob)
    assert res.stop_reason is StopReason.NON_FINITE and not res.success
    assert "is not finite" in res.message and "best finite iterate" in res.message
    assert np.isfinite(res.fun) and res.feasibility <= FEAS_TOL


@pytest.mark.parametrize("n_blocks", [2, 3])
def test_a_non_finite_cost_read_by_rssms_rule_stops_the_run_where_it_was_read(n_blocks):
    """RSSM's default rule (`BlockRule`) reads f at its tests only; where it read a NaN it
    went on stepping to the next recorded row (iteration 50 here, read at 42 with l = 3 and
    28 with l = 2: an audit of guarantees.md section 4)."""
    a = np.random.default_rng(0).standard_normal((40, 8))
    state = {"k": 0, "read": None}

    def cost(x):
        if state["k"] > 25:
            state["read"] = state["read"] or state["k"] - 1
            return np.nan
        return float(np.abs(a @ x).sum())

    def partial(x, c):
        state["k"] += 1
        return a.T @ np.sign(a @ x[:, c])

    prob = rssm.Problem.from_functions(cost, lambda x: a.T @ np.sign(a @ x), partial,
                                       shape=(8, 3))
    res = rssm.minimize(prob, method="rssm", options={"n_blocks": n_blocks}, max_iter=200,
                        tol=0, record=50)
    assert res.stop_reason is StopReason.NON_FINITE and not res.success
    assert state["read"] is not None and res.n_iter == state["read"] < 50
    assert res.message == (f"iteration {res.n_iter}: f(X_{res.n_iter}) = nan is not finite; "
                           "returning the best finite iterate")
    assert np.isfinite(res.fun) and res.feasibility <= FEAS_TOL


@pytest.mark.parametrize("method, bad", [("rsm", np.inf), ("rsm", np.nan),
                                         ("rssm", np.inf), ("rssm", np.nan)])
def test_a_non_finite_subgradient_stops_without_numpy_warnings(method, bad):
    """A user's subgradient with an infinity or a NaN at iteration 3 stops the run
    `non_finite` at the best finite iterate, before the tangent projection: it used to
    pass through rssm's own products first, with four "invalid value encountered"
    RuntimeWarnings from stiefel.py and rsm.py before the run's message."""
    a = np.random.default_rng(3).standard_normal((20, 5))
    calls = [0]

    def grad(x):
        calls[0] += 1
        g = -np.sign(a - x)
        if calls[0] > 3:
            g[0, 0] = bad
        return g

    prob = rssm.Problem.from_functions(lambda x: float(np.abs(a - x).sum()), grad,
                                       lambda x, cols: grad(x)[:, cols], shape=(20, 5))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        res = rssm.minimize(prob, method=method, seed=0,
                            **({"options": {"n_blocks": 5}} if method == "rssm" else {}))
    assert [str(w.message) for w in seen] == []
    assert res.stop_reason is StopReason.NON_FINITE and not res.success
    # RSSM's rule reads one more subgradient at the start (its first search)
    assert res.n_iter == (3 if method == "rsm" else 4)
    assert f"iteration {res.n_iter}: the subgradient is not finite" in res.message
    assert np.isfinite(res.fun) and res.fun == prob.cost(res.x)
    assert res.feasibility <= FEAS_TOL


def test_a_non_finite_subgradient_at_a_checks_trial_point_raises_no_numpy_warning():
    """An audit: a subgradient with an infinity only at points the convergence checks
    visit (away from every iterate) reached the zigzag's tangent projection, which warned
    "invalid value encountered in matmul". The checks now test it first and read such a
    point as no information, as they did after the warning."""
    n, p = 7, 6
    y = np.random.default_rng(72).standard_normal((n, 72))

    def bad(x):
        return abs(x[0, 0]) > 0.6

    def grad(x):
        g = y @ np.sign(y.T @ x)
        if bad(x):
            g[0, 0] = np.inf
        return g

    prob = rssm.Problem.from_functions(
        lambda x: float("nan") if bad(x) else float(np.abs(y.T @ x).sum()), grad,
        lambda x, c: grad(x)[:, c], shape=(n, p))
    x0 = rssm.stiefel.random_point(n, p, np.random.default_rng(889)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = rssm.minimize(prob, x0, stepsize=rssm.stepsizes.InverseSqrt(0.01),
                            seed=np.random.default_rng(1), max_iter=150, tol=0.1)
    assert res.stop_reason is StopReason.MAX_ITER and np.isfinite(res.fun)
    assert res.feasibility <= FEAS_TOL


@pytest.mark.parametrize("scale", [1e-162, 1e-170, 1e-200])
def test_a_subgradient_whose_square_underflows_is_not_called_stationary(scale):
    """f scaled by 1e-170: ||G||^2 underflowed to 0 and the default call stopped at its start
    "converged: the Riemannian subgradient is 0 to working precision" (success=True),
    where the same f at scale 1 goes from 111.6 to 76.2. Now it stops non_finite and says
    to scale f up; at 1e-162 the squares were subnormal (a few digits)."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((30, 6)), rng.standard_normal((30, 3))
    prob = rssm.Problem.from_functions(lambda x: scale * float(np.abs(a @ x - b).sum()),
                                       lambda x: scale * (a.T @ np.sign(a @ x - b)),
                                       shape=(6, 3))
    res = rssm.minimize(prob, max_iter=100, seed=0)
    assert not res.success and res.stop_reason is StopReason.NON_FINITE
    assert "squared norm underflows float64" in res.message and "scale f" in res.message
    assert res.fun == prob.cost(res.x)


def test_non_finite_cost_stops_at_the_recording_point():
    a = np.random.default_rng(12).standard_normal((8, 30))
    prob = _Poisoned(a, 4, 6, where="cost")
    res = rssm.minimize(
        prob, method="rsm", stepsize=0.01, max_iter=50, seed=0, record=2, stationarity=False
    )
    assert res.stop_reason is StopReason.NON_FINITE
    assert res.n_iter == 6 and "not finite at iteration 6" in res.message
    assert np.isfinite(res.x).all() and res.feasibility <= FEAS_TOL
    assert np.isnan(res.trace["cost"][-1]) and np.isfinite(res.trace["cost"][:-1]).all()


def test_non_finite_cost_at_the_start():
    a = np.random.default_rng(13).standard_normal((8, 30))
    res = rssm.minimize(
        _Poisoned(a, 4, 0, where="cost"), method="rssm", stepsize=0.01, max_iter=5, seed=0,
        options={"n_blocks": 2}
    )
    assert res.stop_reason is StopReason.NON_FINITE and res.n_iter == 0
    assert res.message == "f(x0) is not finite"


@pytest.mark.parametrize("clip", [True, False])
@pytest.mark.parametrize("method", ["rssm", "rsm"])
def test_overflowing_step_size_stops_non_finite_or_stays_feasible(method, clip):
    """gamma = 1e308 overflows X - gamma * grad: the run must end with a clear reason and a
    feasible x, never a NaN result or a LinAlgError, and without NumPy's overflow warnings
    (an audit: with the cap off, ``clip_steps=False``, the step's products warned)."""
    prob = DPCP.synthetic(n=10, d=3, n_inliers=30, n_outliers=20, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = rssm.minimize(
            prob, method=method, stepsize=1e308, max_iter=20, seed=1,
            options={"n_blocks": 3, "clip_steps": clip}
        )
    assert np.isfinite(res.x).all() and np.isfinite(res.fun)
    if res.stop_reason is StopReason.NON_FINITE:
        assert "step size 1e+308" in res.message
    else:
        assert res.stop_reason is StopReason.MAX_ITER
    if method == "rsm":
        assert res.feasibility <= FEAS_TOL


@pytest.mark.parametrize("gamma", [1e8, 1e16, 1e308])
def test_huge_rssm_step_sizes_stay_feasible(gamma):
    prob = DPCP.synthetic(n=10, d=3, n_inliers=30, n_outliers=20, seed=0)
    worst = [0.0]

    def cb(progress):
        worst[0] = max(worst[0], stiefel.feasibility(progress.x))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = rssm.minimize(
            prob, method="rssm", stepsize=gamma, max_iter=200, seed=1, record=1, callback=cb,
            options={"n_blocks": 3}
        )
    assert res.stop_reason is StopReason.NON_FINITE or worst[0] <= FEAS_TOL


@pytest.mark.parametrize("gamma", [1e-300, 5e-324, 1e-3, 1.0, 1e3])
@pytest.mark.parametrize("method", ["rssm", "rsm"])
def test_tiny_and_large_step_sizes_stay_feasible(gamma, method):
    prob = DPCP.synthetic(n=10, d=3, n_inliers=30, n_outliers=20, seed=0)
    res = _run_checked(prob, method=method, n_blocks=3, stepsize=gamma, max_iter=100)
    if gamma < 1e-200:  # the step is below the rounding of X: the iterate does not move
        np.testing.assert_allclose(res.x, prob.initial_point(), rtol=0, atol=1e-14)


# -- 6. reproducibility --------------------------------------------------------------------


def _digest(res) -> str:
    h = hashlib.sha256(res.x.tobytes())
    h.update(res.trace["cost"].tobytes())
    h.update(res.trace["error"].tobytes())
    return h.hexdigest()


_REPRO_SNIPPET = """
import hashlib, rssm
prob = rssm.problems.DPCP.synthetic(n=30, d=5, n_inliers=200, n_outliers=100, seed=2)
res = rssm.minimize(prob, method="rssm", n_blocks=5, max_iter=500, seed=17)
h = hashlib.sha256(res.x.tobytes())
h.update(res.trace["cost"].tobytes())
h.update(res.trace["error"].tobytes())
print(h.hexdigest())
"""


def test_same_seed_bit_identical_in_process_and_across_processes():
    """Same seed and the same BLAS thread count: bit-identical x and trace, in this process,
    with a Generator built from the seed, and in a fresh interpreter."""
    prob = DPCP.synthetic(n=30, d=5, n_inliers=200, n_outliers=100, seed=2)
    runs = [rssm.minimize(
        prob, method="rssm", max_iter=500, seed=17, options={"n_blocks": 5}
    ) for _ in range(2)]
    assert _digest(runs[0]) == _digest(runs[1])
    other = rssm.minimize(
        prob, method="rssm", max_iter=500, seed=18, options={"n_blocks": 5}
    )
    assert _digest(other) != _digest(runs[0])  # the seed matters
    out = subprocess.run([sys.executable, "-c", _REPRO_SNIPPET], capture_output=True, text=True,
                         timeout=120, check=True, env=dict(os.environ))
    assert out.stdout.strip() == _digest(runs[0])


@pytest.mark.parametrize("method", ["rsm", "rssm"])
def test_same_generator_state_bit_identical(method):
    prob = ODL.synthetic(n=8, seed=3)
    x0 = prob.initial_point(np.random.default_rng(4))
    a = rssm.minimize(
        prob, x0, method=method, max_iter=300, seed=np.random.default_rng(5),
        options={"n_blocks": 4}
    )
    b = rssm.minimize(
        prob, x0, method=method, max_iter=300, seed=np.random.default_rng(5),
        options={"n_blocks": 4}
    )
    assert _digest(a) == _digest(b)
    np.testing.assert_array_equal(a.trace["flops"], b.trace["flops"])


# -- 6. reproducibility: minimize vs the command line --------------------------------------

_SOLVE_ARGS = ["solve", "dpcp", "--n", "20", "--d", "5", "--n-inliers", "120",
               "--n-outliers", "80", "--method", "rssm", "--blocks", "4", "--max-iter", "400",
               "--record-every", "20", "--seed", "4"]


def _library_twin():
    """The run of `_SOLVE_ARGS` through the library: data seed 4, start from the
    independent stream default_rng([seed, 1]), the problem's default (paper) schedule."""
    prob = DPCP.synthetic(n=20, d=5, n_inliers=120, n_outliers=80, seed=4)
    x0 = prob.initial_point(np.random.default_rng([4, 1]))
    return rssm.minimize(
        prob, x0, method="rssm", stepsize=None, max_iter=400, seed=4, record=20,
        options={"n_blocks": 4}
    )


def test_cli_solve_is_bit_identical_to_minimize(tmp_path):
    """`python -m rssm solve ... --out run.json` in a fresh process gives the same trace,
    bit for bit, as `rssm.minimize` here (JSON floats round-trip exactly)."""
    out = tmp_path / "run.json"
    proc = subprocess.run([sys.executable, "-m", "rssm", *_SOLVE_ARGS, "--out", str(out)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    res = _library_twin()
    assert doc["summary"]["n_iter"] == res.n_iter <= 400
    for col in ("iteration", "flops", "cost", "error"):
        np.testing.assert_array_equal(np.array(doc["trace"][col], dtype=float), res.trace[col])
    assert doc["summary"]["cost"] == res.fun and doc["summary"]["error"] == res.error
    assert doc["summary"]["feasibility"] == res.feasibility


def test_a_cost_of_minus_infinity_is_not_the_best_iterate():
    """A cost that breaks down to -inf stops the run `non_finite` with the best iterate of
    finite cost (before: the -inf iterate won, `fun = -inf`)."""
    a = np.random.default_rng(0).standard_normal((40, 8))
    calls = [0]

    def cost(x):
        calls[0] += 1
        return -np.inf if calls[0] >= 5 else float(np.abs(a @ x).sum())

    def sub(x):
        return a.T @ np.sign(a @ x)

    prob = rssm.Problem.from_functions(cost, sub, lambda x, c: sub(x)[:, c], shape=(8, 4))
    for kw in ({"stepsize": 1e-3, "record": 10}, {}):
        calls[0] = 0
        res = rssm.minimize(prob, method="rsm", seed=0, max_iter=200, **kw)
        assert res.stop_reason is StopReason.NON_FINITE
        assert np.isfinite(res.fun) and res.best_iteration < res.n_iter


@pytest.mark.parametrize("where", ["start", "record", "finish"])
@pytest.mark.parametrize("method", ["rsm", "rssm"])
def test_ctrl_c_in_an_observer_returns_the_run(where, method):
    """Ctrl-C (KeyboardInterrupt) raised in an Observer's start, record or finish hook
    returns a Result marked `interrupted` (before: it escaped `minimize`)."""

    class Obs(rssm.Observer):
        def start(self, info):
            if where == "start":
                raise KeyboardInterrupt

        def record(self, progress):
            if where == "record" and progress.iteration == 20:
                raise KeyboardInterrupt

        def finish(self, result):
            if where == "finish":
                raise KeyboardInterrupt

    prob = rssm.problems.ODL.synthetic(n=8, m=200, seed=1)
    res = rssm.minimize(prob, method=method, seed=0, max_iter=100, record=5,
                        observers=[Obs()])
    assert res.stop_reason is StopReason.INTERRUPTED and not res.success
    assert res.n_iter == {"start": 0, "record": 20}.get(where, res.n_iter)
    assert res.fun == pytest.approx(prob.cost(res.x), rel=1e-12)
    assert res.feasibility <= FEAS_TOL


def test_an_overflowing_subgradient_norm_is_said_as_such():
    """ODL on data scaled by 1e155: the subgradient is finite, its squared norm overflows;
    the message says that (before: "the subgradient is not finite")."""
    base = rssm.problems.ODL.synthetic(n=8, m=200, seed=1)
    # in-memory data at that scale is refused when the problem is built
    with pytest.raises(ValueError, match=r"y: the largest entry is .* outside \[1e-150, "
                                         r"1e\+150\].*scale the data first"):
        rssm.problems.ODL(np.asarray(base.y) * 1e155, None)
    # an oracle of the user's at that scale: the loop says what overflowed
    prob = rssm.Problem.from_functions(lambda x: 1e155 * float(np.abs(x).sum()),
                                        lambda x: 1e155 * np.sign(x), shape=(8, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = rssm.minimize(prob, max_iter=5)
    assert res.stop_reason is StopReason.NON_FINITE
    assert "the subgradient's squared norm overflows float64 (its entries reach" in res.message


def test_the_rounding_zero_test_leaves_a_small_but_real_gradient_alone():
    """Brockett's cost shifted by 1e12 I (p = 4): its gradient is mostly normal to the
    manifold, the Riemannian part a few tens of eps ||G|| near the minimizer. A threshold
    of 16 sqrt(p) eps ||G|| called it 0 there and stopped at error 1.3e-3; the default
    call reaches 6.4e-5 (as before the test existed)."""
    n, p = 20, 4
    rng = np.random.default_rng(0)
    m = rng.standard_normal((n, n))
    a0 = (m + m.T) / 2
    a = a0 + 1e12 * np.eye(n)
    nn = np.diag(np.arange(p, 0, -1.0))
    xs = np.linalg.eigh(a0)[1][:, :p]
    prob = rssm.Problem.from_functions(
        lambda x: float(np.trace(x.T @ a @ x @ nn)), lambda x: 2 * a @ x @ nn,
        shape=(n, p),
        error=lambda x: float(np.abs(np.abs(np.sum(x * xs, 0)) - 1).max()))
    res = rssm.minimize(prob, method="rsm", seed=0)
    assert res.success and res.error < 1e-4, (res.message, res.error)


def test_a_zero_direction_ends_an_rssm_run_only_when_every_pair_has_one():
    """RSSM stopped "converged: the Riemannian subgradient is 0" after 2 binom(l, 2)
    iterations without a move, reading only the last direction: random pairs can skip
    the one pair that still has a direction (smooth Brockett, constant step: gaps 1.8e-9
    to 1.3e-5 on seeds 0-7). Now every pair's direction must be 0 at the current X."""
    for seed in range(3):
        rng = np.random.default_rng(seed)
        m = rng.standard_normal((10, 10))
        m = m + m.T
        nn = np.diag([3.0, 2.0, 1.0])
        f_star = float(np.linalg.eigvalsh(m)[:3] @ np.diag(nn))
        prob = rssm.Problem.from_functions(
            lambda x, m=m, nn=nn: float(np.trace(x.T @ m @ x @ nn)),
            lambda x, m=m, nn=nn: 2 * m @ x @ nn,
            lambda x, c, m=m, nn=nn: 2 * m @ x @ nn[:, c], shape=(10, 3))
        res = rssm.minimize(prob, method="rssm", options={"n_blocks": 3}, stepsize=1e-2,
                            max_iter=20000)
        assert res.success and res.fun - f_star < 1e-10, (seed, res.message, res.fun - f_star)
