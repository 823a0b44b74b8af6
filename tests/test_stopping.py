"""Stopping criteria (`rssm.stopping`), the trace and `Result` (`rssm.trace`)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

import rssm
from rssm.problems import DPCP
from rssm.stepsizes import Geometric
from rssm.stopping import (
    AllOf,
    AnyOf,
    CallbackStop,
    MaxIterations,
    MaxTime,
    Progress,
    StopReason,
    TargetError,
)
from rssm.trace import TRACE_COLUMNS, Result

STEP = Geometric(0.1, 0.9)


# --------------------------------------------------------------------------------------
# criteria as objects
# --------------------------------------------------------------------------------------


def _at_record(k, t=0.0, err=0.5):
    return Progress(k, t, 0.0, cost=1.0, error=err, x=None)


def test_each_criterion_fires_on_its_own_condition():
    assert MaxIterations(5).check(Progress(4, 0.0, 0.0)) is None
    assert MaxIterations(5).check(Progress(5, 0.0, 0.0)) is StopReason.MAX_ITER
    assert MaxTime(1.0).check(Progress(9, 0.99, 0.0)) is None
    assert MaxTime(1.0).check(Progress(9, 1.0, 0.0)) is StopReason.MAX_TIME
    assert TargetError(1e-3).check(_at_record(3, err=2e-3)) is None
    assert TargetError(1e-3).check(_at_record(3, err=1e-3)) is StopReason.TARGET_ERROR
    assert TargetError(1e-3).check(_at_record(3, err=None)) is None
    assert CallbackStop(lambda p: p.iteration > 2).check(_at_record(3)) is StopReason.CALLBACK
    assert CallbackStop(lambda p: None).check(_at_record(3)) is None
    with pytest.raises(TypeError, match="callback must be callable"):
        CallbackStop(42)


def test_or_and_combine():
    either = MaxIterations(5) | TargetError(1e-3)
    assert isinstance(either, AnyOf)
    assert either.check(_at_record(2, err=1.0)) is None
    assert either.check(_at_record(5, err=1.0)) is StopReason.MAX_ITER
    assert either.check(_at_record(2, err=1e-4)) is StopReason.TARGET_ERROR
    # both fire: the one that means success (a target reached on the budget's last
    # iteration is reached; a user's review), else the first member's
    assert either.check(_at_record(5, err=1e-4)) is StopReason.TARGET_ERROR
    assert (MaxIterations(5) | MaxTime(1.0)).check(
        Progress(5, 2.0, 0.0)) is StopReason.MAX_ITER
    assert (TargetError(1e-3) | MaxIterations(5)).check(
        _at_record(5, err=1e-4)
    ) is StopReason.TARGET_ERROR
    both = MaxIterations(5) & TargetError(1e-3)
    assert isinstance(both, AllOf)
    assert both.check(_at_record(5, err=1.0)) is None
    assert both.check(_at_record(4, err=1e-4)) is None
    assert both.check(_at_record(5, err=1e-4)) is StopReason.TARGET_ERROR  # the last member's
    nested = (MaxIterations(100) & MaxTime(1.0)) | CallbackStop(lambda p: p.cost < 2)
    assert nested.check(_at_record(3)) is StopReason.CALLBACK
    assert nested.check(Progress(100, 2.0, 0.0)) is StopReason.MAX_TIME
    assert "MaxIterations(5) & TargetError(0.001)" == repr(both)


def test_record_only_criteria_wait_for_a_recording_point():
    """Between recording points (cost None) error and callback criteria are not asked."""
    calls = []
    cb = CallbackStop(lambda p: calls.append(p.iteration) or True)
    assert AnyOf(cb).check(Progress(3, 0.0, 0.0)) is None
    assert AllOf(MaxIterations(1), cb).check(Progress(3, 0.0, 0.0)) is None
    assert calls == []
    assert AnyOf(cb).check(_at_record(3)) is StopReason.CALLBACK
    assert calls == [3]


def test_stop_reason_is_a_string_enum():
    assert StopReason("max_iter") is StopReason.MAX_ITER
    assert str(StopReason.NON_FINITE) == "non_finite"
    assert {r.value for r in StopReason} >= {
        "max_iter",
        "max_time",
        "target_error",
        "callback",
        "non_finite",
        "interrupted",
    }


# --------------------------------------------------------------------------------------
# each reason through minimize
# --------------------------------------------------------------------------------------


def test_max_iter(small_dpcp):
    res = rssm.minimize(
        small_dpcp, method="rssm", stepsize=STEP, max_iter=37, seed=0, options={"n_blocks": 4}
    )
    assert isinstance(res, Result)
    assert res.stop_reason is StopReason.MAX_ITER and res.n_iter == 37
    assert "37" in res.message
    res0 = rssm.minimize(small_dpcp, stepsize=STEP, max_iter=0, seed=0)
    assert res0.n_iter == 0 and res0.stop_reason is StopReason.MAX_ITER
    assert res0.trace["iteration"].tolist() == [0]


def test_max_time(small_dpcp):
    res = rssm.minimize(
        small_dpcp, method="rssm", stepsize=1e-3, max_time=0.05, seed=0, options={"n_blocks": 4}
    )
    assert res.stop_reason is StopReason.MAX_TIME
    assert res.time >= 0.05 and res.n_iter > 0
    assert res.trace["iteration"][-1] == res.n_iter


def test_target_error_stops_at_the_first_recording_point_below_target(small_dpcp):
    res = rssm.minimize(
        small_dpcp,
            method="rssm", stepsize=STEP, max_iter=5000, target_error=1e-6, seed=0, record=5,
        options={"n_blocks": 4}
    )
    assert res.stop_reason is StopReason.TARGET_ERROR
    assert res.n_iter % 5 == 0 and res.n_iter < 5000
    err = res.trace["error"]
    assert err[-1] <= 1e-6 and np.all(err[:-1] > 1e-6)
    assert res.error == err[-1] == small_dpcp.error(res.x)


def test_callback_stops_and_sees_the_iterate(small_dpcp):
    seen = []

    def cb(progress):
        seen.append(progress)
        assert not progress.x.flags.writeable
        assert progress.cost == pytest.approx(small_dpcp.cost(progress.x), rel=1e-12)
        assert progress.error == small_dpcp.error(progress.x)
        return progress.iteration >= 30

    res = rssm.minimize(
        small_dpcp, method="rssm", stepsize=STEP, max_iter=1000, record=10, callback=cb, seed=0,
        options={"n_blocks": 4}
    )
    assert res.stop_reason is StopReason.CALLBACK and res.n_iter == 30
    assert [p.iteration for p in seen] == [0, 10, 20, 30]
    np.testing.assert_array_equal(seen[-1].x, res.x_last)
    assert res.fun <= seen[-1].cost                  # x: the best iterate seen
    with pytest.raises(ValueError, match="read-only"):
        seen[-1].x[0, 0] = 1.0


def test_callback_sees_every_recording_point_including_the_last(small_dpcp):
    """The callback is asked at the recording point where max_iter stops the run too."""
    seen = []
    res = rssm.minimize(
        small_dpcp,
            method="rssm", stepsize=STEP, max_iter=25, record=5, callback=seen.append, seed=0,
        options={"n_blocks": 4}
    )
    assert res.stop_reason is StopReason.MAX_ITER
    assert [p.iteration for p in seen] == [0, 5, 10, 15, 20, 25]


def test_callback_sees_the_last_row_between_recording_points(small_dpcp):
    """max_iter not a multiple of record_every: the extra final row reaches the callback,
    which then has seen exactly the rows of the returned trace."""
    seen = []
    res = rssm.minimize(
        small_dpcp,
            method="rssm", stepsize=STEP, max_iter=23, record=5, callback=seen.append, seed=0,
        options={"n_blocks": 4}
    )
    assert res.stop_reason is StopReason.MAX_ITER
    assert [p.iteration for p in seen] == [0, 5, 10, 15, 20, 23]
    np.testing.assert_array_equal([p.iteration for p in seen], res.trace["iteration"])
    assert seen[-1].cost == res.fun
    np.testing.assert_array_equal(seen[-1].x, res.x)


def test_callback_sees_the_last_row_after_a_time_limit(small_dpcp):
    seen = []
    res = rssm.minimize(
        small_dpcp,
            method="rssm", stepsize=STEP, max_time=0.05, record=10**6, callback=seen.append,
        seed=0, tol=0,
        options={"n_blocks": 4}
    )
    assert res.stop_reason is StopReason.MAX_TIME and res.n_iter > 0
    assert [p.iteration for p in seen] == [0, res.n_iter]
    assert seen[-1].error == small_dpcp.error(res.x_last)


def test_combined_criteria_forward_the_last_row(small_dpcp):
    seen_any, seen_all = [], []
    stop = (MaxIterations(10**6) & CallbackStop(seen_all.append)) | CallbackStop(seen_any.append)
    res = rssm.minimize(
        small_dpcp, method="rssm", stepsize=STEP, max_iter=7, record=5, stop=stop, seed=0,
        options={"n_blocks": 4}
    )
    assert res.n_iter == 7
    assert [p.iteration for p in seen_any] == [0, 5, 7]
    assert [p.iteration for p in seen_all][-1] == 7


def test_stop_argument_combines_with_the_others(small_dpcp):
    # AllOf: stops only when both hold (here at iteration 20, a recording point)
    stop = MaxIterations(20) & CallbackStop(lambda p: p.iteration >= 12)
    res = rssm.minimize(
        small_dpcp,
            method="rssm", stepsize=STEP, record=4, stop=stop, seed=0, options={"n_blocks": 4}
    )
    assert res.n_iter == 20 and res.stop_reason is StopReason.CALLBACK
    # AnyOf with max_iter: whichever comes first
    res = rssm.minimize(
        small_dpcp,
            method="rssm", stepsize=STEP, max_iter=50, stop=MaxIterations(7) | MaxTime(100.0),
        seed=0,
        options={"n_blocks": 4}
    )
    assert res.n_iter == 7 and res.stop_reason is StopReason.MAX_ITER
    res = rssm.minimize(
        small_dpcp, method="rssm", stepsize=STEP, max_iter=9, stop=MaxIterations(70), seed=0,
        options={"n_blocks": 4}
    )
    assert res.n_iter == 9


def test_keyboard_interrupt_returns_the_result_so_far(small_dpcp):
    def cb(progress):
        if progress.iteration == 20:
            raise KeyboardInterrupt

    res = rssm.minimize(
        small_dpcp, method="rssm", stepsize=STEP, max_iter=100, record=10, callback=cb, seed=0,
        options={"n_blocks": 4}
    )
    assert res.stop_reason is StopReason.INTERRUPTED and res.n_iter == 20
    assert res.feasibility <= 1e-13


# --------------------------------------------------------------------------------------
# trace and Result
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "max_iter,record_every,want",
    [
        (100, 10, list(range(0, 101, 10))),
        (100, 30, [0, 30, 60, 90, 100]),
        (5, 1, [0, 1, 2, 3, 4, 5]),
    ],
)
def test_trace_columns_and_record_every(max_iter, record_every, want, small_dpcp):
    res = rssm.minimize(
        small_dpcp, method="rssm", stepsize=STEP, max_iter=max_iter, record=record_every, seed=0,
        options={"n_blocks": 4}
    )
    assert tuple(res.trace) == TRACE_COLUMNS == ("iteration", "time", "flops", "cost", "error",
                                                 "stationarity")
    assert all(isinstance(v, np.ndarray) and v.shape == (len(want),) for v in res.trace.values())
    assert res.trace["iteration"].dtype.kind == "i"
    assert res.trace["iteration"].tolist() == want
    # time 0 is the oracle's set-up (its cache of Y^T X0), counted as solver time
    assert np.all(np.diff(res.trace["time"]) >= 0) and 0 <= res.trace["time"][0] < res.time
    assert np.all(np.diff(res.trace["flops"]) > 0) and res.trace["flops"][0] == 0.0
    assert res.trace["flops"][-1] == res.flops and res.trace["time"][-1] == res.time
    last = small_dpcp.cost(res.x_last)
    assert res.trace["cost"][-1] == res.fun_last == pytest.approx(last, rel=1e-12)
    assert res.trace["error"][-1] == small_dpcp.error(res.x_last)
    assert res.fun == pytest.approx(small_dpcp.cost(res.x), rel=1e-12) and res.fun <= last
    assert res.fun == pytest.approx(min(res.trace["cost"]), rel=1e-12) or res.fun < min(
        res.trace["cost"])
    assert res.error == small_dpcp.error(res.x)


def test_default_record_every(small_dpcp):
    res = rssm.minimize(
        small_dpcp,
            method="rssm", stepsize=STEP, max_iter=1000, seed=0, tol=0, options={"n_blocks": 4}
    )
    assert res.trace["iteration"].tolist() == list(range(0, 1001, 5))  # max_iter // 200
    res = rssm.minimize(
        small_dpcp, method="rssm", stepsize=STEP, seed=0, tol=0, options={"n_blocks": 4}
    )  # default limit
    assert res.n_iter == 2000  # 1000 epochs of l/2 = 2 iterations
    assert res.trace["iteration"][1] == 10  # record_every = 2000 // 200


def test_error_column_is_nan_without_ground_truth(small_dpcp):
    prob = DPCP(small_dpcp.yt, small_dpcp.p)
    seen = []
    res = rssm.minimize(
        prob, method="rssm", stepsize=STEP, max_iter=20, record=10, callback=seen.append, seed=0,
        options={"n_blocks": 4}
    )
    assert np.all(np.isnan(res.trace["error"])) and math.isnan(res.error)
    assert [p.error for p in seen] == [None, None, None]
    assert "n/a" in repr(res)


class _SlowError(DPCP):
    """DPCP whose error(X) takes 0.1 s: evaluating it must not count as solver time."""

    def error(self, x):
        time.sleep(0.1)
        return super().error(x)


def test_recording_time_is_excluded(small_dpcp):
    """A callback sleeping 0.2 s at each of 4 recording points and an error taking 0.1 s
    at each: 1.2 s of recording, while 30 iterations of this problem take milliseconds.
    If recording were counted, Result.time would exceed 0.6 s (three sleeps before the
    last record). A logic check, not a timing benchmark."""
    slow = _SlowError(small_dpcp.yt, small_dpcp.p, small_dpcp.subspace)

    def sleepy(progress):
        time.sleep(0.2)

    t0 = time.perf_counter()
    res = rssm.minimize(
        slow, method="rssm", stepsize=STEP, max_iter=30, record=10, callback=sleepy, seed=0,
        options={"n_blocks": 4}
    )
    wall = time.perf_counter() - t0
    total_sleep = 4 * (0.2 + 0.1)
    assert wall >= total_sleep
    assert res.time < 0.3 < total_sleep
    assert res.trace["time"][-1] == res.time


def test_result_summary(small_dpcp):
    res = rssm.minimize(
        small_dpcp, method="rssm", stepsize=STEP, max_iter=10, seed=0, options={"n_blocks": 4}
    )
    text = repr(res)
    for part in ("RSSM", "l=4", "St(20, 16)", "max_iter", "iterations    10", "feasibility"):
        assert part in text
    assert not res.success  # an iteration limit is not convergence (issue #12, item 15)
    assert res.method == "rssm" and res.n_blocks == 4 and res.selection == "uniform"
    assert res.seed == 0


# -- behaviour a mutation audit found unpinned (each assertion failed on a mutant) ------------
def test_min_step_norm_stops_below_tol_only_and_stagnation_forgets_a_repeated_iteration():
    from rssm.progress import Progress
    from rssm.stopping import CostStagnation, MinStepNorm

    def row(k, **kw):
        return Progress(iteration=k, time=0.0, flops=0.0, **kw)

    assert MinStepNorm(0.5).check(row(3, step_norm=0.5)) is None        # not below tol
    assert MinStepNorm(0.5).check(row(3, step_norm=0.4999)) is not None
    # a criterion used again: a row whose iteration does not go forward starts a new run
    c = CostStagnation(window=2)
    for k in range(4):
        c.check(row(k, cost=10.0 - k))
    assert [c.check(row(k, cost=f)) for k, f in ((3, 20.0), (4, 19.0), (5, 18.0))] == \
        [None, None, None]
