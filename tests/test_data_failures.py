"""Issue 19's data defects (1, 4, 5, 8, 9 without a cluster): each test fails on the code
before the storage protocol (main 345b821)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import warnings

import numpy as np
import pytest

import rssm
from rssm.data import ChunkedData, LayoutWarning, samples
from rssm.problems import DPCP, ODL, L1Procrustes, PlantedSparseBasis, SparsePCA
from rssm.stepsizes import Constant


def _env() -> dict:
    env = dict(os.environ)
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


# -- defect 1: a chunk of exactly p samples with the cache on disk ----------------------------
def test_disk_cache_with_a_chunk_of_p_samples_gives_the_right_cost(tmp_path):
    """ODL, n = p = 8, m = 108 in chunks of 100: the last chunk holds p samples. The old
    oracle moved every float64 attribute whose last axis had the chunk's length to the
    cache file, the per-column row costs (shape (p,)) included, and never wrote them back:
    the cost was 641.1 for a true 665.1. The state is now declared, never guessed."""
    prob = ODL.synthetic(n=8, m=108, seed=4)
    np.save(tmp_path / "y.npy", np.ascontiguousarray(prob.y.T))
    mm = np.load(tmp_path / "y.npy", mmap_mode="r")
    big = ODL(samples(mm, chunk_size=100, cache="disk"), dictionary=prob.dictionary)
    assert big.data.bounds == ((0, 100), (100, 108))
    x0 = prob.initial_point(3)
    kw = dict(options={"n_blocks": 4}, stepsize=Constant(1e-3), max_iter=30, seed=0, record=1)
    r_big = rssm.minimize(big, x0, **kw)
    r_mem = rssm.minimize(prob, x0, **kw)
    assert r_big.fun == pytest.approx(prob.cost(r_big.x), rel=1e-12)
    np.testing.assert_allclose(r_big.trace["cost"], r_mem.trace["cost"], rtol=1e-12)
    np.testing.assert_allclose(r_big.x, r_mem.x, rtol=0, atol=1e-12)


# -- defect 4: no cache file left behind ------------------------------------------------------
# The child restores the default action of SIGHUP and SIGTERM: under nohup (or any parent
# that ignores them) it would inherit "ignore", survive the signal, and the test would
# time out for a reason that has nothing to do with the cache file.
_HOLD = """
import signal, sys, time, numpy as np, rssm
signal.signal(signal.SIGHUP, signal.SIG_DFL)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
from rssm.data import samples
a = np.random.default_rng(0).standard_normal((3000, 10))
prob = rssm.problems.DPCP(samples(a, chunk_size=500, cache="disk", cache_dir=sys.argv[1]), p=6)
oracle = prob.make_oracle(prob.initial_point(), None)
print("READY", flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP])
def test_cache_file_is_not_left_behind_when_the_process_is_killed(tmp_path, sig):
    """The disk cache (1.5 GB at m = 2e6) used to stay in the temporary folder after
    SIGTERM, SIGHUP, kill -9 or a crash: it is now unlinked as soon as it is open."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(tmp_path)],
                            stdout=subprocess.PIPE, text=True, env=_env())
    try:
        assert proc.stdout.readline().strip() == "READY"
        os.kill(proc.pid, sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -sig
    assert os.listdir(tmp_path) == []


# -- defect 5: a memory-mapped file truncated during a run ---------------------------------------
_TRUNCATE = """
import os, sys, numpy as np, rssm
from rssm.data import samples
path = sys.argv[1]
base = rssm.problems.DPCP.synthetic(n=20, d=3, n_inliers=400, n_outliers=600, seed=0)
np.save(path, np.ascontiguousarray(base.yt.T))
prob = rssm.problems.DPCP(samples(np.load(path, mmap_mode="r"), chunk_size=250,
                                  cache="memory"), base.p)
def cut(progress):
    if progress.iteration == 4:
        os.truncate(path, 1000)
res = rssm.minimize(prob, max_iter=50, record=2, callback=cut, stepsize=1e-3)
x = res.x
feas = float(np.abs(x.T @ x - np.eye(x.shape[1])).max())
print(res.stop_reason.value, "|", res.message, "|", feas, "|", res.n_iter)
"""


def test_truncated_memmap_raises_a_clear_error_not_sigbus(tmp_path):
    """Truncating the .npy during a run killed Python with SIGBUS (exit 135, no message).
    The file's size is checked before each chunk is read: the run now ends with stop
    reason ``data_error``, a message that says what happened, and the iterate so far."""
    out = subprocess.run([sys.executable, "-c", _TRUNCATE, str(tmp_path / "a.npy")],
                         capture_output=True, text=True, env=_env(), timeout=120)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    name, msg, feas, n_iter = out.stdout.strip().splitlines()[-1].split(" | ")
    assert name == "data_error" and 4 <= int(n_iter) < 50
    assert "a.npy shrank to 1000 bytes since it was opened" in msg
    assert 0.0 <= float(feas) < 1e-12


_TRUNCATE_BEFORE = """
import os, sys, json, numpy as np, rssm
from rssm.data import samples
from rssm.problems import DPCP, SparsePCA
path = sys.argv[1]
rng = np.random.default_rng(0)
out = {}
for kind in ("dpcp", "dpcp_rsm", "sparse_pca", "sparse_pca_polyak_level"):
    np.save(path, rng.standard_normal((2000, 10)))
    data = samples(np.load(path, mmap_mode="r"), chunk_size=300)
    prob = (SparsePCA.from_data(data, r=2) if kind.startswith("sparse_pca")
            else DPCP(data, p=2))
    x0 = rssm.minimize(prob, max_iter=3, seed=0).x      # a first run reads the whole file
    os.truncate(path, os.path.getsize(path) - 800)     # shortened between two runs
    res = rssm.minimize(prob, x0, max_iter=5, seed=0,
                        method="rsm" if kind == "dpcp_rsm" else None,
                        stepsize="polyak_level" if kind.endswith("polyak_level") else None)
    out[kind] = [res.stop_reason.value, res.message, res.n_iter, bool(np.array_equal(res.x, x0)),
                 res.stepsize["rule"], float(res.fun)]
print(json.dumps(out))
"""


def test_data_unreadable_as_a_run_starts_is_a_data_error_result(tmp_path):
    """A file shortened between two runs on the same problem: the second run's set-up (the
    oracle's caches, sparse PCA's default rule, which reads the data for its scale) raised
    `DataError` out of `minimize`, where docs/data.md says the error is a result with stop
    reason ``data_error``; it is now, at x0, after 0 iterations."""
    out = subprocess.run([sys.executable, "-c", _TRUNCATE_BEFORE, str(tmp_path / "a.npy")],
                         capture_output=True, text=True, env=_env(), timeout=120)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    got = json.loads(out.stdout.strip().splitlines()[-1])
    for kind, (reason, msg, n_iter, at_x0, _rule, fun) in got.items():
        assert reason == "data_error", (kind, msg)
        assert msg.startswith("iteration 0: the data file") and "a.npy shrank to" in msg, msg
        assert n_iter == 0 and at_x0 and fun != fun      # no cost could be read: NaN
    assert got["sparse_pca"][4] == "default"             # the rule that could not be set up
    # a named spec completed from the problem's own rule reads the data too (a regression
    # hunt: it still raised)
    assert got["sparse_pca_polyak_level"][4] == "polyak_level"
    assert got["dpcp"][4] == "Auto"


_REPLACE = _TRUNCATE.replace("""    if progress.iteration == 4:
        os.truncate(path, 1000)""", """    if progress.iteration == 4:
        np.save(path + ".new.npy", np.zeros((3, 3)))
        os.replace(path + ".new.npy", path)       # a new file under the same name
    if progress.iteration == 8:
        os.remove(path)""")


def test_a_memmap_replaced_or_unlinked_during_a_run_goes_on(tmp_path):
    """Writing a new file and renaming it over the data (the safe way to update data), or
    deleting it, leaves the mapped file whole (the mapping holds it open), but the size
    check read the size of whatever the path named and ended the run with a false "shrank
    to 128 bytes"; it now reads the size of the mapped file itself."""
    out = subprocess.run([sys.executable, "-c", _REPLACE, str(tmp_path / "a.npy")],
                         capture_output=True, text=True, env=_env(), timeout=120)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    name, msg, feas, n_iter = out.stdout.strip().splitlines()[-1].split(" | ")
    assert name != "data_error" and int(n_iter) > 8, msg
    assert 0.0 <= float(feas) < 1e-12


def test_a_zarr_store_deleted_during_a_run_ends_it_with_data_error(tmp_path):
    """Zarr reads a missing storage chunk as its fill value without an error: a store
    deleted during a run gave a run on zeros that ended ``converged`` (its subgradient
    was 0). A chunk of samples that held data and now reads as the fill value only ends
    the run with ``data_error``; a chunk that is all zeros from the start runs."""
    zarr = pytest.importorskip("zarr")
    import shutil

    pts = np.random.default_rng(3).standard_normal((6000, 12))
    pts[:1000] = 0.0                      # a chunk of zeros from the start: fine
    z = zarr.open(str(tmp_path / "z.zarr"), mode="w", shape=pts.shape, chunks=(1000, 12),
                  dtype="f8")          # (zarr.create_array is Zarr 3 only; Python 3.10 has 2)
    z[:] = pts
    prob = DPCP(samples(zarr.open_array(str(tmp_path / "z.zarr"), mode="r")), p=4)

    def gone(progress):
        if progress.iteration == 5:
            shutil.rmtree(tmp_path / "z.zarr")

    res = rssm.minimize(prob, max_iter=40, tol=0, seed=0, callback=gone, record=1)
    assert res.stop_reason.value == "data_error" and not res.success
    assert "now read as its fill value 0.0 only" in res.message
    z = zarr.open(str(tmp_path / "y.zarr"), mode="w", shape=pts.shape, chunks=(1000, 12),
                  dtype="f8")          # (zarr.create_array is Zarr 3 only; Python 3.10 has 2)
    z[:] = pts
    data = samples(zarr.open_array(str(tmp_path / "y.zarr"), mode="r+"))
    ok = rssm.minimize(DPCP(data, p=4), max_iter=40, tol=0, seed=0)
    assert ok.stop_reason.value == "max_iter"
    # data changed between two runs is the next run's data (the record is the run's own:
    # kept on the data object, it refused the second run from its start)
    zarr.open_array(str(tmp_path / "y.zarr"), mode="r+")[1000:2000] = 0.0
    again = rssm.minimize(DPCP(data, p=4), max_iter=40, tol=0, seed=0)
    assert again.stop_reason.value == "max_iter"


def test_a_zarr_store_with_a_nan_fill_value_deleted_or_damaged_ends_with_data_error(
        tmp_path):
    """A user's audit: with ``fill_value=NaN`` a deleted store read as NaNs (NaN equals
    nothing, so "only the fill value" never held) and the run ended ``non_finite``; a
    storage chunk that no longer decodes raised the codec's RuntimeError out of
    `rssm.minimize`, the run lost."""
    zarr = pytest.importorskip("zarr")
    import shutil

    pts = np.random.default_rng(3).standard_normal((6000, 12))

    def store(name):
        z = zarr.open(str(tmp_path / name), mode="w", shape=pts.shape, chunks=(3000, 12),
                      dtype="f8", fill_value=np.nan)
        z[:] = pts
        return DPCP(samples(zarr.open_array(str(tmp_path / name), mode="r")), p=4)

    def at_5(act):
        def callback(progress):
            if progress.iteration == 5:
                act()
        return callback

    prob = store("gone.zarr")
    res = rssm.minimize(prob, max_iter=40, tol=0, seed=0, record=1,
                        callback=at_5(lambda: shutil.rmtree(tmp_path / "gone.zarr")))
    assert res.stop_reason.value == "data_error", res.message
    assert "now read as its fill value nan only" in res.message

    def damage():
        for path in (tmp_path / "bad.zarr").rglob("*"):
            if path.is_file() and not path.name.startswith(".") and path.name != "zarr.json":
                path.write_bytes(b"garbage")     # every storage chunk, Zarr 2 or 3

    prob = store("bad.zarr")
    res = rssm.minimize(prob, max_iter=40, tol=0, seed=0, record=1, callback=at_5(damage))
    assert res.stop_reason.value == "data_error", res.message
    assert "of the zarr data could not be read" in res.message
    assert np.isfinite(res.fun) and res.n_iter == 5


def test_an_hdf5_file_truncated_during_a_run_ends_it_with_data_error(tmp_path):
    """HDF5 reads the part of a dataset past the end of a truncated file as zeros, without
    an error: a file cut during a run gave a run on zeros that ended ``converged`` (exit
    status 0 from ``rssm solve``; a user's audit), where docs/data.md advised h5py for
    reads that fail. The size of the open file is checked after each read."""
    h5py = pytest.importorskip("h5py")

    path = tmp_path / "pts.h5"
    pts = np.random.default_rng(3).standard_normal((60000, 12))
    with h5py.File(path, "w") as f:
        f["pts"] = pts
    with h5py.File(path, "r") as f:
        prob = DPCP(samples(f["pts"], chunk_size=10000), p=4)
        ok = rssm.minimize(prob, max_iter=10, tol=0, seed=0)
        assert ok.stop_reason.value == "max_iter"

        def cut(progress):
            if progress.iteration == 3:
                os.truncate(path, os.path.getsize(path) // 3)

        res = rssm.minimize(prob, x0=ok.x, max_iter=40, tol=0, seed=0, callback=cut,
                            record=1)
        assert res.stop_reason.value == "data_error" and not res.success
        assert "shrank to" in res.message and "HDF5 reads what is gone as zeros" in \
            res.message
        assert res.n_iter == 3
    # a file that shrinks with the dataset's bytes intact (HDF5 gives back the space of a
    # deleted dataset) is no truncation (a review: the first version ended the run)
    path = tmp_path / "two.h5"
    with h5py.File(path, "w") as f:
        f["pts"] = pts
        f["scratch"] = np.zeros((20000, 12))
    with h5py.File(path, "a") as f:
        prob = DPCP(samples(f["pts"], chunk_size=10000), p=4)
        before = os.path.getsize(path)
        del f["scratch"]
        f.flush()
        assert os.path.getsize(path) < before
        res = rssm.minimize(prob, max_iter=10, tol=0, seed=0)
        assert res.stop_reason.value == "max_iter"


def test_a_cache_dir_that_does_not_exist_is_named_when_the_data_is_wrapped(tmp_path):
    """A missing cache_dir surfaced as a bare FileNotFoundError naming a temporary file
    ("rssm-cache-....bin") when the run started; it is refused where it is given."""
    np.save(tmp_path / "x.npy", np.random.default_rng(0).standard_normal((50, 6)))
    with pytest.raises(ValueError, match=r"cache_dir '.*nope' is not an existing folder; "
                                         r"create it first"):
        samples(np.load(tmp_path / "x.npy", mmap_mode="r"), cache="disk",
                cache_dir=str(tmp_path / "nope"))
    # only where it is used: a cache in memory never makes the file
    samples(np.load(tmp_path / "x.npy", mmap_mode="r"), cache="memory",
            cache_dir=str(tmp_path / "nope"))
    samples(np.load(tmp_path / "x.npy"), cache_dir=str(tmp_path / "nope"))  # "auto": memory


# -- defect 8: samples and features swapped ---------------------------------------------------
def test_swapped_layout_warns():
    """DPCP(Y.T, p=25) with 1000 features and 30 samples ran silently (St(1000, 995)...).
    Rule: a DPCP or ODL data matrix with fewer samples than features (m < n) warns."""
    y = np.random.default_rng(0).standard_normal((30, 1000))   # 1000 samples in R^30
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DPCP(y, p=25)
        ODL(y, p=5)
    with pytest.warns(LayoutWarning, match=r"DPCP: yt is 1000 x 30, read as 30 samples in "
                                           r"R\^1000.*pass yt\.T"):
        DPCP(y.T, p=25)
    with pytest.warns(LayoutWarning, match=r"ODL: y is 1000 x 30"):
        ODL(y.T, p=5)


# -- defect 9 (no cluster): a Dask array's partition, unknown chunk sizes -----------------------
def test_dask_array_partition_and_unknown_chunk_sizes():
    da = pytest.importorskip("dask.array")
    a = np.random.default_rng(1).standard_normal((1000, 12))
    arr = da.from_array(a, chunks=(250, 12))
    data = samples(arr)
    assert repr(data) == "ChunkedData(dask, n=12, m=1000, samples as rows, 4 chunks of 250)"
    assert data.bounds == ((0, 250), (250, 500), (500, 750), (750, 1000))
    masked = arr[arr[:, 0] > 0]
    with pytest.raises(ValueError, match=r"^data is a Dask array with unknown chunk sizes "
                                         r"\(shape \(nan, 12\)\); call its "
                                         r"\.compute_chunk_sizes\(\) first"):
        samples(masked)
    with pytest.raises(ValueError, match=r"^yt is a Dask array with unknown chunk sizes"):
        DPCP(masked.T, p=3)


# -- sparse PCA, planted sparse bases and l1 Procrustes out of core ----------------------------
def _triple(which: str, tmp_path):
    """(in-memory problem, the same on a memmap of its rows, the same on a NumPy array of
    its rows through `samples`, a start)."""
    def rows_of(arr, name):
        rows = np.ascontiguousarray(arr.T)
        np.save(tmp_path / name, rows)
        return np.load(tmp_path / name, mmap_mode="r"), samples(rows)

    if which == "sparse_pca":
        prob = SparsePCA.synthetic(n=30, r=3, m=900, support=5, seed=2)
        mm, rows = rows_of(prob.yt, "a.npy")
        big, ref = SparsePCA(mm, 3, prob.mu), SparsePCA(rows, 3, prob.mu)
    elif which == "sparse_basis":
        prob = PlantedSparseBasis.synthetic(n=12, p=3, m=1500, seed=1)
        mm, rows = rows_of(prob.yt, "q.npy")
        big, ref = PlantedSparseBasis(samples(mm), 3), PlantedSparseBasis(rows, 3)
    else:
        prob = L1Procrustes.synthetic(m=1200, n=15, p=4, seed=3)
        mm, rows = rows_of(prob.yt, "a.npy")
        mb, brows = rows_of(prob.bt, "b.npy")
        big, ref = L1Procrustes(mm, mb), L1Procrustes(rows, brows)
    return prob, big, ref, prob.initial_point(0)


@pytest.mark.parametrize("which", ["sparse_pca", "sparse_basis", "l1_procrustes"])
def test_builtins_read_out_of_core_data(tmp_path, which):
    """They read their data into memory before: now a memmap (or `samples` of one) is
    streamed through the same store as DPCP's. Its oracles agree with in memory to
    rounding, and its runs equal, bit for bit, those on the same rows held in memory
    (the same partition and layout)."""
    prob, big, ref, x0 = _triple(which, tmp_path)
    assert isinstance(big.data, ChunkedData) and big.data.kind == "memmap"
    assert big.shape == prob.shape and big.m == prob.m
    assert big.cost(x0) == pytest.approx(prob.cost(x0), rel=1e-12)
    np.testing.assert_allclose(big.subgradient(x0), prob.subgradient(x0), rtol=1e-11,
                               atol=1e-11)
    ref_mu0, big_mu0 = prob.reference_stepsize().mu0, big.reference_stepsize().mu0
    assert big_mu0 == pytest.approx(ref_mu0, rel=1e-10)
    s0 = big.initial_point(0)
    assert np.linalg.norm(s0 @ s0.T - x0 @ x0.T) < 1e-8    # the same span
    rule = prob.reference_stepsize()
    r1 = rssm.minimize(ref, x0,
        method="rssm", options={"n_blocks": 2}, stepsize=rule, max_iter=40, seed=1)
    r2 = rssm.minimize(big, x0,
        method="rssm", options={"n_blocks": 2}, stepsize=rule, max_iter=40, seed=1)
    assert big.data.bounds == ref.data.bounds == prob.data.bounds
    np.testing.assert_array_equal(r2.x, r1.x)


def test_sparse_pca_from_data_out_of_core_centres_without_a_copy(tmp_path):
    a = np.random.default_rng(5).standard_normal((700, 16)) * np.arange(1, 17) + 3.0
    np.save(tmp_path / "a.npy", a)
    mem = SparsePCA.from_data(a, r=3, mu=0.1)
    big = SparsePCA.from_data(np.load(tmp_path / "a.npy", mmap_mode="r"), r=3, mu=0.1)
    assert "Standardized" in repr(big.data) and big.data.base.kind == "memmap"
    x0 = mem.initial_point()
    assert big.cost(x0) == pytest.approx(mem.cost(x0), rel=1e-12)
    assert big.explained_variance(x0) == pytest.approx(mem.explained_variance(x0), rel=1e-12)
    r1 = rssm.minimize(mem, x0,
        method="rssm", options={"n_blocks": 3}, max_iter=30, seed=0, stepsize=1e-3)
    r2 = rssm.minimize(big, x0,
        method="rssm", options={"n_blocks": 3}, max_iter=30, seed=0, stepsize=1e-3)
    np.testing.assert_allclose(r2.x, r1.x, rtol=0, atol=1e-10)


_FULL = """
import resource, signal, numpy as np, rssm
from rssm.data import samples
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))   # a disk with 100 kB free
a = np.random.default_rng(0).standard_normal((3000, 10))
prob = rssm.problems.DPCP(samples(a, chunk_size=500, cache="disk"), p=6)
try:
    prob.make_oracle(prob.initial_point(), None)
    print("NO ERROR")
except Exception as exc:
    print(type(exc).__name__, "|", exc)
"""


def test_cache_that_does_not_fit_is_refused_before_the_run():
    """The state file gets its disk blocks when the oracle is built (posix_fallocate where
    the system has it): too little space is a one-line DataError before the run, not a
    failed write in the middle of it."""
    out = subprocess.run([sys.executable, "-c", _FULL], capture_output=True, text=True,
                         env=_env(), timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    name, msg = out.stdout.strip().splitlines()[-1].split(" | ")
    assert name == "DataError"
    assert msg.startswith("the cache file (0.2 MiB for the per-sample state) could not be made")
    assert "cache='memory'" in msg


def test_sparse_matrices_and_missing_values_are_refused_by_what_they_are():
    """A float64 SciPy sparse matrix was refused as "dtype object", and by
    ``rssm.data.samples`` with NumPy's bare "setting an array element with a sequence";
    a pandas frame with pd.NA as "dtype object"."""
    import scipy.sparse as sp

    y = sp.csr_matrix(np.random.default_rng(0).standard_normal((10, 300)))
    for build in (lambda: DPCP.from_data(y, d=2), lambda: ODL.from_data(y),
                  lambda: samples(y.T.tocsr()), lambda: SparsePCA.from_data(y.T, 2)):
        with pytest.raises(TypeError, match=r"is a SciPy sparse matrix \(cs[rc]_matrix\), which "
                                            r"rssm does not take: pass .*\.toarray\(\)"):
            build()
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(np.random.default_rng(1).standard_normal((50, 6)),
                         dtype="Float64")
    frame.iloc[3, 5] = pd.NA
    for build in (lambda: DPCP.from_data(frame.T, d=2), lambda: samples(frame)):
        with pytest.raises(ValueError, match=r"has 1 missing values \(NaN or pd\.NA\), the "
                                             r"first at row \d, column \d"):
            build()


def test_a_constant_column_of_sparse_pca_is_0_whatever_its_value_in_binary(tmp_path):
    # (an audit: a column of 0.1 kept a centring residue of 1e-14, which the scaling made
    # a unit feature that took a loading; 400 copies of one Gaussian row "converged")
    da = pytest.importorskip("dask.array")
    a = np.random.default_rng(0).standard_normal((200, 8))
    ref = rssm.minimize(SparsePCA.from_data(np.insert(a, 3, 0.0, axis=1), 3), max_iter=300,
                        seed=0)
    for value in (0.1, 1.7e9 + 0.1):
        b = np.insert(a, 3, value, axis=1)
        np.save(tmp_path / "b.npy", b)
        for data in (b, np.load(tmp_path / "b.npy", mmap_mode="r"),
                     da.from_array(b, chunks=(64, 9))):
            prob = SparsePCA.from_data(data, 3)
            for _, _, blk in prob._store.chunks():       # the feature, standardized
                assert not blk[3].any()
            if data is b:              # the same standardized data as a column of 0.0
                assert np.array_equal(rssm.minimize(prob, max_iter=300, seed=0).x, ref.x)
    row = np.random.default_rng(1).standard_normal(15)
    with pytest.raises(ValueError, match="a has no variance"):
        SparsePCA.from_data(np.tile(row, (400, 1)), 2)


def test_data_without_variance_is_refused_and_a_zero_design_has_no_reference_step():
    """Sparse PCA on one sample (0 after centring) "converged" and then raised
    ZeroDivisionError in its summary, after the run, which the command line lost; l1
    Procrustes with A = 0 (which runs, as DPCP and ODL on zero data do) raised
    ZeroDivisionError in its reference step, which the command line asked for first."""
    with pytest.raises(ValueError, match=r"a has one sample \(n_samples = 1\)"):
        SparsePCA.from_data(np.ones((1, 6)), 2)
    with pytest.raises(ValueError, match="a has no variance"):
        SparsePCA.from_data(np.tile(np.arange(5.0), (8, 1)), 2)
    # the estimator says it in its own words (it said "a has no variance ... where
    # from_data centred it", names the user never wrote)
    from rssm.estimators import OrthogonalSparsePCA

    with pytest.raises(ValueError, match=r"OrthogonalSparsePCA: every feature of X is "
                                         r"constant"):
        OrthogonalSparsePCA(2).fit(np.tile(np.arange(5.0), (8, 1)))
    rng = np.random.default_rng(0)
    zero = L1Procrustes(np.zeros((30, 7)), rng.standard_normal((30, 2)))   # runs (as DPCP)
    with pytest.raises(ValueError, match=r"reference_stepsize needs A != 0"):
        zero.reference_stepsize()
    assert rssm.minimize(zero, max_iter=5).n_iter >= 1


def test_a_ctrl_c_as_a_cache_file_is_made_leaves_no_file_and_no_descriptor(tmp_path,
                                                                            monkeypatch):
    """A real SIGINT between the disk cache's mkstemp and its unlink left a named
    rssm-cache-*.bin in cache_dir with its descriptor open (an audit: 16 of 400
    interrupted runs); it is held until the finalizer owns the file, then raised."""
    import signal
    import tempfile

    from rssm.data.statefile import StateFile

    real = tempfile.mkstemp
    made = []

    def mkstemp(*args, **kwargs):
        fd, path = real(*args, **kwargs)
        made.append(fd)
        os.kill(os.getpid(), signal.SIGINT)          # lands before the unlink
        return fd, path

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    with pytest.raises(KeyboardInterrupt):
        StateFile(str(tmp_path))
    assert os.listdir(tmp_path) == []
    with pytest.raises(OSError):
        os.fstat(made[0])                            # closed


def test_a_ctrl_c_while_the_cache_file_closes_is_raised_after_the_close(tmp_path,
                                                                         monkeypatch):
    """A real SIGINT inside the cache file's close was held so the descriptor closed,
    then lost: ``close()`` returned as if nothing had come. It is raised once the file is
    closed; a second close does nothing."""
    import signal

    from rssm.data import statefile

    f = statefile.StateFile(str(tmp_path))
    fd = f.fd
    real = os.close

    def close(d):
        os.kill(os.getpid(), signal.SIGINT)          # lands inside the held close
        real(d)

    monkeypatch.setattr(statefile.os, "close", close)
    with pytest.raises(KeyboardInterrupt):
        f.close()
    monkeypatch.setattr(statefile.os, "close", real)
    with pytest.raises(OSError):
        os.fstat(fd)                                 # closed
    f.close()                                        # nothing left to do, no raise
    assert os.listdir(tmp_path) == []
