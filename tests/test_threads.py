"""BLAS/OpenMP pools during a run (rssm.threads) and the one-pool rule (issue #10).

NumPy and SciPy wheels each bundle an OpenBLAS with its own thread pool; a SciPy LAPACK
call between NumPy's GEMMs made the two pools fight for the cores (RSM 8x slower in
default threads). The solver paths must use NumPy's pool alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest
from threadpoolctl import threadpool_info

import rssm
from rssm.stepsizes import Constant
from rssm.threads import _FIRST_INTERVAL, _WINDOW, SWITCH_MARGIN, ThreadGovernor, check_threads


def _max_threads() -> int:
    return max((i["num_threads"] for i in threadpool_info()), default=1)


_ONE_POOL = r"""
import json, numpy as np, rssm
from threadpoolctl import threadpool_info
from rssm.stepsizes import Constant
probs = [rssm.problems.DPCP.synthetic(n=30, d=3, n_inliers=200, n_outliers=100, seed=0),
         rssm.problems.ODL.synthetic(n=12, m=300, seed=0)]
for prob in probs:
    for method in ("rsm", "rssm"):
        rssm.minimize(prob, method=method, n_blocks=3, stepsize=Constant(1e-3), max_iter=20,
                      record_every=5, seed=0)
        prob.initial_point(np.random.default_rng(0))
libs = [i["filepath"] for i in threadpool_info() if i["user_api"] == "blas"]
print(json.dumps(libs))
"""


def test_solver_paths_load_only_numpys_blas():
    """A fresh process that imports rssm and runs RSM and RSSM on DPCP and ODL (steps,
    recording, error, spectral start) has exactly one BLAS library loaded: NumPy's.
    Fails on the code that called SciPy's dsyevd for the polar factor."""
    out = subprocess.run([sys.executable, "-c", _ONE_POOL], capture_output=True, text=True,
                         timeout=120, check=True)
    libs = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(libs) == 1, libs
    assert "numpy" in libs[0], libs


def _rsm_replay(prob, x):
    """The BLAS/LAPACK calls of one rssm RSM iteration on DPCP, through NumPy alone."""
    yt = prob.yt
    zt = x.T @ yt
    w = zt / np.linalg.norm(zt, axis=0)
    g = (w @ yt.T).T / yt.shape[1]
    y = x.T @ g
    xi = x - 1e-4 * (g - x @ (0.5 * (y + y.T)))
    gram = xi.T @ xi
    ev, v = np.linalg.eigh(gram)
    q = xi @ ((v / np.sqrt(ev)) @ v.T)
    np.matmul(q.T, yt, out=zt)
    return q


def test_rsm_iteration_costs_about_its_numpy_replay_in_default_threads():
    """Regression test of the pool fight, robust on a noisy machine: the ratio of an RSM
    iteration (pools as they are, threads=None) to the same calls replayed through NumPy
    alone, interleaved, best of several rounds. The SciPy-eigh code measured 2-8x here;
    one pool gives about 1."""
    if _max_threads() < 2:
        pytest.skip("one BLAS thread: no second pool to fight with")
    prob = rssm.problems.DPCP.synthetic(n=100, d=10, n_inliers=1500, n_outliers=3500, seed=1)
    x0 = prob.initial_point()
    from rssm.blocks import Partition  # noqa: F401  (the solver classes import it)
    from rssm.solvers.rsm import RSMSolver

    solver = RSMSolver(prob, x0, None, None, np.random.default_rng(0))
    step, replay = [], []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(5):
            solver.step(1e-4)
        step.append(time.perf_counter() - t)
        t = time.perf_counter()
        for _ in range(5):
            _rsm_replay(prob, x0)
        replay.append(time.perf_counter() - t)
    ratio = min(step) / min(replay)
    assert ratio < 1.6, f"RSM iteration / NumPy replay = {ratio:.2f}"


# -- the governor ---------------------------------------------------------------------------
def test_check_threads():
    assert check_threads("auto") == "auto"
    assert check_threads(None) is None
    assert check_threads(np.int64(2)) == 2
    for bad in (0, -1):
        with pytest.raises(ValueError, match="threads must be 'auto', None or an int >= 1"):
            check_threads(bad)
    for bad in (True, 1.5, "two", "AUTO"):
        with pytest.raises((TypeError, ValueError), match="threads must be"):
            check_threads(bad)


def test_minimize_refuses_bad_threads_before_running():
    prob = rssm.problems.DPCP.synthetic(n=20, d=2, n_inliers=50, n_outliers=20, seed=0)
    with pytest.raises(ValueError, match="threads"):
        rssm.minimize(prob, threads=0, max_iter=1)


def test_int_threads_hold_during_the_run_and_are_restored():
    before = [i["num_threads"] for i in threadpool_info()]
    seen = []
    prob = rssm.problems.DPCP.synthetic(n=20, d=2, n_inliers=50, n_outliers=20, seed=0)
    res = rssm.minimize(prob, stepsize=Constant(1e-3), max_iter=6, record_every=2, threads=1,
                        callback=lambda p: seen.append(
                            max(i["num_threads"] for i in threadpool_info())))
    assert seen and set(seen) == {1}
    assert [i["num_threads"] for i in threadpool_info()] == before
    assert res.threads == "1"


def _drive(gov: ThreadGovernor, times_of, n: int, start: int = 0) -> list[int]:
    """Run the governor's hooks over n fake steps; times_of(threads) gives a step time."""
    used = []
    for k in range(start, start + n):
        gov.before_step(k)
        used.append(gov.current)
        gov.after_step(k, times_of(gov.current))
    return used


@pytest.mark.skipif(_max_threads() < 2, reason="needs a pool of >= 2 threads to choose from")
def test_auto_moves_to_one_thread_when_it_is_clearly_faster_and_restores_pools():
    before = [i["num_threads"] for i in threadpool_info()]
    with ThreadGovernor("auto") as gov:
        hi = gov.hi
        used = _drive(gov, lambda t: 10.0 if t > 1 else 1.0, 40)   # loaded machine
        during = max(i["num_threads"] for i in threadpool_info())
    assert used[: 1 + _WINDOW] == [hi] * (1 + _WINDOW)      # warm-up + reference window
    assert used[1 + _WINDOW] == 1                            # the probe
    assert used[-1] == 1 and during == 1
    assert gov.switches[0] == (1 + _WINDOW + 1 + _WINDOW, 1)     # warm-up + window
    # A probe of the full pool on the loaded machine is abandoned after its warm-up step
    # and one slow timed step: two probes in these 40 steps, two slow steps each.
    assert used.count(hi) - (1 + _WINDOW) <= 4
    assert [i["num_threads"] for i in threadpool_info()] == before
    assert "switched to 1 from iteration" in gov.describe()


@pytest.mark.skipif(_max_threads() < 2, reason="needs a pool of >= 2 threads to choose from")
@pytest.mark.parametrize("one_thread_time", [1.0 / 0.6, 1.0, 1.0 / (SWITCH_MARGIN * 0.95)])
def test_auto_stays_on_the_full_pool_unless_one_thread_wins_by_the_margin(one_thread_time):
    """Idle machine (the full pool faster), a tie, and one thread faster by less than the
    margin: the governor keeps the full pool outside its probes, with probes spaced out."""
    with ThreadGovernor("auto") as gov:
        hi = gov.hi
        used = _drive(gov, lambda t: 1.0 if t > 1 else one_thread_time, 200)
    assert not gov.switches
    probe_steps = [k for k, t in enumerate(used) if t == 1]
    assert len(probe_steps) == (1 + _WINDOW) * gov.probes      # warm-up + window
    assert gov.probes <= 3                                   # intervals grow 4x: 16, 64, 256
    assert probe_steps[0] == 1 + _WINDOW and used[-1] == hi
    assert probe_steps[1 + _WINDOW] >= 2 + 2 * _WINDOW + _FIRST_INTERVAL


@pytest.mark.skipif(_max_threads() < 2, reason="needs a pool of >= 2 threads to choose from")
def test_auto_returns_to_the_full_pool_when_the_load_goes():
    load = {"on": True}

    def times(t):
        if load["on"]:
            return 10.0 if t > 1 else 1.0
        return 0.5 if t > 1 else 1.0

    with ThreadGovernor("auto") as gov:
        hi = gov.hi
        _drive(gov, times, 30)
        assert gov.current == 1
        load["on"] = False
        used = _drive(gov, times, 200, start=30)
    assert used[-1] == hi
    assert [t for _, t in gov.switches] == [1, hi]


def test_auto_is_inactive_on_one_thread():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1), ThreadGovernor("auto") as gov:
        used = _drive(gov, lambda t: 1.0, 50)
    assert set(used) == {1} and gov.probes == 0
    assert "nothing to choose" in gov.describe()


def test_fixed_threads_are_bit_identical_across_runs():
    prob = rssm.problems.DPCP.synthetic(n=100, d=10, n_inliers=500, n_outliers=500, seed=2)
    runs = [rssm.minimize(prob, method="rssm", stepsize=Constant(1e-3), max_iter=60, seed=3,
                          threads=1) for _ in range(2)]
    np.testing.assert_array_equal(runs[0].x, runs[1].x)
    np.testing.assert_array_equal(runs[0].trace["cost"], runs[1].trace["cost"])
