"""The default step size against the best tuned geometric schedule, instance by instance
(issue 18, items 5 and 6), and against Pymanopt's SteepestDescent.

    python -m benchmarks.stepsizes [--quick] [--seeds 5] [--problems ...] [--methods ...]
                                   [--candidates] [--out benchmarks/results/stepsizes]
    python -m benchmarks.stepsizes --from-csv RUN/stepsizes.csv ...   # tables again, no run

For every problem, seed and method (RSM; RSSM with l = 3, 5, 10) it runs, from the same
start X0:

* ``auto`` (`rssm.stepsizes.Auto`, the default rule; for a problem with its own
  `default_stepsize`, that rule, with Auto beside it), and with ``--candidates`` the
  rules of `benchmarks.stepsizes_variants.CANDIDATES` (the ones not kept);
* the geometric grid gamma_k = mu0 beta^(k / epoch) (an epoch: l/2 RSSM iterations, one
  RSM iteration) with mu0 = t / ||grad f(X0)||, t in `LENGTHS` (the first step is t long:
  four decades of step lengths, 0.01 to 100, since the best first length ranges from
  0.1 on DPCP from its spectral start to 30-100 on ODL from a Haar start) and beta in
  `BETAS`. "best" is, on each instance, the grid point with the fewest iterations to
  1e-10 (then 1e-8). A grid run stops as soon as it can no longer win: after as many
  iterations as the best grid point so far needed, or after twice auto's converted
  iterations (auto is then reported as more than 2x faster than any grid point);
* Pymanopt 2.2's SteepestDescent (Armijo line search, its default settings) on its
  Stiefel manifold with the same cost and Euclidean subgradient (RSM-type steps only).

**Time on a shared machine.** Solver seconds are recorded, but the tables compare
*converted* time: iterations x t_iter + rejected trials x t_trial, where t_iter (one
iteration that reads f(X_k)) and t_trial (a trial point that is not kept: a retraction and
a cost evaluation, here with the cache update and its undo) are measured in the same
process right before that instance's runs, best of 3 interleaved repetitions; the tables
use the median of these over the seeds (`reconvert`). Iteration and trial counts do not
depend on the machine's load; the conversion only weighs them. A ratio to the best grid
point depends on the calibration only through t_trial / t_iter.
Pymanopt's converted time is iterations x (subgradient + retraction) + cost evaluations x
(cost + retraction), each measured the same way.

sparse_pca has no exact ground truth: its "error" is the relative gap (f - f_min)/|f_min|
to the least cost any run reached on the instance (its grid runs are not cut off).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time

LEVELS = (1e-8, 1e-10)
LENGTHS = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
BETAS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
METHODS = ("rsm", "rssm-l3", "rssm-l5", "rssm-l10")
EPOCHS = 600            # budget in epochs: 600 RSM iterations, 300 l RSSM iterations
EPOCHS_LONG = 800       # sparse_basis and from_functions
QUICK_LENGTHS = (0.1, 1.0, 10.0)
QUICK_BETAS = (0.5, 0.8, 0.95)


def _problems():
    """name -> (build(seed) -> (problem, x0), budget in epochs, exact error?)."""
    import numpy as np

    import rssm
    from rssm.experiments.configs import PROBLEMS
    from rssm.problems import L1Procrustes, PlantedSparseBasis, SparsePCA

    out = {name: (lambda seed, cfg=PROBLEMS[name]: cfg.build(seed), EPOCHS, True)
           for name in ("dpcp", "odl")}

    def synthetic(cls):
        def build(seed):
            prob = cls.synthetic(seed=seed)
            return prob, prob.initial_point(seed)
        return build

    out["l1_procrustes"] = (synthetic(L1Procrustes), EPOCHS, True)
    out["sparse_basis"] = (synthetic(PlantedSparseBasis), EPOCHS_LONG, True)
    out["sparse_pca"] = (synthetic(SparsePCA), EPOCHS, False)

    def custom(seed):
        # docs/custom.md: ||A X - B||_1 from plain callables, with partial subgradients
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((300, 20))
        x_star = rssm.stiefel.random_point(20, 5, rng)
        b = a @ x_star + 10 * rng.standard_normal((300, 5)) * (rng.random((300, 5)) < 0.1)
        prob = rssm.Problem.from_functions(
            lambda x: np.abs(a @ x - b).sum(),
            lambda x: a.T @ np.sign(a @ x - b),
            lambda x, c: a.T @ np.sign(a @ x[:, c] - b[:, c]),
            shape=(20, 5), name="from_functions",
            error=lambda x: float(np.linalg.norm(x - x_star)))
        return prob, prob.initial_point(seed)

    out["from_functions"] = (custom, EPOCHS_LONG, True)
    return out


def _method(key: str) -> tuple[str, int]:
    return ("rsm", 1) if key == "rsm" else ("rssm", int(key[6:]))


# -- counting what a rule costs ------------------------------------------------------------


class _CountingContext:
    """The StepContext a rule sees, with its trials counted."""

    def __init__(self, owner):
        self._owner = owner
        self._ctx = None

    def __getattr__(self, name):
        return getattr(self._ctx, name)

    def trial(self, gamma):
        self._owner._n_trials += 1
        self._owner._last_trial = float(gamma)
        return self._ctx.trial(gamma)


def counting(rule):
    """``rule`` wrapped so that ``.rejected`` lists, per iteration, the trials so far that
    were not kept (a kept trial is the step itself and costs nothing extra)."""
    from rssm.stepsizes import StepSize

    class Counting(StepSize):
        def reset(self):
            rule.reset()
            self._n_trials = 0
            self._n_kept = 0
            self._last_trial = None
            self._proxy = _CountingContext(self)
            self.rejected = [0]

        def __call__(self, k, ctx):
            self._proxy._ctx = ctx
            self._last_trial = None
            gamma = rule(k, self._proxy)
            if self._last_trial is not None and float(gamma) == self._last_trial:
                self._n_kept += 1
            self.rejected.append(self._n_trials - self._n_kept)
            return gamma

        def describe(self):
            return rule.describe()

    return Counting()


def run_rule(prob, x0, key, rule, epochs, seed, stop_iter=None, exact=True):
    """One run; returns (iteration, error, cost, rejected trials so far) per iteration and
    the solver time."""
    import numpy as np

    import rssm
    from rssm.stopping import MinStepNorm

    method, ell = _method(key)
    mi = epochs if method == "rsm" else int(math.ceil(epochs * ell / 2))
    if stop_iter is not None:
        mi = max(1, min(mi, int(stop_iter)))
    wrapped = counting(rule)
    kw = dict(target_error=LEVELS[-1] * 0.5) if exact else {}
    res = rssm.minimize(
        prob, x0, method=method, stepsize=wrapped, max_iter=mi, seed=seed, record=1,
        stop=MinStepNorm(1e-13), **kw, options={"n_blocks": max(ell, 2)}
    )
    tr = res.trace
    it = np.asarray(tr["iteration"], dtype=int)
    rej = np.asarray(wrapped.rejected, dtype=float)
    rej = rej[np.minimum(it, rej.size - 1)]
    return dict(iteration=it, error=np.asarray(tr["error"], dtype=float),
                cost=np.asarray(tr["cost"], dtype=float), rejected=rej,
                time=np.asarray(tr["time"], dtype=float),
                solver_time=float(res.time), n_iter=int(res.n_iter))


def first_at(run, level):
    """(iteration, rejected trials, solver seconds) when the error first is <= level, or
    None."""
    import numpy as np

    i = np.flatnonzero(run["error"] <= level)
    if not i.size:
        return None
    j = int(i[0])
    return int(run["iteration"][j]), float(run["rejected"][j]), float(run["time"][j])


# -- the per-iteration time, measured in this process -------------------------------------


def calibrate(prob, x0, key, reps=3, min_time=0.15):
    """(t_iter, t_trial): seconds per iteration that reads f(X_k), and the extra seconds
    of one trial that is not kept; interleaved, best of ``reps``."""
    import rssm
    from rssm.stepsizes import StepSize

    class Fixed(StepSize):
        def __init__(self, probe):
            self.probe = probe

        def __call__(self, k, ctx):
            ctx.cost  # noqa: B018 (every rule that adapts reads it)
            gamma = 1e-3 / ctx.direction_norm
            if self.probe:
                ctx.trial(2.0 * gamma)
            return gamma

    method, ell = _method(key)
    n = 10
    while True:   # enough iterations for min_time seconds
        res = rssm.minimize(
            prob, x0, method=method, stepsize=Fixed(False), max_iter=n, seed=0, record=n,
            options={"n_blocks": max(ell, 2)}
        )
        if res.time >= min_time or n >= 5000:
            break
        n = int(n * max(2.0, 1.2 * min_time / max(res.time, 1e-6)))
    best = [math.inf, math.inf]
    for _ in range(reps):
        for i, probe in enumerate((False, True)):
            res = rssm.minimize(
                prob, x0, method=method, stepsize=Fixed(probe), max_iter=n, seed=0, record=n,
                options={"n_blocks": max(ell, 2)}
            )
            best[i] = min(best[i], res.time / n)
    return best[0], max(best[1] - best[0], 0.0)


def _best_of(fn, reps=5, min_time=0.02):
    n, t = 1, 0.0
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t = time.perf_counter() - t0
        if t >= min_time or n >= 10000:
            break
        n *= 4
    best = t / n
    for _ in range(reps - 1):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def run_pymanopt(prob, x0, epochs, max_time):
    """Pymanopt's SteepestDescent with our cost and Euclidean subgradient, its default
    settings; returns the run as `run_rule` does (``rejected`` = cost evaluations so far,
    one per line-search trial) and the converted seconds per iteration / evaluation."""
    import numpy as np
    import pymanopt

    from rssm import stiefel
    from rssm.threads import RunThreads

    n, p = prob.shape
    man = pymanopt.manifolds.Stiefel(n, p)
    rows, n_cost = [], [0]
    excluded, t0 = [0.0], [0.0]

    @pymanopt.function.numpy(man)
    def cost(x):
        n_cost[0] += 1
        return prob.cost(x)

    @pymanopt.function.numpy(man)
    def egrad(x):
        te = time.perf_counter()
        err = prob.error(x) if prob.has_error else math.nan
        rows.append((len(rows), err, prob.cost(x), n_cost[0], te - t0[0] - excluded[0]))
        excluded[0] += time.perf_counter() - te
        return prob.subgradient(x)

    problem = pymanopt.Problem(man, cost, euclidean_gradient=egrad)
    opt = pymanopt.optimizers.SteepestDescent(max_iterations=epochs, max_time=max_time,
                                              max_cost_evaluations=10**7, verbosity=0)
    # the threads of an rssm run (BLAS at one thread, the data's chunk workers), so that
    # both use the machine the same way
    with RunThreads("auto"):
        t0[0] = time.perf_counter()
        res = opt.run(problem, initial_point=x0.copy())
        t_sub = _best_of(lambda: prob.subgradient(x0))
        t_cost = _best_of(lambda: prob.cost(x0))
        t_retr = _best_of(lambda: stiefel.polar(x0 + 1e-3 * x0))
    arr = np.array(rows, dtype=np.float64).reshape(-1, 5)
    run = dict(iteration=arr[:, 0].astype(int), error=arr[:, 1], cost=arr[:, 2],
               rejected=arr[:, 3], time=arr[:, 4], solver_time=float(arr[-1, 4]),
               n_iter=int(arr[-1, 0]), stop=str(res.stopping_criterion))
    return run, t_sub + t_retr, t_cost + t_retr


def _row(name, seed, key, kind, label, run, t_iter, t_trial, f_min=None):
    """One CSV row: the run's iterations, rejected trials, converted and solver seconds to
    each level (empty when not reached)."""
    import numpy as np

    if f_min is not None:    # relative objective gap to the best cost seen (sparse_pca)
        run = dict(run, error=(run["cost"] - f_min) / max(abs(f_min), 1e-300))
    row = dict(problem=name, seed=seed, method=key, kind=kind, rule=label,
               t_iter=t_iter, t_trial=t_trial, final_error=float(np.min(run["error"][-1:])),
               n_iter=run["n_iter"], solver_time=run["solver_time"])
    for lv in LEVELS:
        hit = first_at(run, lv)
        tag = f"{lv:g}"
        if hit is None:
            row.update({f"it_{tag}": None, f"rej_{tag}": None, f"conv_{tag}": None,
                        f"solver_{tag}": None})
        else:
            it, rej, sol = hit
            row.update({f"it_{tag}": it, f"rej_{tag}": rej,
                        f"conv_{tag}": it * t_iter + rej * t_trial, f"solver_{tag}": sol})
    return row


def _grid_order(history, key):
    """Grid points, those that won on earlier seeds first, then by beta and length."""
    pts = [(t, b) for b in BETAS for t in LENGTHS]
    won = history.get(key, [])
    return sorted(pts, key=lambda tb: (tb not in won, won.index(tb) if tb in won else 0,
                                       tb[1], abs(math.log10(tb[0]))))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.stepsizes", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="1 seed, RSM and RSSM l=5, a 3 x 3 grid (lengths 0.1, 1, 10; "
                         "beta 0.5, 0.8, 0.95), the candidates too")
    ap.add_argument("--seeds", type=int, default=None, help="number of seeds (default 5)")
    ap.add_argument("--problems", nargs="*", default=None, help="subset of the problems")
    ap.add_argument("--methods", nargs="*", default=None,
                    help=f"subset of {' '.join(METHODS)} (default all)")
    ap.add_argument("--candidates", action="store_true",
                    help="also run the candidates of benchmarks.stepsizes_variants")
    ap.add_argument("--no-pymanopt", action="store_true", help="skip Pymanopt")
    ap.add_argument("--only", nargs="+", default=None, metavar="CANDIDATE",
                    help="run only these candidates (no auto, grid or Pymanopt): rows to "
                         "merge with an earlier run's CSV through --from-csv")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                   "stepsizes"))
    ap.add_argument("--from-csv", nargs="+", default=None, metavar="CSV",
                    help="print the tables of earlier runs (their stepsizes.csv) and exit")
    args = ap.parse_args(argv)
    if args.from_csv:
        rows = []
        for path in args.from_csv:
            with open(path, newline="") as fh:
                rows += [_typed(r) for r in csv.DictReader(fh)]
        for line in tables(rows) + [""] + summary(rows):
            print(line)
        return 0
    import numpy as np

    from benchmarks.suite import machine
    from rssm.stepsizes import Auto, Geometric

    seeds = list(range(1, 1 + (args.seeds or (1 if args.quick else 5))))
    methods = args.methods or (["rsm", "rssm-l5"] if args.quick else list(METHODS))
    lengths, betas = (QUICK_LENGTHS, QUICK_BETAS) if args.quick else (LENGTHS, BETAS)
    probs = _problems()
    names = args.problems or list(probs)
    bad = [n for n in names if n not in probs] + [m for m in methods if m not in METHODS]
    if bad:
        ap.error(f"unknown problem(s) or method(s) {bad}; problems: {list(probs)}, "
                 f"methods: {list(METHODS)}")
    candidates = {}
    if args.candidates or args.quick or args.only:
        from benchmarks.stepsizes_variants import CANDIDATES
        candidates = CANDIDATES
        if args.only:
            unknown = [c for c in args.only if c not in CANDIDATES]
            if unknown:
                ap.error(f"unknown candidate(s) {unknown}; allowed: {list(CANDIDATES)}")
            candidates = {c: CANDIDATES[c] for c in args.only}
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "stepsizes.log"), "w")

    def say(msg=""):
        print(msg, flush=True)
        log.write(msg + "\n")
        log.flush()

    say(f"# python -m benchmarks.stepsizes {' '.join(argv if argv is not None else sys.argv[1:])}")
    say(f"# {machine()}")
    say(f"# seeds {seeds}; methods {methods}; grid lengths {lengths} x beta {betas}; "
        f"levels {LEVELS}")
    rows = []
    wall0 = time.perf_counter()
    history: dict = {}
    for name in names:
        build, epochs, exact = probs[name]
        for seed in seeds:
            prob, x0 = build(seed)
            g0 = float(np.linalg.norm(prob.riemannian_subgradient(x0)))
            runs = []    # (kind, label, key, run, t_iter, t_trial)
            for key in methods:
                if _method(key)[1] > prob.shape[1]:
                    continue            # more blocks than columns (sparse_basis: p = 5)
                t_iter, t_trial = calibrate(prob, x0, key)
                # "auto" is what the default call uses: Auto, or the problem's own rule
                own = prob.default_stepsize()
                rules = {"auto": Auto()} if own is None else {"problem default": own,
                                                              "Auto": Auto()}
                if args.only:
                    rules = {}
                rules.update({c: make() for c, make in candidates.items()})
                auto_work = math.inf
                for label, rule in rules.items():
                    run = run_rule(prob, x0, key, rule, epochs, seed, exact=exact)
                    default = label in ("auto", "problem default")
                    runs.append(("auto" if default else "candidate", label, key, run,
                                 t_iter, t_trial))
                    hit = first_at(run, LEVELS[-1]) if exact else None
                    if default and hit is not None:
                        auto_work = hit[0] + hit[1] * t_trial / t_iter
                best = math.inf
                if args.only:
                    grid = []
                elif args.quick:
                    grid = [(t, b) for b in betas for t in lengths]
                else:
                    grid = _grid_order(history, (name, key))
                for t, b in grid:
                    cap = min(best, 2.0 * auto_work) if exact else math.inf
                    run = run_rule(prob, x0, key, Geometric(t / g0, b), epochs, seed,
                                   None if math.isinf(cap) else math.ceil(cap), exact)
                    hit = first_at(run, LEVELS[-1]) if exact else None
                    if hit is not None and hit[0] < best:
                        best = hit[0]
                        history.setdefault((name, key), []).insert(0, (t, b))
                    runs.append(("grid", f"geometric(t={t:g},beta={b:g})", key, run,
                                 t_iter, t_trial))
            if "rsm" in methods and not (args.no_pymanopt or args.only):
                try:
                    pm, t_pm, t_eval = run_pymanopt(prob, x0, epochs, 60.0)
                    runs.append(("pymanopt", "SteepestDescent", "rsm", pm, t_pm, t_eval))
                except ImportError:
                    say("# pymanopt not installed: its rows are missing")
            f_min = None if exact else min(float(np.min(r[3]["cost"])) for r in runs)
            for kind, label, key, run, t_iter, t_trial in runs:
                rows.append(_row(name, seed, key, kind, label, run, t_iter, t_trial, f_min))
            say(f"{name} seed {seed}: {len(runs)} runs, {time.perf_counter() - wall0:.0f} s "
                "so far")
    path = os.path.join(args.out, "stepsizes.csv")
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    say("")
    for line in tables(rows) + [""] + summary(rows):
        say(line)
    say(f"\n# wall time {time.perf_counter() - wall0:.0f} s; rows in {path}")
    log.close()
    return 0


def _typed(row):
    """A CSV row with its numbers back as numbers (empty: not reached, None)."""
    out = dict(row)
    out["seed"] = int(out["seed"])
    out["n_iter"] = int(out["n_iter"])
    for k in ("t_iter", "t_trial", "final_error", "solver_time"):
        out[k] = float(out[k])
    for lv in LEVELS:
        for col in ("it", "rej", "conv", "solver"):
            k = f"{col}_{lv:g}"
            v = out.get(k, "")
            out[k] = None if v in ("", None) else (int(float(v)) if col == "it" else float(v))
    return out


def _median(vals):
    v = sorted(vals)
    return v[len(v) // 2] if v else None


def _fmt(v, spec=".0f"):
    return "-" if v is None else format(v, spec)


def _best_grid(sel):
    """The grid row with the fewest iterations to 1e-10 (then 1e-8), or None."""
    lv8, lv10 = (f"{lv:g}" for lv in LEVELS)
    hits = [r for r in sel if r[f"it_{lv10}"] is not None]
    if not hits:
        return None
    return min(hits, key=lambda r: (r[f"it_{lv10}"], r[f"it_{lv8}"] or 0))


def best_grid_points(path):
    """(problem, method, seed) -> (t, beta, iterations to 1e-10) of each instance's best
    grid point (`_best_grid`), read from a CSV this script wrote."""
    with open(path, newline="") as fh:
        rows = [_typed(r) for r in csv.DictReader(fh) if r["kind"] == "grid"]
    by: dict = {}
    for r in rows:
        by.setdefault((r["problem"], r["method"], r["seed"]), []).append(r)
    out = {}
    for key, sel in by.items():
        row = _best_grid(sel)
        if row is not None:
            inner = row["rule"][row["rule"].index("(") + 1:-1]      # t=0.1,beta=0.5
            vals = dict(part.split("=") for part in inner.split(","))
            out[key] = (float(vals["t"]), float(vals["beta"]), row[f"it_{LEVELS[-1]:g}"])
    return out


def ratio(rule_row, best_row, auto_row):
    """Converted time to 1e-10 of a rule over the best grid point's: a float, None when
    the rule did not reach 1e-10, or the text "<v" when no grid point reached it within
    twice auto's iterations (where grid runs were cut off): the best grid point is then
    slower than 2 x auto, so the ratio is below v = rule / (2 x auto)."""
    lv10 = f"{LEVELS[-1]:g}"
    t = rule_row[f"conv_{lv10}"]
    if t is None:
        return None
    if best_row is None:
        a = auto_row[f"conv_{lv10}"]
        return None if a is None else f"<{t / (2.0 * a):.2f}"
    return t / best_row[f"conv_{lv10}"]


def _ratios(vals):
    return " ".join(v if isinstance(v, str) else ("-" if v is None else f"{v:.2f}")
                    for v in vals)


def reconvert(rows):
    """The rows with their converted times recomputed from the median t_iter and t_trial
    over the seeds of each problem and method (Pymanopt's separately): one calibration
    caught by a burst of load on a shared machine then does not move a ratio."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["problem"], r["method"], r["kind"] == "pymanopt"), []).append(r)
    out = []
    for sel in groups.values():
        # one calibration per instance: the rows of the rules (grid rows of older runs
        # carried t_trial = 0, as a schedule makes no trials)
        cal = [r for r in sel if r["kind"] != "grid"] or sel
        t_iter = _median([r["t_iter"] for r in cal])
        t_trial = _median([r["t_trial"] for r in cal])
        for r in sel:
            r = dict(r, t_iter=t_iter, t_trial=t_trial)
            for lv in LEVELS:
                tag = f"{lv:g}"
                if r[f"it_{tag}"] is not None:
                    r[f"conv_{tag}"] = r[f"it_{tag}"] * t_iter + r[f"rej_{tag}"] * t_trial
            out.append(r)
    return out


def tables(rows):
    """The summary tables (markdown): the default rule (auto, or the problem's own) against
    the best grid point and Pymanopt, then the candidates; converted times from the
    median calibrations (`reconvert`)."""
    lv8, lv10 = (f"{lv:g}" for lv in LEVELS)
    rows = reconvert(rows)
    names = list(dict.fromkeys(r["problem"] for r in rows))
    out = ["| problem | method | auto it 1e-8 / 1e-10 (rejected trials) | best grid it "
           "1e-8 / 1e-10 | seeds to 1e-10 auto / grid | auto/best time to 1e-10, per "
           "seed | auto s to 1e-10 (converted) | Pymanopt it / s to 1e-10 | auto/Pymanopt "
           "time, per seed |", "|" + "---|" * 9]
    cand_lines = []
    for name in names:
        keys = [k for k in METHODS if any(r["problem"] == name and r["method"] == k
                                          and r["kind"] == "auto" for r in rows)]
        for key in keys:
            sel = [r for r in rows if r["problem"] == name and r["method"] == key]
            seeds = sorted({r["seed"] for r in sel})
            auto, best, rat, pym, rat_p = [], [], [], [], []
            cands: dict = {}
            for s in seeds:
                a = next(r for r in sel if r["seed"] == s and r["kind"] == "auto")
                b = _best_grid([r for r in sel if r["seed"] == s and r["kind"] == "grid"])
                auto.append(a)
                best.append(b)
                rat.append(ratio(a, b, a))
                pm = [r for r in sel if r["seed"] == s and r["kind"] == "pymanopt"]
                if pm:
                    pym.append(pm[0])
                    if a[f"conv_{lv10}"] is not None and pm[0][f"conv_{lv10}"] is not None:
                        rat_p.append(a[f"conv_{lv10}"] / pm[0][f"conv_{lv10}"])
                for r in sel:
                    if r["seed"] == s and r["kind"] == "candidate":
                        cands.setdefault(r["rule"], []).append((r, ratio(r, b, a)))

            def med(rs, col):
                return _median([r[col] for r in rs if r is not None and r[col] is not None])

            n_a = sum(r[f"it_{lv10}"] is not None for r in auto)
            n_b = sum(r is not None for r in best)
            pm_txt = ""
            if pym:
                n_p = sum(r[f"it_{lv10}"] is not None for r in pym)
                pm_txt = (f"{_fmt(med(pym, f'it_{lv10}'))} / "
                          f"{_fmt(med(pym, f'conv_{lv10}'), '.3g')} ({n_p} of {len(pym)})")
            own = " (own rule)" if auto[0]["rule"] != "auto" else ""
            out.append(
                f"| {name}{own} | {key} | {_fmt(med(auto, f'it_{lv8}'))} / "
                f"{_fmt(med(auto, f'it_{lv10}'))} ({_fmt(med(auto, f'rej_{lv10}'))}) | "
                f"{_fmt(med(best, f'it_{lv8}'))} / {_fmt(med(best, f'it_{lv10}'))} | "
                f"{n_a} / {n_b} of {len(seeds)} | {_ratios(rat)} | "
                f"{_fmt(med(auto, f'conv_{lv10}'), '.3g')} | {pm_txt} | "
                f"{' '.join(f'{v:.2f}' for v in rat_p)} |")
            for label, pairs in cands.items():
                n_c = sum(r[f"it_{lv10}"] is not None for r, _ in pairs)
                cand_lines.append(
                    f"| {name} | {key} | {label} | {n_c} of {len(pairs)} | "
                    f"{_fmt(med([r for r, _ in pairs], f'it_{lv10}'))} "
                    f"({_fmt(med([r for r, _ in pairs], f'rej_{lv10}'))}) | "
                    f"{_ratios([v for _, v in pairs])} |")
    if cand_lines:
        out += ["", "| problem | method | candidate | seeds to 1e-10 | median it to 1e-10 "
                "(rejected trials) | time/best grid point, per seed |", "|" + "---|" * 6]
        out += cand_lines
    return out


def summary(rows):
    """One line per rule (the default first; for problems with their own default rule,
    the Auto row): per problem and method, seeds reaching 1e-10 of those run and the
    median time ratio to the best grid point there ("<v" bounds count as v)."""
    rows = reconvert(rows)
    names = list(dict.fromkeys(r["problem"] for r in rows))
    keys = [k for k in METHODS if any(r["method"] == k for r in rows)]
    labels = ["auto"] + list(dict.fromkeys(r["rule"] for r in rows if r["kind"] == "candidate"
                                           and r["rule"] != "Auto"))
    cols = [(n, k) for n in names for k in keys
            if any(r["problem"] == n and r["method"] == k and r["kind"] == "auto" for r in rows)]
    out = ["| rule | " + " | ".join(f"{n} {k}" for n, k in cols) + " |",
           "|" + "---|" * (1 + len(cols))]
    for label in labels:
        cells = []
        for n, k in cols:
            sel = [r for r in rows if r["problem"] == n and r["method"] == k]
            vals, seen = [], 0
            for s in sorted({r["seed"] for r in sel}):
                here = [r for r in sel if r["seed"] == s]
                a = next(r for r in here if r["kind"] == "auto")
                if label == "auto":
                    r = a if a["rule"] == "auto" else next(
                        (x for x in here if x["rule"] == "Auto"), None)
                else:
                    r = next((x for x in here if x["rule"] == label), None)
                if r is None:
                    continue
                seen += 1
                v = ratio(r, _best_grid([x for x in here if x["kind"] == "grid"]), a)
                if v is not None:
                    vals.append(float(v[1:]) if isinstance(v, str) else v)
            med = _median(vals)
            cells.append("" if not seen else f"{len(vals)}/{seen} {_fmt(med, '.2f')}")
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return out


if __name__ == "__main__":
    sys.exit(main())
