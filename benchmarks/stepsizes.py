"""Step sizes without tuning (issue 11): ``stepsize="auto"`` against the best of a tuned
grid scored on the same instance, and against Pymanopt's SteepestDescent (Armijo search).

    python -m benchmarks.stepsizes [--quick] [--threads N] [--out benchmarks/results]

For every problem, seed and method (RSM, RSSM with l = 3, 5, 10) it runs

* ``auto`` (`rssm.stepsizes.Auto`), and with ``--candidates`` (always with ``--quick``)
  the other tuning-free candidates of docs/stepsizes.md;
* every point of the problem's geometric grid (the ``--tuned`` grid of
  `rssm.experiments.configs` for DPCP and ODL; mu0 in {1/3, 1, 3} x the problem's
  reference mu0 and beta in {0.9, 0.95} for the others), each scored on this instance:
  "tuned" is the grid point with the least time to 1e-10 (then 1e-8, then the lowest final
  error). A grid point is cut off once its time exceeds 1.5x the best time so far, since
  it can no longer win;
* Pymanopt's SteepestDescent on its Stiefel manifold with the same cost and Euclidean
  subgradient (numpy backend; RSM-type full steps only).

It records time and iterations to error 1e-8 and 1e-10 (sparse_pca, which has no exact
ground truth: the relative objective gap (f - f_min) / |f_min|, f_min the least cost any
run reached on that instance). Times are solver times (error evaluation excluded). The
table gives medians over the seeds and the ratio auto / tuned of the median times; the
CSV has one row per run. Iteration counts are robust on a shared machine; times are not.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time

LEVELS = (1e-8, 1e-10)


def _problems(quick: bool):
    """name -> (build(seed) -> (problem, x0, error_fn or None), grid of (mu0, beta), budget)."""
    import numpy as np

    import rssm
    from rssm.experiments.configs import PROBLEMS
    from rssm.problems import L1Procrustes, PlantedSparseBasis, SparsePCA

    out = {}
    for name in ("dpcp", "odl"):
        cfg = PROBLEMS[name]
        grid = [(g["mu0"], g["beta"]) for g in cfg.tuned_grid if g["rule"] == "geometric"]
        out[name] = (lambda seed, cfg=cfg: cfg.build(seed), grid, 300 if quick else 600)

    def around(mu0, betas=(0.9, 0.95)):
        return [(mu0 * f, b) for f in (1 / 3, 1.0, 3.0) for b in betas]

    def sb(seed):
        prob = PlantedSparseBasis.synthetic(seed=seed)
        return prob, prob.initial_point(seed)

    def pr(seed):
        prob = L1Procrustes.synthetic(seed=seed)
        return prob, prob.initial_point(seed)

    def sp(seed):
        prob = SparsePCA.synthetic(seed=seed)
        return prob, prob.initial_point(seed)

    ref = {k: f(0)[0].reference_stepsize().mu0 for k, f in (("sb", sb), ("pr", pr), ("sp", sp))}
    out["sparse_basis"] = (sb, around(ref["sb"], (0.95, 0.98)), 400 if quick else 800)
    out["l1_procrustes"] = (pr, around(ref["pr"]), 300 if quick else 600)
    out["sparse_pca"] = (sp, around(ref["sp"], (0.95, 0.99)), 300 if quick else 600)

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

    out["from_functions"] = (custom, around(1.0 / 300, (0.9, 0.95)), 400 if quick else 800)
    return out


METHODS = (("rsm", 1), ("rssm", 3), ("rssm", 5), ("rssm", 10))


def _first(trace_t, trace_it, err, level):
    import numpy as np

    i = np.flatnonzero(err <= level)
    return (float(trace_t[i[0]]), int(trace_it[i[0]])) if i.size else (math.inf, -1)


def _run_rssm(prob, x0, method, ell, rule, budget, seed, max_time=None, exact=True):
    import rssm

    mi = budget if method == "rsm" else int(math.ceil(budget * ell / 2))
    kw = dict(target_error=LEVELS[-1] * 0.5) if exact else {}
    res = rssm.minimize(prob, x0, method=method, n_blocks=max(ell, 2), stepsize=rule,
                        max_iter=mi, max_time=max_time, seed=seed, record_every=1, **kw)
    tr = res.trace
    return tr["time"], tr["iteration"], tr["cost"], tr["error"], res


def _run_pymanopt(prob, x0, budget, max_time):
    """SteepestDescent (Armijo backtracking) of Pymanopt with our cost and subgradient, its
    default tolerances; one trace row per iteration (Pymanopt evaluates the gradient once
    per iterate), the time of our bookkeeping excluded."""
    import numpy as np
    import pymanopt

    n, p = prob.shape
    man = pymanopt.manifolds.Stiefel(n, p)
    rows = []
    excluded = [0.0]
    t0 = [0.0]

    @pymanopt.function.numpy(man)
    def cost(x):
        return prob.cost(x)

    @pymanopt.function.numpy(man)
    def egrad(x):
        te = time.perf_counter()
        err = prob.error(x) if prob.has_error else math.nan
        rows.append((te - t0[0] - excluded[0], len(rows), prob.cost(x), err))
        excluded[0] += time.perf_counter() - te
        return prob.subgradient(x)

    problem = pymanopt.Problem(man, cost, euclidean_gradient=egrad)
    opt = pymanopt.optimizers.SteepestDescent(max_iterations=budget, max_time=max_time,
                                              max_cost_evaluations=10**7, verbosity=0)
    t0[0] = time.perf_counter()
    res = opt.run(problem, initial_point=x0.copy())
    arr = np.array(rows, dtype=np.float64).reshape(-1, 4)
    return arr[:, 0], arr[:, 1].astype(int), arr[:, 2], arr[:, 3], res.stopping_criterion


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.stepsizes", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="1 seed, shorter budgets, RSM and RSSM l=5, all candidates")
    ap.add_argument("--seeds", type=int, default=None, help="number of seeds (default 5)")
    ap.add_argument("--problems", nargs="*", default=None, help="subset of the problems")
    ap.add_argument("--candidates", action="store_true",
                    help="also run the other tuning-free candidates (always with --quick)")
    ap.add_argument("--threads", type=int, default=None,
                    help="fix the BLAS/OpenMP threads (default: the environment's, what "
                         "users get; rssm's own runs use threads='auto')")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    ap.add_argument("--from-csv", nargs="+", default=None, metavar="CSV",
                    help="print the tables of earlier runs (their stepsizes.csv) and exit")
    args = ap.parse_args(argv)
    if args.from_csv:
        for path in args.from_csv:
            with open(path, newline="") as fh:
                rows = [_typed(r) for r in csv.DictReader(fh)]
            names = list(dict.fromkeys(r["problem"] for r in rows))
            print(f"# {path}")
            for line in _table(rows, names, METHODS, {}) + [""] + _per_seed(rows, names):
                print(line)
            print()
        return 0
    if args.threads is not None:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(args.threads)
    import numpy as np

    from benchmarks.suite import machine
    from rssm.stepsizes import (
        AdaptiveGeometric,
        Auto,
        Backtracking,
        Geometric,
        PolyakBest,
        PolyakLevel,
    )

    seeds = list(range(1, 1 + (args.seeds or (1 if args.quick else 5))))
    methods = METHODS if not args.quick else (("rsm", 1), ("rssm", 5))
    probs = _problems(args.quick)
    names = args.problems or list(probs)
    candidates = {} if not (args.candidates or args.quick) else {
        "PolyakLevel": PolyakLevel, "PolyakBest": PolyakBest,
        "AdaptiveGeometric": AdaptiveGeometric, "Backtracking": Backtracking}
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "stepsizes.log"), "w")

    def say(msg=""):
        print(msg, flush=True)
        log.write(msg + "\n")
        log.flush()

    say(f"# python -m benchmarks.stepsizes {' '.join(argv if argv is not None else sys.argv[1:])}")
    say(f"# {machine()}")
    say(f"# seeds {seeds}; levels {LEVELS}; times are solver seconds")
    rows = []
    wall0 = time.perf_counter()
    for name in names:
        build, grid, budget = probs[name]
        for seed in seeds:
            prob, x0 = build(seed)
            exact = prob.has_error and name != "sparse_pca"
            runs = []   # (label, rule-label, method key, trace tuple)
            for method, ell in methods:
                if ell > prob.shape[1]:
                    continue            # more blocks than columns (sparse_basis: p = 5)
                key = "rsm" if method == "rsm" else f"rssm-l{ell}"
                tr = _run_rssm(prob, x0, method, ell, Auto(), budget, seed, exact=exact)
                runs.append(("auto", "Auto", key, tr))
                best_t = _first(tr[0], tr[1], tr[3], LEVELS[-1])[0] if exact else math.inf
                for cname, cls in candidates.items():
                    cap = 3.0 * best_t if math.isfinite(best_t) else None
                    tr = _run_rssm(prob, x0, method, ell, cls(), budget, seed, cap, exact)
                    runs.append((cname, cname, key, tr))
                best_t = math.inf
                for mu0, beta in grid:
                    cap = 1.5 * best_t if math.isfinite(best_t) else None
                    tr = _run_rssm(prob, x0, method, ell, Geometric(mu0, beta), budget, seed,
                                   cap, exact)
                    if exact:
                        best_t = min(best_t, _first(tr[0], tr[1], tr[3], LEVELS[-1])[0])
                    runs.append(("grid", f"geometric({mu0:.3g},{beta:g})", key, tr))
            t_auto_rsm = min((_first(r[3][0], r[3][1], r[3][3], LEVELS[-1])[0]
                              for r in runs if r[0] == "auto"), default=math.inf)
            cap = max(10.0, 3 * t_auto_rsm) if math.isfinite(t_auto_rsm) else 30.0
            try:
                tr = _run_pymanopt(prob, x0, budget, cap)
                runs.append(("pymanopt", "SteepestDescent", "rsm", tr[:4]))
            except ImportError:
                say("# pymanopt not installed: its rows are missing")
            if not exact:   # relative objective gap to the best value any run reached
                f_min = min(float(np.min(r[3][2])) for r in runs)
                runs = [(a, b, c, (t[0], t[1], t[2],
                                   (t[2] - f_min) / max(abs(f_min), 1e-300)) + tuple(t[4:]))
                        for a, b, c, t in runs]
            for kind, label, key, tr in runs:
                row = dict(problem=name, seed=seed, method=key, kind=kind, rule=label,
                           final_error=float(tr[3][-1]), iterations=int(tr[1][-1]),
                           time=float(tr[0][-1]))
                for lv in LEVELS:
                    t, it = _first(tr[0], tr[1], tr[3], lv)
                    row[f"time_{lv:g}"], row[f"iter_{lv:g}"] = t, it
                rows.append(row)
            say(f"{name} seed {seed}: {len(runs)} runs, "
                f"{time.perf_counter() - wall0:.0f} s so far")
    path = os.path.join(args.out, "stepsizes.csv")
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    say("")
    for line in _table(rows, names, methods, candidates) + [""] + _per_seed(rows, names):
        say(line)
    say(f"\n# wall time {time.perf_counter() - wall0:.0f} s; rows in {path}")
    log.close()
    return 0


def _typed(row):
    """A CSV row with its numbers back as numbers."""
    out = dict(row)
    for k in ("seed", "iterations") + tuple(f"iter_{lv:g}" for lv in LEVELS):
        out[k] = int(out[k])
    for k in ("final_error", "time") + tuple(f"time_{lv:g}" for lv in LEVELS):
        out[k] = float(out[k])
    return out


def _tuned(sel, seed):
    """The grid point with the least time to 1e-10 on this seed (then 1e-8, then error)."""
    lv8, lv10 = (f"{lv:g}" for lv in LEVELS)
    g = [r for r in sel if r["seed"] == seed and r["kind"] == "grid"]
    return min(g, key=lambda r: (r[f"time_{lv10}"], r[f"time_{lv8}"], r["final_error"]))


def _per_seed(rows, names):
    """Per instance: on how many seeds auto, the tuned grid point and Pymanopt reach
    1e-10, and the ratios auto / tuned and auto / Pymanopt of the time to 1e-10 on each
    seed where both reach it."""
    lv10 = f"{LEVELS[-1]:g}"
    out = ["| problem | method | seeds to 1e-10: auto / tuned / Pymanopt | auto/tuned time, "
           "per seed | auto/Pymanopt time, per seed |", "|---|---|---|---|---|"]
    for name in names:
        keys = list(dict.fromkeys(r["method"] for r in rows
                                  if r["problem"] == name and r["kind"] == "auto"))
        for key in keys:
            sel = [r for r in rows if r["problem"] == name and r["method"] == key]
            seeds = sorted({r["seed"] for r in sel})
            n_a = n_t = n_p = 0
            r_t, r_p = [], []
            for s in seeds:
                ta = next(r for r in sel if r["seed"] == s and r["kind"] == "auto")[f"time_{lv10}"]
                tt = _tuned(sel, s)[f"time_{lv10}"]
                n_a += math.isfinite(ta)
                n_t += math.isfinite(tt)
                if math.isfinite(ta) and math.isfinite(tt):
                    r_t.append(f"{ta / tt:.2f}")
                pm = [r for r in rows if r["problem"] == name and r["seed"] == s
                      and r["kind"] == "pymanopt" and key == "rsm"]
                if pm and math.isfinite(pm[0][f"time_{lv10}"]):
                    n_p += 1
                    if math.isfinite(ta):
                        r_p.append(f"{ta / pm[0][f'time_{lv10}']:.2f}")
            pym = f" / {n_p}" if key == "rsm" else ""
            out.append(f"| {name} | {key} | {n_a} / {n_t}{pym} of {len(seeds)} | "
                       f"{' '.join(r_t) or '-'} | {' '.join(r_p) if key == 'rsm' else ''} |")
    return out


def _med(vals):
    import numpy as np

    v = [x for x in vals]
    if not v:
        return math.nan
    return float(np.median(v))


def _table(rows, names, methods, candidates):
    """Median over seeds, per problem and method: auto, tuned (best grid point per seed),
    Pymanopt; the other candidates' iterations to 1e-10."""
    lv8, lv10 = (f"{lv:g}" for lv in LEVELS)
    out = ["| problem | method | auto it 1e-8 / 1e-10 | auto s to 1e-10 | tuned it 1e-8 / 1e-10 "
           "| tuned s to 1e-10 | auto/tuned time | Pymanopt it / s to 1e-10 |"
           + "".join(f" {c} it 1e-10 |" for c in candidates),
           "|" + "---|" * (8 + len(candidates))]

    def fmt_it(v):
        return "-" if not math.isfinite(v) or v < 0 else f"{v:.0f}"

    def fmt_t(v):
        return "-" if not math.isfinite(v) else f"{v:.3g}"

    for name in names:
        for method, ell in methods:
            key = "rsm" if method == "rsm" else f"rssm-l{ell}"
            sel = [r for r in rows if r["problem"] == name and r["method"] == key]
            if not sel:
                continue
            seeds = sorted({r["seed"] for r in sel})
            auto = [next(r for r in sel if r["seed"] == s and r["kind"] == "auto") for s in seeds]
            tuned = [_tuned(sel, s) for s in seeds]

            def med(rs, col, inf_if_any=True):
                v = [r[col] if r[col] >= 0 else math.inf for r in rs]
                return float(sorted(v)[len(v) // 2]) if v else math.nan

            ta, tt = med(auto, f"time_{lv10}"), med(tuned, f"time_{lv10}")
            ratio = ta / tt if math.isfinite(ta) and math.isfinite(tt) else math.nan
            pym = "" if method != "rsm" else "-"
            if method == "rsm":
                pr = [r for r in rows if r["problem"] == name and r["kind"] == "pymanopt"]
                if pr:
                    pym = f"{fmt_it(med(pr, f'iter_{lv10}'))} / {fmt_t(med(pr, f'time_{lv10}'))}"
            cand = [fmt_it(med([r for r in sel if r["rule"] == c], f"iter_{lv10}"))
                    for c in candidates]
            out.append(
                f"| {name} | {key} | {fmt_it(med(auto, f'iter_{lv8}'))} / "
                f"{fmt_it(med(auto, f'iter_{lv10}'))} | {fmt_t(ta)} | "
                f"{fmt_it(med(tuned, f'iter_{lv8}'))} / {fmt_it(med(tuned, f'iter_{lv10}'))} | "
                f"{fmt_t(tt)} | {'-' if math.isnan(ratio) else f'{ratio:.2f}'} | {pym} |"
                + "".join(f" {c} |" for c in cand))
    return out


if __name__ == "__main__":
    sys.exit(main())
