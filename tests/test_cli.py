"""`rssm solve`, the parser built from the problem registry, one-line errors, progress bar."""

from __future__ import annotations

import csv
import io as _io
import json
import subprocess
import sys

import numpy as np
import pytest

import rssm
from rssm import cli
from rssm.cli import build_parser, main
from rssm.experiments.progress import ProgressBar, format_seconds
from rssm.problems import DPCP, REGISTRY
from rssm.stepsizes import Geometric
from rssm.trace import TRACE_COLUMNS

SMALL = ["--n", "20", "--d", "3", "--n-inliers", "120", "--n-outliers", "80"]


def test_solve_csv_matches_minimize(tmp_path, capsys):
    out = tmp_path / "trace.csv"
    rc = main(["solve", "dpcp", *SMALL, "--method", "rssm", "--blocks", "4", "--stepsize",
               "geometric", "--mu0", "0.3", "--beta", "0.9", "--max-iter", "60",
               "--record-every", "7", "--seed", "3", "--out", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "RSSM (l=4, uniform)" in text and "final error" in text and "max_iter" in text
    with out.open(newline="") as fh:
        rows = list(csv.reader(fh))
    assert tuple(rows[0]) == TRACE_COLUMNS
    assert [int(r[0]) for r in rows[1:]] == [0, 7, 14, 21, 28, 35, 42, 49, 56, 60]
    # the same run through the library: data seed 3, start from default_rng([3, 1])
    prob = DPCP.synthetic(n=20, d=3, n_inliers=120, n_outliers=80, seed=3)
    x0 = prob.initial_point(np.random.default_rng([3, 1]))
    res = rssm.minimize(
        prob, x0, method="rssm", stepsize=Geometric(0.3, 0.9), max_iter=60, seed=3, record=7,
        options={"n_blocks": 4}
    )
    np.testing.assert_allclose([float(r[4]) for r in rows[1:]], res.trace["error"],
                               rtol=1e-12, atol=0)
    np.testing.assert_allclose(float(rows[-1][3]), res.fun_last, rtol=1e-12)


@pytest.mark.parametrize(("name", "cls"), [("sparse_pca", "SparsePCA"),
                                         ("sparse_basis", "PlantedSparseBasis")])
def test_solve_with_nothing_set_is_the_default_call(tmp_path, capsys, name, cls):
    """`rssm solve NAME` with no --stepsize runs what `rssm.minimize(problem, seed=S)` runs,
    the problem's own rule where it has one (before, the command line ran Auto there:
    sparse_basis seed 5 ended at error 1.4 where the default call reaches 4e-12)."""
    out = tmp_path / "run"
    assert main(["solve", name, "--seed", "2", "--max-iter", "80", "--quiet",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    prob = getattr(rssm.problems, cls).synthetic(seed=2)
    res = rssm.minimize(prob, seed=2, max_iter=80)
    assert res.stepsize["rule"] == "Geometric"
    settings = json.loads((out / "settings.json").read_text())
    assert settings["stepsize"] == res.stepsize
    np.testing.assert_array_equal(np.load(out / "X.npy"), res.x)


def test_blocks_without_a_method_run_rssm(capsys):
    """--blocks (or a --selection other than uniform) without --method means RSSM, as
    `options={"n_blocks": l}` does in `rssm.minimize`; before, it was refused."""
    assert main(["solve", "dpcp", *SMALL, "--blocks", "3", "--max-iter", "5", "--quiet"]) == 0
    assert "RSSM (l=3, uniform)" in capsys.readouterr().out
    assert main(["solve", "dpcp", *SMALL, "--selection", "cyclic", "--max-iter", "5",
                 "--quiet"]) == 0
    assert "RSSM (l=5, cyclic)" in capsys.readouterr().out
    assert main(["solve", "dpcp", *SMALL, "--max-iter", "5", "--quiet"]) == 0
    assert "method         RSM" in capsys.readouterr().out


@pytest.mark.parametrize(("problem", "opts", "names"), [
    ("dpcp", ["--d", "0"], ["argument --d:", "d must be >= 1"]),
    ("sparse_pca", ["--r", "11"], ["argument --r:", "r must be <= n = 10"]),
    ("l1_procrustes", ["--p", "6"], ["argument --p:", "1 <= p <= 5"]),
])
def test_data_options_are_named_in_their_errors(tmp_path, capsys, problem, opts, names):
    """Errors about an option given with --data name that option and its own name (before:
    sparse_pca said "p" for --r, l1_procrustes "b must have at most n = 4 columns" for
    --p 6, and dpcp ran --d 0, a constant cost, to its budget)."""
    path = tmp_path / "x.npy"
    np.save(path, np.random.default_rng(0).standard_normal((30, 10)))
    assert main(["solve", problem, "--data", str(path), *opts]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("rssm: error: ")
    for name in names:
        assert name in err, err


def test_solve_json(tmp_path, capsys):
    out = tmp_path / "run.json"
    rc = main(["solve", "odl", "--n", "8", "--m", "200", "--method", "rsm", "--max-iter", "30",
               "--stepsize", "paper", "--out", str(out)])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["problem"] == "odl" and doc["synthetic"] == {"n": 8, "theta": 0.3, "m": 200}
    assert doc["method"] == "rsm" and doc["stepsize"]["rule"] == "PaperSchedule"
    assert doc["stepsize"]["delta"] == pytest.approx(1e-3)
    assert doc["summary"]["n_iter"] == 30 and doc["summary"]["stop_reason"] == "max_iter"
    assert set(doc["trace"]) == set(TRACE_COLUMNS)
    assert doc["trace"]["iteration"][-1] == 30
    assert doc["summary"]["error"] == pytest.approx(doc["trace"]["error"][-1], rel=1e-15)
    assert "trace: " in capsys.readouterr().out


def test_solve_target_error_stops(capsys):
    rc = main(["solve", "dpcp", *SMALL, "--method", "rsm", "--stepsize", "geometric",
               "--mu0", "0.3", "--beta", "0.9", "--max-iter", "2000", "--target-error", "1e-6",
               "--record-every", "5"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "target_error" in out
    err = float(out.split("final error")[1].split()[0])
    assert err <= 1e-6


def test_problem_options_come_from_registry(monkeypatch):
    """A problem added to REGISTRY later appears in `rssm solve` with its own options."""

    class Toy(DPCP):
        """Toy problem for the registry test."""

        @classmethod
        def synthetic(cls, n: int = 12, spread: float = 0.5, seed=None):
            """Toy instance."""
            return DPCP.synthetic(n=n, d=2, n_inliers=50, n_outliers=30, seed=seed)

        def default_stepsize(self):
            return Geometric(0.25, 0.9)

    monkeypatch.setitem(REGISTRY, "toy", Toy)
    parser = build_parser()
    args = parser.parse_args(["solve", "toy", "--spread", "0.25"])
    assert args.problem == "toy" and args.syn_n == 12 and args.syn_spread == 0.25
    helptext = _help(["solve", "toy", "--help"])
    assert "--spread FLOAT" in helptext and "(default: 0.5)" in helptext
    assert "(default: 12)" in helptext


def test_solve_uses_the_problems_own_stepsize(monkeypatch, capsys):
    """--stepsize default takes the problem's rule; parameters not given on the command
    line come from it, so a problem without the paper's schedule still runs. Without
    --stepsize the run uses it too (as `rssm.minimize`); --stepsize auto selects Auto."""

    class Toy(DPCP):
        @classmethod
        def synthetic(cls, n: int = 12, seed=None):
            base = DPCP.synthetic(n=n, d=2, n_inliers=50, n_outliers=30, seed=seed)
            return cls(base.yt, base.p, base.subspace)

        def default_stepsize(self):
            return Geometric(0.25, 0.9)

    monkeypatch.setitem(REGISTRY, "toy", Toy)
    assert main(["solve", "toy", "--max-iter", "5", "--stepsize", "default"]) == 0
    assert "Geometric(mu0=0.25, beta=0.9)" in capsys.readouterr().out
    assert main(["solve", "toy", "--max-iter", "5", "--stepsize", "default", "--beta", "0.5"]) == 0
    assert "Geometric(mu0=0.25, beta=0.5)" in capsys.readouterr().out
    assert main(["solve", "toy", "--max-iter", "5"]) == 0
    assert "Geometric(mu0=0.25, beta=0.9)" in capsys.readouterr().out
    assert main(["solve", "toy", "--max-iter", "5", "--stepsize", "auto"]) == 0
    assert "Auto(" in capsys.readouterr().out
    assert main(["solve", "toy", "--stepsize", "paper"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rssm: error: argument --stepsize paper:") and "--delta" in err


def _help(argv) -> str:
    buf = _io.StringIO()
    with pytest.raises(SystemExit) as exc:
        import contextlib

        with contextlib.redirect_stdout(buf):
            build_parser().parse_args(argv)
    assert exc.value.code == 0
    return buf.getvalue()


def test_help_lists_defaults():
    text = _help(["solve", "dpcp", "--help"])
    for piece in ("--n INT", "(default: 100)", "(default: 1500)", "--method {rsm,rssm}",
                  "{auto,default,paper,geometric,constant,invsqrt}", "(default: uniform)"):
        assert piece in text, piece
    text = _help(["reproduce", "--help"])
    for piece in ("--quick", "--tuned", "--resume", "--seeds", "(default: 5)", "--quiet"):
        assert piece in text, piece
    assert "rssm reproduce all --quick --out rssm-results" in _help(["--help"])


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["solve", "dpcp", "--method", "foo"], ["--method", "rsm", "rssm"]),
        (["solve", "dpcp", "--stepsize", "cosine"], ["--stepsize", "geometric", "invsqrt"]),
        (["solve", "dpcp", "--selection", "random"], ["--selection", "uniform", "cyclic"]),
        (["solve", "dpcp", "--method", "rssm", "--blocks", "200"],
         ["--blocks", "2 <= n_blocks <= p = 90"]),
        (["solve", "dpcp", "--method", "rsm", "--blocks", "3"], ["--blocks", "use --method rssm"]),
        (["solve", "dpcp", "--blocks", "0"], ["--blocks", ">= 2"]),
        (["solve", "dpcp", "--blocks", "1"], ["--blocks", ">= 2"]),
        (["solve", "dpcp", "--stagnation-rtol", "0.5"],
         ["--stagnation-rtol", "only used with --stagnation-epochs"]),
        (["solve", "dpcp", "--tol", "0", "--verify-steps", "5"],
         ["--verify-steps", "--tol 0 turns off"]),
        (["solve", "dpcp", "--out", "-"], ["--out", "standard output"]),
        (["solve", "dpcp", "--d", "0"], ["--d", ">= 1"]),
        (["solve", "sparse_pca", "--support", "1000"],
         ["synthetic instance", "--support 1000", "--r 5", "r * support must be <= n = 100"]),
        (["solve", "dpcp", "--max-iter", "ten"], ["--max-iter", "integer"]),
        (["solve", "dpcp", "--mu0", "0.1"],
         ["--mu0", "geometric", "no --stepsize given", "default step size is auto",
          "add --stepsize geometric"]),
        (["solve", "dpcp", "--stepsize", "default", "--mu0", "0.1"],
         ["--mu0", "(--stepsize default: this problem's default step size is auto"]),
        (["solve", "dpcp", "--stepsize", "auto", "--delta", "0.5"],
         ["--delta", "paper", "(got --stepsize auto)"]),
        (["solve", "dpcp", "--stepsize", "geometric", "--mu0", "1"], ["--beta"]),
        (["solve", "dpcp", "--stepsize", "geometric", "--mu0", "1", "--beta", "2"],
         ["--beta", "beta"]),
        (["solve", "dpcp", "--out", "trace.txt"], ["--out", ".csv", ".json"]),
        (["solve", "dpcp", "--out", "no/such/folder/t.csv"], ["--out", "does not exist"]),
        (["solve", "nosuch"], ["PROBLEM", "dpcp", "odl"]),
        (["reproduce", "everything"], ["experiment", "all", "dpcp", "odl"]),
        (["reproduce", "all", "--formats", "gif"], ["--formats", "png", "pdf"]),
        (["reproduce", "all", "--budget", "2"], ["--budget", "(0, 1]"]),
        (["reproduce", "all", "--resume", "--overwrite"], ["--resume", "--overwrite"]),
        (["plot", "no/such/results.csv"], ["RESULTS.csv", "no such file"]),
        ([], ["COMMAND"]),
    ],
)
def test_bad_options_one_line_exit_2(argv, names, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("rssm: error: ")
    for name in names:
        assert name in lines[0], (name, lines[0])
    assert "Traceback" not in captured.err and captured.out == ""


def test_python_m_rssm_entry_point():
    proc = subprocess.run([sys.executable, "-m", "rssm", "solve", "dpcp", "--method", "bad"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("rssm: error: argument --method: invalid choice")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_library_errors_name_the_option_by_their_argument(monkeypatch, capsys):
    """Issue 19: the option is named from the error's ``argument`` attribute, never by
    reading the message (the old `_name_option` parsed its first word)."""
    assert main(["solve", "dpcp", "--n-inliers", "-1"]) == 2
    assert capsys.readouterr().err == (
        "rssm: error: argument --n-inliers: n_inliers must be >= 0, got -1\n")

    def broken(**kwargs):
        raise ValueError("n_blocks is mentioned first but is not the culprit")

    monkeypatch.setattr(REGISTRY["dpcp"], "synthetic", broken)
    assert main(["solve", "dpcp"]) == 2
    assert capsys.readouterr().err == (
        "rssm: error: n_blocks is mentioned first but is not the culprit\n")


def test_progress_bar_line():
    """The reproduce bar is tqdm's, with runs done / total, the current run and our ETA
    (resumed runs count as done, not in the mean)."""
    buf = _io.StringIO()
    bar = ProgressBar(5, enabled=True, stream=buf)
    bar.skip(2)
    bar.start("paper dpcp RSM seed 0")
    bar.finish()
    bar.start("paper dpcp RSSM (l=3) seed 0")
    assert bar.done == 3 and bar.eta() >= 0
    bar._bar.refresh()
    line = buf.getvalue().split("\r")[-1]
    assert "3/5 runs" in line and "RSSM (l=3)" in line and "ETA" in line
    assert line.lstrip().startswith("60%|")
    bar.close()
    assert buf.getvalue().rstrip().endswith("done]")
    quiet = ProgressBar(5, stream=_io.StringIO())  # not a terminal: disabled
    assert quiet.enabled is False
    quiet.start("x")
    quiet.finish()
    quiet.close()


def test_solve_progress_bar_follows_the_recording_points():
    from rssm.experiments.progress import SolveProgress
    from rssm.stopping import Progress

    buf = _io.StringIO()
    bar = SolveProgress(200, None, enabled=True, stream=buf, delay=0.0)
    for k in (0, 100, 200):
        assert bar(Progress(k, 0.01 * k, 0.0, cost=1.0 / (k + 1))) is False
        bar._bar.refresh()
    text = buf.getvalue()
    assert "200/200" in text and "cost 0.00497512" in text
    bar.close()
    assert buf.getvalue().endswith("\r")  # leave=False: the bar is wiped at the end
    timed = SolveProgress(None, 2.0, enabled=True, stream=_io.StringIO(), delay=0.0)
    timed(Progress(10, 2.5, 0.0))  # a step may end past the limit: clamped
    assert timed.by_time and timed._bar.n == 2.0
    timed.close()
    assert SolveProgress(10, enabled=None, stream=_io.StringIO()).enabled is False


def test_solve_draws_no_bar_off_a_terminal(capsys):
    assert main(["solve", "dpcp", "--n", "10", "--d", "2", "--n-inliers", "30",
                 "--n-outliers", "10", "--max-iter", "50"]) == 0
    assert main(["solve", "dpcp", "--n", "10", "--d", "2", "--n-inliers", "30",
                 "--n-outliers", "10", "--max-iter", "50", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert err == ""


@pytest.mark.parametrize(("sec", "text"), [(9.87, "9.9s"), (73.2, "1m13s"), (4000, "1h06m"),
                                          (float("nan"), "?")])
def test_format_seconds(sec, text):
    assert format_seconds(sec) == text


def test_solve_prints_the_problem_summary(capsys):
    """Sparse PCA reports explained variance and sparsity next to the cost (issue 5)."""
    rc = main(["solve", "sparse_pca", "--max-iter", "3000", "--seed", "0", "--stepsize",
               "geometric"])  # the problem's reference rule
    assert rc == 0
    lines = {ln.split("  ")[0]: ln.split()[-1] for ln in capsys.readouterr().out.splitlines()
             if ln.strip()}
    from rssm.problems import SparsePCA

    prob = SparsePCA.synthetic(seed=0)
    # the planted loadings are 90% zero; after 3000 iterations the iterate is that sparse
    assert float(lines["sparsity"]) == pytest.approx(0.9, abs=0.01)
    assert 0.0 < float(lines["explained variance"]) < 1.0
    assert prob.summary(prob.initial_point())["explained_variance"] > 0


def test_solve_bar_on_a_terminal_unless_quiet(monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    parser = cli.build_parser()
    on = cli._solve_progress(parser.parse_args(["solve", "dpcp", "--max-time", "3"]))
    off = cli._solve_progress(parser.parse_args(["solve", "dpcp", "--quiet"]))
    try:
        assert on.enabled and on.by_time and on.total == 3.0
        # the default iteration limit: 1000 epochs of the default method
        from rssm.solvers.options import DEFAULT_METHOD, default_budget

        assert not off.enabled
        assert off.total == default_budget(1 if DEFAULT_METHOD == "rsm" else 5)
    finally:
        on.close()


def test_solve_verify_steps_reaches_the_convergence_check(tmp_path):
    """--verify-steps sets the steps of the check that confirms a verdict (recorded in the
    JSON), as options={"verify_steps": N} does: with RSM and 24 steps per phase the converged
    run costs up to 24 more cost evaluations than with the check off (the bundle check's
    trial points), and stops at the same point."""
    docs = {}
    for n in ("0", "24"):
        out = tmp_path / f"run{n}.json"
        assert main(["solve", "dpcp", *SMALL, "--method", "rsm", "--verify-steps", n,
                     "--quiet", "--out", str(out)]) == 0
        docs[n] = json.loads(out.read_text())
    assert docs["24"]["options"]["verify_steps"] == 24
    off, on = docs["0"]["result"], docs["24"]["result"]
    assert off["stop_reason"] == on["stop_reason"] == "converged"
    assert off["n_iter"] == on["n_iter"] and off["fun"] == on["fun"]
    assert 0 < on["n_cost"] - off["n_cost"] <= 24 and on["flops"] > off["flops"]
    assert main(["solve", "dpcp", "--verify-steps", "-1"]) == 2


def test_no_clip_steps_runs_the_rules_steps_as_they_are(tmp_path):
    """--no-clip-steps is options={"clip_steps": False}: the paper's schedule on ODL at
    l = 5 has steps longer than the block's diameter, shortened by default."""
    runs = {}
    for extra in ([], ["--no-clip-steps"]):
        out = tmp_path / f"r{len(extra)}.json"
        assert main(["solve", "odl", "--n", "12", "--method", "rssm", "--stepsize", "paper",
                     "--max-iter", "50", "--quiet", "--out", str(out), *extra]) == 0
        runs[bool(extra)] = json.loads(out.read_text())["result"]
    assert runs[False]["clip_steps"] is True and runs[False]["n_clipped"] > 0
    assert runs[True]["clip_steps"] is False and runs[True]["n_clipped"] == 0


def test_chunk_size_sets_the_chunks_of_an_out_of_core_run(tmp_path):
    # (a mutation audit: --chunk-size could be dropped without a test noticing)
    import json

    np.save(tmp_path / "y.npy", np.random.default_rng(0).standard_normal((10000, 12)))
    assert main(["solve", "dpcp", "--data", str(tmp_path / "y.npy"), "--d", "2",
                 "--out-of-core", "always", "--chunk-size", "500", "--max-iter", "3",
                 "--quiet", "--out", str(tmp_path / "run")]) == 0
    settings = json.loads((tmp_path / "run" / "settings.json").read_text())
    assert settings["data"]["chunk_size"] == 500


def test_max_time_and_the_data_default_of_mu_reach_the_run(tmp_path):
    # (a mutation audit: --max-time, and sparse_pca's --mu default of 0.2 with --data,
    # could be dropped without a test noticing)
    import json

    assert main(["solve", "dpcp", "--max-iter", "100000", "--tol", "0", "--max-time",
                 "0.05", "--quiet", "--out", str(tmp_path / "run")]) == 0
    res = json.loads((tmp_path / "run" / "settings.json").read_text())["result"]
    assert res["stop_reason"] == "max_time" and res["n_iter"] < 100000
    rng = np.random.default_rng(0)
    np.savetxt(tmp_path / "a.csv", rng.standard_normal((60, 8)), delimiter=",")
    assert main(["solve", "sparse_pca", "--data", str(tmp_path / "a.csv"), "--max-iter", "5",
                 "--quiet", "--out", str(tmp_path / "spca")]) == 0
    settings = json.loads((tmp_path / "spca" / "settings.json").read_text())
    assert "mu=0.2," in settings["repr"]
