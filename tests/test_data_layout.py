"""The chunked layout of the data oracle (issue 18 item 2, issue 19): a fixed partition of
the samples that depends on the data's size alone, so the bits of a run do not depend on
the worker count, and in-memory and out-of-core runs with the same partition agree to the
last bit; one dispatch per RSSM iteration; no large allocations in the hot path."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import rssm
import rssm.data.chunkset as engine
from rssm.blocks import Partition, UniformPairs
from rssm.data import ChunkedData, DataOracle, InMemory, default_chunk_size, samples
from rssm.data.store import MAX_CHUNKS
from rssm.problems import DPCP, ODL, CompositeProblem, EntrywiseLoss, NormLoss
from rssm.solvers.rsm import RSMSolver
from rssm.solvers.rssm import RSSMSolver
from rssm.stepsizes import Constant
from rssm.threads import RunThreads


def _problems() -> dict:
    """Instances with 3 to 6 chunks in the default partition."""
    rng = np.random.default_rng(0)
    y = rng.standard_normal((30, 6600))
    return {
        "dpcp": DPCP.synthetic(n=40, d=4, n_inliers=2600, n_outliers=4000, seed=3),
        "odl": ODL.synthetic(n=16, m=12300, seed=2),
        "norm-composite": CompositeProblem(
            y, 6, NormLoss.huber(0.5), sample_weights=rng.uniform(0, 2, 6600),
            l1_penalty=0.01, stepsize=1e-4),
        "l1-composite": CompositeProblem(
            y, 6, EntrywiseLoss.l1(), offset=0.1 * rng.standard_normal((6600, 6)),
            stepsize=1e-5),
    }


@pytest.fixture(scope="module")
def problems() -> dict:
    return _problems()


@pytest.mark.parametrize("method", ["rsm", "rssm"])
@pytest.mark.parametrize("name", ["dpcp", "odl", "norm-composite", "l1-composite"])
def test_worker_count_does_not_change_the_bits(problems, name, method):
    """threads=1, 2 and 3 give bit-identical iterates, traces and flop counts (the
    default step, which reads f, included)."""
    prob = problems[name]
    assert len(prob.data.bounds) >= 3
    opts = {"n_blocks": 3} if method == "rssm" else None
    runs = [rssm.minimize(prob, method=method, options=opts, max_iter=30, seed=1, threads=t,
                          record=rssm.Record(every=5, stationarity=True)) for t in (1, 2, 3)]
    for r in runs[1:]:
        np.testing.assert_array_equal(r.x, runs[0].x)
        np.testing.assert_array_equal(r.x_last, runs[0].x_last)
        for col in ("cost", "error", "stationarity", "flops"):
            np.testing.assert_array_equal(r.trace[col], runs[0].trace[col])


def test_partition_is_a_function_of_the_size_alone():
    assert default_chunk_size(5000, 100) == 2500       # paper DPCP: 2 chunks
    assert default_chunk_size(4648, 60) == 2324        # paper ODL: 2 chunks
    assert default_chunk_size(226, 8) == 226           # small problems: one chunk
    assert default_chunk_size(40_000, 100) == 40_000 // MAX_CHUNKS
    # 64 MiB chunks at most: 1.6 GB of data in 24 chunks
    assert -(-2_000_000 // default_chunk_size(2_000_000, 100)) == 24
    prob = DPCP.synthetic(seed=1)
    with RunThreads(3):
        assert prob.data.bounds == InMemory(prob.yt).bounds
    assert prob.data.bounds == ((0, 2500), (2500, 5000))
    # out-of-core data are cut the same way by default
    assert samples(np.ascontiguousarray(prob.yt.T)).bounds == prob.data.bounds
    assert ChunkedData(prob.yt, rows_are_samples=False).bounds == prob.data.bounds


@pytest.mark.parametrize("layout", ["columns-memmap-disk", "columns-memmap-memory",
                                    "columns-numpy", "rows-memmap-disk", "rows-memmap-memory"])
@pytest.mark.parametrize("method", ["rsm", "rssm"])
def test_out_of_core_equals_in_memory_bit_for_bit(tmp_path, layout, method):
    """With the same partition (the default for all) and the same layout, a run on
    out-of-core data equals the reference run to the last bit, with the default step
    (which reads f) too. The reference: in memory (a C copy, samples as columns) for data
    stored with samples as columns; a NumPy array with one sample per row through
    `samples` for data stored by rows (the products then run on the rows' layout). Before
    issue 19 out of core agreed with in memory to 1e-10 only, and only for schedules that
    do not read f."""
    prob = DPCP.synthetic(n=40, d=4, n_inliers=2600, n_outliers=4000, seed=3)
    store, where = layout.split("-", 1)
    cache = "disk" if where.endswith("disk") else "memory"
    if store == "columns":
        ref = prob
        np.save(tmp_path / "y.npy", prob.yt)
        src = np.load(tmp_path / "y.npy", mmap_mode="r") if where != "numpy" else prob.yt
        big = DPCP(ChunkedData(src, rows_are_samples=False, cache=cache), prob.p)
    else:
        rows = np.ascontiguousarray(prob.yt.T)
        ref = DPCP(samples(rows), prob.p)
        np.save(tmp_path / "y.npy", rows)
        big = DPCP(samples(np.load(tmp_path / "y.npy", mmap_mode="r"), cache=cache), prob.p)
    assert big.data.bounds == ref.data.bounds == prob.data.bounds
    assert len(big.data.bounds) == 3          # 6600 samples: 3 chunks of 2200
    x0 = ref.initial_point()
    np.testing.assert_array_equal(big.initial_point(), x0)
    r1 = rssm.minimize(ref, x0, method=method, max_iter=40, seed=2, record=4, threads=2)
    r2 = rssm.minimize(big, x0, method=method, max_iter=40, seed=2, record=4, threads=2)
    np.testing.assert_array_equal(r2.x, r1.x)
    np.testing.assert_array_equal(r2.trace["cost"], r1.trace["cost"])
    assert big.cost(r1.x) == ref.cost(r1.x)


@pytest.mark.parametrize("header", [1, 4, 12])
@pytest.mark.parametrize("rows", [False, True])
def test_a_file_opened_at_an_unaligned_offset_gives_the_bits_in_memory(tmp_path, header,
                                                                        rows):
    """A user's audit: a raw float64 file with a header of 1, 4 or 12 bytes, opened as
    np.memmap(offset=header) and run out of core, gave other bits than the same samples
    in memory (7e-14 after a default DPCP run; headers of 0, 8 or 16 bytes did not):
    NumPy computes products of unaligned operands without BLAS. Unaligned chunks are
    copied before their products, the start's Gram matrix included."""
    prob = DPCP.synthetic(n=40, d=4, n_inliers=2600, n_outliers=4000, seed=3)
    data = np.ascontiguousarray(prob.yt.T if rows else prob.yt)
    ref = DPCP(samples(data), prob.p) if rows else DPCP(data, prob.p)
    path = tmp_path / "raw.bin"
    path.write_bytes(b"h" * header + data.tobytes())
    mm = np.memmap(path, dtype=np.float64, mode="r", offset=header, shape=data.shape)
    assert not mm.flags.aligned
    big = DPCP(samples(mm) if rows else ChunkedData(mm, rows_are_samples=False), prob.p)
    assert big.data.bounds == ref.data.bounds and len(big.data.bounds) == 3
    np.testing.assert_array_equal(big.initial_point(), ref.initial_point())
    for method in ("rsm", "rssm"):
        r1 = rssm.minimize(ref, method=method, max_iter=40, seed=2)
        r2 = rssm.minimize(big, method=method, max_iter=40, seed=2)
        np.testing.assert_array_equal(r2.x, r1.x)


def test_one_dispatch_per_rssm_iteration(monkeypatch):
    """An RSSM iteration (cache update of the last step, statistics, weights, product, and
    the cost, which the loop reads after the direction to keep the best iterate and the
    step-size rules read too) is one dispatch of the chunks, with or without the loop's
    read of f (``cheap_cost``)."""
    calls = []
    real = engine.parallel_for
    monkeypatch.setattr(engine, "parallel_for", lambda fn, n: (calls.append(n), real(fn, n)))
    prob = DPCP.synthetic(seed=1)
    for track_best in (False, True):
        monkeypatch.setattr(DataOracle, "cheap_cost", track_best)
        for stepsize in (Constant(1e-3), "auto"):
            calls.clear()
            res = rssm.minimize(prob, method="rssm", options={"n_blocks": 5}, stepsize=stepsize,
                                max_iter=60, seed=0, record=60)
            assert res.n_iter == 60
            # + the first refresh, the cost at the end, "auto"'s first-iteration search
            extra = 3 + (30 if stepsize == "auto" else 0)
            assert 60 <= len(calls) <= 60 + extra, (track_best, len(calls))
            assert set(calls) == {2}                  # the paper DPCP's 2 chunks


@pytest.mark.parametrize("which", ["rssm", "rsm"])
def test_hot_path_allocates_no_large_arrays(which):
    """50 iterations on the paper's DPCP with two workers allocate at most a few n x p
    matrices at a time (the geometry), nothing of the size of the cache (p x m)."""
    prob = DPCP.synthetic(seed=1)
    n, p = prob.shape
    part = Partition.uniform(p, 5) if which == "rssm" else None
    cls = RSSMSolver if which == "rssm" else RSMSolver
    solver = cls(prob, prob.initial_point(), part, UniformPairs() if part else None,
                 np.random.default_rng(0))
    with RunThreads(2):
        for _ in range(10):
            solver.step(1e-3)
        tracemalloc.start()
        try:
            for _ in range(50):
                solver.step(1e-3)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 8 * 6 * n * p, peak
    assert peak < 8 * p * prob.m / 8


def test_cache_rows_and_statistics_are_exact_after_many_steps():
    """No drift: after 3000 RSSM steps on 4 chunks, Z^T, the block norms and the cost
    equal those of a fresh oracle to a rounding or two (one GEMM of all p rows and
    one of |C| rows may round an entry differently), not to an accumulated error."""
    prob = DPCP.synthetic(n=40, d=4, n_inliers=2600, n_outliers=4000, seed=3)
    part = Partition.uniform(prob.shape[1], 5)
    solver = RSSMSolver(prob, prob.initial_point(), part, UniformPairs(),
                        np.random.default_rng(1))
    for _ in range(3000):
        solver.step(1e-3)
    o = solver.oracle
    fresh = prob.make_oracle(solver.x.copy(), part)
    eps = np.finfo(float).eps
    assert np.max(np.abs(o.zt - fresh.zt)) <= 2 * eps * np.max(np.abs(fresh.zt))
    assert np.max(np.abs(o.bn - fresh.bn)) <= 8 * eps * np.max(fresh.bn)
    assert o.cost() == pytest.approx(fresh.cost(), rel=4 * eps)


@pytest.mark.parametrize("name", ["dpcp", "odl", "norm-composite", "l1-composite"])
def test_trial_cost_is_pure_and_equals_the_cost_after_the_step(problems, name):
    """`cost_at` (the step-size rules' trial points) is one pass over the chunks, leaves X
    and the caches alone, and gives the cost that the step writing those values then
    reports, to the last bit."""
    prob = problems[name]
    n, p = prob.shape
    rng = np.random.default_rng(5)
    for part in (Partition.uniform(p, 3), None):
        x = prob.initial_point(0).copy()
        oracle = prob.make_oracle(x, part)
        sets = [None] if part is None else [part.columns(0, 1), part.columns(0, 2)]
        for cols in sets:
            sel = slice(None) if cols is None else cols.selector
            c = p if cols is None else cols.size
            values = x[:, sel] + 1e-2 * rng.standard_normal((n, c))
            before = oracle.cost()
            trial = oracle.cost_at(cols, sel, values)
            assert oracle.cost() == before
            xt = x.copy()
            xt[:, sel] = values
            assert trial == pytest.approx(prob.cost(xt), rel=1e-12)
            x[:, sel] = values
            oracle.update(cols)
            assert oracle.cost() == trial


def test_the_layout_warning_is_for_arrays_whose_layout_was_not_stated(tmp_path):
    """An audit: DPCP(rssm.data.samples(rows[:5]), p=4) warned "pass yt.T, or
    rssm.data.samples(array)", which is what the call did."""
    import warnings

    from rssm.data.store import LayoutWarning

    rows = np.random.default_rng(0).standard_normal((5, 12))       # 5 samples in R^12
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert DPCP(samples(rows), p=4).m == 5
        assert ODL(ChunkedData(rows.T, rows_are_samples=False)).m == 5
    with pytest.warns(LayoutWarning, match=r"yt is 12 x 5, read as 5 samples"):
        DPCP(rows.T, p=4)
    # a raw memmap states nothing either (the review: it was silent while a first fix
    # warned for in-memory arrays only), nor does a Dask array
    np.save(tmp_path / "rows.npy", rows.T)
    with pytest.warns(LayoutWarning, match=r"yt is 12 x 5, read as 5 samples"):
        DPCP(np.load(tmp_path / "rows.npy", mmap_mode="r"), p=4)
