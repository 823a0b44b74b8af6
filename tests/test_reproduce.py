"""End to end: `rssm reproduce` at a tiny budget, `--resume`, and `rssm plot`.

The problems have the paper's sizes; the budgets are 1% of the full ones (`--budget 0.01`)
and two seeds, so the whole module runs in a few seconds of solver time.
"""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import sys
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import rssm
from rssm.cli import main
from rssm.experiments import io
from rssm.experiments.configs import PAPER_METHODS, TUNING_SEED, make_configs, stepsize_label
from rssm.experiments.runner import plan_paper, plan_tuned

BUDGET = 0.01
SEEDS = 2
ARGS = ["reproduce", "all", "--budget", str(BUDGET), "--seeds", str(SEEDS), "--tuned", "--quiet"]


def _expected_points(max_iter: int, every: int) -> int:
    """Recorded points of a run that hits its iteration limit: 0, every, 2 every, ..., end."""
    return max_iter // every + 1 + (1 if max_iter % every else 0)


@pytest.fixture(scope="module")
def outdir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("repro") / "res"
    assert main(ARGS + ["--out", str(out)]) == 0
    return out


def _rows(out: Path) -> list[dict]:
    return io.read_rows(out / "results.csv")


def test_files_written(outdir):
    for name in ("dpcp", "odl", "dpcp-tuned", "odl-tuned"):
        png = (outdir / f"{name}.png").read_bytes()
        pdf = (outdir / f"{name}.pdf").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
        assert pdf[:5] == b"%PDF-" and len(pdf) > 5_000
    # no temporary files left by the atomic writes
    assert not [p for p in outdir.iterdir() if p.name.startswith(".")]


def test_csv_columns_and_row_counts(outdir):
    with (outdir / "results.csv").open(newline="") as fh:
        header = next(csv.reader(fh))
    assert tuple(header) == io.CSV_COLUMNS
    rows = _rows(outdir)
    counts = Counter((r["part"], r["problem"], r["method"], r["seed"]) for r in rows)
    configs = make_configs(scale=BUDGET)
    for name, cfg in configs.items():
        for spec in plan_paper(cfg, range(SEEDS)):
            got = counts[("paper", name, spec.method.key, spec.seed)]
            assert got == _expected_points(spec.max_iter, spec.record_every), spec
        # every method of every tuning candidate ran on the tuning seed
        n_tuning = sum(1 for r in {(r["method"], r["stepsize"]) for r in rows
                                   if r["part"] == "tuning" and r["problem"] == name})
        assert n_tuning == len(cfg.tuned_grid) * len(PAPER_METHODS)
        assert {r["seed"] for r in rows if r["part"] == "tuning"} == {TUNING_SEED}
        tuned = {(r["method"], r["seed"]) for r in rows
                 if r["part"] == "tuned" and r["problem"] == name}
        assert len(tuned) == SEEDS * len(PAPER_METHODS)
    # the budget of RSSM with l blocks is l/2 times RSM's
    last = {k: 0 for k in counts}
    for r in rows:
        k = (r["part"], r["problem"], r["method"], r["seed"])
        last[k] = max(last[k], r["iteration"])
    for name, cfg in configs.items():
        assert last[("paper", name, "rsm", 0)] == cfg.rsm_iter
        assert last[("paper", name, "rssm-l10", 0)] == 5 * cfg.rsm_iter


def test_same_data_and_start_for_all_methods(outdir):
    """Iteration 0 (cost and error of X^0 on the seed's data) is the same across methods
    and differs between seeds. The error is identical to the bit; the cost agrees to
    rounding: DPCP's oracle sums each row's squared norm block by block (so that a block's
    update never drifts), and l blocks group those sums differently."""
    rows = [r for r in _rows(outdir) if r["part"] == "paper" and r["iteration"] == 0]
    for name in ("dpcp", "odl"):
        per_seed = {}
        for r in rows:
            if r["problem"] == name:
                per_seed.setdefault(r["seed"], []).append((r["cost"], r["error"]))
        for v in per_seed.values():
            assert len({e for _, e in v}) == 1, per_seed
            costs = [c for c, _ in v]
            assert max(costs) - min(costs) <= 4e-16 * max(costs), per_seed
        assert len({v[0][1] for v in per_seed.values()}) == SEEDS


def test_json_settings(outdir):
    doc = io.read_json(outdir / "results.json")
    st = doc["settings"]
    assert st["seeds"] == [0, 1]
    assert st["methods"] == ["rsm", "rssm-l3", "rssm-l5", "rssm-l10"]
    assert st["problems"]["dpcp"]["synthetic"] == {"n": 100, "d": 10, "n_inliers": 1500,
                                                   "n_outliers": 3500}
    assert st["problems"]["odl"]["synthetic"] == {"n": 60, "theta": 0.3}
    assert st["problems"]["dpcp"]["paper_stepsize"] == {"rule": "paper", "delta": 0.9,
                                                        "a": 2.0, "rho": 0.991}
    assert st["problems"]["odl"]["paper_stepsize"] == {"rule": "paper", "delta": 1e-3,
                                                       "a": 4.0, "rho": 0.995}
    assert doc["command"].startswith("rssm reproduce all --budget 0.01")
    for key in ("platform", "cpu_count", "numpy", "blas"):
        assert key in doc["machine"]
    # paper + tuned + auto on every seed, and the tuning grid on the tuning seed
    n_runs = 2 * len(PAPER_METHODS) * SEEDS * 3 + sum(
        len(c.tuned_grid) * len(PAPER_METHODS) for c in make_configs(scale=BUDGET).values())
    assert len(doc["runs"]) == n_runs
    assert set(doc["tuned_choice"]) == {"dpcp", "odl"}
    # each run's summary agrees with its last CSV row
    rows = _rows(outdir)
    run = doc["runs"][0]
    part, prob, method, seed, step = run["key"]
    mine = [r for r in rows if (r["part"], r["problem"], r["method"], r["seed"],
                                r["stepsize"]) == (part, prob, method, seed, step)]
    assert mine[-1]["iteration"] == run["n_iter"]
    assert mine[-1]["error"] == pytest.approx(run["final_error"], rel=1e-12)


def test_report_tables_filled(outdir):
    text = (outdir / "report.md").read_text()
    assert "No finished" not in text
    for label in ("| RSM |", "| RSSM (l=3) |", "| RSSM (l=5) |", "| RSSM (l=10) |"):
        # paper, tuned and auto table of both problems
        assert sum(line.startswith(label) for line in text.splitlines()) == 6, label
    assert text.count(" time to 0.01 |") == 6 and text.count(" time to 1e-08 |") == 4
    assert "## Part 2: tuned step sizes" in text
    assert "iteration budgets are 0.01 times the full ones" in text
    assert "Command: `rssm reproduce all --budget 0.01" in text
    assert "the claim **" in text
    assert "![Robust subspace recovery (DPCP)](dpcp.png)" in text


def test_resume_skips_finished_and_reruns_missing(outdir, tmp_path):
    out = tmp_path / "res"
    shutil.copytree(outdir, out)
    before = (out / "results.csv").read_text()
    assert main(ARGS + ["--out", str(out), "--resume", "--formats", "png"]) == 0
    assert (out / "results.csv").read_text() == before  # nothing re-run

    # Drop the last paper run of odl seed 1 (as if it had been interrupted) and resume.
    rows = _rows(out)
    cfg = make_configs(scale=BUDGET)["odl"]
    victim = plan_paper(cfg, range(SEEDS))[-1]
    key = ("paper", "odl", victim.method.key, victim.seed)
    kept = [r for r in rows if (r["part"], r["problem"], r["method"], r["seed"]) != key]
    lost = [r for r in rows if (r["part"], r["problem"], r["method"], r["seed"]) == key]
    assert lost
    with (out / "results.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(io.CSV_COLUMNS)
        for r in kept:
            w.writerow([r[c] for c in io.CSV_COLUMNS])
    assert main(ARGS + ["--out", str(out), "--resume", "--formats", "png"]) == 0
    again = _rows(out)
    assert len(again) == len(rows)
    redone = [r for r in again if (r["part"], r["problem"], r["method"], r["seed"]) == key]
    # the same seed gives the same iterates: error and cost bit for bit, time differs
    assert [r["error"] for r in redone] == [r["error"] for r in lost]
    assert [r["cost"] for r in redone] == [r["cost"] for r in lost]
    doc = io.read_json(out / "results.json")
    assert len([r for r in doc["runs"] if tuple(r["key"][:4]) == (*key[:3], key[3])]) == 1


def test_existing_results_need_resume_or_overwrite(outdir, tmp_path, capsys):
    out = tmp_path / "res"
    shutil.copytree(outdir, out)
    assert main(ARGS + ["--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rssm: error:")
    assert "--resume" in err[0] and "--overwrite" in err[0]


def test_resume_with_other_settings_names_what_differs(outdir, tmp_path, capsys):
    """--resume refuses other settings and names them (before, a subset of the experiments
    was refused as "budgets, sizes or --quick differ", none of which did)."""
    out = tmp_path / "res"
    shutil.copytree(outdir, out)
    other = ["reproduce", "dpcp", "--budget", str(BUDGET), "--seeds", str(SEEDS), "--tuned",
             "--quiet", "--out", str(out), "--resume"]
    assert main(other) == 2
    err = capsys.readouterr().err.strip()
    assert "the experiments (dpcp, odl there, dpcp now) differ" in err, err
    bigger = ["reproduce", "all", "--budget", str(2 * BUDGET), "--seeds", str(SEEDS),
              "--tuned", "--quiet", "--out", str(out), "--resume"]
    assert main(bigger) == 2
    assert (f"the budgets (--budget {BUDGET:g} there, --budget {2 * BUDGET:g} now) differ"
            in capsys.readouterr().err)
    # an audit: without --budget the refusal named --quick, which neither command used
    for opts, now in (([], "the full budgets"), (["--quick"], "--quick")):
        assert main(["reproduce", "all", *opts, "--seeds", str(SEEDS), "--tuned", "--quiet",
                     "--out", str(out), "--resume"]) == 2
        err = capsys.readouterr().err
        assert f"the budgets (--budget {BUDGET:g} there, {now} now) differ" in err, err
        assert "sizes or budgets of" not in err
    # budgets typed otherwise but the same are not a difference (the review of that fix)
    from rssm.experiments.runner import _differences, _settings

    def settings(quick, scale):
        return _settings(make_configs(quick=quick, scale=scale), range(SEEDS),
                         quick or scale is not None, False,
                         scale if scale is not None else 1 / 15 if quick else 1.0)

    assert _differences(settings(False, BUDGET), settings(False, BUDGET * 1.00001)) == []
    assert _differences(settings(True, None), settings(False, 1 / 15 + 1e-9)) == []
    # results made while the paper's steps were clipped are not mixed with unclipped ones
    doc = json.loads((out / "results.json").read_text())
    del doc["settings"]["paper_steps_clipped"]
    (out / "results.json").write_text(json.dumps(doc))
    same = ["reproduce", "all", "--budget", str(BUDGET), "--seeds", str(SEEDS), "--tuned",
            "--quiet", "--out", str(out), "--resume"]
    assert main(same) == 2
    assert "the clipping of the paper's steps" in capsys.readouterr().err


def test_the_paper_runs_are_algorithm_1_to_the_letter(outdir):
    """The paper's step sizes run unclipped (the loop's cap at the block's diameter changed
    ODL RSSM l = 5 seed 0 from error 0.31 to 3e-7); the report says so."""
    doc = json.loads((outdir / "results.json").read_text())
    assert doc["settings"]["paper_steps_clipped"] is False
    assert all(r["n_clipped"] == 0 for r in doc["runs"] if r["key"][0] == "paper")
    assert "The paper's step sizes run as Algorithm 1 writes them" in (
        outdir / "report.md").read_text()


def test_plot_of_a_folder_names_the_file_in_it(outdir, capsys):
    assert main(["plot", str(outdir)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"rssm: error: argument RESULTS.csv: {outdir} is a folder; pass the file "
                   f"in it, {outdir / 'results.csv'}")


def test_plot_redraws(outdir, tmp_path, capsys):
    out = tmp_path / "figs"
    assert main(["plot", str(outdir / "results.csv"), "--out", str(out), "--formats", "png"]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["dpcp-tuned.png", "dpcp.png", "odl-tuned.png", "odl.png", "report.md"]
    assert all(p.stat().st_size > 10_000 for p in out.glob("*.png"))
    # the same report, less the links to PDFs that this plot did not write
    full = (outdir / "report.md").read_text()
    assert (out / "report.md").read_text() == re.sub(r"\[PDF\]\([^)]+\)\n\n", "", full)
    # its own report.md it redraws; a user's file of that name it keeps (an audit: it was
    # replaced without a word)
    assert main(["plot", str(outdir / "results.csv"), "--out", str(out), "--formats", "png"]) == 0
    capsys.readouterr()
    (out / "report.md").write_text("my notes")
    assert main(["plot", str(outdir / "results.csv"), "--out", str(out), "--formats", "png"]) == 2
    err = capsys.readouterr().err
    assert "is not a report rssm wrote; pass --no-report" in err and len(err.splitlines()) == 1
    assert (out / "report.md").read_text() == "my notes"
    assert main(["plot", str(outdir / "results.csv"), "--out", str(out), "--formats", "png",
                 "--no-report"]) == 0


def _links(report: Path) -> list[str]:
    return re.findall(r"\]\(([^)]+)\)", report.read_text())


@pytest.mark.parametrize("formats", ["svg", "png", "pdf,svg"])
def test_report_links_only_files_that_exist(outdir, tmp_path, formats):
    """Issue #12, item 6: `rssm plot --formats svg` linked png and pdf files it never wrote."""
    out = tmp_path / "figs"
    assert main(["plot", str(outdir / "results.csv"), "--out", str(out),
                 "--formats", formats]) == 0
    links = _links(out / "report.md")
    assert links and all((out / name).is_file() for name in links), links
    assert {name.rsplit(".", 1)[1] for name in links} == set(formats.split(","))


def test_resume_with_fewer_seeds_reports_the_seeds_used(outdir, tmp_path):
    """Issue #12, item 5: `--resume --seeds 1` on a 2-seed folder said "Seeds 0" while its
    tables and figures used seeds 0 and 1."""
    out = tmp_path / "res"
    shutil.copytree(outdir, out)
    args = [a if a != str(SEEDS) else "1" for a in ARGS]
    assert main(args + ["--out", str(out), "--resume", "--formats", "png"]) == 0
    text = (out / "report.md").read_text()
    assert "- Seeds 0, 1 (the last command asked for seeds 0;" in text
    st = io.read_json(out / "results.json")["settings"]
    assert st["seeds"] == [0, 1] and st["requested_seeds"] == [0]


def test_speedup_level_is_reached_by_rsm_with_two_seeds():
    """Issue #12, item 14: with two seeds the level was the mean of RSM's two final errors,
    which one RSM run never reaches: "RSM does not reach" its own median final error."""
    from rssm.experiments.analysis import Run
    from rssm.experiments.report import _speedup

    def run(method, seed, errors):
        return Run([{"part": "paper", "problem": "odl", "method": method, "blocks": 1,
                     "seed": seed, "stepsize": "s", "iteration": i, "time": 0.1 * i,
                     "flops": 10.0 * i, "cost": 1.0, "error": e}
                    for i, e in enumerate(errors)])

    base = [run("rsm", 0, [1, 1e-1, 1e-3]), run("rsm", 1, [1, 1e-2, 1e-5])]
    other = [run("rssm-l5", 0, [1, 1e-4, 1e-6]), run("rssm-l5", 1, [1, 1e-4, 1e-7])]
    text = _speedup(base, other)
    assert "does not reach" not in text
    # level 1e-3 (the upper median): both RSM runs stay below it from 0.2 s on; RSSM from
    # 0.1 s on (the old level, the mean 5.05e-4, is never reached by RSM's seed 0)
    assert text == "2.00x (to 0.001)"


def test_tuned_runs_use_the_chosen_stepsize(outdir):
    doc = io.read_json(outdir / "results.json")
    cfg = make_configs(scale=BUDGET)["dpcp"]
    plan = plan_tuned(cfg, range(SEEDS), doc["tuned_choice"]["dpcp"])
    rows = _rows(outdir)
    have = {(r["method"], r["seed"], r["stepsize"]) for r in rows
            if r["part"] == "tuned" and r["problem"] == "dpcp"}
    assert have == {(s.method.key, s.seed, s.key[4]) for s in plan}
    # the chosen candidate has the least time to 1e-8, else the lowest final error
    for key, chosen in doc["tuned_choice"]["dpcp"].items():
        scores = {}
        for cand in cfg.tuned_grid:
            lab = stepsize_label(cand)
            mine = sorted((r for r in rows if r["part"] == "tuning" and r["problem"] == "dpcp"
                           and r["method"] == key and r["stepsize"] == lab),
                          key=lambda r: r["iteration"])
            hit = [r["time"] for r in mine if r["error"] <= 1e-8]
            scores[lab] = (hit[0] if hit else math.inf, mine[-1]["error"])
        assert scores[stepsize_label(chosen)] == min(scores.values())


def test_interrupted_run_is_not_saved_and_resume_finishes(tmp_path, monkeypatch, capsys):
    """Ctrl-C inside a run (minimize returns stop reason 'interrupted') ends the reproduction
    with status 130; the cut-short run is not in the CSV, and --resume runs it."""
    real = rssm.minimize
    calls = {"n": 0}

    def interrupt_third(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            def callback(progress):
                if progress.iteration >= 2:
                    raise KeyboardInterrupt
            kwargs["callback"] = callback
        return real(*args, **kwargs)

    monkeypatch.setattr(rssm, "minimize", interrupt_third)
    out = tmp_path / "res"
    argv = ["reproduce", "dpcp", "--budget", "0.01", "--seeds", "1", "--quiet",
            "--formats", "png", "--out", str(out)]
    assert main(argv) == 130
    assert "--resume" in capsys.readouterr().err
    rows = io.read_rows(out / "results.csv")
    assert len({r["method"] for r in rows}) == 2  # the two runs before the interrupted one
    monkeypatch.setattr(rssm, "minimize", real)
    assert main(argv + ["--resume"]) == 0
    rows = io.read_rows(out / "results.csv")
    assert sorted({r["method"] for r in rows}) == ["rsm", "rssm-l10", "rssm-l3", "rssm-l5"]
    assert len(io.read_json(out / "results.json")["runs"]) == 4


def test_resume_without_json_keeps_the_csv(outdir, tmp_path, capsys):
    out = tmp_path / "res"
    shutil.copytree(outdir, out)
    (out / "results.json").unlink()
    before = (out / "results.csv").read_text()
    assert main(ARGS + ["--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rssm: error: argument --resume:") and "results.json" in err
    assert (out / "results.csv").read_text() == before


def test_resume_rebuilds_a_run_log_entry_lost_between_csv_and_json(outdir, tmp_path):
    """A kill after the CSV append and before the JSON write leaves a run in the CSV without
    its summary; --resume rebuilds the summary from the CSV rows (without rerunning)."""
    out = tmp_path / "res"
    shutil.copytree(outdir, out)
    doc = io.read_json(out / "results.json")
    lost = doc["runs"].pop(3)
    io.write_json(out / "results.json", doc)
    before = (out / "results.csv").read_text()
    assert main(ARGS + ["--out", str(out), "--resume", "--formats", "png"]) == 0
    assert (out / "results.csv").read_text() == before
    runs = {tuple(r["key"]): r for r in io.read_json(out / "results.json")["runs"]}
    assert len(runs) == len(doc["runs"]) + 1
    again = runs[tuple(lost["key"])]
    assert again["rebuilt_from_csv"] is True
    for field in ("n_iter", "time", "flops", "final_error", "final_cost", "stop_reason"):
        assert again[field] == lost[field], field


def test_out_under_a_file_is_one_line_exit_2(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    argv = ["reproduce", "dpcp", "--budget", "0.01", "--seeds", "1", "--quiet",
            "--out", str(blocker / "dir")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rssm: error: argument --out: cannot create")


def test_each_seed_line_starts_at_the_starting_error():
    """On a log axis the start (flops 0) was dropped, so each method seemed to start at
    the error of its first iterate; it is now drawn as a step down at the first
    iteration's cost. Time axes whose first row is already > 0 are unchanged."""

    from rssm.experiments.plots import seed_line

    xs, err = np.array([0.0, 4e8, 8e8]), np.array([0.12, 5e-3, 2e-3])
    xp, ep = seed_line(xs, err)
    np.testing.assert_array_equal(xp, [4e8, 4e8, 8e8])
    np.testing.assert_array_equal(ep, [0.12, 5e-3, 2e-3])
    xt = np.array([1e-3, 2e-3, 3e-3])
    xp, ep = seed_line(xt, err)
    np.testing.assert_array_equal(xp, xt)
    np.testing.assert_array_equal(ep, err)
    assert seed_line(np.zeros(1), err[:1])[0].size == 0


def test_the_report_of_an_interrupted_run_names_the_seeds_not_yet_in():
    """An interrupted run (seeds 0-4 asked, 0-2 finished) was reported in the words of a
    --resume with fewer seeds ("the other seeds' runs were already in the results")."""
    from rssm.experiments.report import _asked_note

    note = _asked_note([0, 1, 2, 3, 4], [0, 1, 2])
    assert "seeds 3, 4 have no finished runs yet" in note and "--resume" in note
    assert "already in the results" not in note
    assert "already in the results" in _asked_note([0, 1], [0, 1, 2])
    assert _asked_note([0, 1], [0, 1]) == ""


def test_resume_without_tuned_keeps_the_tuned_part(outdir, tmp_path):
    """An audit: `--resume` without `--tuned` on a folder made with it dropped Part 2 from
    report.md (and settings.tuned went False, so `rssm plot` dropped it too) while the
    tuned rows stayed in the CSV and their figures were redrawn."""
    out = tmp_path / "res"
    shutil.copytree(outdir, out)
    assert "## Part 2" in (out / "report.md").read_text()
    args = [a for a in ARGS if a != "--tuned"]
    assert main(args + ["--out", str(out), "--resume", "--formats", "png"]) == 0
    assert "## Part 2" in (out / "report.md").read_text()
    assert io.read_json(out / "results.json")["settings"]["tuned"] is True


def test_overwrite_removes_the_earlier_figures_and_killed_draws_leave_nothing(outdir, tmp_path):
    """An audit: `--overwrite` deleted results.csv and .json but left the earlier run's
    figures (odl.png beside results of dpcp alone); a draw killed before its rename left
    hidden temporary files (.odl.kjpl87qb.pdf) that no later run removed."""
    out = tmp_path / "res"
    shutil.copytree(outdir, out)
    (out / ".odl.rssm-tmp-kjpl87qb.pdf").write_bytes(b"partial")
    (out / ".odl.20261126.pdf").write_bytes(b"a user's own")   # not rssm's: kept
    assert (out / "odl.png").exists() and (out / "odl-tuned.png").exists()
    argv = ["reproduce", "dpcp", "--budget", str(BUDGET), "--seeds", "1", "--quiet",
            "--formats", "png,pdf", "--out", str(out), "--overwrite"]
    assert main(argv) == 0
    left = sorted(p.name for p in out.iterdir())
    assert left == [".odl.20261126.pdf", "dpcp.pdf", "dpcp.png", "report.md", "results.csv",
                    "results.json"], left
    # a folder that never held a run keeps every file (an audit: --overwrite deleted a
    # user's odl.svg and dpcp.pdf there)
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in ("odl.svg", "dpcp.pdf", "notes.txt"):
        (mine / name).write_text("mine")
    argv[argv.index(str(out))] = str(mine)
    assert main(argv) == 0
    assert {"odl.svg", "notes.txt"} <= {p.name for p in mine.iterdir()}


def test_budget_one_is_the_full_run(monkeypatch, tmp_path):
    """`--budget 1` ("default: 1, the full budgets") took the reduced path: 40 recorded
    points instead of 150, a "Reduced run" banner, and a resume without --budget refused."""
    seen = {}

    def fake(configs, out, seeds, **kw):
        seen["configs"], seen["kw"] = configs, kw
        return {}

    monkeypatch.setattr("rssm.experiments.reproduce", fake)
    monkeypatch.setattr("rssm.experiments.render", lambda *a, **k: [])
    assert main(["reproduce", "dpcp", "--budget", "1", "--seeds", "1", "--quiet",
                 "--out", str(tmp_path / "r")]) == 0
    full = make_configs()["dpcp"]
    assert seen["configs"]["dpcp"] == full and full.record_every_points == 150
    assert seen["kw"]["quick"] is False and seen["kw"]["budget_scale"] == 1.0


def test_a_folder_without_a_run_keeps_a_users_report_and_figures(tmp_path, capsys):
    """An audit: `rssm reproduce --out DIR` replaced a user's report.md (and a figure of
    the same name as one it draws) in a folder that held no run, without a word."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "report.md").write_text("my notes")
    argv = ["reproduce", "dpcp", "--budget", str(BUDGET), "--seeds", "1", "--quiet",
            "--formats", "png", "--out", str(mine)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "report.md" in err and "--overwrite" in err and len(err.strip().splitlines()) == 1
    assert (mine / "report.md").read_text() == "my notes"
    assert sorted(p.name for p in mine.iterdir()) == ["report.md"]
    (mine / "report.md").unlink()
    (mine / "dpcp.png").write_text("mine")
    assert main(argv) == 2
    assert "dpcp.png" in capsys.readouterr().err
    assert (mine / "dpcp.png").read_text() == "mine"
    # --overwrite replaces them, as it says
    assert main(argv + ["--overwrite"]) == 0
    assert (mine / "dpcp.png").read_bytes()[:4] == b"\x89PNG"


def test_a_results_json_that_is_no_run_does_not_turn_the_check_off(tmp_path, capsys):
    """An audit: a folder holding a user's own results.json ({"mine": 1}) beside their
    report.md counted as a run, and both were replaced without a word."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "results.json").write_text('{"mine": 1}')
    (mine / "report.md").write_text("my notes")
    argv = ["reproduce", "dpcp", "--budget", str(BUDGET), "--seeds", "1", "--quiet",
            "--formats", "png", "--out", str(mine)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "report.md, results.json" in err and "--overwrite" in err
    assert (mine / "results.json").read_text() == '{"mine": 1}'
    assert main(argv + ["--resume"]) == 2
    assert (mine / "report.md").read_text() == "my notes"


def test_fewer_formats_name_the_figures_left_from_an_earlier_draw(outdir, tmp_path, capsys,
                                                                  monkeypatch):
    """An audit: `--resume --formats png` (or `rssm plot --formats png`) after a png,pdf
    draw left the PDFs, drawn from fewer runs, without a word. They are kept (a file of
    that name may be a user's) and named in one line on stderr."""
    out = tmp_path / "res"
    shutil.copytree(outdir, out)
    (out / "dpcp.pdf").write_bytes(b"%PDF earlier")           # the earlier draw's PDFs
    assert main(["plot", str(out / "results.csv"), "--formats", "png", "--no-report"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["rssm: note: dpcp-tuned.pdf, dpcp.pdf, odl-tuned.pdf, odl.pdf drawn "
                   "earlier, not redrawn (--formats png): they may show fewer runs; delete "
                   "them or add their format"], err
    assert (out / "dpcp.pdf").read_bytes() == b"%PDF earlier"
    assert main(["plot", str(out / "results.csv"), "--formats", "png,pdf", "--no-report"]) == 0
    assert capsys.readouterr().err == ""
    # a review: with stderr closed the note made the command fail (exit 1) after drawing
    import io as _io

    from rssm.cli._common import note_not_redrawn

    closed = _io.StringIO()
    closed.close()
    monkeypatch.setattr(sys, "stderr", closed)
    note_not_redrawn([out / "dpcp.png"], ["png"])      # dpcp.pdf is left: no exception


def _trace_run(method, seed, xs, errors, axis="flops"):
    from rssm.experiments.analysis import Run

    rows = []
    for i, (x, e) in enumerate(zip(xs, errors, strict=True)):
        t, f = (x, 10.0 * i) if axis == "time" else (0.01 * (i + 1), x)
        rows.append({"part": "paper", "problem": "odl", "method": method, "blocks": 1,
                     "seed": seed, "stepsize": "s", "iteration": i, "time": t, "flops": f,
                     "cost": 1.0, "error": e})
    return Run(rows)


def test_the_median_starts_at_the_starting_errors_on_both_axes():
    """A figure audit: on the flops axis (start at 0 flops, off the log axis) the median
    began at the first iterates' errors (DPCP RSM at 1.5e-3) while the time panel's began
    at the starting error (0.12), and the seeds' lines were drawn straight between records
    while the median held each record's error: on the time axis the median lay above
    every seed it summarised. Now both panels start from the starting errors, a run not
    yet at its first record counts with its start, and the seeds' lines are steps."""
    from rssm.experiments.analysis import median_band, step_values

    runs = [_trace_run("rsm", s, [0.0, 4e8, 8e8], [0.12, 5e-3 * (s + 1), 2e-3])
            for s in range(3)]
    grid, med, lo, hi = median_band(runs, "flops")
    assert grid[0] == 4e8 and med[0] == 0.12 and lo[0] == hi[0] == 0.12
    assert med[1] == 1e-2                       # then the iterates' errors, same x
    # time axis: the records start at t > 0; a seed that has not recorded yet holds its start
    late = _trace_run("rsm", 9, [0.5, 0.9, 2.0], [0.12, 1e-3, 1e-4], axis="time")
    early = _trace_run("rsm", 8, [0.1, 0.2, 2.0], [0.12, 1e-2, 1e-4], axis="time")
    grid, med, lo, hi = median_band([late, early], "time")
    assert grid[0] == 0.1 and hi[0] == 0.12
    np.testing.assert_array_equal(step_values(late.time, late.error, np.array([0.05, 0.6])),
                                  [0.12, 0.12])
    assert np.isnan(step_values(np.empty(0), np.empty(0), np.array([1.0]))).all()


def test_seed_lines_are_drawn_held_between_records(tmp_path, monkeypatch):
    """The thin lines use the median's reading: each record's error held until the next."""
    import matplotlib.axes

    from rssm.experiments.plots import plot_comparison

    styles = []
    real = matplotlib.axes.Axes.plot

    def spy(self, *args, **kw):
        styles.append((kw.get("linewidth"), kw.get("drawstyle")))
        return real(self, *args, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", spy)
    runs = [_trace_run("rsm", s, [0.0, 4e8, 8e8], [0.12, 5e-3, 2e-3]) for s in range(2)]
    plot_comparison(runs, "t", "err", tmp_path / "f", formats=("png",))
    thin = [d for w, d in styles if w == 0.6]
    assert len(thin) == 4 and set(thin) == {"steps-post"}


def test_report_words_for_seed_lists_and_levels():
    """A reader's audit of report.md: "faster than RSM on seeds none", "1/5 (seeds 2)",
    "does not reach 0.00058" beside a median final error of 0.000579 (the level, 0.000576,
    rounded to 2 digits), and "it starts at 39.8 and reaches up to 39.8"."""
    from rssm.experiments.report import _bad_runs, _on_seeds, _speedup

    assert _on_seeds([]) == "on no seed"
    assert _on_seeds([2]) == "on seed 2"
    assert _on_seeds([0, 3]) == "on seeds 0, 3"
    base = [_trace_run("rsm", s, [0.0, 1e8, 2e8], [0.12, 1e-3, e])
            for s, e in enumerate([5.76e-4, 3.9e-4, 1.1e-3])]
    other = [_trace_run("rssm-l3", s, [0.0, 1e8, 2e8], [0.12, 1e-3, e])
             for s, e in enumerate([5.79e-4, 1e-3, 1.2e-3])]
    assert _speedup(base, other) == "does not reach 0.000576"
    flat = [_trace_run("rssm-l5", 0, [0.0, 1e8, 2e8], [39.8, 39.8, 0.314])]
    (line,) = _bad_runs(flat)
    assert "on seed 0 the error ends at up to 0.314 (it starts at 39.8)." in line
    rise = [_trace_run("rssm-l5", 0, [0.0, 1e8, 2e8, 3e8], [39.8, 45.0, 41.0, 0.314])]
    assert "rises above its start within the first" in _bad_runs(rise)[0]
    assert "on seed 0, to up to 45" in _bad_runs(rise)[0]
    # seeds that start apart are no rise (an audit: the largest start of five seeds,
    # 40.4, against their median start, 39.8, read as "reaches up to 40.4")
    apart = [_trace_run("rssm-l5", s, [0.0, 1e8, 2e8, 3e8], [e0, e0 * 0.9, e0 * 0.8, 22.0])
             for s, e0 in enumerate([39.8, 40.4, 39.5])]
    (line,) = _bad_runs(apart)
    assert line.endswith("(it starts at 39.8).")


def test_the_claim_check_says_where_rsm_led_and_where_its_error_dipped():
    # (an audit: "holds on all 5 seeds" on DPCP, where RSM's error was the lower for the
    # first 0.25-0.42 s of each run and dipped to 6.6e-5 before ending at 1.73e-4)
    from rssm.experiments.report import _summary, claim_check

    rsm = [_trace_run("rsm", s, [0.0, 0.1, 2.0, 3.0], [0.12, 1e-3, 1e-5, 1e-4], "time")
           for s in range(2)]
    wins = [_trace_run("rssm-l3", s, [0.0, 0.5, 1.0, 1.5], [0.12, 1e-2, 1e-6, 1e-7], "time")
            for s in range(2)]
    lines, verdicts = claim_check(rsm + wins)
    text = "\n".join(lines)
    assert "RSM's error is not monotone on seeds 0, 1: its least recorded error (1e-05)" in text
    assert "**holds on all 2 seeds**" in text
    assert "Where it holds, RSM's error is still the lower at equal CPU time until" in text
    # a variant that loses throughout gets no such note
    loses = [_trace_run("rssm-l5", s, [0.0, 0.5, 1.0, 1.5], [0.12, 1e-1, 1e-1, 1e-1], "time")
             for s in range(2)]
    lines, _ = claim_check(rsm + loses)
    assert not any("Where it holds" in line for line in lines)
    # the quick run's summary says what its verdicts are
    assert "verdicts on reduced runs (`--quick` or `--budget`)" in "\n".join(
        _summary([("DPCP", verdicts)], quick=True))
    assert "--quick" not in "\n".join(_summary([("DPCP", verdicts)]))


def test_figure_titles_carry_the_derived_sizes_and_a_reduced_run():
    """A figure passed on alone said neither that it came from a reduced run nor p = 90
    (DPCP) and m = 4648 (ODL)."""
    from rssm.experiments.configs import PROBLEMS, sizes_text

    assert sizes_text("dpcp", PROBLEMS["dpcp"].synthetic).endswith("X in St(100, 90)")
    assert "m=4648; X in St(60, 60)" in sizes_text("odl", PROBLEMS["odl"].synthetic)
    assert sizes_text("odl", {"n": 10, "theta": 0.3, "m": 50}) == (
        "n=10, theta=0.3, m=50; X in St(10, 10)")
    assert sizes_text("other", {"k": 1}) == "k=1"


def test_a_short_log_axis_labels_2_and_5_times_the_decades(tmp_path, monkeypatch):
    """A review: on a time axis under two decades matplotlib labelled 2, 4 and 6 times
    each decade, and the labels ran into each other. Under three decades the minor labels
    are at 2x and 5x only; from three decades on, the decades alone."""
    import matplotlib.pyplot as plt

    from rssm.experiments.plots import plot_comparison

    kept = []
    real_close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig: kept.append(fig))
    runs = [_trace_run("rsm", s, [0.0015, 0.004, 0.02, 0.05], [0.12, 1e-2, 1e-5, 1e-8],
                       axis="time") for s in range(2)]
    plot_comparison(runs, "t", "err", tmp_path / "f", formats=("png",))
    (fig,) = kept
    _, time_ax = fig.axes[:2]
    minor = time_ax.xaxis.get_minor_locator()()
    lo, hi = time_ax.get_xlim()
    shown = sorted({round(v / 10 ** np.floor(np.log10(v)), 6) for v in minor if lo <= v <= hi})
    assert shown == [2.0, 5.0]
    assert time_ax.yaxis.get_minor_formatter().__class__.__name__ == "NullFormatter"
    _assert_labels_apart(fig)
    real_close(fig)
    # under one decade, matplotlib's own labels (its linear ticks, all labelled 2x / 5x,
    # ran together in the first version of this fix: a review)
    kept.clear()
    runs = [_trace_run("rsm", s, [0.021, 0.03, 0.04, 0.049], [0.12, 1e-2, 1e-5, 1e-8],
                       axis="time") for s in range(2)]
    plot_comparison(runs, "t", "err", tmp_path / "g", formats=("png",))
    (fig,) = kept
    _assert_labels_apart(fig)
    real_close(fig)


def _assert_labels_apart(fig):
    """No two visible tick labels of an x axis overlap on the drawn figure."""
    fig.canvas.draw()
    for ax in fig.axes[:2]:
        boxes = sorted((t.get_window_extent() for t in ax.xaxis.get_ticklabels(which="both")
                        if t.get_visible() and t.get_text()), key=lambda b: b.x0)
        assert len(boxes) >= 2
        for left, right in zip(boxes, boxes[1:], strict=False):
            assert left.x1 <= right.x0 + 0.5, (left, right)


def _runs(counts: dict[str, int]):
    from rssm.experiments.analysis import Run

    runs = []
    for method, n in counts.items():
        for seed in range(n):
            rows = [dict(part="paper", problem="dpcp", method=method, blocks=1, seed=seed,
                         stepsize="s", iteration=k, time=0.01 * (k + 1),
                         flops=1e6 * (k + 1), cost=1.0 / (k + 1), error=0.5 ** k)
                    for k in range(6)]
            runs.append(Run(rows))
    return runs


@pytest.mark.parametrize(("counts", "words"), [
    ({"rsm": 3, "rssm-l3": 3}, "median of 3 seeds"),
    ({"rsm": 2, "rssm-l3": 3}, "median of 2 to 3 seeds (each method over the seeds it "
                               "finished)"),
    ({"rsm": 1, "rssm-l3": 1}, "one seed: its error"),
])
def test_the_legend_says_over_how_many_seeds_each_curve_is(tmp_path, monkeypatch, counts,
                                                           words):
    # a run stopped part way drew "median of 3 seeds" for a method that had 2, and one
    # seed read "median of 1 seeds ... shaded band" with no band (a user's audit)
    import matplotlib.figure

    from rssm.experiments.plots import plot_comparison

    titles = []
    real = matplotlib.figure.Figure.legend

    def spy(self, *args, **kwargs):
        titles.append(kwargs.get("title"))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "legend", spy)
    plot_comparison(_runs(counts), "t", "e", tmp_path / "fig", formats=("png",))
    assert len(titles) == 1 and words in titles[0]


@pytest.fixture(scope="module")
def one_seed_run(tmp_path_factory):
    """``rssm reproduce dpcp --quick --seeds 1`` once for the tests that read it."""
    src = tmp_path_factory.mktemp("one_seed") / "r"
    assert main(["reproduce", "dpcp", "--quick", "--seeds", "1", "--quiet", "--out",
                 str(src)]) == 0
    return src


@pytest.mark.parametrize(("column", "value", "words"), [
    ("error", "inf", "column error is 'inf'; it must be a finite number >= 0"),
    ("time", "-1.0", "column time is '-1.0'; it must be a finite number >= 0"),
    ("flops", "nan", "column flops is 'nan'; it must be a finite number >= 0"),
])
def test_plot_refuses_values_no_run_writes(tmp_path, capsys, one_seed_run, column, value,
                                           words):
    import csv

    src = one_seed_run
    report = (src / "report.md").read_text()
    assert "all 1 seeds" not in report and "of the 1 seeds" not in report   # "its one seed"
    rows = list(csv.DictReader((src / "results.csv").open()))
    rows[3][column] = value
    bad = tmp_path / "bad.csv"
    with bad.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert main(["plot", str(bad), "--no-report", "--formats", "png"]) == 2
    assert words in capsys.readouterr().err


# -- behaviour a mutation audit found unpinned (each assertion failed on a mutant) ------------
def test_a_reproduction_run_draws_its_pairs_from_its_own_seed():
    # RunSpec: "data seed (and block-selection seed)": the run of seed s is minimize(seed=s)
    from rssm.experiments.configs import make_configs
    from rssm.experiments.runner import _clips, make_stepsize, plan_paper, run_one

    cfg = make_configs(scale=0.01)["dpcp"]
    for seed in (1, 2):
        spec = next(s for s in plan_paper(cfg, [seed]) if s.method.key == "rssm-l3")
        prob, x0 = cfg.build(spec.seed)
        rows, _ = run_one(spec, prob, x0)
        res = rssm.minimize(prob, x0, method="rssm", stepsize=make_stepsize(spec.stepsize),
                            max_iter=spec.max_iter, seed=spec.seed, record=spec.record_every,
                            tol=0, options={"n_blocks": 3, "clip_steps": _clips(spec.part)})
        assert float(rows[-1][9]) == float(res.trace["cost"][-1])


def test_the_thick_curve_of_a_figure_is_the_median_over_seeds(tmp_path, monkeypatch):
    import matplotlib
    import matplotlib.axes

    from rssm.experiments import plots
    from rssm.experiments.analysis import Run, median_band

    def rows(seed, errs):
        return [dict(part="paper", problem="dpcp", method="rsm", blocks=1, seed=seed,
                     stepsize="paper", iteration=i, time=0.1 * (i + 1), flops=1e6 * (i + 1),
                     cost=1.0, error=e) for i, e in enumerate(errs)]

    runs = [Run(rows(0, [1, .1, .01])), Run(rows(1, [1, .2, .02])), Run(rows(2, [1, .5, .4]))]
    thick = []
    plot = matplotlib.axes.Axes.plot

    def spy(self, *a, **k):
        if k.get("linewidth", 0) >= 1.5:
            thick.append(np.asarray(a[1], dtype=float))
        return plot(self, *a, **k)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", spy)
    plots.plot_comparison(runs, "t", "err", str(tmp_path / "f"), formats=("png",))
    assert thick and thick[0][-1] == 0.02 == median_band(runs, "flops")[1][-1]


def test_the_claim_needs_both_faster_and_as_accurate_on_a_seed():
    # RSSM below RSM's final error sooner (faster) but above RSM's error at equal time
    # (less accurate): the claim does not hold on that seed (a mutant read "or")
    from rssm.experiments.analysis import Run
    from rssm.experiments.report import claim_check

    def run(method, times, errs):
        return Run([dict(part="paper", problem="dpcp", method=method, blocks=1, seed=0,
                         stepsize="x", iteration=i, time=t, flops=0.0, cost=0.0, error=e)
                    for i, (t, e) in enumerate(zip(times, errs, strict=True))])

    lines, verdicts = claim_check([run("rsm", [0, 1, 2, 3], [1, .001, .005, .01]),
                                   run("rssm-l5", [0, .5, 1], [1, .009, .009])])
    assert verdicts == {"rssm-l5": ([], [0])}     # (seeds where it holds, seeds faster)
    assert any("does not hold on its one seed" in line for line in lines)


def test_report_words_for_unreached_targets_budgets_and_near_ties():
    """A user's audit of the report: "auto did not reach it" where the tuned runs had not
    either; a --budget 0.02 run's summary read "of `--quick` ... cut 15-fold"; and a tuned
    choice resting on times 0.2 % apart was not flagged (the committed ODL grid)."""
    from rssm.experiments.analysis import Run
    from rssm.experiments.report import _auto_ratio, _near_ties, _summary

    def run(part, stepsize, times, errs):
        return Run([dict(part=part, problem="odl", method="rsm", blocks=1, seed=0,
                         stepsize=stepsize, iteration=10 * i, time=t, flops=0.0, cost=0.0,
                         error=e) for i, (t, e) in enumerate(zip(times, errs, strict=True))])

    never = [1.0, 1e-3, 1e-5]
    assert _auto_ratio([run("auto", "auto", [0, 1, 2], never)],
                       [run("tuned", "g", [0, 1, 2], never)]) == "RSM neither reached it."
    assert _auto_ratio([run("auto", "auto", [0, 1, 2], never)],
                       [run("tuned", "g", [0, 1, 2], [1.0, 1e-3, 1e-9])]) == \
        "RSM auto did not reach it."
    text = "\n".join(_summary([("ODL", {})], quick=True, scale=0.02))
    assert "cut 50-fold (at least 4 iterations)" in text and "15-fold" not in text
    grid = [run("tuning", "a", [0, 0.3058, 0.4], [1.0, 1e-9, 1e-10]),
            run("tuning", "b", [0, 0.3064, 0.4], [1.0, 1e-9, 1e-10]),
            run("tuning", "c", [0, 0.5, 0.6], [1.0, 1e-9, 1e-10])]
    ties = _near_ties(grid, ["rsm"], ["a", "b", "c"])
    assert ties == ["RSM: a at 0.3058 s (10 iterations) against b at 0.3064 s (10)"]
    grid[1] = run("tuning", "b", [0, 0.32, 0.4], [1.0, 1e-9, 1e-10])     # 4.6 % apart
    assert _near_ties(grid, ["rsm"], ["a", "b", "c"]) == []
    committed = (Path(__file__).parents[1] / "docs" / "reproduction" / "report.md")
    if committed.exists():
        assert "RSSM (l=5): geometric(mu0=0.01, beta=0.9) at 0.3058 s (328 iterations)" \
            in committed.read_text()


def _spy_lines(monkeypatch):
    import matplotlib.axes

    drawn = []
    plot = matplotlib.axes.Axes.plot

    def spy(self, *a, **k):
        drawn.append((np.asarray(a[0], dtype=float), np.asarray(a[1], dtype=float),
                      k.get("linewidth", 0)))
        return plot(self, *a, **k)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", spy)
    return drawn


def test_an_exact_zero_error_is_drawn_on_a_labelled_floor(tmp_path, monkeypatch):
    """An audit: errors of exactly 0 (an exact recovery; read_rows takes them) were
    dropped by the log axis; with every error 0 both panels were empty, exit 0."""
    from rssm.experiments import plots

    drawn = _spy_lines(monkeypatch)
    zeros = [_trace_run("rsm", s, [0.0, 1e6, 2e6], [0.0, 0.0, 0.0]) for s in range(2)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no "cannot be log-scaled" warning
        plots.plot_comparison(zeros, "t", "err", str(tmp_path / "z"), formats=("png",))
    assert plots.zero_floor(zeros) == 1e-16
    assert drawn and all((y == 1e-16).all() for _, y, _ in drawn)
    drawn.clear()
    mixed = [_trace_run("rsm", 0, [0.0, 1e6, 2e6], [0.1, 1e-9, 0.0]),
             _trace_run("rsm", 1, [0.0, 1e6, 2e6], [0.1, 1e-5, 1e-12])]
    assert plots.zero_floor(mixed) == pytest.approx(1e-13, rel=1e-12)
    plots.plot_comparison(mixed, "t", "err", str(tmp_path / "m"), formats=("png",))
    ys = np.concatenate([y for _, y, _ in drawn])
    assert ys.min() == pytest.approx(1e-13, rel=1e-12) and (ys > 0).all()
    assert plots.zero_floor([_trace_run("rsm", 0, [0.0, 1.0], [0.1, 1e-3])]) is None


def test_unknown_errors_break_the_median_and_an_all_unknown_figure_says_so(tmp_path,
                                                                        monkeypatch):
    """An audit: a nan error (unknown) dropped the grid points of the median, which then
    ran straight across the gap; every error nan gave two empty panels and no word."""
    from rssm.experiments import plots
    from rssm.experiments.analysis import median_band

    nan = float("nan")
    runs = [_trace_run("rsm", 0, [0.0, 1e6, 2e6, 4e6, 8e6], [1.0, 0.1, nan, 1e-3, 1e-4]),
            _trace_run("rsm", 1, [0.0, 1e6, 2e6, 4e6, 8e6], [1.0, 0.2, 0.02, 2e-3, 2e-4])]
    grid, med, lo, hi = median_band(runs, "flops")
    inside = (grid >= 2e6) & (grid < 4e6)
    assert inside.any() and np.isnan(med[inside]).all() and np.isnan(lo[inside]).all()
    assert np.isfinite(med[grid >= 4e6]).all() and np.isfinite(med[grid < 2e6]).all()
    unknown = [_trace_run("rsm", s, [0.0, 1e6], [nan, nan]) for s in range(2)]
    assert median_band(unknown, "flops")[0].size == 0
    with pytest.warns(UserWarning, match="nan .unknown. in every row") as rec:
        plots.plot_comparison(unknown, "t", "err", str(tmp_path / "u"), formats=("png",))
    assert rec[0].filename == __file__          # (the review: it named rssm's own line)
