"""Issue #12, items 15 and 16: what `Result.success` means, the stationarity column, and
the `MinStationarity` and `CostStagnation` criteria."""

from __future__ import annotations

import csv
import json
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rssm
from rssm import stiefel
from rssm.cli import main
from rssm.problems import DPCP, PlantedSparseBasis
from rssm.stepsizes import Constant
from rssm.stopping import CostStagnation, MinStationarity, Progress, StopReason
from rssm.trace import TRACE_COLUMNS


def test_success_is_false_for_a_stall(small_odl):
    """A run frozen by a vanishing step size (gamma = 1e-12) ends on its iteration limit
    looking converged (cost flat) but is not a success."""
    res = rssm.minimize(small_odl, stepsize=1e-12, max_iter=40, seed=0)
    assert res.stop_reason is StopReason.MAX_ITER and not res.success
    assert res.error > 1.0  # far from the dictionary
    res = rssm.minimize(small_odl, stepsize=1e-12, stagnation_epochs=5, max_iter=400, seed=0)
    assert res.stop_reason is StopReason.NO_PROGRESS and not res.success
    # the best cost did not move by 1e-8 (relative) over 5 epochs of l/2 = 2.5 iterations
    assert res.n_iter < 40


def test_success_for_a_target_error(small_odl):
    res = rssm.minimize(small_odl, target_error=1e9, max_iter=10, seed=0)
    assert res.stop_reason is StopReason.TARGET_ERROR and res.success


def test_stationarity_column_is_the_riemannian_subgradient_norm(small_dpcp):
    kept = []
    res = rssm.minimize(
        small_dpcp, max_iter=30, record=rssm.Record(every=10, stationarity=True), seed=0,
        callback=lambda pr: kept.append((pr.x, pr.stationarity))
    )
    assert tuple(res.trace) == TRACE_COLUMNS and "stationarity" in TRACE_COLUMNS
    st = res.trace["stationarity"]
    assert st.shape == (4,) and np.all(np.isfinite(st)) and np.all(st > 0)
    for (x, s_cb), s_tr in zip(kept, st, strict=True):
        ref = np.linalg.norm(stiefel.tangent_projection(x, small_dpcp.subgradient(x)))
        assert s_cb == s_tr == pytest.approx(ref, rel=1e-10)
    assert res.stationarity == st[-1]
    assert "stationarity" in repr(res)


def test_min_stationarity_fires_on_a_smooth_cost():
    """f(X) = -tr(X^T A X)/2 (smooth): the Riemannian gradient norm goes to 0 at the top
    eigenspace, and MinStationarity stops the run there with reason `stationary`."""
    rng = np.random.default_rng(0)
    q = np.linalg.qr(rng.standard_normal((10, 10)))[0]
    a = q @ np.diag(np.arange(10, 0, -1.0)) @ q.T
    prob = rssm.Problem.from_functions(
        lambda X: -0.5 * float(np.sum(X * (a @ X))), lambda X: -(a @ X),
        lambda X, c: -(a @ X[:, c]), shape=(10, 3), stepsize=Constant(0.05))
    res = rssm.minimize(
        prob,
            method="rssm", stop=MinStationarity(1e-6), max_iter=20000, seed=0,
        options={"n_blocks": 3},
        record=rssm.Record(every=10, stationarity=True), tol=0)
    assert res.stop_reason is StopReason.STATIONARY and res.success
    assert res.stationarity <= 1e-6 and res.n_iter < 20000
    top = q[:, :3]
    assert np.linalg.norm(res.x @ res.x.T - top @ top.T) < 1e-5


def test_cost_stagnation_uses_the_best_cost_over_the_window():
    crit = CostStagnation(3, rtol=1e-3, epoch=2.0)  # window 6 iterations

    def at(k, c):
        return crit.check(Progress(k, 0.0, 0.0, cost=c))

    assert at(0, 10.0) is None
    assert at(2, 5.0) is None
    assert at(4, 7.0) is None  # oscillation up: the best is still 5
    assert at(6, 4.0) is None  # 10 -> 4 since iteration 0
    assert at(8, 4.001) is None  # best 5 at iteration 2 -> 4: progress
    assert at(10, 3.999) is None  # 5 (it. 4) -> 3.999
    assert at(12, 3.9985) is StopReason.NO_PROGRESS  # 4.0 (it. 6) -> 3.9985 < 1e-3 * 4
    # a new run (iteration 0) starts afresh
    assert at(0, 1.0) is None and at(6, 1.0) is StopReason.NO_PROGRESS
    with pytest.raises(ValueError, match="window"):
        CostStagnation(0)
    assert MinStationarity(0.5).check(Progress(1, 0, 0, cost=1.0, stationarity=0.4)) is (
        StopReason.STATIONARY)


def test_sharp_problem_stationarity_does_not_vanish_but_stagnation_stops():
    """On a sharp l1 problem one subgradient's norm stays bounded away from 0 at the
    solution, as documented: without the convergence test (tol=0) the stagnation test is
    what stops there (measured: error 4.7e-10 at iteration 1170, min stationarity 8.5)."""
    prob = PlantedSparseBasis.synthetic(n=10, p=3, m=400, seed=0)
    res = rssm.minimize(
        prob, method="rsm", max_iter=5000, record=rssm.Record(every=10, stationarity=True),
        tol=0, stepsize=prob.reference_stepsize(), stop=CostStagnation(100), seed=0)
    assert res.stop_reason is StopReason.NO_PROGRESS and not res.success
    assert res.error < 1e-6 and res.n_iter < 5000  # it did converge, and stopped early
    assert np.min(res.trace["stationarity"]) > 1.0


def test_cli_options_and_trace_column(tmp_path, capsys):
    out = tmp_path / "t.csv"
    rc = main(["solve", "sparse_basis", "--n", "10", "--p", "3", "--m", "400", "--method",
               "rsm", "--stepsize", "geometric", "--stagnation-epochs", "100", "--max-iter",
               "5000", "--tol", "0", "--record-stationarity", "--seed", "1", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0 and "no_progress" in text and "stationarity" in text
    assert "success        False" in text
    with out.open(newline="") as fh:
        rows = list(csv.reader(fh))
    assert tuple(rows[0]) == TRACE_COLUMNS and all(math.isfinite(float(r[5])) for r in rows[1:])
    js = tmp_path / "t.json"
    assert main(["solve", "sparse_basis", "--n", "8", "--p", "2", "--m", "200",
                 "--stationarity-tol", "1e30", "--out", str(js)]) == 0
    doc = json.loads(js.read_text())
    assert doc["summary"]["stop_reason"] == "stationary" and doc["summary"]["success"]
    assert len(doc["trace"]["stationarity"]) == 1


def test_cli_bad_stationarity_tol_is_one_line(capsys):
    assert main(["solve", "odl", "--n", "4", "--stationarity-tol", "-1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--stationarity-tol" in err


def test_planted_basis_unaffected():
    prob = PlantedSparseBasis.synthetic(n=8, p=2, m=200, seed=0)
    res = rssm.minimize(prob, max_iter=5, seed=0, record=rssm.Record(stationarity=True))
    assert math.isfinite(res.stationarity)
    assert math.isnan(rssm.minimize(prob, max_iter=5, seed=0).stationarity)  # off by default


def test_a_run_with_the_test_off_does_not_say_the_test_failed_to_hold():
    """tol=0 turns the convergence test off; the budget's message says so instead of
    "before the convergence test held"."""
    prob = DPCP.synthetic(n=20, d=3, n_inliers=100, n_outliers=50, seed=0)
    off = rssm.minimize(prob, tol=0, max_iter=20)
    assert off.stop_reason is StopReason.MAX_ITER
    assert off.message == "reached the iteration limit (20) (the convergence test is off: tol=0)"
    on = rssm.minimize(prob, max_iter=5)
    assert on.message == "reached the iteration limit (5) before the convergence test held"
    # a time limit says the same (docs/convergence.md; it said only "reached the time
    # limit", a user's audit), with the advice of a run whose cost was still falling
    timed = rssm.minimize(prob, max_time=1e-9, max_iter=50)
    assert timed.stop_reason is StopReason.MAX_TIME
    assert re.fullmatch(r"reached the time limit \(1e-09 s of solver time\) after \d+ "
                        r"iterations? before the convergence test held(; f was still "
                        r"falling .*)?", timed.message), timed.message
    off = rssm.minimize(prob, max_time=1e-9, tol=0)
    assert off.message.endswith("(the convergence test is off: tol=0)"), off.message


def test_a_criterion_of_your_own_gets_the_best_iterate_and_must_return_a_reason():
    """A user's criterion that returns TARGET_ERROR on the best cost gets the best iterate
    (before: the last one, above the level it certified); one that returns a bool is
    refused by name (before: False counted as a stop and `print(res)` crashed)."""
    from rssm.stopping import StoppingCriterion

    prob = DPCP.synthetic(n=20, d=3, n_inliers=200, n_outliers=200, seed=0)
    level = rssm.minimize(prob).fun + 1e-6

    class BestBelow(StoppingCriterion):
        indicates_convergence = True

        def check(self, p):
            below = p.best_cost is not None and p.best_cost <= level
            return StopReason.TARGET_ERROR if below else None

    res = rssm.minimize(prob, stop=BestBelow(), tol=0, record=rssm.Record(every=1000))
    assert res.success and res.fun <= level and res.best_iteration < res.n_iter
    assert res.fun == pytest.approx(prob.cost(res.x), rel=1e-12)

    class BoolStop(StoppingCriterion):
        def check(self, p):
            return p.iteration >= 7

    with pytest.raises(TypeError, match=r"BoolStop.check must return a rssm.StopReason .* "
                                        r"or None to go on, got False"):
        rssm.minimize(prob, stop=BoolStop(), max_iter=50)
    # the built-in target error still returns the iterate whose error it measured
    hit = rssm.minimize(prob, target_error=1e-3)
    assert hit.stop_reason is StopReason.TARGET_ERROR and hit.best_iteration == hit.n_iter


def test_stop_messages_name_the_limit_and_the_criterion(small_dpcp):
    """A combined criterion that fires after its iteration limit names the limit and the
    iterations (before: "reached the iteration limit (7)" for a limit of 3);
    MinStationarity names itself (before: the legacy keyword stationarity_tol)."""
    from rssm.stopping import MaxIterations, MinStationarity, StoppingCriterion

    class After7(StoppingCriterion):
        def check(self, p):
            return StopReason.CALLBACK if p.iteration >= 7 else None

    res = rssm.minimize(small_dpcp, stop=After7() & MaxIterations(3), max_iter=100, record=1)
    assert res.n_iter == 7
    assert res.message == ("reached the iteration limit (3) after 7 iterations before the "
                           "convergence test held")
    stat = rssm.minimize(small_dpcp, stop=MinStationarity(1e9), max_iter=100,
                         record=rssm.Record(every=1, stationarity=True))
    assert stat.message.startswith("||P_T(G)||_F is at most 1e+09 (the stationarity "
                                   "tolerance) after")


def test_a_budget_that_ended_a_falling_run_says_more_iterations_may_help():
    """A run cut short by its budget while f still fell said the same as one that had
    stalled (l1 Procrustes at n = 500, p = 2: error 0.12 at the default budget of 1000,
    converged at 2322): the message now says which."""
    from rssm.problems import L1Procrustes
    from rssm.stepsizes import Constant

    prob = L1Procrustes.synthetic(seed=1)
    short = rssm.minimize(prob, seed=1, max_iter=20)
    assert short.stop_reason is StopReason.MAX_ITER
    assert short.message.startswith(
        "reached the iteration limit (20) before the convergence test held; f was still "
        "falling (a new least value at iteration ")
    assert short.message.endswith("): more iterations may let it converge")
    done = rssm.minimize(prob, seed=1)
    assert done.success
    # from the solution, fixed steps only move away: no new least value, no advice
    stuck = rssm.minimize(prob, done.x, seed=1, stepsize=Constant(1e-2), max_iter=50,
                          tol=1e-30)
    assert stuck.stop_reason is StopReason.MAX_ITER and stuck.best_iteration == 0
    assert stuck.message.startswith(
        "reached the iteration limit (50) before the convergence test held; no iterate was "
        "below the start (f(x0) = ")
    assert "x0 may be a minimizer the test could not confirm" in stuck.message
    # a review: the message named the loop's best iterate, before the last iterate was
    # recorded and could become the best (a budget off the recording grid: 401 said 399)
    for max_iter in (401, 403):
        res = rssm.minimize(prob, seed=1, stepsize=rssm.stepsizes.Geometric(1e-3, 0.99),
                            max_iter=max_iter)
        assert f"a new least value at iteration {res.best_iteration})" in res.message
    # and progress at rounding is no progress: tiny fixed steps from the solution lower f
    # by 8e-13 relative over 2000 iterations, which no longer reads as "still falling"
    flat = rssm.minimize(prob, done.x, seed=1, stepsize=Constant(1e-17), max_iter=2000,
                         tol=1e-30)
    assert flat.message.startswith("reached the iteration limit (2000) before the convergence "
                                   "test held; no step of the step-size rule Constant(c=1e-17) "
                                   "moved X by more than ")
    assert "still falling" not in flat.message and "checks" not in flat.message


def test_a_run_that_never_went_below_its_start_says_so():
    """A user's audit: a cost given with its subgradient's sign flipped ran its budget, f
    rising to 35 from -0.21, and the message said only that the test had not held. A
    budget-ended run none of whose evaluated iterates was below f(x0) now says so and
    names the check of the subgradient; a short budget and a run that went lower do not."""
    a = np.random.default_rng(0).standard_normal((8, 8))
    a = a + a.T

    def cost(x):
        return float(-np.trace(x.T @ a @ x))

    wrong = rssm.Problem.from_functions(cost, lambda x: 2.0 * a @ x, shape=(8, 3))
    res = rssm.minimize(wrong, seed=0)
    f0 = cost(wrong.initial_point(0))
    assert res.stop_reason is StopReason.MAX_ITER and res.best_iteration == 0
    assert res.fun == f0
    assert res.message == (
        "reached the iteration limit (1000) before the convergence test held; no iterate "
        f"was below the start (f(x0) = {f0:.6g}): x0 may be a minimizer the test could "
        "not confirm, or the subgradient may not be one of f "
        "(rssm.diagnostics.check_subgradient(problem) compares the two)")
    assert "no iterate" not in rssm.minimize(wrong, seed=0, max_iter=5).message
    right = rssm.Problem.from_functions(cost, lambda x: -2.0 * a @ x, shape=(8, 3))
    assert "no iterate" not in rssm.minimize(right, seed=0, max_iter=30).message


@settings(max_examples=80, deadline=None, derandomize=True)
@given(st.integers(2, 120), st.integers(1, 40), st.floats(0.0, 2.0), st.floats(0.01, 2.0),
       st.integers(0, 4), st.integers(0, 2**32 - 1))
def test_the_least_norm_point_from_the_last_bundles_answer_is_the_same_point(
        dim, k, offset, spread, distinct, seed):
    """The bundle check grows its bundle one subgradient at a time and now starts each
    least-norm search from the last answer (a sparse PCA fit spent 54 of 58 s in searches
    from scratch). Over bundles grown vector by vector, the warm search gives the same
    least-norm point as the cold one, to rounding, and a valid convex combination; also
    where the bundle holds near-duplicates (``distinct`` > 0 rows, repeated with noise of
    1e-9: a review found the warm steps stalled at 7.99 where the least is 2.64, with an
    affinely dependent support, before the optimality test sent them back to a cold
    start)."""
    from rssm.solvers.minnorm import min_norm_point

    rng = np.random.default_rng(seed)
    vecs = offset * rng.standard_normal(dim) + spread * rng.standard_normal((k, dim))
    if distinct:
        rows = rng.integers(0, min(distinct, k), size=k)
        vecs = vecs[rows] + 1e-9 * rng.standard_normal((k, dim))
    lam = None
    for j in range(1, k + 1):
        gram = vecs[:j] @ vecs[:j].T
        cold_sq, cold = min_norm_point(gram)
        sq, lam = min_norm_point(gram, start=lam)
        assert lam.shape == (j,) and np.all(lam >= 0) and abs(lam.sum() - 1) < 1e-12
        scale = float(np.max(np.diag(gram)))
        # never above the search from scratch, and optimal: <x, g_i> >= ||x||^2 for every
        # vector, to the search's tolerance (which bounds ||x||^2 - min to twice it), or
        # with near-duplicates to the search from scratch's own accuracy there (its steps
        # can stall on a nearly dependent support: up to 2.8e-9 of the largest squared
        # norm above the least that scipy's NNLS finds, over 3000 such bundles)
        assert sq <= cold_sq + 1e-12 * scale
        x = lam @ vecs[:j]
        assert float(np.min(vecs[:j] @ x)) >= x @ x - (1e-8 if distinct else 2e-12) * scale
        if not distinct:
            assert abs(sq - cold_sq) <= 1e-12 * scale
            assert np.linalg.norm(x - cold @ vecs[:j]) <= 1e-6 * math.sqrt(scale)


def test_a_start_that_is_not_usable_is_ignored():
    """A review's bad starts: inf gave NaN weights and a RuntimeWarning, weights all at
    rounding level all-NaN weights, a feasible start that was not the last answer a
    larger norm than the least (1.008 against 0.660), a 2-d start a broadcasting error.
    Each now gives the search from scratch's answer."""
    import warnings

    from rssm.solvers.minnorm import min_norm_point

    rng = np.random.default_rng(7)
    vecs = 0.5 + rng.standard_normal((5, 6))
    gram = vecs @ vecs.T
    cold_sq, cold = min_norm_point(gram)
    for start in ([np.inf, 1.0], [1e-13, 1e-13], np.full(5, 0.2), [0.5, 0.5], [-1.0, 2.0],
                  [np.nan], np.ones((2, 2)), np.ones(9), [0.0, 0.0], []):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            sq, lam = min_norm_point(gram, start=np.asarray(start, dtype=float))
        assert abs(sq - cold_sq) <= 1e-12 * gram.diagonal().max(), start
        assert np.all(lam >= 0) and abs(lam.sum() - 1) < 1e-12
        np.testing.assert_allclose(lam @ vecs, cold @ vecs, atol=1e-9)


def _textbook_affine_min(m):
    """The affine least-norm system as written before the fast path: np.linalg.solve on
    [[M, 1], [1^T, 0]], lstsq where LAPACK calls it singular."""
    k = m.shape[0]
    a = np.block([[m, np.ones((k, 1))], [np.ones((1, k)), np.zeros((1, 1))]])
    rhs = np.zeros(k + 1)
    rhs[k] = 1.0
    try:
        sol = np.linalg.solve(a, rhs)
    except np.linalg.LinAlgError:
        sol = np.linalg.lstsq(a, rhs, rcond=None)[0]
    w = sol[:k]
    return w if np.all(np.isfinite(w)) else None


@pytest.mark.parametrize("seed", range(6))
def test_the_affine_solves_give_the_bits_of_the_textbook_solve(seed):
    """`_affine_min` calls LAPACK's solve as np.linalg.solve does, without its per-call
    checks (half of a least-norm search's time on the 3-vector bundles that RSSM's default
    rule checks every iteration): the same bits as np.linalg.solve on every support, the
    same lstsq answer on a singular one (a repeated vertex), and no warning there."""
    import warnings

    from rssm.solvers.minnorm import _affine_min, _bordered

    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((6, 9)) + rng.standard_normal(9)
    vecs[5] = vecs[2]                               # a repeated vertex: singular systems
    m = vecs @ vecs.T
    m /= m.diagonal().max()
    big = _bordered(m)
    supports = [np.array([2, 5]), np.array([0, 2, 5]), np.arange(6)]
    supports += [np.sort(rng.choice(6, size=size, replace=False))
                 for size in range(1, 7) for _ in range(4)]
    singular = 0
    for idx in supports:
        if True:
            want = _textbook_affine_min(m[np.ix_(idx, idx)])
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                got = _affine_min(big, idx)
                alone = _affine_min(m[np.ix_(idx, idx)])
            for w in (got, alone):
                assert (w is None) == (want is None)
                if want is not None:
                    assert w.tobytes() == want.tobytes(), idx
            singular += {2, 5} <= set(idx.tolist())
    assert singular >= 3


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.integers(1, 3), st.integers(1, 6), st.sampled_from([0.0, 0.3, 3.0]),
       st.sampled_from(["free", "midpoint", "repeat", "around_origin", "zero"]),
       st.sampled_from([1e-150, 1e-80, 1.0, 1e80, 1e150]), st.integers(0, 2**32 - 1))
def test_the_closed_form_least_norm_of_up_to_three_vectors_is_wolfes(w, dim, offset, kind,
                                                                     scale, seed):
    """`least_sq_upto3` (BlockRule's cancel ratio, all pairs at once) against Wolfe's
    search: the same least squared norm to 1e-14 of the largest, on free vectors, a third
    on the segment of the first two, a repeated vector, three around the origin (least
    norm 0) and zero vectors, with norms from 1e-150 to 1e150 and no warning (a review:
    without the search's normalization the closed form overflowed from 1e77 and read 0.5
    for three vectors that cancel)."""
    import warnings

    from rssm.solvers.certificate import least_sq_upto3
    from rssm.solvers.minnorm import min_norm_point

    rng = np.random.default_rng(seed)
    v = scale * (rng.standard_normal((w, dim)) + offset * rng.standard_normal(dim))
    if kind == "midpoint" and w == 3:
        v[2] = 0.25 * v[0] + 0.75 * v[1]
    elif kind == "repeat" and w >= 2:
        v[-1] = v[0]
    elif kind == "around_origin" and w == 3:
        v[2] = -(0.4 * v[0] + 0.6 * v[1])
    elif kind == "zero":
        v[0] = 0.0
    gram = v @ v.T
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = least_sq_upto3(gram[None])
    want, _ = min_norm_point(gram)
    assert got.shape == (1,) and got[0] >= 0.0
    assert abs(got[0] - want) <= 1e-14 * max(gram.diagonal().max(), 1e-300)


def test_the_cancel_ratio_is_the_per_bundle_one():
    """`cancel_ratio` on bundles of three vectors of two sizes (blocks of unequal width)
    and one longer bundle: the ratio of the per-bundle `least_norm`s, to rounding."""
    from rssm.solvers.certificate import cancel_ratio, least_norm

    rng = np.random.default_rng(3)
    bundles = [[rng.standard_normal((6, 2)) for _ in range(3)] for _ in range(4)]
    bundles += [[rng.standard_normal((6, 3)) for _ in range(3)] for _ in range(2)]
    bundles += [[rng.standard_normal(12) + 1.0 for _ in range(5)]]
    d2 = m2 = 0.0
    for q in bundles:
        sq, mean_norm, _ = least_norm(q)
        d2, m2 = d2 + sq, m2 + mean_norm**2
    assert abs(cancel_ratio(bundles, 7, 3) - math.sqrt(d2 / m2)) <= 1e-14
    assert math.isnan(cancel_ratio(bundles, 8, 3))
    assert math.isnan(cancel_ratio(bundles[:6] + [bundles[6][:2]], 7, 3))


def test_the_bundle_check_searches_from_the_last_answer_only_once_its_bundle_is_long(
        monkeypatch):
    """The warm start is for the long bundles of sparse PCA's checks (up to 128 vectors),
    where searches from scratch took most of a fit's time. Bundles under WARM_FROM vectors
    search from scratch, so small problems' checks keep their paths (with every bundle
    warm, 3 of the 96 ridge calls of benchmarks.valley_stalls ended above the least value
    nearby by more than 1e-8, against 2)."""
    import rssm.solvers.certificate as cert
    from rssm.solvers.minnorm import min_norm_point

    seen = []
    unset = object()

    def spy(gram, max_iter=200, start=unset):
        if start is not unset:                   # the bundle check's calls (it passes one)
            seen.append((gram.shape[0], start is not None))
        return min_norm_point(gram, max_iter, None if start is unset else start)

    pytest.importorskip("sklearn")
    from sklearn.datasets import load_wine

    from rssm.estimators import OrthogonalSparsePCA

    monkeypatch.setattr(cert, "min_norm_point", spy)
    with pytest.warns(Warning):      # it ends on this short budget (ConvergenceWarning)
        OrthogonalSparsePCA(5, random_state=0, max_iter=6000).fit(load_wine().data)
    assert any(k > cert.WARM_FROM for k, _ in seen)         # long bundles were searched
    assert any(k < cert.WARM_FROM for k, _ in seen)
    assert all(warm == (k >= cert.WARM_FROM) for k, warm in seen)
