"""The Dask oracle when things go wrong (issue 19, defects 3 and 9): a second solve on the
same problem, a killed worker, a stopped worker, Ctrl-C while a worker is stopped, a
client closed mid-run; and the same bits as in memory. One LocalCluster of two worker
processes for the module."""

from __future__ import annotations

import os
import signal
import threading
import time
import warnings

import numpy as np
import pytest

import rssm
from rssm.data import ChunkedData, DataError, samples
from rssm.problems import DPCP
from rssm.stopping import StopReason

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, worker_dashboard_address=None) as c:
        with distributed.Client(c) as client:
            yield c, client


@pytest.fixture(scope="module")
def prob():
    """DPCP on St(40, 36), m = 4400: two chunks of 2200 in the default partition."""
    p = DPCP.synthetic(n=40, d=4, n_inliers=2200, n_outliers=2200, seed=3)
    # samples as rows in memory, the layout of the Dask array below
    return DPCP(np.ascontiguousarray(p.yt.T).T, p.p, p.subspace)


def _on_dask(prob, timeout: float = 60.0) -> DPCP:
    rows = da.from_array(np.ascontiguousarray(prob.yt.T), chunks=(2200, prob.shape[0]))
    return DPCP(samples(rows, timeout=timeout), prob.p, prob.subspace)


def _pids(client) -> list[int]:
    client.wait_for_workers(2, timeout=60)
    return sorted(client.run(os.getpid).values())


def test_same_bits_as_in_memory_and_a_second_solve(cluster, prob):
    """Chunk partials are added in chunk order on the client: the run equals the
    in-memory run bit for bit (default step). A second oracle on the same problem used to
    fail (FuturesCancelledError) once the first was released: releasing cancelled the
    persisted chunks by key, and the second oracle's data and actors with them."""
    _, client = cluster
    big = _on_dask(prob)
    assert big.data.bounds == prob.data.bounds == ((0, 2200), (2200, 4400))
    x0 = prob.initial_point()
    np.testing.assert_array_equal(big.initial_point(), x0)
    o1 = big.make_oracle(x0.copy(), None)
    o2 = big.make_oracle(x0.copy(), None)
    c2 = o2.cost()
    o1.close()
    del o1
    time.sleep(0.3)
    assert o2.cost() == c2
    o2.close()
    ref = rssm.minimize(prob, x0, max_iter=25, seed=1, record=5, threads=2)
    res = rssm.minimize(big, x0, max_iter=25, seed=1, record=5, threads=2)
    np.testing.assert_array_equal(res.x, ref.x)
    np.testing.assert_array_equal(res.trace["cost"], ref.trace["cost"])
    # threads=None (the case; the bits then follow the BLAS pools, which the
    # workers keep at one thread): the third solve on the same problem
    res = rssm.minimize(big, x0, max_iter=25, seed=1, record=5, threads=None)
    np.testing.assert_allclose(res.x, ref.x, rtol=0, atol=1e-10)


def test_samples_as_columns_on_worker_processes_give_the_bits_in_memory(cluster, prob):
    """A user's audit: a Dask array with samples as columns, on worker processes, gave
    other bits than in memory, and other bits on each repeat (5 hashes in 6 calls): a
    chunk unpickled on a worker can sit at any byte (address % 64 = 7 was seen), and
    NumPy computes products of unaligned operands with its own loops, not BLAS. The
    worker aligns its chunks once."""
    _, client = cluster
    cols = np.ascontiguousarray(prob.yt)
    on_dask = DPCP(da.from_array(cols, chunks=(cols.shape[0], 2200)), prob.p, prob.subspace)
    assert on_dask.data.bounds == prob.data.bounds
    x0 = prob.initial_point()
    ref = rssm.minimize(prob, x0, max_iter=25, seed=1)
    for threads in ("auto", 1):
        res = rssm.minimize(on_dask, x0, max_iter=25, seed=1, threads=threads)
        np.testing.assert_array_equal(res.x, ref.x)


def test_a_killed_worker_is_replaced_and_the_run_goes_on(cluster, prob):
    _, client = cluster
    big = _on_dask(prob)
    victim = _pids(client)[0]
    x0 = prob.initial_point()

    def kill(progress):
        if progress.iteration == 10:
            os.kill(victim, signal.SIGKILL)

    with pytest.warns(RuntimeWarning, match=r"Dask worker .* was lost .* reloaded on another "
                                            r"worker and their caches rebuilt from X"):
        res = rssm.minimize(big, x0, max_iter=30, seed=1, record=5, callback=kill)
    ref = rssm.minimize(prob, x0, max_iter=30, seed=1, record=5)
    assert res.n_iter == 30
    np.testing.assert_allclose(res.x, ref.x, rtol=0, atol=1e-10)
    _pids(client)   # the nanny restarts the worker


def test_a_stopped_worker_ends_the_run_within_the_timeout(cluster, prob):
    """A worker stopped with SIGSTOP blocked minimize forever (past max_time). (Both are
    stopped here: the actors live where the persisted chunks are, which may be one.)"""
    _, client = cluster
    big = _on_dask(prob, timeout=2.0)
    victims = _pids(client)
    stopped = []

    def stop(progress):
        if progress.iteration == 10:
            for pid in victims:
                os.kill(pid, signal.SIGSTOP)
            stopped.append(time.monotonic())

    try:
        res = rssm.minimize(big, prob.initial_point(), max_iter=10**6, max_time=60.0, seed=1,
                            record=5, callback=stop)
        waited = time.monotonic() - stopped[0]
    finally:
        for pid in victims:
            os.kill(pid, signal.SIGCONT)
    assert res.stop_reason is rssm.StopReason.DATA_ERROR and not res.success
    assert "a Dask worker did not answer within 2 s" in res.message
    assert 1.9 < waited < 10.0
    x = res.x
    assert x.shape == prob.shape and np.abs(x.T @ x - np.eye(prob.p)).max() < 1e-12
    assert res.n_iter >= 10 and np.isfinite(res.fun)


def test_ctrl_c_while_a_worker_is_stopped_ends_the_run_in_seconds(cluster, prob):
    """Ctrl-C used to wait for the stopped worker (the interrupt handler made another
    remote call). Now the run ends within seconds with the iterate so far: as a Result
    marked interrupted (its cost NaN when the workers cannot tell it), or, where the loop
    evaluates the best point from scratch after the interrupt, as a DataError carrying
    that point (the remote reads then wait at most `STALLED_TIMEOUT`)."""
    _, client = cluster
    big = _on_dask(prob, timeout=30.0)
    victims = _pids(client)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    marks = []

    def stop_then_interrupt(progress):
        if progress.iteration == 10:
            for pid in victims:
                os.kill(pid, signal.SIGSTOP)
            marks.append(time.monotonic())
            threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()

    try:
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            try:
                res = rssm.minimize(big, prob.initial_point(), max_iter=10**6, seed=1,
                                    record=5, callback=stop_then_interrupt)
                assert res.stop_reason is StopReason.INTERRUPTED and res.n_iter >= 10
                x = res.x
            except DataError as exc:
                assert "did not" in str(exc)
                x = exc.x
        waited = time.monotonic() - marks[0]
    finally:
        for pid in victims:
            os.kill(pid, signal.SIGCONT)
    assert waited < 10.0      # 0.5 s to the signal, then 2 s attempts
    assert x.shape == prob.shape and np.abs(x.T @ x - np.eye(prob.p)).max() < 1e-12
    _pids(client)


def test_a_closed_client_is_reported_as_such(prob):
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as c, distributed.Client(c) as client:
        big = _on_dask(prob)

        def close(progress):
            if progress.iteration == 5:
                client.close()

        res = rssm.minimize(big, prob.initial_point(), max_iter=50, seed=1, record=5,
                            callback=close)
        assert res.stop_reason is rssm.StopReason.DATA_ERROR
        assert "the Dask client was closed during the run" in res.message


def test_one_round_trip_per_iteration(cluster, prob, monkeypatch):
    """An RSSM iteration is one message to each actor, also when the step-size rule reads
    f every iteration (the default): the cost comes back with the partial products."""
    from rssm.data.distributed import DaskOracle
    from rssm.stepsizes import Constant

    big = _on_dask(prob)
    calls = []
    real = DaskOracle._round
    monkeypatch.setattr(DaskOracle, "_round",
                        lambda self, *a, **k: (calls.append(1), real(self, *a, **k))[1])
    counts = {}
    for name, rule in (("constant", Constant(1e-3)), ("auto", "auto")):
        calls.clear()
        res = rssm.minimize(big, prob.initial_point(), method="rssm", options={"n_blocks": 5},
                            stepsize=rule, max_iter=40, seed=0, record=40)
        assert res.n_iter == 40
        counts[name] = len(calls)
    assert counts["constant"] <= 40 + 2, counts
    assert counts["auto"] <= 40 + 2 + 12, counts   # + the first iteration's step search


def test_trial_cost_on_the_workers_equals_in_memory(cluster, prob):
    from rssm.blocks import Partition

    big = _on_dask(prob)
    part = Partition.uniform(prob.p, 4)
    x0 = prob.initial_point()
    local, remote = prob.make_oracle(x0.copy(), part), big.make_oracle(x0.copy(), part)
    try:
        cols = part.columns(1, 3)
        vals = x0[:, cols.index] + 1e-2
        assert remote.cost_at(cols, cols.selector, vals) == local.cost_at(
            cols, cols.selector, vals)
        assert remote.cost() == local.cost()
    finally:
        remote.close()


def test_sparse_pca_from_dask_data_with_an_empty_chunk():
    """Filtering samples the Dask way (boolean index, then ``compute_chunk_sizes``) leaves
    zero-length chunks; `SparsePCA.from_data` failed on them inside Dask's reductions
    ("all the input array dimensions except for the concatenation axis must match"), where
    every other problem and estimator skips them. The run is the one on the same chunks
    without the empty one."""
    from rssm.problems import SparsePCA

    pts = np.random.default_rng(0).standard_normal((3000, 6))
    pts[1000:2000, 0] = -5.0                       # the middle chunk is filtered out
    d = da.from_array(pts, chunks=(1000, 6))
    sel = d[d[:, 0] > -4].compute_chunk_sizes()
    assert sel.chunks[0] == (1000, 0, 1000)
    plain = da.from_array(pts[pts[:, 0] > -4], chunks=(1000, 6))
    runs = [rssm.minimize(SparsePCA.from_data(a, r=2), max_iter=20, seed=0)
            for a in (sel, plain)]
    assert runs[0].n_iter == 20
    np.testing.assert_array_equal(runs[0].x, runs[1].x)


def test_an_exact_fit_on_dask_data_is_left_to_the_convergence_test():
    """The exact-fit level needs a pass over the data, which for a Dask array would read
    its source again (a review: every chunk read twice, without the store's timeout):
    none is made there."""
    rng = np.random.default_rng(5)
    basis = np.linalg.qr(rng.standard_normal((12, 3)))[0]
    cols = basis @ rng.standard_normal((3, 3000))
    prob = DPCP(ChunkedData(da.from_array(cols, chunks=(12, 700)), rows_are_samples=False), 9)
    assert prob._exact_fit_level(0.0) is None
    assert DPCP(cols, 9)._exact_fit_level(0.0) is not None
