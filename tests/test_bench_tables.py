"""``python -m benchmarks.stepsizes``: which grid point counts as best on each instance, the
converted times and ratios docs/stepsizes.md quotes, the CSV round trip, and the quick
mode end to end."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest


@pytest.fixture
def bench(benchmark_module):
    return benchmark_module("stepsizes")


def _row(seed, kind, rule, it10, rej10=0.0, t_iter=1e-3, t_trial=5e-4, method="rsm"):
    row = dict(problem="toy", seed=seed, method=method, kind=kind, rule=rule, t_iter=t_iter,
               t_trial=t_trial, final_error=1e-11 if it10 else 0.5, n_iter=100,
               solver_time=0.1)
    for lv, frac in (("1e-08", 0.8), ("1e-10", 1.0)):
        it = None if it10 is None else int(it10 * frac)
        rej = None if it10 is None else rej10
        row.update({f"it_{lv}": it, f"rej_{lv}": rej, f"solver_{lv}": None,
                    f"conv_{lv}": None if it is None else it * t_iter + rej * t_trial})
    return row


def test_tables_score_every_instance_against_its_best_grid_point(bench, tmp_path, capsys):
    rows = [
        # seed 1: auto 50 its + 20 rejected trials = 60 its converted; best grid 40 its
        _row(1, "auto", "auto", 50, rej10=20.0),
        _row(1, "grid", "geometric(t=1,beta=0.5)", 80),
        _row(1, "grid", "geometric(t=1,beta=0.8)", 40),
        _row(1, "candidate", "race", 30, rej10=60.0),
        _row(1, "pymanopt", "SteepestDescent", 10, rej10=30.0, t_iter=2e-3, t_trial=1e-3),
        # seed 2: no grid point within 2 x auto (cut off there): auto more than 2x faster
        _row(2, "auto", "auto", 30),
        _row(2, "grid", "geometric(t=1,beta=0.5)", None),
        _row(2, "candidate", "race", 45),
        _row(2, "pymanopt", "SteepestDescent", None),
    ]
    lines = bench.tables(rows)
    main = [ln for ln in lines if ln.startswith("| toy | rsm | ") and "race" not in ln]
    # auto: medians (upper) of 1e-8 its (40, 24) -> 40, 1e-10 (50, 30) -> 50, rejected (20, 0)
    # ratio seed 1: (50e-3 + 20 * 5e-4) / 40e-3 = 1.5; seed 2: no grid point -> "<0.50"
    # Pymanopt seed 1: 10 * 2e-3 + 30 * 1e-3 = 0.05 s; auto / Pymanopt = 0.06 / 0.05
    assert main == ["| toy | rsm | 40 / 50 (20) | 32 / 40 | 2 / 1 of 2 | 1.50 <0.50 | 0.06 "
                    "| 10 / 0.05 (1 of 2) | 1.20 |"], lines
    cand = [ln for ln in lines if "| race |" in ln]
    # race seed 1: (30e-3 + 60 * 5e-4) / 40e-3 = 1.5; seed 2: 45e-3 / (2 x 30e-3) -> "<0.75"
    assert cand == ["| toy | rsm | race | 2 of 2 | 45 (60) | 1.50 <0.75 |"], lines
    # the CSV round trip gives the same tables
    path = tmp_path / "stepsizes.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert bench.main(["--from-csv", str(path)]) == 0
    summary = bench.summary(rows)
    assert capsys.readouterr().out.splitlines() == lines + [""] + summary
    # per rule: seeds reaching 1e-10 and the median ratio, a "<v" bound counted as v
    assert summary[2:] == ["| auto | 2/2 1.50 |", "| race | 2/2 1.50 |"], summary


def test_the_best_grid_point_is_the_fewest_iterations_to_1e10(bench):
    rows = [_row(1, "grid", "a", 60), _row(1, "grid", "b", 40), _row(1, "grid", "c", None)]
    assert bench._best_grid(rows)["rule"] == "b"
    assert bench._best_grid([_row(1, "grid", "c", None)]) is None
    assert bench.ratio(_row(1, "auto", "auto", None), rows[1], rows[1]) is None


def test_quick_mode_runs_end_to_end(bench, tmp_path):
    """``--quick`` on the smallest problem, RSM only: auto, the candidates and a 3 x 3
    grid; the counts of trials are those of the rules (auto: its first search only)."""
    assert bench.main(["--quick", "--problems", "l1_procrustes", "--methods", "rsm",
                       "--no-pymanopt", "--out", str(tmp_path)]) == 0
    with open(tmp_path / "stepsizes.csv", newline="") as fh:
        rows = [bench._typed(r) for r in csv.DictReader(fh)]
    kinds = {r["kind"] for r in rows}
    assert kinds == {"auto", "candidate", "grid"}
    assert len([r for r in rows if r["kind"] == "grid"]) == 9
    auto = next(r for r in rows if r["kind"] == "auto")
    assert auto["it_1e-10"] is not None and auto["rej_1e-10"] <= 8
    race = next(r for r in rows if r["rule"] == "race")
    assert race["rej_1e-10"] >= race["it_1e-10"] - 1     # one rejected trial per step
    assert all(r["t_iter"] > 0 and math.isfinite(r["t_trial"]) for r in rows)
    assert (tmp_path / "stepsizes.log").read_text().count("| l1_procrustes | rsm |") >= 8


def test_best_grid_points_reads_each_instance_best_schedule(bench, tmp_path):
    """`best_grid_points` (used by benchmarks.failed_steps and benchmarks.rssm_rule): per
    instance, the (t, beta) and iterations of the fewest-iterations grid point."""
    rows = [_row(1, "grid", "geometric(t=1,beta=0.5)", 80),
            _row(1, "grid", "geometric(t=30,beta=0.8)", 40),
            _row(1, "auto", "auto", 20),
            _row(2, "grid", "geometric(t=0.1,beta=0.95)", None)]
    path = tmp_path / "stepsizes.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert bench.best_grid_points(str(path)) == {("toy", "rsm", 1): (30.0, 0.8, 40)}


def test_failed_steps_counts_steps_that_did_not_decrease_f(benchmark_module):
    mod = benchmark_module("failed_steps")
    failed_steps, thirds = mod.failed_steps, mod.thirds

    costs = [5.0, 4.0, 4.0, 3.0, 3.5, 2.0, 1.0, 1.5, 0.5, 9.0]
    failed = failed_steps(costs, 6)          # steps 0..5: f(X_1..X_6) against f(X_0..X_5)
    assert failed.tolist() == [False, True, False, True, False, False]
    assert thirds(failed) == [0.5, 0.5, 0.0]
    # a run stopped at its target has one cost fewer than the hit iteration + 1
    assert failed_steps(costs[:4], 4).tolist() == [False, True, False]


def test_step_signals_cosine_and_cancel_ratio(benchmark_module):
    """Per-block cosine against the last subgradient on the same block, and the per-pair
    cancel ratio (least-norm convex combination over the mean norm)."""
    import numpy as np

    from rssm.stepsizes import StepContext

    mod = benchmark_module("step_signals")
    sig = mod.Signals(w=2)
    ctx = StepContext("rssm", 3, (4, 6))          # blocks {0,1}, {2,3}, {4,5}
    v = np.arange(1.0, 9.0).reshape(4, 2)

    def feed(pair, cols, d):
        ctx.advance(0, float(np.linalg.norm(d)), 1.0, direction=d, columns=cols, pair=pair)
        sig.add(ctx)

    feed((0, 1), np.array([0, 1, 2, 3]), np.hstack([v, v]))
    assert math.isnan(sig.take_cosine())          # no block seen before
    feed((0, 2), np.array([0, 1, 4, 5]), np.hstack([-v, v]))
    assert sig.take_cosine() == pytest.approx(-1.0)   # block 0 reversed; block 2 new
    assert math.isnan(sig.cancel(3))              # pair (1, 2) never seen
    feed((1, 2), np.array([2, 3, 4, 5]), np.hstack([v, v]))
    assert sig.take_cosine() == pytest.approx(1.0)    # blocks 1 and 2 agree
    assert math.isnan(sig.cancel(3))              # bundles hold 1 < w vectors
    for pair, cols in (((0, 1), [0, 1, 2, 3]), ((0, 2), [0, 1, 4, 5]),
                       ((1, 2), [2, 3, 4, 5])):
        feed(pair, np.array(cols), np.hstack([v, v]))
    # pairs (0, 1) and (1, 2) hold two equal vectors (ratio 1 each), pair (0, 2) holds a
    # vector and its block-0 reversal: least norm 1/sqrt(2) of their common norm
    expect = math.sqrt((1.0 + 0.5 + 1.0) / 3.0)
    assert sig.cancel(3) == pytest.approx(expect, rel=1e-9)


def test_step_signals_candidates_run_on_a_small_problem(benchmark_module, small_dpcp):
    """Every candidate of the benchmark runs RSSM and RSM without error and moves f."""
    import rssm

    mod = benchmark_module("step_signals")
    x0 = small_dpcp.initial_point(0)
    f0 = small_dpcp.cost(x0)
    for name, make in mod.CANDIDATES.items():
        for method, opts in (("rssm", {"n_blocks": 4}), ("rsm", {})):
            res = rssm.minimize(small_dpcp, x0, method=method, stepsize=make(), max_iter=120,
                                seed=0, options=opts)
            assert res.fun < f0, (name, method)


def test_step_signals_shares_split_the_gradient(benchmark_module, small_dpcp):
    """--shares: the three shares add up to 1; DPCP has no rotations at all (it depends
    on span(X) only), ODL with p = n has no X_perp part."""
    import numpy as np

    from rssm.problems import ODL

    mod = benchmark_module("step_signals")
    x = small_dpcp.initial_point(0)
    off, diag, perp = mod._shares(small_dpcp, x, 3)
    assert off + diag + perp == pytest.approx(1.0, rel=1e-12)
    assert off < 1e-12 and diag < 1e-12
    odl = ODL.synthetic(n=12, m=400, seed=2)
    off, diag, perp = mod._shares(odl, odl.initial_point(np.random.default_rng(5)), 3)
    assert off + diag + perp == pytest.approx(1.0, rel=1e-12)
    assert off > 0.5 and perp < 1e-12


def test_step_signals_decay_per_sweep(monkeypatch, benchmark_module):
    """A decay beta per epoch (l/2 iterations) is beta^(l-1) per sweep of the binom(l, 2)
    block pairs, and beta itself for RSM (a sweep is one iteration)."""
    mod = benchmark_module("step_signals")
    import benchmarks.stepsizes as bench

    grid = {("odl", "rsm", 1): (100.0, 0.6, 35), ("odl", "rssm-l3", 1): (10.0, 0.8, 104),
            ("odl", "rssm-l5", 1): (3.0, 0.9, 394), ("odl", "rssm-l5", 2): (3.0, 0.95, 681)}
    monkeypatch.setattr(bench, "best_grid_points", lambda path: grid)
    out = mod.sweep_decays("unused.csv")
    assert out[("odl", "rsm")] == ([0.6], [pytest.approx(0.6, rel=1e-12)])
    assert out[("odl", "rssm-l3")][1] == [pytest.approx(0.64, rel=1e-12)]
    assert out[("odl", "rssm-l5")][0] == [0.9, 0.95]
    assert out[("odl", "rssm-l5")][1] == [pytest.approx(0.9**4, rel=1e-12),
                                          pytest.approx(0.95**4, rel=1e-12)]


def test_step_signals_per_sweep_restart_and_first_search_switch(benchmark_module, small_dpcp,
                                                                 small_odl):
    """The per-sweep certificate restart decays by beta^(epoch / n_pairs) per epoch; the
    switch takes cosine control after DPCP's spectral start (its first search accepts a
    short step) and the certificate restart after ODL's random one."""
    import rssm

    mod = benchmark_module("step_signals")
    rule = mod.CertificateRestart(beta=0.6, at_cap=True, plateau=3.0, fixed_scale=True,
                                  per_sweep=True)
    rssm.minimize(small_dpcp, small_dpcp.initial_point(0), method="rssm", stepsize=rule,
                  max_iter=1, seed=0, options={"n_blocks": 4})
    assert rule.beta == pytest.approx(0.6 ** (2.0 / 6.0), rel=1e-12)   # l = 4: 2 / 6
    for prob, branch in ((small_dpcp, "near"), (small_odl, "far")):
        switch = mod.FirstSearchSwitch()
        x0 = prob.initial_point(0)
        res = rssm.minimize(prob, x0, method="rssm", stepsize=switch, max_iter=60, seed=0,
                            options={"n_blocks": 3})
        assert switch.rule is getattr(switch, branch), branch
        assert res.fun < prob.cost(x0)


def test_valley_stalls_descent_steps_tell_a_minimizer_from_a_start(benchmark_module, small_dpcp):
    """benchmarks.valley_stalls' check: subgradient steps never lower f at a converged
    point (the steps overshoot a sharp minimizer) and do lower it at the start."""
    import rssm

    mod = benchmark_module("valley_stalls")

    x0 = small_dpcp.initial_point(0)
    res = rssm.minimize(small_dpcp, x0, method="rsm", seed=0)
    assert res.success and small_dpcp.error(res.x) < 1e-9
    assert mod.descent_steps(small_dpcp, res.x) == (0.0, None)
    assert all(v > 0 for v in mod.line(small_dpcp, res.x))
    best, hit = mod.descent_steps(small_dpcp, x0, first=1e-3)
    assert best < -1e-6 and hit is not None


def test_drop_floor_compares_floors_against_the_grid_and_from_starts(
        monkeypatch, benchmark_module, tmp_path, capsys):
    """benchmarks.drop_floor: each floor's ratio to the instance's best grid point (read
    from the grid CSV), and its convergence from cold and warm starts; a floor outside
    [0, 1] is refused with the allowed range."""
    mod = benchmark_module("drop_floor")

    monkeypatch.setattr(mod, "PROBLEMS", ("l1_procrustes",))
    monkeypatch.setattr(mod, "COLD", ("l1_procrustes",))
    monkeypatch.setattr(mod, "NOISE", (1e-2,))
    # a one-point "grid" for seed 1: 60 iterations to 1e-10
    path = tmp_path / "grid.csv"
    row = _row(1, "grid", "geometric(t=1,beta=0.6)", 60)
    row.update(problem="l1_procrustes")
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(row))
        w.writeheader()
        w.writerow(row)
    mod.against_grid([0.6], [1], str(path))
    out = capsys.readouterr().out
    assert "floor 0.6: within 1.5x of the best grid point on" in out
    ratio = float(out.split("l1_procrustes ")[1].split()[1])
    assert 0.5 < ratio < 3.0
    mod.starts([0.0, 0.6], 1)
    out = capsys.readouterr().out
    assert "floor 0.6, cold starts: converged at error below 1e-8 on 1/1" in out
    assert "floor 0.6, warm starts: converged at error below 1e-8 on" in out
    with pytest.raises(SystemExit):
        mod.main(["--floors", "1.5"])
    assert "--floors takes values in [0, 1]" in capsys.readouterr().err


def test_fast_cut_scores_the_kept_rule_as_its_log_says(benchmark_module, capsys):
    """``python -m benchmarks.fast_cut`` on one cell and seed, against the logged grid: the
    kept rule's ratio to the best grid point is the log's (l1 Procrustes l = 3, seed 1:
    148 iterations over 102, 1.46 including its rejected trial as half an iteration), and
    the rule before it (0.7 throughout) is the 2.07 of the item-5 table."""
    fc = benchmark_module("fast_cut")
    assert fc.main(["--seeds", "1", "--cells", "l1_procrustes:rssm-l3", "--variants",
                    "0.6 up to l = 3 (kept)", "0.7 throughout (before)"]) == 0
    out = capsys.readouterr().out
    assert "best grid point [102]" in out
    assert "0.6 up to l = 3 (kept): within 1.5x 1 of 1" in out and "ratios 1.46" in out
    assert "0.7 throughout (before): within 1.5x 0 of 1" in out and "ratios 2.07" in out


def test_early_freeze_reads_the_full_bundle_as_its_log_says(benchmark_module, capsys):
    """``python -m benchmarks.early_freeze`` on one cell and seed: the run without the
    early ask and its readings of the full bundle at the six levels are the log's (l1
    Procrustes l = 3, seed 1: 153 iterations; at 1e-2 ||X||_F, iteration 70, error 6.9e-5,
    reading 0.02, below `EARLY_FROZEN`), and the early ask is back on afterwards."""
    from rssm.solvers import certificate

    ef = benchmark_module("early_freeze")
    assert ef.main(["--seeds", "1", "--cells", "l1_procrustes:rssm-l3"]) == 0
    out = capsys.readouterr().out
    line = next(r for r in out.splitlines() if r.startswith("l1_procrustes:rssm-l3 seed 1"))
    logged = (Path(__file__).parents[1] / "benchmarks" / "results" / "early_freeze"
              / "readings.log").read_text().splitlines()
    assert line in logged
    assert "[1e-02 k70 error 6.9e-05 read 0.02]" in line
    assert certificate.EARLY_LEVELS == (1e-2,) and 0.02 < certificate.EARLY_FROZEN


def test_sparse_basis_seeds_reads_the_commands_stop_and_error(benchmark_module):
    """benchmarks.sparse_basis_seeds (docs/custom.md's table): one line per run, with the
    command's stop reason and final error; seed 0's RSM run converges at the planted basis
    as the logged line says."""
    mod = benchmark_module("sparse_basis_seeds")
    line = mod.one(0, "rsm", "geometric")
    assert line.startswith("seed 0 rsm geometric: stop reason converged: converged after "
                           "1399 iterations")
    assert float(line.split("final error ")[1].rstrip(";")) < 1e-10
    logged = (Path(mod.__file__).parent / "results" / "sparse_basis_seeds.log").read_text()
    assert line in logged.splitlines()
