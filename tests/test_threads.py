"""Threads during a run (rssm.threads): reproducible bits whatever the thread setting,
safe concurrent runs, and the one-pool rule (issue #10).

NumPy and SciPy wheels each bundle an OpenBLAS with its own thread pool; a SciPy LAPACK
call between NumPy's GEMMs made the two pools fight for the cores. The solver paths must
use NumPy's pool alone.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import rssm
from rssm import threads as T
from rssm.stepsizes import Constant
from rssm.threads import RunThreads, check_threads, parallel_for


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
        rssm.minimize(prob, method=method, options={"n_blocks": 3} if method == "rssm" else None,
                      stepsize=Constant(1e-3), max_iter=20, record=5, seed=0)
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


@pytest.mark.parametrize("threads", ["auto", 1, 3])
def test_blas_is_one_thread_during_a_run_and_restored_after(threads):
    before = [i["num_threads"] for i in threadpool_info()]
    seen = []
    prob = rssm.problems.DPCP.synthetic(n=20, d=2, n_inliers=50, n_outliers=20, seed=0)
    res = rssm.minimize(prob, stepsize=Constant(1e-3), max_iter=6, record=2, threads=threads,
                        callback=lambda p: seen.append(
                            max(i["num_threads"] for i in threadpool_info())))
    assert seen and set(seen) == {1}
    assert [i["num_threads"] for i in threadpool_info()] == before
    assert "BLAS 1 thread" in res.threads
    want = T.usable_cores() if threads == "auto" else threads
    assert f"{min(want, T.MAX_WORKERS)} chunk worker" in res.threads


def test_threads_none_leaves_the_pools_alone():
    before = [i["num_threads"] for i in threadpool_info()]
    seen = []
    prob = rssm.problems.DPCP.synthetic(n=20, d=2, n_inliers=50, n_outliers=20, seed=0)
    res = rssm.minimize(prob, max_iter=4, record=2, threads=None,
                        callback=lambda p: seen.append([i["num_threads"]
                                                        for i in threadpool_info()]))
    assert all(s == before for s in seen)
    assert res.threads.startswith("unchanged pools")


@pytest.mark.parametrize("threads", ["auto", 1, None])
def test_the_observers_see_the_thread_setting_the_result_returns(threads):
    # (an audit: Result.threads was filled in after the observers' finish, which saw "",
    # so a Result saved there was not the one returned)
    class Saver(rssm.Observer):
        def start(self, info):
            self.info = dict(info)

        def finish(self, result):
            self.saved = json.dumps(result.to_dict(arrays=True))

    obs = Saver()
    prob = rssm.problems.DPCP.synthetic(n=20, d=2, n_inliers=50, n_outliers=20, seed=0)
    res = rssm.minimize(prob, max_iter=20, observers=[obs], threads=threads)
    assert res.threads
    assert obs.info["threads"] == res.threads
    assert rssm.Result.from_dict(json.loads(obs.saved)) == res


def _dpcp():
    return rssm.problems.DPCP.synthetic(n=60, d=6, n_inliers=600, n_outliers=900, seed=2)


@pytest.mark.parametrize("method", ["rsm", "rssm"])
def test_the_same_call_gives_the_same_bits_for_any_thread_count(method):
    """The default step reads f, so a last-bit difference would change the path: the runs
    must agree to the bit, whatever the number of chunk workers."""
    prob = _dpcp()
    runs = [rssm.minimize(prob, method=method, max_iter=120, threads=t)
            for t in ("auto", 1, 2, 3, "auto")]
    for r in runs[1:]:
        np.testing.assert_array_equal(r.x, runs[0].x)
        np.testing.assert_array_equal(r.trace["cost"], runs[0].trace["cost"])


_SEEDED_HASHES = r"""
import hashlib, json, warnings
import numpy as np
from rssm import problems as P, stiefel
from rssm.estimators import OrthogonalSparsePCA, RobustSubspace
warnings.simplefilter("ignore")
h = lambda a: hashlib.sha1(np.ascontiguousarray(a).tobytes()).hexdigest()
out = {}
for name in ("DPCP", "ODL", "L1Procrustes", "SparsePCA", "PlantedSparseBasis"):
    prob = getattr(P, name).synthetic(seed=0)
    for key, val in sorted(vars(prob).items()):
        if isinstance(val, np.ndarray):
            out[name + "." + key] = h(val)
# sizes at which OpenBLAS sums on one thread in another order than on several
big = {"ODL": P.ODL.synthetic(n=30, seed=0).y,
       "DPCP": P.DPCP.synthetic(n=300, d=150, n_inliers=200, n_outliers=400, seed=0).yt,
       "SparsePCA": P.SparsePCA.synthetic(n=300, m=400, seed=0).yt,
       "PlantedSparseBasis": P.PlantedSparseBasis.synthetic(n=50, m=5000, seed=0).x_true,
       "random_point": stiefel.random_point(300, 150, np.random.default_rng(0))}
out.update({"big " + k: h(v) for k, v in big.items()})
rng = np.random.default_rng(5)
l1 = P.L1Procrustes(rng.standard_normal((3000, 80)), rng.standard_normal((3000, 40)))
out["L1Procrustes.initial_point"] = h(l1.initial_point(0))
x = np.vstack([rng.standard_normal((1500, 3)) @ rng.standard_normal((3, 200)) + 0.5,
               rng.standard_normal((1000, 200))])
out["RobustSubspace"] = h(RobustSubspace(3, center=True, random_state=0,
                                         max_iter=30).fit(x).components_)
x3 = rng.standard_normal((400, 300)) @ np.diag(np.linspace(1, 3, 300))
out["OrthogonalSparsePCA"] = h(OrthogonalSparsePCA(5, mu=0.3, random_state=0,
                                                   max_iter=30).fit(x3).components_)
print(json.dumps(out))
"""


def test_seeded_data_starts_and_fits_do_not_depend_on_the_blas_thread_count():
    """What a seed or the data decide outside a run is the same whatever the machine's BLAS
    thread count: every built-in's ``synthetic(seed=0)`` (and larger instances, where
    OpenBLAS on one thread sums products and QRs in another order than on several),
    ``initial_point(s)``, `rssm.stiefel.random_point` and the estimators' fits (their
    scatter, Gram and eigendecompositions). Before the fix ``OPENBLAS_NUM_THREADS=1``
    changed DPCP's, ODL's, sparse PCA's and the sparse basis's data, l1 Procrustes' start
    and the fits of `RobustSubspace(center=True)` and `OrthogonalSparsePCA`."""
    import os

    hashes = []
    for threads in ("1", "3"):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=threads, OMP_NUM_THREADS=threads)
        out = subprocess.run([sys.executable, "-c", _SEEDED_HASHES], capture_output=True,
                             text=True, env=env, timeout=600)
        assert out.returncode == 0, out.stderr
        hashes.append(json.loads(out.stdout))
    assert len(hashes[0]) >= 18
    differ = sorted(k for k in hashes[0] if hashes[0][k] != hashes[1][k])
    assert not differ, differ


def test_concurrent_runs_in_two_python_threads_agree_with_a_run_alone():
    prob = _dpcp()
    before = [i["num_threads"] for i in threadpool_info()]
    alone = rssm.minimize(prob, method="rssm", max_iter=150, seed=4)
    out: list = [None, None]

    def go(i):
        out[i] = rssm.minimize(prob, method="rssm", max_iter=150, seed=4)

    ts = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for r in out:
        np.testing.assert_array_equal(r.x, alone.x)
        np.testing.assert_array_equal(r.trace["cost"], alone.trace["cost"])
    assert [i["num_threads"] for i in threadpool_info()] == before


def test_a_run_in_another_python_thread_is_limited_too():
    """threadpoolctl lets only a "controlling" thread set OpenBLAS's limits; a run started
    in a second Python thread must still see one BLAS thread, and the pools come back."""
    prob = _dpcp()
    before = [i["num_threads"] for i in threadpool_info()]
    seen: list = []
    with threadpool_limits(limits=before[0]):   # the main thread takes the role first
        pass

    def go():
        rssm.minimize(prob, max_iter=5, record=1, callback=lambda p: seen.append(
            max(i["num_threads"] for i in threadpool_info())))

    t = threading.Thread(target=go)
    t.start()
    t.join()
    assert seen and set(seen) == {1}
    assert [i["num_threads"] for i in threadpool_info()] == before


# -- the chunk executor ---------------------------------------------------------------------
def test_parallel_for_runs_every_chunk_once_and_the_sum_is_worker_independent():
    rng = np.random.default_rng(0)
    a = [rng.standard_normal((40, 300)) for _ in range(7)]
    b = rng.standard_normal((300, 30))
    sums = []
    for w in (1, 2, 4):
        out = [None] * 7
        calls = []

        def chunk(i, out=out, calls=calls):
            calls.append(i)
            out[i] = a[i] @ b

        with RunThreads(w):
            parallel_for(chunk, 7)
        assert sorted(calls) == list(range(7))
        total = out[0].copy()
        for o in out[1:]:
            total += o
        sums.append(total)
    for s in sums[1:]:
        np.testing.assert_array_equal(s, sums[0])


def test_parallel_for_raises_the_first_chunks_error_and_skips_the_rest():
    started = []

    def chunk(i):
        started.append(i)
        if i in (2, 5):
            raise ValueError(f"chunk {i} failed")

    with RunThreads(2), pytest.raises(ValueError, match="chunk 2 failed"):
        parallel_for(chunk, 40)
    assert len(started) < 40


def test_a_keyboard_interrupt_waits_for_the_chunks_in_flight():
    """Ctrl-C reaches the caller's thread only: parallel_for must not return while a helper
    still writes to a chunk's buffer."""
    state = {"busy": 0, "max_after": None}
    lock = threading.Lock()

    def chunk(i):
        if threading.current_thread() is threading.main_thread() and i > 0:
            raise KeyboardInterrupt
        with lock:
            state["busy"] += 1
        time.sleep(0.05)
        with lock:
            state["busy"] -= 1

    with RunThreads(4), pytest.raises(KeyboardInterrupt):
        parallel_for(chunk, 8)
    assert state["busy"] == 0


@pytest.mark.parametrize("exc", [SystemExit, asyncio.CancelledError, KeyboardInterrupt])
def test_an_exception_that_is_no_exception_on_a_helper_thread_reaches_the_caller(exc):
    """A user's loss that raised SystemExit (or asyncio's CancelledError, pytest's
    failures, a KeyboardInterrupt of its own) on one of rssm's helper threads left its
    chunk uncounted: the caller waited for it for good (a user's audit: a request thread
    of a service stuck in `minimize`). It is raised in the caller, after the chunks in
    flight."""
    seen: list = []

    def chunk(i):
        time.sleep(0.002)
        if threading.current_thread().name.startswith("rssm-worker"):
            raise exc("on a helper")

    def call():
        try:
            with RunThreads(2):
                parallel_for(chunk, 60)
        except BaseException as e:   # noqa: BLE001 - what the caller gets is the test
            seen.append(e)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    caller.join(10)
    assert not caller.is_alive(), "parallel_for never returned"
    assert len(seen) == 1 and type(seen[0]) is exc and str(seen[0]) == "on a helper"


def test_parallel_for_outside_a_run_is_serial_and_in_order():
    order = []
    parallel_for(order.append, 5)
    assert order == [0, 1, 2, 3, 4]
    assert T.workers() == 1


def test_the_blas_controller_is_kept_until_python_imports_something(monkeypatch):
    """Building threadpoolctl's controller scans every loaded shared object (2 ms with
    SciPy and scikit-learn loaded); it is kept between runs and built again once Python
    has imported a module, so a native library loaded since the last run is limited too.
    The limit itself is read live: after a run every pool is back at its own setting."""
    import sys
    import types

    from threadpoolctl import threadpool_info

    from rssm import threads

    first = threads._blas_controller()
    assert threads._blas_controller() is first
    monkeypatch.setitem(sys.modules, "rssm_test_fake_module", types.ModuleType("fake"))
    second = threads._blas_controller()
    assert second is not first and threads._blas_controller() is second
    before = [(d["filepath"], d["num_threads"]) for d in threadpool_info()]
    with threads.single_blas():
        assert all(d["num_threads"] == 1 for d in threadpool_info())
    assert [(d["filepath"], d["num_threads"]) for d in threadpool_info()] == before


_FORK = r"""
import json, multiprocessing as mp, threading
import rssm, rssm.threads as T
from threadpoolctl import threadpool_info

def pools():
    return sorted(i["num_threads"] for i in threadpool_info())

BIG = rssm.problems.DPCP.synthetic(n=30, d=3, n_inliers=3000, n_outliers=6000, seed=1)
SMALL = rssm.problems.DPCP.synthetic(n=30, d=3, n_inliers=300, n_outliers=600, seed=0)

def chunked_runs(_):
    for s in range(3):
        rssm.minimize(BIG, seed=s, max_iter=30, threads=2)
    alive = sum(t.is_alive() for t in T._POOL._threads)
    # a job the caller finished before a helper took it stays queued until one does (a
    # moment on an idle machine, longer on a loaded one: the suite saw 1 left): wait for
    # the workers to drain it; without workers (the defect) nothing ever would
    import time
    for _ in range(100):
        if T._POOL._queue.qsize() == 0:
            break
        time.sleep(0.05)
    return dict(queued=T._POOL._queue.qsize(), alive=alive)

def state(_):
    before = (pools(), T._blas_depth)
    rssm.minimize(SMALL, seed=0, max_iter=5)
    return dict(at_fork=before, after_run=(pools(), T._blas_depth))

if __name__ == "__main__":
    out = {"parent": pools()}
    rssm.minimize(BIG, seed=0, max_iter=30, threads=2)      # the parent's workers start
    ctx = mp.get_context("fork")
    with ctx.Pool(1) as pool:
        out["chunked"] = pool.apply(chunked_runs, (0,))
    started, release = threading.Event(), threading.Event()
    def cb(_):
        started.set()
        release.wait(30)
    t = threading.Thread(target=lambda: rssm.minimize(SMALL, seed=0, max_iter=3, tol=0,
                                                       callback=cb))
    t.start()
    started.wait(30)
    with ctx.Pool(1) as pool:
        out["mid_run"] = pool.apply(state, (0,))
    release.set()
    t.join()
    out["parent_after"] = (pools(), T._blas_depth)
    print(json.dumps(out))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="the fork start method is Linux's default")
def test_a_forked_child_gets_a_pool_and_blas_pools_of_its_own():
    """A child forked after the parent ran on several chunks runs its chunks on workers
    of its own and queues nothing for the parent's workers, which do not exist in it
    (before: every helper job stayed queued with its chunk buffers, 7070 jobs and 416 MiB
    after 101 calls); a child forked while another thread is inside a run starts with
    the BLAS pools as they were before any run (before: one thread, and a count of 1 that
    no run of its own took back). The parent is not changed."""
    out = subprocess.run([sys.executable, "-c", _FORK], capture_output=True, text=True,
                         timeout=240, check=True)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["chunked"]["queued"] == 0, res
    assert res["chunked"]["alive"] >= 1, res
    assert res["mid_run"]["at_fork"] == [res["parent"], 0], res
    assert res["mid_run"]["after_run"] == [res["parent"], 0], res
    assert res["parent_after"] == [res["parent"], 0], res


def test_a_run_that_leaves_the_pools_alone_says_when_another_run_held_them():
    """``threads=None`` leaves the pools alone, but a default run in another Python thread
    holds them at one thread while it runs, so the first run's BLAS threads change under
    it and its bits follow the other's timing (a user's audit: 4 tries, 4 iterates), while
    ``Result.threads`` said "unchanged pools" alone."""
    import threading

    prob = rssm.problems.DPCP.synthetic(n=20, d=3, n_inliers=200, n_outliers=200, seed=0)
    alone = rssm.minimize(prob, seed=0, max_iter=5, threads=None)
    assert "another rssm run" not in alone.threads
    inside, release = threading.Event(), threading.Event()

    def hold(_):
        inside.set()
        release.wait(30)

    other = threading.Thread(target=lambda: rssm.minimize(prob, seed=1, max_iter=2, tol=0,
                                                           callback=hold))
    other.start()
    try:
        assert inside.wait(30)
        beside = rssm.minimize(prob, seed=0, max_iter=5, threads=None)
    finally:
        release.set()
        other.join()
    assert "another rssm run in this process held them at 1 thread" in beside.threads


def test_a_run_that_starts_while_a_threads_none_run_holds_the_limit_is_counted():
    """A review: the count took only holds that found the pools free, so a run of another
    thread that started while the ``threads=None`` run held them for a moment of its own
    (as its start does) and held them after went unnoticed."""
    import threading

    from rssm.threads import single_blas

    small = rssm.problems.DPCP.synthetic(n=10, d=2, n_inliers=60, n_outliers=40, seed=0)
    inside, release = threading.Event(), threading.Event()

    def b_hold(_):
        inside.set()
        release.wait(30)

    other = threading.Thread(target=lambda: rssm.minimize(small, seed=0, max_iter=3,
                                                           threads=1, callback=b_hold))

    def a_cb(progress):
        if progress.iteration == 1:
            with single_blas():          # A's own hold; B starts inside it
                other.start()
                assert inside.wait(30)
        if progress.iteration == 4:
            release.set()
            other.join()

    res = rssm.minimize(small, seed=0, max_iter=8, threads=None, callback=a_cb)
    assert "another rssm run in this process held them at 1 thread" in res.threads


def test_concurrent_calls_leave_the_warning_filters_as_they_were():
    """`ODL.synthetic` (and the dictionary estimator's fit) silenced their own layout
    warning with `warnings.catch_warnings`, which changes the process's filter list: two
    threads inside it at once left an ``ignore LayoutWarning`` behind, and a later call's
    layout warning went unseen (a user's audit: 5 of 5 runs of 2 threads x 50 calls). The
    warnings rssm silences for itself are now silenced in the calling thread only
    (`rssm._validation.quieted`), and no module of the library touches the filters."""
    import warnings
    from pathlib import Path

    from rssm.data import LayoutWarning

    before = list(warnings.filters)

    def work():
        for i in range(60):
            rssm.problems.ODL.synthetic(n=4, m=20, seed=i)

    workers = [threading.Thread(target=work) for _ in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert list(warnings.filters) == before
    with pytest.warns(LayoutWarning, match="read as 5 samples"):
        rssm.problems.ODL(np.random.default_rng(1).standard_normal((10, 5)))
    src = Path(rssm.__file__).parent
    touching = [str(f.relative_to(src)) for f in src.rglob("*.py")
                if any(w in f.read_text() for w in ("catch_warnings()", "simplefilter("))]
    assert touching == []
