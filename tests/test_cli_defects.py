"""Issue 19, the command line and the readers: each test failed on the code before the fix
(defect numbers are the issue's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import rssm
from rssm.cli import main
from rssm.data import io as dio
from rssm.problems import DPCP, L1Procrustes

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--n", "8", "--d", "2", "--n-inliers", "40", "--n-outliers", "20", "--max-iter", "6",
        "--quiet"]


def _one_line(capsys, code_expected: int, rc: int) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert rc == code_expected, captured.err
    assert len(lines) == 1 and lines[0].startswith("rssm: error: "), captured.err
    return lines[0]


@pytest.fixture
def no_run(monkeypatch):
    """Fail the test if the solver runs: refusals must come before the run."""

    def refuse(*args, **kwargs):
        raise AssertionError("the run started")

    monkeypatch.setattr(rssm, "minimize", refuse)


# -- defect 2: --out checked before the run; a full disk during the write ------------------
@pytest.mark.parametrize(("make", "out", "words"), [
    (lambda d: (d / "t.csv").write_text("old"), "t.csv", ["t.csv exists", "--overwrite"]),
    (lambda d: (d / "blocker").write_text("x"), "blocker", ["is a file"]),
    (lambda d: (d / "blocker").write_text("x"), "blocker/run", ["lies under", "a file"]),
    (lambda d: (d / "blocker").write_text("x"), "blocker/t.csv", ["lies under", "a file"]),
    (lambda d: (d / "run").mkdir() or (d / "run" / "X.npy").write_text("x"), "run",
     ["already holds a run (X.npy)", "--overwrite"]),
])
def test_out_refused_before_the_run(tmp_path, capsys, no_run, make, out, words):
    make(tmp_path)
    rc = main(["solve", "dpcp", *TINY, "--out", str(tmp_path / out)])
    line = _one_line(capsys, 2, rc)
    assert line.startswith("rssm: error: argument --out: ")
    for word in words:
        assert word in line, line
    assert (tmp_path / "t.csv").read_text() == "old" if out == "t.csv" else True


def test_out_in_an_unwritable_place_refused_before_the_run(tmp_path, capsys, no_run,
                                                         monkeypatch):
    """(The suite may run as root, for whom permission bits do not bite: the probe's
    failure is simulated.)"""
    from rssm.cli import output

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(output.tempfile, "mkstemp", denied)
    rc = main(["solve", "dpcp", *TINY, "--out", str(tmp_path / "run")])
    line = _one_line(capsys, 2, rc)
    assert "cannot write in" in line and "Permission denied" in line


def test_overwrite_replaces_an_earlier_run(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["solve", "dpcp", *TINY, "--out", str(out)]) == 0
    first = (out / "settings.json").read_text()
    assert main(["solve", "dpcp", *TINY, "--seed", "1", "--out", str(out)]) == 2
    assert (out / "settings.json").read_text() == first
    assert main(["solve", "dpcp", *TINY, "--seed", "1", "--out", str(out), "--overwrite"]) == 0
    assert json.loads((out / "settings.json").read_text())["seed"] == 1


def test_full_disk_while_writing_the_folder(tmp_path):
    """``ulimit -f`` (file size limit) in a child: X.npy (72 kB) cannot be written. One
    line, exit 1, no temporary file left, trace.csv and settings.json kept."""
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = (f"ulimit -f 40; exec {sys.executable} -m rssm solve dpcp --n 100 --d 10 "
           f"--n-inliers 60 --n-outliers 40 --max-iter 2 --quiet --out {out}")
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rssm: error: could not write X.npy")
    assert "kept: trace.csv, settings.json" in lines[0]
    assert sorted(p.name for p in out.iterdir()) == ["settings.json", "trace.csv"]
    doc = json.loads((out / "settings.json").read_text())
    assert "X.npy" not in doc["files"] and doc["summary"]["n_iter"] == 2
    assert "disk full" not in lines[0]      # (no guess: the reason is the system's)
    # the summary is printed before the error (it was not: a user's audit)
    assert "stop reason" in proc.stdout and "final cost" in proc.stdout


def test_a_single_file_that_cannot_be_written_leaves_the_summary_on_stdout(tmp_path):
    """A user's audit: with ``--out run.json`` and a file size limit nothing of the run
    survived (the error came before the summary was printed)."""
    out = tmp_path / "run.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = (f"ulimit -f 8; exec {sys.executable} -m rssm solve dpcp --n 30 --d 3 "
           f"--n-inliers 60 --n-outliers 40 --max-iter 300 --record-every 1 --tol 0 "
           f"--quiet --out {out}")
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"rssm: error: could not write {out}")
    assert "nothing was written" in lines[0] and not out.exists()
    assert "iterations" in proc.stdout and "300" in proc.stdout
    assert "final cost" in proc.stdout


# -- defect 12: Ctrl-C exits 130, every setting written, l1_procrustes --data ---------------
def test_ctrl_c_during_solve_saves_and_exits_130(tmp_path, capsys, monkeypatch):
    real = rssm.minimize

    def interrupted(*args, **kwargs):
        def cb(progress):
            if progress.iteration >= 3:
                raise KeyboardInterrupt
        kwargs["callback"], kwargs["record"] = cb, 1
        return real(*args, **kwargs)

    monkeypatch.setattr(rssm, "minimize", interrupted)
    out = tmp_path / "run.json"
    assert main(["solve", "dpcp", *TINY[:-3], "--max-iter", "50", "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert "interrupted after 3 iterations" in err and str(out) in err
    doc = json.loads(out.read_text())
    assert doc["summary"]["stop_reason"] == "interrupted" and doc["summary"]["n_iter"] == 3


def test_out_folder_writes_every_setting(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["solve", "dpcp", *TINY, "--stationarity-tol", "1e-12", "--stagnation-epochs",
                 "50", "--threads", "1", "--out", str(out)]) == 0
    doc = json.loads((out / "settings.json").read_text())
    opts = doc["options"]
    assert opts["stationarity_tol"] == 1e-12 and opts["stagnation_epochs"] == 50
    assert opts["stagnation_rtol"] == 1e-8 and opts["threads"] == 1
    assert {"max_iter", "max_time", "target_error", "record_every", "method", "blocks",
            "selection", "stepsize"} <= set(opts)
    assert set(doc["summary"]) >= {"success", "stationarity", "stop_reason", "cost"}
    assert doc["threads"] and doc["synthetic"]["n"] == 8 and doc["command"].startswith("rssm ")


def test_l1_procrustes_runs_on_a_data_file(tmp_path, capsys):
    """Was "unrecognized arguments": each row holds a_j and then its target b_j."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((60, 6))
    b = a @ rssm.stiefel.random_point(6, 2, rng) + (rng.random((60, 2)) < 0.1)
    rows = np.hstack([a, b])  # one observation per row: a_j, then b_j
    np.save(tmp_path / "ab.npy", rows)
    assert main(["solve", "l1_procrustes", "--data", str(tmp_path / "ab.npy"), "--p", "2",
                 "--max-iter", "40", "--seed", "3", "--quiet"]) == 0
    text = capsys.readouterr().out
    api = L1Procrustes(rows[:, :6], rows[:, 6:])
    res = rssm.minimize(api, api.initial_point(np.random.default_rng([3, 1])), max_iter=40,
                        seed=3)
    assert float(text.split("final cost")[1].split()[0]) == pytest.approx(res.fun, rel=1e-9)
    assert main(["solve", "l1_procrustes", "--data", str(tmp_path / "ab.npy")]) == 2
    assert "--p: required with --data" in capsys.readouterr().err


@pytest.mark.parametrize(("name", "attr"), [("sparse_pca", "from_data"),
                                            ("sparse_basis", "__init__")])
def test_sparse_problems_get_the_file_unloaded(tmp_path, monkeypatch, name, attr):
    """The CLI hands sparse_pca / sparse_basis the memory-mapped file as it is (nothing
    read into memory by the CLI); the problems decide how to read it."""
    from rssm.problems import REGISTRY

    np.save(tmp_path / "a.npy", np.random.default_rng(0).standard_normal((50, 8)))
    seen = []
    cls = REGISTRY[name]
    real = getattr(cls, attr)

    if attr == "from_data":
        def spy(a, *args, **kwargs):
            seen.append(type(a))
            return real(a, *args, **kwargs)
        monkeypatch.setattr(cls, attr, staticmethod(spy))
    else:
        def spy(self, a, *args, **kwargs):
            seen.append(type(a))
            real(self, a, *args, **kwargs)
        monkeypatch.setattr(cls, attr, spy)
    assert main(["solve", name, "--data", str(tmp_path / "a.npy"), "--max-iter", "2",
                 "--quiet"]) == 0
    assert seen == [np.memmap]


def test_a_cost_returning_text_is_refused():
    prob = rssm.Problem.from_functions(lambda x: "1.5", lambda x: np.zeros_like(x),
                                       shape=(4, 2), stepsize=0.1)
    with pytest.raises(TypeError, match="cost must return a real number, got str"):
        prob.cost(np.eye(4, 2))


# -- defect 8: layout and --d -------------------------------------------------------------
def test_samples_as_columns_refused_with_the_fix_named(tmp_path, capsys):
    base = DPCP.synthetic(n=8, d=2, n_inliers=40, n_outliers=20, seed=0)
    np.save(tmp_path / "cols.npy", base.yt)  # 8 x 60: one sample per column
    rc = main(["solve", "dpcp", "--data", str(tmp_path / "cols.npy"), "--d", "2"])
    line = _one_line(capsys, 2, rc)
    assert "--samples-as-columns" in line and "m = 8 samples of n = 60 features" in line
    assert main(["solve", "dpcp", "--data", str(tmp_path / "cols.npy"), "--d", "2",
                 "--samples-as-columns", "--max-iter", "5", "--seed", "1", "--quiet"]) == 0
    text = capsys.readouterr().out
    api = DPCP.from_data(base.yt, d=2)
    res = rssm.minimize(api, api.initial_point(np.random.default_rng([1, 1])), max_iter=5,
                        seed=1)
    assert "(St(8, 6))" in text
    assert float(text.split("final cost")[1].split()[0]) == pytest.approx(res.fun, rel=1e-9)
    # streamed a chunk of columns at a time: the same run
    assert main(["solve", "dpcp", "--data", str(tmp_path / "cols.npy"), "--d", "2",
                 "--samples-as-columns", "--out-of-core", "always", "--chunk-size", "7",
                 "--max-iter", "5", "--seed", "1", "--quiet", "--stepsize", "paper"]) == 0
    streamed = capsys.readouterr().out
    assert "streamed" in streamed
    ref = rssm.minimize(api, api.initial_point(np.random.default_rng([1, 1])), max_iter=5,
                        seed=1, stepsize=api.reference_stepsize())
    assert float(streamed.split("final cost")[1].split()[0]) == pytest.approx(ref.fun,
                                                                               rel=1e-9)
    assert main(["solve", "dpcp", "--data", str(tmp_path / "cols.npy"), "--d", "2",
                 "--samples-as-rows", "--max-iter", "1", "--quiet"]) == 0


def test_data_only_options_need_data(capsys, no_run):
    rc = main(["solve", "odl", "--n", "6", "--p", "3"])
    assert "argument --p: only used with --data" in _one_line(capsys, 2, rc)
    rc = main(["solve", "dpcp", "--header", "yes"])
    assert "argument --header: only used with --data" in _one_line(capsys, 2, rc)


def test_dpcp_data_needs_d(tmp_path, capsys):
    np.save(tmp_path / "a.npy", np.random.default_rng(0).standard_normal((50, 6)))
    rc = main(["solve", "dpcp", "--data", str(tmp_path / "a.npy")])
    line = _one_line(capsys, 2, rc)
    assert line.startswith("rssm: error: argument --d: required with --data")


# -- defects 6 and 7: text files and damaged .npy -----------------------------------------
@pytest.mark.parametrize(("text", "expected"), [
    ('"1.5","2"\n3,4\n', [[1.5, 2.0], [3.0, 4.0]]),           # quoted cells: data
    ('"1,5",2\n3,4\n5,6\n', None),                            # was dropped as a header
    ("\ufeff1,5\n3,4\n", [[1.0, 5.0], [3.0, 4.0]]),           # byte-order mark: data
    ("a;b\n1,5;2\n", None),                                   # decimal comma: refused
    ("x y\n1 2\n3 4\n", [[1.0, 2.0], [3.0, 4.0]]),            # a header of names
    ("# numpy.savetxt header\n1\t5\n3\t4\n", [[1.0, 5.0], [3.0, 4.0]]),
    ("0,2,1\n5,6,7\n", [[0.0, 2.0, 1.0], [5.0, 6.0, 7.0]]),   # integer data: all kept
    ("0,1,2\n5,6,7\n", "header"),      # 0..n-1 over integers: a header or a sample, refused
])
def test_text_files(tmp_path, text, expected):
    path = tmp_path / "f.csv"
    path.write_bytes(text.encode("utf-8"))
    if expected == "header":
        with pytest.raises(dio.DataFileError, match="may be a header of column numbers"):
            dio.read_csv(path)
    elif expected is None:
        with pytest.raises(dio.DataFileError, match="column 1 .* not numeric"):
            dio.read_csv(path)
    else:
        np.testing.assert_array_equal(dio.read_csv(path), expected)


def test_a_first_row_with_na_is_not_a_header(tmp_path):
    path = tmp_path / "f.csv"
    path.write_text("NA,1\n2,3\n4,5\n")
    with pytest.raises(dio.DataFileError, match=r"line 1: 'NA'\); a missing value"):
        dio.read_csv(path)


def test_numeric_header_is_ambiguous_unless_said(tmp_path):
    path = tmp_path / "f.csv"
    path.write_text("0,1,2\n0.5,1.5,2.5\n3.5,4.5,5.5\n")
    with pytest.raises(dio.DataFileError, match="say which with header='yes' or header='no'$"
                       ) as exc:
        dio.read_csv(path)
    assert exc.value.argument == "header"
    assert exc.value.cli_message.endswith("say which with --header yes or --header no")
    assert dio.read_csv(path, header="yes").shape == (2, 3)
    assert dio.read_csv(path, header="no").shape == (3, 3)
    # above integer data too (pandas' to_csv(index=False) of pixel counts): it was read
    # as one more sample
    ints = tmp_path / "i.csv"
    ints.write_text("0,1,2,3\n5,0,12,7\n3,3,0,1\n")
    with pytest.raises(dio.DataFileError, match="say which with header='yes' or header='no'$"):
        dio.read_csv(ints)
    assert dio.read_csv(ints, header="yes").shape == (2, 4)


def test_a_pandas_row_index_is_refused_not_read_as_a_feature(tmp_path, capsys):
    """A user's audit: ``DataFrame.to_csv`` (index=True, pandas' default) writes the row
    index as an unnamed first column; it was read as one more feature, 0..m-1."""
    pd = pytest.importorskip("pandas")
    a = np.random.default_rng(0).standard_normal((40, 5))
    frame = pd.DataFrame(a, columns=list("abcde"))
    frame.to_csv(tmp_path / "idx.csv")
    frame.to_csv(tmp_path / "plain.csv", index=False)
    with pytest.raises(dio.DataFileError, match=r"unnamed first column holding 0, 1, \.\.\., "
                       r"39: a row index .*index=False"):
        dio.read_csv(tmp_path / "idx.csv")
    np.testing.assert_allclose(dio.read_csv(tmp_path / "plain.csv"), a, rtol=1e-15)
    # a named index (index_label) or an unnamed column of other values is data
    frame.to_csv(tmp_path / "named.csv", index_label="row")
    assert dio.read_csv(tmp_path / "named.csv").shape == (40, 6)
    other = tmp_path / "other.csv"
    other.write_text(",a,b\n" + "".join(f"{2 * i},{i}.5,1\n" for i in range(5)))
    assert dio.read_csv(other).shape == (5, 3)
    one = tmp_path / "one.csv"          # one row: no index to tell
    one.write_text(",a,b\n0,1.5,2\n")
    assert dio.read_csv(one).shape == (1, 3)
    rc = main(["solve", "dpcp", "--data", str(tmp_path / "idx.csv"), "--d", "2"])
    assert "argument --data: " in _one_line(capsys, 2, rc)


def test_a_write_error_is_not_lost_when_stdout_closes_early(tmp_path, capsys, monkeypatch):
    """A review: with the summary printed before the write error, ``| head -1`` closed
    stdout during the summary and the run exited 141 without a word, no file written."""
    import errno

    from rssm.cli import _common, output, solve

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    def closed(text):
        raise _common.StdoutClosed

    monkeypatch.setattr(output, "_atomic", full)
    monkeypatch.setattr(solve, "out", closed)
    rc = main(["solve", "dpcp", *TINY, "--quiet", "--out", str(tmp_path / "t.csv")])
    line = _one_line(capsys, 1, rc)
    assert "could not write" in line and "No space left on device" in line
    # no write error: a closed stdout is still the quiet exit 141
    monkeypatch.undo()
    monkeypatch.setattr(solve, "out", closed)
    assert main(["solve", "dpcp", *TINY, "--quiet"]) == 141


def test_a_delimiter_ending_every_line_is_an_empty_column_not_a_missing_value(tmp_path):
    """A user's audit: a CSV whose every line ends with ',' (some exporters write one) was
    refused as "a missing value", with a hint to use --header yes for a line of data."""
    a = np.random.default_rng(0).standard_normal((20, 4))
    body = "".join(",".join(repr(float(v)) for v in row) + ",\n" for row in a)
    (tmp_path / "t.csv").write_text(body)
    np.testing.assert_array_equal(dio.read_csv(tmp_path / "t.csv"), a)
    (tmp_path / "h.csv").write_text("a,b,c,d,\n" + body)          # a header ending so too
    np.testing.assert_array_equal(dio.read_csv(tmp_path / "h.csv"), a)
    (tmp_path / "h2.csv").write_text("a,b,c,d\n" + body)          # or not
    np.testing.assert_array_equal(dio.read_csv(tmp_path / "h2.csv"), a)
    # a header that names the empty last column: a feature of missing values (pandas'
    # to_csv of an all-NaN column), refused as such, not dropped (a review)
    (tmp_path / "n.csv").write_text("x,y,z\n1,2,\n3,4,\n5,6,\n")
    with pytest.raises(dio.DataFileError, match=r"column 3 \('z'\) is not numeric \(line 2: "
                                                r"''\); a missing value"):
        dio.read_csv(tmp_path / "n.csv")
    # a real missing value is still one, named where it is (not the empty last cell)
    bad = body.split("\n")
    bad[3] = bad[3].replace(repr(float(a[3, 1])), "NA")
    (tmp_path / "m.csv").write_text("\n".join(bad))
    with pytest.raises(dio.DataFileError, match=r"column 2 is not numeric \(line 4: 'NA'\); "
                                                r"a missing value"):
        dio.read_csv(tmp_path / "m.csv")
    # one line without the trailing delimiter: not every line ends so, and the empty
    # cell is a missing value (no header hint: an empty cell is no column name)
    mixed = body.split("\n")
    mixed[5] = mixed[5].rstrip(",")
    (tmp_path / "x.csv").write_text("\n".join(mixed))
    with pytest.raises(dio.DataFileError, match=r"column 5 is not numeric \(line 1: ''\); a "
                                                r"missing value: fill or drop it first$"):
        dio.read_csv(tmp_path / "x.csv")


def test_hexadecimal_floats_are_refused_as_such(tmp_path):
    """A user's audit: a file of float.hex() values was taken as having a header, and the
    error named the first sample as a column."""
    a = np.random.default_rng(0).standard_normal((5, 3))
    (tmp_path / "x.csv").write_text("".join(",".join(float(v).hex() for v in row) + "\n"
                                            for row in a))
    with pytest.raises(dio.DataFileError, match=r"line 1 holds hexadecimal floats \('0x1"
                                                r".*float.fromhex"):
        dio.read_csv(tmp_path / "x.csv")
    (tmp_path / "y.csv").write_text("a,b,c\n" + (tmp_path / "x.csv").read_text())
    with pytest.raises(dio.DataFileError, match=r"column 1 \('a'\) is not numeric \(line 2: "
                                                r"'0x1.*a hexadecimal float"):
        dio.read_csv(tmp_path / "y.csv")


def test_fixed_width_text(tmp_path):
    a = np.random.default_rng(0).standard_normal((30, 4))
    np.savetxt(tmp_path / "f.txt", a, fmt="%10.4f")
    np.testing.assert_allclose(dio.read_csv(tmp_path / "f.txt"), a, atol=5e-5)


def test_cli_header_option(tmp_path, capsys):
    a = np.random.default_rng(0).standard_normal((60, 5))
    np.savetxt(tmp_path / "h.csv", a, delimiter=",", header="0,1,2,3,4", comments="")
    rc = main(["solve", "dpcp", "--data", str(tmp_path / "h.csv"), "--d", "2"])
    line = _one_line(capsys, 2, rc)
    # the command line's words only (it said "header='yes' or 'no' (--header yes|no)")
    assert "argument --header:" in line and line.endswith("--header yes or --header no")
    assert "header=" not in line
    (tmp_path / "w.csv").write_text("c1,2\n1,2\n3,4\n")
    line = _one_line(capsys, 2, main(["solve", "dpcp", "--data", str(tmp_path / "w.csv"),
                                      "--d", "1"]))
    assert line.endswith("if line 1 is a header, use --header yes"), line
    with pytest.raises(dio.DataFileError, match="if line 1 is a header, use header='yes'$"):
        dio.read_csv(tmp_path / "w.csv")
    assert main(["solve", "dpcp", "--data", str(tmp_path / "h.csv"), "--d", "2", "--header",
                 "yes", "--max-iter", "2", "--quiet"]) == 0
    assert "m=60 samples of 5 numbers" in capsys.readouterr().out


def test_damaged_npy_header_is_one_line(tmp_path, capsys):
    np.save(tmp_path / "a.npy", np.ones((20, 4)))
    raw = bytearray((tmp_path / "a.npy").read_bytes())
    start = raw.index(b"{")
    raw[start + 1:start + 20] = b"'descr': '<f8', (fo"
    (tmp_path / "bad.npy").write_bytes(bytes(raw))
    rc = main(["solve", "dpcp", "--data", str(tmp_path / "bad.npy"), "--d", "1"])
    line = _one_line(capsys, 2, rc)
    assert line.startswith("rssm: error: argument --data: cannot read") and "damaged" in line


def test_a_run_that_lost_its_data_exits_1(tmp_path, capsys, monkeypatch):
    """A run that ends `data_error` (the data truncated or a worker lost during the run)
    exits with status 1 and says why on stderr; before, it exited 0 like a finished run.
    The data error is raised here from the run's callback, as an oracle raises it."""
    from rssm.cli import solve as cli_solve
    from rssm.data import DataError

    real = cli_solve._minimize

    def losing(problem, x0, args, rule, callback):
        def cut(progress):
            if progress.iteration >= 4:
                raise DataError("the data file x.npy shrank to 1000 bytes during the run")
        return real(problem, x0, args, rule, cut)

    monkeypatch.setattr(cli_solve, "_minimize", losing)
    rc = main(["solve", "dpcp", "--n", "12", "--d", "2", "--n-inliers", "60", "--n-outliers",
               "40", "--record-every", "2", "--quiet", "--out", str(tmp_path / "run")])
    captured = capsys.readouterr()
    assert rc == 1
    assert "stop reason    data_error" in captured.out
    assert captured.err.startswith("rssm: the data could not be read: iteration 4: the data "
                                   "file x.npy shrank")
    assert "the run so far is saved in" in captured.err
    assert (tmp_path / "run" / "X.npy").exists()


def _with_closed_pipe(args, tmp_path, stream="stdout"):
    """``rssm ARGS`` with ``stream`` a pipe whose reader has already left."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    r, w = os.pipe()
    os.close(r)                               # no reader: the first write gets EPIPE
    try:
        kw = {stream: w, ("stderr" if stream == "stdout" else "stdout"): subprocess.PIPE}
        proc = subprocess.run([sys.executable, "-m", "rssm", *args], env=env, timeout=300,
                              cwd=tmp_path, **kw)
    finally:
        os.close(w)
    return proc


def test_a_reader_that_leaves_early_does_not_cost_the_run(tmp_path):
    """``rssm solve ... --out F | head -1``: the summary was printed before --out was
    written, so the broken pipe lost the run (exit 1, "Broken pipe", no file). The files
    come first now, and a closed stdout ends the command quietly with 141 (SIGPIPE's)."""
    proc = _with_closed_pipe(["solve", "odl", "--n", "20", "--out", "run.json"], tmp_path)
    assert proc.returncode == 141 and proc.stderr == b"", proc.stderr
    doc = json.loads((tmp_path / "run.json").read_text())
    assert doc["result"]["stop_reason"] == "converged"
    proc = _with_closed_pipe(["solve", "odl", "--n", "20", "--out", "D"], tmp_path)
    assert proc.returncode == 141
    assert sorted(p.name for p in (tmp_path / "D").iterdir()) == ["X.npy", "settings.json",
                                                                  "trace.csv"]


def test_reproduce_goes_on_when_its_progress_lines_have_no_reader(tmp_path):
    """The progress lines on stderr are advisory: a closed stderr ended the experiment
    with exit 1 and no figures or report."""
    proc = _with_closed_pipe(["reproduce", "dpcp", "--budget", "0.01", "--seeds", "1",
                              "--out", "BP"], tmp_path, stream="stderr")
    assert proc.returncode == 0, proc.stdout
    assert {"results.csv", "report.md", "dpcp.png"} <= {p.name for p in (tmp_path / "BP")
                                                       .iterdir()}


def test_an_empty_out_is_refused(tmp_path, capsys):
    """``--out ""`` wrote X.npy, trace.csv and settings.json into the current folder."""
    assert main(["solve", "dpcp", "--max-iter", "5", "--out", "", "--quiet"]) == 2
    assert "argument --out: empty" in capsys.readouterr().err


def test_target_error_on_data_names_the_option(tmp_path, capsys):
    """``--target-error`` with ``--data`` said "target_error needs a ground truth" with the
    Python name and no "argument" prefix."""
    np.save(tmp_path / "d.npy", np.random.default_rng(0).standard_normal((200, 10)))
    rc = main(["solve", "dpcp", "--data", str(tmp_path / "d.npy"), "--d", "3",
               "--target-error", "1e-8", "--quiet"])
    line = _one_line(capsys, 2, rc)
    # then: the library's message, whose advice (DPCP(..., subspace=...)) is Python's
    assert line.startswith("rssm: error: argument --target-error: needs a ground truth, "
                           "which only a generated instance has (a --data file has none)")


def test_a_layout_flag_that_reads_few_samples_is_questioned_in_the_commands_words(
        tmp_path, capsys):
    """``--samples-as-columns`` on a file of one sample per row built St(300, 295) from 10
    samples with only the problem's raw LayoutWarning (a file:line and API advice)."""
    np.save(tmp_path / "rows.npy", np.random.default_rng(0).standard_normal((300, 10)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no Python warning reaches the user
        rc = main(["solve", "dpcp", "--d", "5", "--data", str(tmp_path / "rows.npy"),
                   "--samples-as-columns", "--quiet", "--max-iter", "3"])
    err = capsys.readouterr().err
    assert rc == 0
    assert err.startswith("rssm: warning: --samples-as-columns reads ") and "LayoutWarning" \
        not in err
    assert "as m = 10 samples of n = 300 features" in err and "without --samples-as-columns" \
        in err


def test_a_missing_command_or_problem_lists_the_choices(capsys):
    """``rssm`` and ``rssm solve`` said only "the following arguments are required:
    COMMAND" (PROBLEM), where cli.md promises the values allowed."""
    line = _one_line(capsys, 2, main([]))
    assert line.endswith("required: COMMAND (choose from 'reproduce', 'plot', 'solve')")
    line = _one_line(capsys, 2, main(["solve"]))
    assert "required: PROBLEM (choose from 'dpcp', 'odl'," in line


def test_plot_given_a_folder_says_what_it_takes(tmp_path, capsys):
    """``rssm plot`` on the folder of ``rssm solve --out`` said "no such file"."""
    (tmp_path / "run").mkdir()
    line = _one_line(capsys, 2, main(["plot", str(tmp_path / "run")]))
    assert "is a folder with no results.csv in it; rssm plot redraws the results.csv" in line


def test_plot_of_a_file_that_is_no_results_csv_names_the_file_and_the_cell(tmp_path, capsys):
    """An audit: ``rssm plot X.npy`` (or Latin-1 text) said only "'utf-8' codec can't
    decode byte 0x93 in position 0", and a results CSV with one bad cell "could not
    convert string to float: 'abc'", naming neither the file nor where."""
    np.save(tmp_path / "x.npy", np.eye(3))
    line = _one_line(capsys, 2, main(["plot", str(tmp_path / "x.npy")]))
    assert line.endswith("x.npy is not an rssm results CSV: not UTF-8 text at byte 0, line 1"), line
    (tmp_path / "latin.csv").write_bytes("part,probl\xe8me\n".encode("latin-1"))
    line = _one_line(capsys, 2, main(["plot", str(tmp_path / "latin.csv")]))
    assert line.endswith("latin.csv is not an rssm results CSV: not UTF-8 text at byte 10, line 1")
    cols = "part,problem,method,blocks,seed,stepsize,iteration,time,flops,cost,error"
    good = "paper,dpcp,rsm,1,1,paper,0,0.0,0.0,1.0,0.5"
    bad = "paper,dpcp,rsm,1,1,paper,1,abc,0.0,1.0,0.5"
    (tmp_path / "results.csv").write_text("\n".join([cols, good, bad]) + "\n")
    line = _one_line(capsys, 2, main(["plot", str(tmp_path / "results.csv")]))
    assert line.endswith("results.csv, line 3: column time is 'abc', not a number"), line
    (tmp_path / "results.csv").write_text("\n".join([cols, good, good[:20]]) + "\n")
    line = _one_line(capsys, 2, main(["plot", str(tmp_path / "results.csv")]))
    assert line.endswith("results.csv, line 3: column iteration is missing"), line
    (tmp_path / "results.csv").write_text("\n".join([cols, good, good + ",7,8"]) + "\n")
    line = _one_line(capsys, 2, main(["plot", str(tmp_path / "results.csv")]))
    assert line.endswith("results.csv, line 3: 13 cells, the header has 11"), line
    (tmp_path / "results.csv").write_text("\n".join([cols, good + ",", good + ",,"]) + "\n")
    from rssm.experiments import io as eio

    assert len(eio.read_rows(tmp_path / "results.csv")) == 2    # empty trailing cells


def test_max_iter_help_names_the_budget_the_problem_declares(capsys):
    """The help of every problem said 1000 epochs; ODL, sparse PCA and the sparse basis
    declare 3000, 20000 and 2000 with their default rules."""
    from rssm.cli.solve import DECLARED_EPOCHS
    from rssm.problems import REGISTRY

    small = {"dpcp": dict(n=10, d=2, n_inliers=30, n_outliers=20), "odl": dict(n=6),
             "sparse_pca": dict(n=12, r=2, m=30, support=3),
             "l1_procrustes": dict(m=40, n=6, p=2), "sparse_basis": dict(n=8, p=2, m=200)}
    for name, cls in REGISTRY.items():
        declared = cls.synthetic(seed=0, **small[name]).default_max_epochs()
        assert DECLARED_EPOCHS.get(name) == declared, name
        with pytest.raises(SystemExit):
            main(["solve", name, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert f"given: {declared or 1000} epochs" in text, name


def test_settings_record_the_budget_in_force(tmp_path):
    """settings.json said "max_iter": null when the default budget applied; it also
    records the limit the run had."""
    import json

    assert main(["solve", "sparse_basis", "--n", "8", "--p", "2", "--m", "200", "--quiet",
                 "--out", str(tmp_path / "run")]) == 0
    doc = json.loads((tmp_path / "run" / "settings.json").read_text())
    assert doc["options"]["max_iter"] is None and doc["max_iter_in_force"] == 2000
    assert main(["solve", "dpcp", *TINY, "--out", str(tmp_path / "tiny")]) == 0
    doc = json.loads((tmp_path / "tiny" / "settings.json").read_text())
    assert doc["max_iter_in_force"] == 6


_TERM = r"""
import os, signal, sys
import rssm
from rssm.cli import main
real = rssm.minimize

def stopped(*args, **kwargs):
    def cb(progress):
        if progress.iteration >= 3:
            os.kill(os.getpid(), signal.SIGTERM)     # what a job scheduler sends
    kwargs["callback"], kwargs["record"] = cb, 1
    return real(*args, **kwargs)

rssm.minimize = stopped
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.skipif(os.name != "posix", reason="SIGTERM to oneself needs POSIX")
def test_sigterm_during_solve_saves_the_run_as_ctrl_c_does(tmp_path):
    """SIGTERM (SLURM stopping a job, ``kill``, ``timeout``) ended ``rssm solve`` at once:
    exit 143, nothing printed, no --out files. It is handled as Ctrl-C now: the run so far
    is printed and saved, and the exit status stays 143."""
    import signal

    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-c", _TERM, "solve", "dpcp", *TINY[:-3],
                           "--max-iter", "50", "--out", str(out)], capture_output=True,
                          text=True, timeout=120,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.returncode == 143, proc.stderr
    assert "interrupted after 3 iterations" in proc.stderr
    doc = json.loads((out / "settings.json").read_text())
    assert doc["summary"]["stop_reason"] == "interrupted" and doc["summary"]["n_iter"] == 3
    assert np.load(out / "X.npy").shape == (8, 6)
    # a user's audit: the run's message said "interrupted by the user" after SIGTERM
    assert "interrupted by SIGTERM after 3 iterations" in json.dumps(doc)
    assert "by the user" not in json.dumps(doc) + proc.stdout + proc.stderr


def test_a_run_records_the_machine_and_its_data_file(tmp_path, capsys):
    """settings.json named the data file only as typed and no version of rssm, NumPy,
    Python or the BLAS (`rssm reproduce` records them); a run's bits depend on both."""
    data = tmp_path / "pts.npy"
    np.save(data, np.random.default_rng(0).standard_normal((60, 8)))
    out = tmp_path / "run"
    assert main(["solve", "dpcp", "--data", str(data), "--d", "5", "--max-iter", "5",
                 "--out", str(out), "--quiet"]) == 0
    doc = json.loads((out / "settings.json").read_text())
    import hashlib

    assert doc["data"]["file"]["sha256"] == hashlib.sha256(data.read_bytes()).hexdigest()
    assert doc["data"]["file"]["bytes"] == data.stat().st_size
    assert doc["machine"]["rssm"] == rssm.__version__
    assert doc["machine"]["numpy"] == np.__version__ and doc["machine"]["python"]


def test_out_with_a_trailing_slash_is_a_folder(tmp_path, capsys):
    """``--out run.v3/`` was refused ("file name must end in .csv or .json") though the
    slash names a folder (the README writes ``--out run/``)."""
    out = tmp_path / "run.v3"
    assert main(["solve", "dpcp", *TINY, "--out", f"{out}/"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["X.npy", "settings.json", "trace.csv"]


def test_a_file_that_is_not_npy_or_holds_objects_is_named(tmp_path, capsys):
    """A .npy that is not one said "contains pickled (object) data ... allow_pickle="; an
    object array said "can't be memory-mapped ... (a damaged or truncated .npy file?)"."""
    bad = tmp_path / "garbage.npy"
    bad.write_bytes(b"hello world")
    obj = tmp_path / "obj.npy"
    np.save(obj, np.array([[1, "a"]], dtype=object), allow_pickle=True)
    assert main(["solve", "dpcp", "--data", str(bad), "--d", "1", "--quiet"]) == 2
    assert "is not a .npy file" in capsys.readouterr().err
    assert main(["solve", "dpcp", "--data", str(obj), "--d", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "holds Python objects" in err and "damaged" not in err
    # the same in a .npz (an audit: "a damaged or truncated .npz file?")
    npz = tmp_path / "obj.npz"
    np.savez(npz, pts=np.ones((20, 3)).astype(object))
    assert main(["solve", "dpcp", "--data", str(npz), "--d", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "obj.npz holds Python objects" in err and "damaged" not in err


def test_reproduce_out_naming_a_file_says_so(tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    assert main(["reproduce", "dpcp", "--quick", "--out", str(f)]) == 2
    assert "is a file; name a folder" in capsys.readouterr().err


def test_reproduce_into_a_folder_with_results_names_the_option(tmp_path, capsys):
    """The runner's refusal read "rssm: error: --out X already holds results.csv ..."
    without the "argument --out:" every other refusal of an option starts with."""
    out = tmp_path / "rq"
    assert main(["reproduce", "dpcp", "--quick", "--quiet", "--out", str(out)]) == 0
    assert main(["reproduce", "dpcp", "--quick", "--quiet", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"rssm: error: argument --out: {out} already holds results.csv")


@pytest.mark.skipif(os.name != "posix", reason="SIGTERM needs POSIX")
def test_sigterm_saves_a_run_started_with_sigint_ignored(tmp_path):
    """``rssm ... &`` in a script starts with SIGINT ignored. First the SIGTERM handler's
    SIGINT was dropped and the run went on after SIGTERM; then SIGTERM ended such a job at
    once, nothing printed or saved, though docs/cli.md promises 143 with the run saved (a
    user's audit). Now SIGTERM raises the interrupt itself there: exit 143, the run saved;
    and SIGINT stays ignored, as the shell meant (a Ctrl-C at the terminal leaves the
    job alone)."""
    import signal
    import time

    def ignore_sigint():
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    out = tmp_path / "bg"
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from rssm.cli import main; "
                             "sys.exit(main(sys.argv[1:]))", "solve", "dpcp", "--n", "30",
                             "--d", "3", "--n-inliers", "300", "--n-outliers", "300",
                             "--tol", "0", "--max-iter", "100000000", "--max-time", "60",
                             "--stepsize", "constant", "--c", "1e-3", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=ignore_sigint)
    try:
        time.sleep(4)
        proc.send_signal(signal.SIGINT)
        time.sleep(1)
        assert proc.poll() is None          # SIGINT ignored: still running
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "interrupted after" in err
    doc = json.loads((out / "settings.json").read_text())
    assert doc["summary"]["stop_reason"] == "interrupted" and doc["summary"]["n_iter"] > 0
    assert np.load(out / "X.npy").shape == (30, 27)


def test_a_sigterm_inside_a_held_section_is_recorded_where_sigint_is_ignored():
    """The SIGTERM that stands for an interrupt where SIGINT is ignored is held by the
    same sections as Ctrl-C (it must not land half-way through a change of state)."""
    import signal

    from rssm._interrupt import HeldInterrupt, term_as_interrupt, term_interrupt

    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    term_as_interrupt(True)
    try:
        with HeldInterrupt() as outer:
            with HeldInterrupt() as inner:
                term_interrupt(signal.SIGTERM, None)     # recorded, not raised
            assert not inner.interrupted
        assert outer.interrupted
        with pytest.raises(KeyboardInterrupt):
            term_interrupt(signal.SIGTERM, None)         # outside sections: raised
    finally:
        term_as_interrupt(False)
        signal.signal(signal.SIGINT, old)


_WRITE = r"""
import os, signal, sys
import numpy as np
from rssm.cli import main
real, hit = np.save, []

def save(*args, **kwargs):          # SIGTERM as X.npy is written, after the run
    if not hit:
        hit.append(1)
        os.kill(os.getpid(), signal.SIGTERM)
    return real(*args, **kwargs)

np.save = save
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.skipif(os.name != "posix", reason="SIGTERM to oneself needs POSIX")
def test_sigterm_while_the_results_are_written_keeps_them(tmp_path):
    """A user's audit: SIGTERM (or Ctrl-C) while ``--out`` was being written, after the
    run, left only trace.csv and no summary. The writing is held now: every file is
    written, the summary printed, and the exit status says the process was stopped."""
    import signal

    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-c", _WRITE, "solve", "dpcp", *TINY, "--out",
                           f"{out}/"], capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.returncode == 143, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["X.npy", "settings.json", "trace.csv"]
    assert "the run so far is saved in" in proc.stderr
    json.loads((out / "settings.json").read_text())


def test_plot_names_the_byte_and_line_of_a_late_bad_byte_and_reads_a_bom(tmp_path, capsys):
    """An audit: a results CSV with one Latin-1 byte after 500 good rows was said to be
    "not UTF-8 text (byte 7082)" where the byte was at 23466 (the position within the
    reader's last chunk); a CSV saved with a byte order mark was "missing column(s)
    part"."""
    cols = "part,problem,method,blocks,seed,stepsize,iteration,time,flops,cost,error"
    good = "paper,dpcp,rsm,1,1,paper,0,0.0,0.0,1.0,0.5"
    data = ("\n".join([cols] + [good] * 500) + "\n").encode() + b"\xe9\n"
    (tmp_path / "late.csv").write_bytes(data)
    line = _one_line(capsys, 2, main(["plot", str(tmp_path / "late.csv")]))
    assert line.endswith(f"not UTF-8 text at byte {len(data) - 2}, line 502"), line
    from rssm.experiments import io as eio

    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbf" + data[:-2])
    rows = eio.read_rows(tmp_path / "bom.csv")
    assert len(rows) == 500 and rows[0]["part"] == "paper" and rows[0]["error"] == 0.5


def test_a_nul_byte_or_an_overlong_cell_is_named_by_line(tmp_path, capsys):
    """An audit: a NUL byte inside a name cell of a results CSV was read without a word
    (into the run's key and the figures' legends); a cell over the csv module's field
    limit named the file but not the line."""
    cols = "part,problem,method,blocks,seed,stepsize,iteration,time,flops,cost,error"
    good = "paper,dpcp,rsm,1,1,paper,0,0.0,0.0,1.0,0.5"
    (tmp_path / "nul.csv").write_text(
        "\n".join([cols, good, good.replace("dpcp", "dp\x00cp")]) + "\n", encoding="utf-8")
    line = _one_line(capsys, 2, main(["plot", str(tmp_path / "nul.csv")]))
    # (Python 3.10's csv module stops at the NUL itself, with its own words)
    assert line.endswith(("nul.csv, line 3: column problem holds a NUL byte",
                          "nul.csv, line 3 is not an rssm results CSV: line contains NUL")), line
    (tmp_path / "long.csv").write_text(
        "\n".join([cols, good, good, good.replace("dpcp", "d" * 200_000)]) + "\n",
        encoding="utf-8")
    line = _one_line(capsys, 2, main(["plot", str(tmp_path / "long.csv")]))
    assert "long.csv, line 4 is not an rssm results CSV: field larger than" in line, line


def test_a_new_users_walk_plot_of_a_trace_and_sizes_that_follow_n(tmp_path, capsys):
    """A new user's walk: `rssm plot` on the trace.csv of `rssm solve --out` was told only
    which columns it lacked; `rssm solve sparse_pca --n 300` was refused for an --m the
    user never passed (its default stayed 200 whatever n); the l1_procrustes data label
    called the file's 13 columns n beside St(10, 3)."""
    out = tmp_path / "run"
    assert main(["solve", "dpcp", "--n", "20", "--d", "3", "--n-inliers", "100",
                 "--n-outliers", "50", "--max-iter", "5", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    line = _one_line(capsys, 2, main(["plot", str(out / "trace.csv")]))
    assert line.endswith("it looks like the trace.csv of one run (rssm solve --out): rssm "
                         "plot draws the results.csv that rssm reproduce writes"), line
    from rssm.problems import SparsePCA

    assert SparsePCA.synthetic(n=300, seed=0).m == 301
    assert SparsePCA.synthetic(n=100, seed=0).m == 200          # as before
    rng = np.random.default_rng(0)
    a = rng.standard_normal((60, 10))
    np.savetxt(tmp_path / "proc.csv", np.hstack([a, a[:, :3]]), delimiter=",")
    assert main(["solve", "l1_procrustes", "--data", str(tmp_path / "proc.csv"), "--p", "3",
                 "--max-iter", "3"]) == 0
    assert "(m=60 samples of 13 numbers)" in capsys.readouterr().out


def test_plot_out_that_cannot_be_a_folder_is_named_with_status_2(tmp_path, capsys):
    """An audit: ``rssm plot --out`` gave a bare OSError and status 1 for a file, a path
    under a file or one that cannot be created, and took ``--out ""`` as the current
    folder; ``rssm solve`` and ``rssm reproduce`` name ``--out`` with status 2."""
    from rssm.cli import main

    csv_path = tmp_path / "results.csv"
    csv_path.write_text("part,problem,method,blocks,seed,stepsize,iteration,time,flops,"
                        "cost,error\n")
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    for bad, says in ((str(blocker), "is a file; name a folder"),
                      (str(blocker / "sub"), "cannot create folder"),
                      ("", "empty; name a folder")):
        assert main(["plot", str(csv_path), "--out", bad]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("rssm: error: argument --out: ")
        assert says in err[0]
    assert main(["reproduce", "dpcp", "--out", ""]) == 2
    assert "argument --out: empty" in capsys.readouterr().err


def test_the_command_ignores_a_further_ctrl_c_once_an_interrupted_run_is_saved(monkeypatch):
    """An audit: a second Ctrl-C 50-100 ms after the first landed once the run was saved
    and its summary printed, while the process exited, and ended it by the signal (raw
    status -2 where the docs promise 130). The command's entry point ignores SIGINT
    after an interrupted run's status; a plain run leaves the handler alone."""
    import signal

    import rssm.cli

    before = signal.getsignal(signal.SIGINT)
    try:
        for status, ignored in ((130, True), (143, True), (0, False), (2, False)):
            signal.signal(signal.SIGINT, signal.default_int_handler)
            monkeypatch.setattr(rssm.cli, "main", lambda s=status: s)
            assert rssm.cli.console() == status
            now = signal.getsignal(signal.SIGINT)
            assert (now is signal.SIG_IGN) == ignored
    finally:
        signal.signal(signal.SIGINT, before)


def test_the_json_says_how_the_trace_was_spaced(tmp_path, capsys):
    """A review of the trace thinning: nothing in the JSON of ``rssm solve --max-time``
    said that the trace's spacing grew. ``trace_spacing`` lists the gaps between rows
    (the last row aside): one value with a budget or ``--record-every``."""
    from rssm.cli import main

    base = ["solve", "dpcp", "--n", "8", "--d", "2", "--n-inliers", "30", "--n-outliers",
            "20", "--tol", "0", "--quiet"]
    assert main(base + ["--max-iter", "400", "--out", str(tmp_path / "a.json")]) == 0
    assert json.loads((tmp_path / "a.json").read_text())["trace_spacing"] == [2]
    assert main(base + ["--max-iter", "400", "--record-every", "7",
                        "--out", str(tmp_path / "b.json")]) == 0
    assert json.loads((tmp_path / "b.json").read_text())["trace_spacing"] == [7]
    capsys.readouterr()


_FOREIGN = "is not a results.json written by rssm reproduce "


@pytest.mark.parametrize(("text", "words"), [
    ('{"bad": 1}', "is not a results.json written by rssm reproduce (no 'settings' object"),
    ('{"settings": {}}', "is not a results.json written by rssm reproduce"),
    ("[]", "is not a results.json written by rssm reproduce"),
    ('{"bad json', "is not valid JSON (Unterminated string starting at, line 1 column 2)"),
    ("", "is not valid JSON (Expecting value, line 1 column 1)"),
    ('{"settings": {"problems": {"dpcp": 1}}}',
     _FOREIGN + "(settings.problems.dpcp is not an object)"),
    ('{"settings": {"problems": {"dpcp": {}}}}',
     _FOREIGN + "(settings.problems.dpcp has no 'name')"),
    ('{"settings": {"problems": {"x": {}}}}',
     _FOREIGN + "(settings.problems names 'x', which rssm reproduce does not run)"),
    ('{"settings": {"problems": {}}, "runs": 5}', _FOREIGN + "(runs is not a list of objects)"),
])
def test_a_damaged_results_json_is_named_by_plot_and_resume(tmp_path, capsys, no_run, text,
                                                             words):
    """A user's audit: beside a good results.csv, a results.json holding another object
    made `rssm plot` end in a KeyError traceback (status 1, also with --no-report), and a
    damaged one gave "rssm: error: Expecting value: line 1 column 1 (char 0)", naming
    neither the file nor what was wrong; `reproduce --resume` the same."""
    cols = "part,problem,method,blocks,seed,stepsize,iteration,time,flops,cost,error"
    rows = ["paper,dpcp,rsm,1,1,paper,0,0.0,0.0,1.0,0.5",
            "paper,dpcp,rsm,1,1,paper,1,0.1,10.0,0.9,0.25"]
    (tmp_path / "results.csv").write_text("\n".join([cols, *rows]) + "\n")
    (tmp_path / "results.json").write_text(text)
    line = _one_line(capsys, 2, main(["plot", str(tmp_path / "results.csv")]))
    assert f"{tmp_path / 'results.json'} {words}" in line, line
    assert line.endswith("the report needs it (--no-report draws the figures without it)")
    assert main(["plot", str(tmp_path / "results.csv"), "--no-report", "--formats", "png"]) == 0
    assert (tmp_path / "dpcp.png").is_file()
    capsys.readouterr()
    line = _one_line(capsys, 2, main(["reproduce", "dpcp", "--quick", "--resume", "--out",
                                      str(tmp_path)]))
    assert line.startswith(f"rssm: error: argument --resume: {tmp_path / 'results.json'} "
                           f"{words}"), line
    assert line.endswith("; use another --out or --overwrite"), line


def test_solve_names_the_options_the_user_gave(capsys, no_run):
    """A user's audit: a condition on several instance options listed "--m None" (a size
    the instance chooses, not an option given), and RSSM on St(n, 1) chosen by --blocks was
    refused as "argument --method", an option not given."""
    line = _one_line(capsys, 2, main(["solve", "sparse_pca", "--support", "1000"]))
    assert "(--n 100 --r 5 --support 1000 --theta 4.0 --mu 0.2)" in line, line
    assert "None" not in line
    line = _one_line(capsys, 2, main(["solve", "l1_procrustes", "--p", "1", "--blocks", "2"]))
    assert line.startswith("rssm: error: argument --blocks: RSSM needs p >= 2"), line
    assert line.endswith("drop --blocks (RSM, the default)"), line
    line = _one_line(capsys, 2, main(["solve", "l1_procrustes", "--p", "1", "--method",
                                      "rssm"]))
    assert line.startswith("rssm: error: argument --method: RSSM needs p >= 2"), line
    assert line.endswith("use --method rsm"), line
    line = _one_line(capsys, 2, main(["solve", "odl", "--overwrite"]))
    assert line == ("rssm: error: argument --overwrite: only used with --out (the files it "
                    "may replace)"), line


def test_a_cache_that_cannot_be_made_is_a_data_error_summary_not_a_traceback(
        tmp_path, capsys, monkeypatch):
    """The disk cache's folder full (a 1 MiB TMPDIR): the run ended ``data_error`` at its
    start with no trace row, and the summary indexed the empty trace (IndexError, a
    traceback, no --out; a user's audit). docs/cli.md: exit status 1, the summary and
    --out written, one line on stderr saying why."""
    import errno

    from rssm.data.statefile import StateFile

    def full(self):
        raise OSError(errno.ENOSPC, "No space left on device")

    data = tmp_path / "pts.npy"
    np.save(data, np.random.default_rng(0).standard_normal((3000, 12)))
    monkeypatch.setattr(StateFile, "allocate", full)
    out = tmp_path / "run"
    assert main(["solve", "dpcp", "--data", str(data), "--d", "3", "--out-of-core",
                 "always", "--out", str(out)]) == 1
    cap = capsys.readouterr()
    assert "No space left on device" in cap.err
    assert [ln.split()[-1] for ln in cap.out.splitlines()
            if ln.startswith("initial cost")] == ["n/a"]
    doc = json.loads((out / "settings.json").read_text())
    assert doc["summary"]["stop_reason"] == "data_error" and doc["summary"]["n_iter"] == 0


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")
def test_a_closed_pipe_on_stdout_leaves_no_descriptor_behind_in_process(monkeypatch):
    """`main` called in a process that goes on, with stdout on a pipe whose reader has
    gone: it returns 141 and stdout then writes to /dev/null, as before; each such call
    also left one more open descriptor (an audit: 7 -> 8 over 20 calls)."""
    import gc

    def on_devnull(skip):
        # descriptors open on /dev/null, but ``skip`` (other tests' files may close
        # meanwhile: the count of all descriptors can fall)
        out = set()
        for name in os.listdir("/proc/self/fd"):
            try:
                if int(name) != skip and os.readlink(f"/proc/self/fd/{name}") == os.devnull:
                    out.add(int(name))
            except OSError:
                pass
        return out

    r, w = os.pipe()
    os.close(r)
    with open(w, "w", buffering=1) as stream:
        monkeypatch.setattr(sys, "stdout", stream)
        gc.collect()
        before = on_devnull(w)
        codes = {main(["solve", "dpcp", "--n", "20", "--d", "3", "--n-inliers", "100",
                       "--n-outliers", "50", "--max-iter", "5", "--quiet"])
                 for _ in range(3)}
        gc.collect()
        new = on_devnull(w) - before
        assert os.readlink(f"/proc/self/fd/{w}") == os.devnull
    assert 141 in codes and new == set()


# -- a user's audit (2026-11-27): errors on generated or file data name the right option ----
@pytest.mark.parametrize(("argv", "start"), [
    # sparse PCA's data array is "a", and --a is the step's exponent: it was named
    (["sparse_pca", "--n", "20", "--support", "2", "--theta", "1e200"],
     "rssm: error: the synthetic instance (--n 20 "),
    (["dpcp", "--n", "20", "--d", "2", "--noise", "1e300"],
     "rssm: error: the synthetic instance (--n 20 --d 2 "),
])
def test_an_error_on_generated_data_names_the_instance_options(argv, start, capsys, no_run):
    line = _one_line(capsys, 2, main(["solve", *argv, "--quiet"]))
    assert line.startswith(start), line
    assert "argument --a" not in line


def test_an_error_on_file_data_names_data(tmp_path, capsys, no_run):
    np.save(tmp_path / "one_row.npy", np.ones((1, 6)))
    line = _one_line(capsys, 2, main(["solve", "sparse_pca", "--data",
                                      str(tmp_path / "one_row.npy"), "--r", "3"]))
    assert line.startswith("rssm: error: argument --data: a has no variance"), line
    np.save(tmp_path / "one_col.npy", np.ones((20, 1)))
    line = _one_line(capsys, 2, main(["solve", "l1_procrustes", "--data",
                                      str(tmp_path / "one_col.npy"), "--p", "1"]))
    assert line == ("rssm: error: argument --data: l1_procrustes needs at least 2 columns (n "
                    ">= 1 design columns, then p >= 1 target columns), the file has 1"), line


def test_the_command_prints_warnings_as_its_own_lines(tmp_path):
    """A review: `rssm plot` on a CSV whose errors are all nan warned as
    "<frozen runpy>:88: UserWarning: ..." with a line of rssm's code under it; the command
    now prints "rssm: warning: ... (UserWarning)". Python callers of `main` keep Python's
    format."""
    from rssm.experiments.io import CSV_COLUMNS

    rows = [",".join(CSV_COLUMNS)]
    for i in range(3):
        rows.append(f"paper,dpcp,rsm,1,0,paper,{i},{0.1 * i},{1e6 * i},1.0,nan")
    (tmp_path / "results.csv").write_text("\n".join(rows) + "\n")
    proc = subprocess.run([sys.executable, "-m", "rssm", "plot", str(tmp_path / "results.csv"),
                           "--formats", "png", "--no-report"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("rssm: warning: ") and proc.stderr.rstrip().endswith(
        "the figure has no curve (UserWarning)"), proc.stderr
    assert "runpy" not in proc.stderr and "plot_comparison(" not in proc.stderr
