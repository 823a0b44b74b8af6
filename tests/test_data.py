"""Data at any size: out-of-core arrays give the in-memory iterates, data files through the
CLI, and the data-parallel Dask oracle on a LocalCluster."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import rssm
from rssm.cli import main
from rssm.data import ChunkedData, samples
from rssm.data.chunked import ChunkedOracle
from rssm.problems import DPCP, ODL, CompositeProblem, EntrywiseLoss, NormLoss
from rssm.stepsizes import PaperSchedule
from rssm.stopping import StopReason

RTOL = 1e-10


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def dpcp_data():
    """DPCP on St(20, 17), m = 700 (seed 5), samples as rows."""
    prob = DPCP.synthetic(n=20, d=3, n_inliers=250, n_outliers=450, seed=5)
    return prob, np.ascontiguousarray(prob.yt.T)


def _composites(m: int = 530):
    """Composite problems exercising norm losses with sample weights and the l1 penalty,
    and an entrywise loss with an offset (small steps: the runs are not chaotic)."""
    rng = np.random.default_rng(3)
    y = rng.standard_normal((9, m))
    return [
        (y, dict(p=4, loss=NormLoss.huber(0.5), sample_weights=rng.uniform(0, 2, m),
                 l1_penalty=0.01, stepsize=1e-4)),
        (y, dict(p=3, loss=EntrywiseLoss.l1(), offset=0.1 * rng.standard_normal((m, 3)),
                 stepsize=1e-5)),
    ]


# -- out of core ------------------------------------------------------------------------------
@pytest.mark.parametrize("cache", ["memory", "disk"])
@pytest.mark.parametrize("method", ["rssm", "rsm"])
def test_memmap_dpcp_same_iterates(dpcp_data, tmp_path, cache, method):
    prob, a = dpcp_data
    np.save(tmp_path / "a.npy", a)
    mm = np.load(tmp_path / "a.npy", mmap_mode="r")
    big = DPCP(samples(mm, chunk_size=97, cache=cache), prob.p)
    assert big.m == prob.m and big.shape == prob.shape and len(big.yt.bounds) == 8
    x0 = prob.initial_point()
    assert _rel(big.initial_point(), x0) < 1e-12
    # The paper's schedule: "auto" converges so far here that the inlier rows of Z are ~0,
    # where the subgradient's weights z/||z|| amplify rounding beyond the 1e-13 below.
    rule = PaperSchedule.dpcp()
    r1 = rssm.minimize(prob, x0, method=method, max_iter=120, seed=1, record=10,
                       stepsize=rule)
    r2 = rssm.minimize(big, x0, method=method, max_iter=120, seed=1, record=10,
                       stepsize=rule)
    assert _rel(r2.x, r1.x) < RTOL
    np.testing.assert_allclose(r2.trace["cost"], r1.trace["cost"], rtol=RTOL)
    assert r2.flops == pytest.approx(r1.flops, rel=1e-12)
    # The problem-level oracles agree too.
    assert big.cost(r1.x) == pytest.approx(prob.cost(r1.x), rel=1e-13)
    assert _rel(big.subgradient(r1.x), prob.subgradient(r1.x)) < 1e-13


def test_memmap_in_api_layout_and_odl(small_odl, tmp_path):
    """A memmap with samples as columns (the API's layout) is streamed as it is."""
    path = tmp_path / "y.npy"
    np.save(path, small_odl.y)
    mm = np.load(path, mmap_mode="r")
    big = ODL(mm)
    assert isinstance(big.y, ChunkedData) and not big.y.rows_are_samples
    x0 = small_odl.initial_point(np.random.default_rng(4))
    r1 = rssm.minimize(small_odl, x0, method="rssm", options={"n_blocks": 4}, max_iter=150, seed=2)
    r2 = rssm.minimize(big, x0, method="rssm", options={"n_blocks": 4}, max_iter=150, seed=2)
    assert _rel(r2.x, r1.x) < RTOL


@pytest.mark.parametrize("case", [0, 1])
def test_chunked_composite_same_iterates(case):
    y, kw = _composites()[case]
    p = kw.pop("p")
    loss = kw.pop("loss")
    small = CompositeProblem(y, p, loss, **kw)
    big = CompositeProblem(samples(y.T, chunk_size=100, cache="disk"), p, loss, **kw)
    x0 = small.initial_point(np.random.default_rng(0))
    for method in ("rssm", "rsm"):
        r1 = rssm.minimize(small, x0, method=method, options={"n_blocks": 2}, max_iter=80, seed=0)
        r2 = rssm.minimize(big, x0, method=method, options={"n_blocks": 2}, max_iter=80, seed=0)
        assert _rel(r2.x, r1.x) < RTOL, method
        assert r2.fun == pytest.approx(r1.fun, rel=RTOL)


def test_hdf5_and_zarr_sources(dpcp_data, tmp_path):
    h5py = pytest.importorskip("h5py")
    zarr = pytest.importorskip("zarr")
    prob, a = dpcp_data
    with h5py.File(tmp_path / "a.h5", "w") as fh:
        fh.create_dataset("pts", data=a, chunks=(64, a.shape[1]))
    zarr.save_array(str(tmp_path / "a.zarr"), a)
    x0 = prob.initial_point()
    ref = rssm.minimize(prob, x0, max_iter=30, seed=3)
    with h5py.File(tmp_path / "a.h5", "r") as fh:
        ds = fh["pts"]
        data = samples(ds)
        assert data.chunk_size == 700 and data.cache == "disk"  # 64 MiB cap > the data
        r = rssm.minimize(DPCP(data, prob.p), x0, max_iter=30, seed=3)
        assert _rel(r.x, ref.x) < RTOL
    za = zarr.open(str(tmp_path / "a.zarr"), mode="r")
    r = rssm.minimize(DPCP(samples(za, chunk_size=200), prob.p), x0, max_iter=30, seed=3)
    assert _rel(r.x, ref.x) < RTOL


def test_zarr_zip_files_are_read(dpcp_data, tmp_path):
    """A Zarr .zip (an array or a group) is read as the docs say; with Zarr 3 `zarr.open`
    took the path for a folder ("No group found in store")."""
    zarr = pytest.importorskip("zarr")
    if not hasattr(zarr.storage, "ZipStore") or not hasattr(zarr, "create_array"):
        pytest.skip("needs Zarr 3's ZipStore")
    from rssm.data import io as dio

    prob, a = dpcp_data
    store = zarr.storage.ZipStore(str(tmp_path / "a.zip"), mode="w")
    arr = zarr.create_array(store=store, shape=a.shape, chunks=(200, a.shape[1]), dtype="f8")
    arr[:] = a
    store.close()
    store = zarr.storage.ZipStore(str(tmp_path / "g.zip"), mode="w")
    grp = zarr.group(store=store)
    grp.create_array("pts", shape=a.shape, chunks=(200, a.shape[1]), dtype="f8")[:] = a
    store.close()
    for name in ("a.zip", "g.zip"):
        z = dio.load(tmp_path / name)
        np.testing.assert_array_equal(np.asarray(z[:]), a)
    x0 = prob.initial_point()
    ref = rssm.minimize(prob, x0, max_iter=20, seed=3)
    r = rssm.minimize(DPCP(samples(dio.load(tmp_path / "a.zip")), prob.p), x0, max_iter=20,
                      seed=3)
    assert _rel(r.x, ref.x) < RTOL


@pytest.mark.parametrize("make", [
    lambda d: DPCP(d, 5), lambda d: rssm.problems.SparsePCA(d, 3),
    lambda d: rssm.problems.PlantedSparseBasis(d, 3), lambda d: rssm.problems.ODL(d, None),
], ids=["dpcp", "sparse_pca", "sparse_basis", "odl"])
def test_unchecked_data_with_nan_stops_non_finite_at_the_start(tmp_path, make):
    """Data read with check_finite=False (the docs' cluster example) that hold a NaN: the
    run stops at once with `non_finite` (before: DPCP's and sparse PCA's spectral starts,
    and the sparse problems' default rules, raised LAPACK's "Eigenvalues did not
    converge")."""
    a = np.random.default_rng(0).standard_normal((3000, 20))
    a[100, 3] = np.nan
    np.save(tmp_path / "n.npy", a)
    data = samples(np.load(tmp_path / "n.npy", mmap_mode="r"), check_finite=False)
    for method in ("rsm", "rssm"):
        res = rssm.minimize(make(data), method=method, max_iter=10)
        assert res.stop_reason is StopReason.NON_FINITE and res.n_iter == 0
        assert res.message == "f(x0) is not finite"


def test_disk_cache_bounds_memory_and_leaves_no_file(dpcp_data, tmp_path):
    """The state file is unlinked as soon as it is open (issue 19, defect 4: it used to
    stay in the folder until the oracle was garbage-collected, and forever after a kill):
    the folder is empty while the oracle works, and the descriptor holds the state."""
    prob, a = dpcp_data
    big = DPCP(samples(a, chunk_size=128, cache="disk", cache_dir=str(tmp_path)), prob.p)
    x = prob.initial_point()
    from rssm.blocks import Partition

    oracle = big.make_oracle(x.copy(), Partition.uniform(prob.p, 5))
    assert isinstance(oracle, ChunkedOracle)
    assert os.listdir(tmp_path) == []
    fd = oracle.chunks.file.fd
    # The cache Z^T (p x m), the block norms (5 x m), the row norms and weights are on disk.
    assert os.fstat(fd).st_size >= 8 * prob.m * (prob.p + 5 + 2)
    # In memory: one work set (state and scratch) per chunk in flight, here one.
    sets = []
    while not oracle.chunks._pool.empty():
        sets.append(oracle.chunks._pool.get())
    for work in sets:
        oracle.chunks._pool.put(work)
    held = sum(b.nbytes for work in sets for b in work.values())
    assert len(sets) == 1 and held <= 8 * 128 * (2 * prob.p + 5 + 3) + 128
    assert oracle.cost() == pytest.approx(prob.cost(x), rel=1e-13)
    oracle.close()
    with pytest.raises(OSError):
        os.fstat(fd)
    assert os.listdir(tmp_path) == []


def test_out_of_core_errors(tmp_path):
    a = np.random.default_rng(0).standard_normal((50, 4))
    a[[7, 30], 1] = np.nan
    with pytest.raises(ValueError, match=r"2 sample\(s\) with NaN.*first is sample 7"):
        samples(a)
    with pytest.raises(TypeError, match="real numbers"):
        samples(np.ones((5, 3), dtype=bool))
    with pytest.raises(ValueError, match="2-D"):
        samples(np.ones(5))
    with pytest.raises(ValueError, match="chunk_size"):
        samples(np.ones((5, 3)), chunk_size=0)
    with pytest.raises(ValueError, match="cache"):
        samples(np.ones((5, 3)), cache="ssd")


# -- CLI ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def files(tmp_path_factory, dpcp_data):
    _, a = dpcp_data
    d = tmp_path_factory.mktemp("files")
    np.save(d / "pts.npy", a)
    np.savez(d / "pts.npz", pts=a, other=a[:5])
    np.savetxt(d / "pts.csv", a, delimiter=",",
               header=",".join(f"f{i}" for i in range(a.shape[1])), comments="")
    b = a.copy()
    b[11, 2], b[40, 0] = np.nan, np.inf
    np.save(d / "nan.npy", b)
    np.save(d / "flat.npy", a[:, 0])
    np.save(d / "empty.npy", np.zeros((0, 4)))
    (d / "text.csv").write_text("x,y,label\n1,2,a\n3,4,b\n")
    h5py = pytest.importorskip("h5py")
    with h5py.File(d / "pts.h5", "w") as fh:
        fh["group/pts"] = a
        fh["other"] = a[:3]
    return d


def _final_cost(text: str) -> float:
    return float(text.split("final cost")[1].split()[0])


@pytest.mark.parametrize("extra", [
    ["pts.npy"], ["pts.npy", "--out-of-core", "always", "--chunk-size", "150"],
    ["pts.npz", "--key", "pts"], ["pts.csv"], ["pts.h5", "--dataset", "group/pts"]])
def test_cli_data_formats_match_the_api(files, dpcp_data, extra, capsys):
    prob, a = dpcp_data
    argv = ["solve", "dpcp", "--data", str(files / extra[0]), *extra[1:], "--d", "3",
            "--max-iter", "60", "--seed", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    api = DPCP.from_data(a.T, d=3)
    res = rssm.minimize(api, api.initial_point(np.random.default_rng([2, 1])), max_iter=60,
                        seed=2, record=None)
    assert _final_cost(out) == pytest.approx(res.fun, rel=1e-9)
    assert "m=700 samples of 20 numbers" in out


def test_cli_chunk_size_without_streaming_is_refused(files, capsys):
    """--chunk-size on data read into memory did nothing, silently."""
    for extra in ([], ["--out-of-core", "never"]):
        assert main(["solve", "dpcp", "--data", str(files / "pts.npy"), "--d", "3",
                     "--chunk-size", "150", *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("rssm: error: argument --chunk-size: only used when the data "
                              "is streamed") and len(err.splitlines()) == 1


def test_cli_out_folder(files, dpcp_data, tmp_path, capsys):
    prob, a = dpcp_data
    out = tmp_path / "run"
    assert main(["solve", "odl", "--data", str(files / "pts.npy"), "--p", "6",
                 "--max-iter", "30", "--out", str(out)]) == 0
    x = np.load(out / "X.npy")
    assert x.shape == (20, 6)
    np.testing.assert_allclose(x.T @ x, np.eye(6), atol=1e-12)
    settings = json.loads((out / "settings.json").read_text())
    assert settings["data"]["samples"] == 700 and settings["data"]["p"] == 6
    assert settings["summary"]["n_iter"] == 30
    lines = (out / "trace.csv").read_text().splitlines()
    assert lines[0] == "iteration,time,flops,cost,error,stationarity" and len(lines) > 2
    # the summary's cost is f at X.npy, the best iterate (issue 18), not the last row's
    assert ODL(a.T, p=6).cost(x) == pytest.approx(settings["summary"]["cost"], rel=1e-12)
    assert settings["summary"]["cost"] <= float(lines[-1].split(",")[3])


@pytest.mark.parametrize(("argv", "names"), [
    (["dpcp", "--data", "missing.npy"], ["--data", "no such file"]),
    (["dpcp", "--data", "pts.npz"], ["--key", "other, pts"]),
    (["dpcp", "--data", "pts.npz", "--key", "zz"], ["--key", "'zz'", "other, pts"]),
    (["dpcp", "--data", "pts.h5"], ["--dataset", "group/pts, other"]),
    (["dpcp", "--data", "pts.h5", "--dataset", "nope"], ["--dataset", "'nope'"]),
    (["dpcp", "--data", "nan.npy"], ["--data", "2 row(s)", "NaN", "first is row 11"]),
    (["dpcp", "--data", "flat.npy"], ["--data", "1-D", "one sample per row"]),
    (["dpcp", "--data", "empty.npy"], ["--data", "empty"]),
    (["dpcp", "--data", "text.csv"], ["--data", "column 3", "'label'", "not numeric"]),
    (["dpcp", "--data", "pts.npy", "--d", "25"], ["--d", "<= n - 1 = 19", "20 numbers per sample"]),
    (["odl", "--data", "pts.npy", "--p", "21"], ["--p", "<= n = 20", "20 numbers per sample"]),
    (["sparse_pca", "--data", "pts.npy", "--r", "30"], ["--r", "20 numbers per sample"]),
    (["dpcp", "--data", "pts.npy", "--n-inliers", "5"], ["--n-inliers", "--data"]),
    (["dpcp", "--data", "pts.npy", "--key", "a"], ["--key", ".npz"]),
    (["dpcp", "--data", "pts.csv", "--out-of-core", "always"], ["--out-of-core", ".csv"]),
])
def test_cli_data_errors_one_line_exit_2(files, argv, names, capsys, monkeypatch):
    monkeypatch.chdir(files)
    assert main(["solve", *argv]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("rssm: error: argument ")
    for name in names:
        assert name in lines[0], (name, lines[0])
    assert "Traceback" not in captured.err and captured.out == ""


def test_cli_help_says_rows_are_samples():
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), pytest.raises(SystemExit):
        main(["solve", "dpcp", "--help"])
    text = " ".join(buf.getvalue().split())
    assert "ONE SAMPLE PER ROW" in text and "--data FILE" in text and "--dataset" in text


# -- Dask ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dask_client():
    pytest.importorskip("dask.array")
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, worker_dashboard_address=None)
    try:
        client = distributed.Client(cluster)
        try:
            yield client
        finally:
            client.close()
    finally:
        cluster.close()


@pytest.mark.parametrize("method", ["rssm", "rsm"])
def test_dask_same_iterates(dask_client, dpcp_data, method):
    import dask.array as da

    from rssm.data.distributed import DaskOracle

    prob, a = dpcp_data
    big = DPCP(samples(da.from_array(a, chunks=(120, 10))), prob.p)
    x0 = prob.initial_point()
    assert _rel(big.initial_point(), x0) < 1e-12
    from rssm.blocks import Partition

    oracle = big.make_oracle(x0.copy(), Partition.uniform(prob.p, 5))
    try:
        assert isinstance(oracle, DaskOracle)
        assert len(oracle.workers) == 2 and sum(oracle.chunks_per_worker.values()) == 6
    finally:
        oracle.close()
    r1 = rssm.minimize(prob, x0, method=method, max_iter=40, seed=4, record=10)
    r2 = rssm.minimize(big, x0, method=method, max_iter=40, seed=4, record=10)
    assert _rel(r2.x, r1.x) < RTOL
    np.testing.assert_allclose(r2.trace["cost"], r1.trace["cost"], rtol=RTOL)
    assert r2.flops == pytest.approx(r1.flops, rel=1e-12)


def test_dask_composite_same_iterates(dask_client):
    import dask.array as da

    y, kw = _composites()[0]
    p = kw.pop("p")
    loss = kw.pop("loss")
    small = CompositeProblem(y, p, loss, **kw)
    big = CompositeProblem(da.from_array(y, chunks=(9, 100)), p, loss, **kw)
    x0 = small.initial_point(np.random.default_rng(0))
    r1 = rssm.minimize(small, x0, method="rssm", options={"n_blocks": 2}, max_iter=30, seed=0)
    r2 = rssm.minimize(big, x0, method="rssm", options={"n_blocks": 2}, max_iter=30, seed=0)
    assert _rel(r2.x, r1.x) < RTOL


def test_dask_from_npy_workers_read_the_file(dask_client, dpcp_data, tmp_path):
    from rssm.data.distributed import from_npy

    prob, a = dpcp_data
    np.save(tmp_path / "a.npy", a)
    arr = from_npy(tmp_path / "a.npy", chunk_size=300)
    assert arr.chunks[0] == (300, 300, 100)
    big = DPCP(samples(arr), prob.p)
    x0 = prob.initial_point()
    r1 = rssm.minimize(prob, x0, max_iter=20, seed=6)
    r2 = rssm.minimize(big, x0, max_iter=20, seed=6)
    assert _rel(r2.x, r1.x) < RTOL


def test_partitions_and_checks_of_odd_storage_layouts(tmp_path):
    """A Zarr dataset stored by feature columns ((m, 1) chunks) became one chunk of every
    sample (500 MB held for a 400 MB file); a Dask array with a zero-length chunk broke
    the finiteness check ("zero-size array to reduction operation"); RobustSubspace's
    lifted memmap (center=True) kept its p x m cache in memory (1.8 GB for a 1.2 GB
    file)."""
    zarr = pytest.importorskip("zarr")
    da = pytest.importorskip("dask.array")
    from rssm.estimators import RobustSubspace

    rng = np.random.default_rng(0)
    a = rng.standard_normal((200_000, 50))
    z = zarr.open(str(tmp_path / "a.zarr"), mode="w", shape=a.shape, chunks=(200_000, 1),
                  dtype="f8")
    z[:] = a
    data = rssm.data.samples(z)
    assert len(data.bounds) > 1 and max(hi - lo for lo, hi in data.bounds) * 8 * 50 <= 64 * 2**20
    b = rng.standard_normal((2_000, 6))
    rssm.data.samples(da.from_array(b, chunks=((1_000, 0, 1_000), 6)))
    b[1_500, 3] = np.nan
    with pytest.raises(ValueError, match=r"the first is sample 1500"):
        rssm.data.samples(da.from_array(b, chunks=((1_000, 0, 1_000), 6)))
    np.save(tmp_path / "x.npy", rng.standard_normal((3_000, 6)))
    mm = np.load(tmp_path / "x.npy", mmap_mode="r")
    lifted = RobustSubspace(3, center=True)._problem_data(mm, np.zeros(6), 1.0)
    assert lifted.cache == "disk"


def test_out_of_core_data_beyond_float64_squares_is_refused_in_the_finiteness_pass(tmp_path):
    """In memory such data was refused when a problem was built; out of core it reached
    the run and ended non_finite at the start. The finiteness pass (no extra read) now
    refuses it with the same words, for memmaps and Dask arrays."""
    da = pytest.importorskip("dask.array")
    a = np.random.default_rng(0).standard_normal((3000, 6))
    for c in (1e155, 1e-160):
        np.save(tmp_path / "x.npy", a * c)
        mm = np.load(tmp_path / "x.npy", mmap_mode="r")
        for src in (mm, da.from_array(a * c, chunks=(1000, 6))):
            with pytest.raises(ValueError, match=r"the largest entry is .* outside "
                                                 r"\[1e-150, 1e\+150\].*scale the data"):
                rssm.data.samples(src)
    np.save(tmp_path / "x.npy", a * 2.0**400)
    prob = rssm.problems.DPCP(rssm.data.samples(np.load(tmp_path / "x.npy", mmap_mode="r")), 3)
    assert np.isfinite(rssm.minimize(prob, max_iter=3).fun)


def test_file_options_that_cannot_apply_and_odd_files_are_named(tmp_path):
    """``--header yes`` on a .npy file was ignored (``--key`` and ``--dataset`` are
    refused); a folder that is no Zarr store got Zarr's internal wording; a CSV with
    decimal commas called a number a column name and never said why."""
    from rssm.data import io as dio

    rng = np.random.default_rng(0)
    np.save(tmp_path / "rows.npy", rng.standard_normal((30, 4)))
    with pytest.raises(dio.DataFileError, match=r"header is for text files \(\.csv, \.txt\) "
                                                r"only, got \.npy") as exc:
        dio.load(tmp_path / "rows.npy", header="yes")
    assert exc.value.argument == "header"
    (tmp_path / "plain").mkdir()
    with pytest.raises(dio.DataFileError, match=r"plain is a folder but not a Zarr store"):
        dio.load(tmp_path / "plain")
    rows = rng.standard_normal((20, 3))
    (tmp_path / "dc.csv").write_text(
        "\n".join(";".join(f"{v:.6f}".replace(".", ",") for v in r) for r in rows) + "\n")
    with pytest.raises(dio.DataFileError, match=r"seems to write numbers with a comma inside "
                                                r"\(0,5 or 1,000\): rssm reads neither"):
        dio.load(tmp_path / "dc.csv")
    # tab- or space-separated: white space is the delimiter, not the commas inside
    for name, sep in (("dc_tab.csv", "\t"), ("dc_space.txt", " ")):
        (tmp_path / name).write_text(
            "\n".join(sep.join(f"{v:.6f}".replace(".", ",") for v in r) for r in rows) + "\n")
        with pytest.raises(dio.DataFileError, match=r"column 1 is not numeric .*a comma "
                                                    r"inside"):
            dio.load(tmp_path / name)
    # a plain comma-separated file with spaces after the commas still reads
    (tmp_path / "plain.csv").write_text("1, 2, 4\n4, 5, 6\n")
    np.testing.assert_array_equal(dio.load(tmp_path / "plain.csv"), [[1, 2, 4], [4, 5, 6]])


def test_hdf5_chunks_are_whole_storage_chunks(tmp_path):
    # rssm.data.chunked: a chunk of an HDF5/Zarr dataset is a multiple of its storage chunks
    h5py = pytest.importorskip("h5py")
    from rssm.data import ChunkedData

    with h5py.File(tmp_path / "a.h5", "w") as f:
        f.create_dataset("y", data=np.random.default_rng(0).standard_normal((100000, 10)),
                         chunks=(1000, 10))
    with h5py.File(tmp_path / "a.h5", "r") as f:
        bounds = ChunkedData(f["y"], rows_are_samples=True).bounds
    assert len(bounds) > 1 and bounds[-1][1] == 100000
    assert all(lo % 1000 == 0 for lo, _ in bounds)
    assert all(lo == hi for (_, hi), (lo, _) in zip(bounds[:-1], bounds[1:], strict=True))
