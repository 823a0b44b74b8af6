"""The benchmark sections of ``python -m benchmarks`` (issue 4 targets 1-4 and the peers).

Every comparison is measured interleaved in one process (methods alternate round by round
and medians are taken), so load from other processes on a shared machine hits all methods
alike. Sizes are scaled down from the issue's where a full run would exceed its time
budget; each section prints what it ran.
"""

from __future__ import annotations

import csv
import math
import os
import platform
import time
import tracemalloc
from collections.abc import Callable

import numpy as np

import rssm
from rssm import stiefel
from rssm.blocks import Partition, UniformPairs
from rssm.solvers.rsm import RSMSolver
from rssm.solvers.rssm import RSSMSolver
from rssm.stepsizes import PaperSchedule, StepContext

PC = time.perf_counter

# Sizes per mode -----------------------------------------------------------------------------
CONFIG = {
    "quick": dict(rounds=8, steps=3, gemm=1024, scale_reps=2,
                  m_sweep=[2000, 5000, 10000], n_sweep=[100, 200, 400], p_sweep=[32, 64, 128],
                  p_sweep_n=256, p_sweep_m=4000, odl_sweep=[40, 60, 90],
                  acc_cap=2.0, acc_seeds=3, acc_large=(150, 135, 6000), acc_large_cap=3.0,
                  acc_paper_grid_betas=(0.9,),
                  acc_large_grid=((1.0, 0.9),), peer_cap=1.5),
    "default": dict(rounds=15, steps=5, gemm=2048, scale_reps=3,
                    m_sweep=[5000, 10000, 20000, 50000], n_sweep=[125, 250, 500, 1000],
                    p_sweep=[62, 125, 250, 500], p_sweep_n=500, p_sweep_m=10000,
                    odl_sweep=[60, 120, 250], acc_cap=6.0, acc_seeds=5,
                    acc_large=(200, 180, 10000), acc_large_cap=20.0,
                    acc_large_grid=((0.3, 0.95), (1.0, 0.95)), peer_cap=4.0),
    "full": dict(rounds=25, steps=5, gemm=2048, scale_reps=3,
                 m_sweep=[5000, 10000, 20000, 50000, 100000],
                 n_sweep=[125, 250, 500, 1000, 2000], p_sweep=[62, 125, 250, 500, 1000],
                 p_sweep_n=1010, p_sweep_m=10000, odl_sweep=[60, 120, 250, 500],
                 acc_cap=6.0, acc_seeds=5, acc_large=(300, 270, 15000), acc_large_cap=60.0,
                 acc_large_grid=((0.3, 0.95), (1.0, 0.95)), peer_cap=6.0,
                 fusion_large=((100, 100000, (9, 18)), (1010, 10000, (6, 12)))),
}


def machine() -> str:
    """One line describing the machine and the BLAS."""
    try:
        with open("/proc/cpuinfo") as fh:
            model = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")),
                         platform.processor())
    except OSError:
        model = platform.processor()
    blas = "?"
    try:
        cfg = np.show_config(mode="dicts")
        b = cfg["Build Dependencies"]["blas"]
        blas = f"{b.get('name')} {b.get('version')}"
    except Exception:  # noqa: BLE001 - best effort description
        pass
    return (f"{model}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}, "
            f"NumPy {np.__version__}, BLAS {blas}, BLAS threads "
            f"{os.environ.get('OPENBLAS_NUM_THREADS', '?')}; machine shared with other jobs")


def write_csv(path: str, rows: list[dict]) -> None:
    if not rows:
        return
    keys = list(rows[0])
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def fit_slope(xs, ys) -> float:
    """Least-squares slope of log y against log x."""
    lx, ly = np.log(np.asarray(xs, float)), np.log(np.asarray(ys, float))
    return float(np.polyfit(lx, ly, 1)[0])


# Problems and solvers -----------------------------------------------------------------------
def dpcp(n: int, p: int, m: int, seed: int = 0) -> rssm.problems.DPCP:
    """DPCP with the paper's 30 % inliers, d = n - p."""
    n_in = int(round(0.3 * m))
    return rssm.problems.DPCP.synthetic(n=n, d=n - p, n_inliers=n_in, n_outliers=m - n_in,
                                        seed=seed)


def start(prob, seed: int = 0) -> np.ndarray:
    """Haar-random start. Offset seed: ``ODL.synthetic(seed=s)`` draws X* as the first
    draw of default_rng(s), so starting from random_point with the same s would start at X*."""
    return stiefel.random_point(*prob.shape, np.random.default_rng(10_000 + seed))


def make_solver(prob, x0, ell: int | None, seed: int = 0):
    rng = np.random.default_rng(seed)
    if ell is None:
        return RSMSolver(prob, x0, None, None, rng)
    return RSSMSolver(prob, x0, Partition.uniform(prob.shape[1], ell), UniformPairs(), rng)


def data_of(prob) -> np.ndarray:
    return prob.yt if hasattr(prob, "yt") else prob.y


# Section 1 and 2: per-iteration cost --------------------------------------------------------
def dominant_gemms(yt: np.ndarray, x: np.ndarray, c: int) -> Callable[[], None]:
    """The two products of one iteration on c columns, alone: G_C^T = W_C Yt^T and
    Z_C^T = X_C^T Yt (2 m n c flops each), same shapes and layouts as in the oracle."""
    m = yt.shape[1]
    w = np.ones((c, m))
    z = np.empty((c, m))
    xc = x[:, :c]

    def run() -> None:
        np.matmul(w, yt.T)
        np.matmul(xc.T, yt, out=z)

    return run


def periter(cfg: dict, out: str) -> list[dict]:
    a = np.random.default_rng(0).standard_normal((cfg["gemm"], cfg["gemm"]))
    ts = []
    for _ in range(3):
        t = PC()
        a @ a
        ts.append(PC() - t)
    gemm_rate = 2.0 * cfg["gemm"] ** 3 / min(ts) / 1e9
    print(f"\n== 1-2. Per-iteration cost (median of {cfg['rounds']} interleaved rounds x "
          f"{cfg['steps']} steps); square GEMM {cfg['gemm']}^3: {gemm_rate:.1f} GFLOP/s")
    rows = []
    probs = [("dpcp", rssm.problems.DPCP.synthetic(seed=0)),
             ("odl", rssm.problems.ODL.synthetic(seed=0))]
    for name, prob in probs:
        n, p = prob.shape
        m = prob.m
        x0 = start(prob)
        yt = data_of(prob)
        methods = {"rsm": None, "rssm l=3": 3, "rssm l=5": 5, "rssm l=10": 10}
        solvers = {k: make_solver(prob, x0, ell) for k, ell in methods.items()}
        cs = {k: p if ell is None else int(Partition.uniform(p, ell).sizes[:2].sum())
              for k, ell in methods.items()}
        refs = {k: dominant_gemms(yt, x0, cs[k]) for k in methods}
        t_step = {k: [] for k in methods}
        t_ref = {k: [] for k in methods}
        flops = {k: [] for k in methods}
        for _ in range(cfg["rounds"]):
            for k, s in solvers.items():
                s.step(1e-4)
                for _ in range(cfg["steps"]):
                    t = PC()
                    f = s.step(1e-4)
                    t_step[k].append(PC() - t)
                    flops[k].append(f)
                refs[k]()
                for _ in range(2):
                    t = PC()
                    refs[k]()
                    t_ref[k].append(PC() - t)
        print(f"\n{name.upper()} n={n} p={p} m={m}")
        print(f"{'method':>10} {'ms/it':>8} {'MFLOP':>8} {'GFLOP/s':>8} {'BLAS ref':>9} "
              f"{'frac ref':>8} {'frac GEMM':>9} {'t/t_RSM':>8} {'flop ratio':>10} {'x':>6} "
              f"{'BLAS x':>6}")
        base_t = float(np.median(t_step["rsm"]))
        base_f = float(np.mean(flops["rsm"]))
        base_ref = float(np.median(t_ref["rsm"]))
        for k in methods:
            med = float(np.median(t_step[k]))
            fl = float(np.mean(flops[k]))
            ref_rate = 4.0 * m * n * cs[k] / float(np.median(t_ref[k])) / 1e9
            rate = fl / med / 1e9
            ratio, fratio = med / base_t, fl / base_f
            # The same ratio for the two BLAS products alone: what target 2 would read if
            # everything outside BLAS cost nothing (the floor set by BLAS itself).
            ref_ratio = float(np.median(t_ref[k])) / base_ref
            gemm_fratio = cs[k] / p
            row = dict(problem=name, n=n, p=p, m=m, method=k, c=cs[k], ms_per_iter=med * 1e3,
                       mflop=fl / 1e6, gflops=rate, blas_ref_gflops=ref_rate,
                       frac_of_ref=rate / ref_rate, frac_of_gemm=rate / gemm_rate,
                       time_ratio=ratio, flop_ratio=fratio, ratio_over_flop=ratio / fratio,
                       blas_ref_ratio=ref_ratio, blas_ref_ratio_over_flop=ref_ratio / gemm_fratio,
                       gemm_gflops=gemm_rate)
            rows.append(row)
            print(f"{k:>10} {med * 1e3:8.3f} {fl / 1e6:8.2f} {rate:8.1f} {ref_rate:9.1f} "
                  f"{rate / ref_rate:8.2f} {rate / gemm_rate:9.2f} {ratio:8.3f} {fratio:10.3f} "
                  f"{ratio / fratio:6.2f} {ref_ratio / gemm_fratio:6.2f}")
        l5 = next(r for r in rows if r["problem"] == name and r["method"] == "rssm l=5")
        mine = [r for r in rows if r["problem"] == name]
        ok1 = all(r["frac_of_ref"] >= 0.6 for r in mine)
        ok2 = all(r["ratio_over_flop"] <= 1.25 for r in mine)
        print("x = (t/t_RSM) / (flop ratio); BLAS x = the same for the two BLAS products "
              "alone (c/p flops), i.e. the floor BLAS itself sets on x")
        print(f"target 1 (>= 0.60 of BLAS ref): {'met' if ok1 else 'NOT met'}"
              f"; target 2 (t ratio <= 1.25 x flop ratio): {'met' if ok2 else 'NOT met'}"
              f"; issue 2: RSSM l=5 / RSM = {l5['time_ratio']:.3f} (<= 0.5: "
              f"{'yes' if l5['time_ratio'] <= 0.5 else 'NO'})")
    write_csv(os.path.join(out, "periter.csv"), rows)
    return rows


def _data_pass(yt: np.ndarray, c: int, chunk: int | None) -> tuple[Callable[[], None], np.ndarray]:
    """The data work between two partial subgradients: the cache update Z_C^T = X_C^T Yt of
    one step, the weights W = Z_C^T diag(s) and the next subgradient G^T = W Yt^T. With
    ``chunk`` it is done in one pass over column chunks of Yt (each chunk used twice while it
    is in cache), the fusion proposed for small blocks; with None, as two whole GEMMs.
    Returns the function and the array it writes G^T into (c x n)."""
    n, m = yt.shape
    rng = np.random.default_rng(1)
    xc = rng.standard_normal((c, n))
    s = rng.random(m)
    z = np.empty((c, m))
    w = np.empty((c, m))
    g = np.empty((c, n))
    tmp = np.empty((c, n))
    if chunk is None:
        def run() -> None:
            np.matmul(xc, yt, out=z)
            np.multiply(z, s, out=w)
            np.matmul(w, yt.T, out=g)
        return run, g
    sl = [slice(a, min(m, a + chunk)) for a in range(0, m, chunk)]

    def fused() -> None:
        for i, j in enumerate(sl):
            y = yt[:, j]
            np.matmul(xc, y, out=z[:, j])
            np.multiply(z[:, j], s[j], out=w[:, j])
            if i == 0:
                np.matmul(w[:, j], y.T, out=g)
            else:
                np.matmul(w[:, j], y.T, out=tmp)
                np.add(g, tmp, out=g)
    return fused, g


def fusion(cfg: dict, out: str) -> list[dict]:
    print(f"\n== 1b. Would one chunked pass over Yt help small blocks? Cache update + weights "
          f"+ next subgradient as two whole GEMMs against one pass over column chunks of Yt "
          f"(median of {cfg['rounds'] * 8} interleaved repetitions; {cfg['rounds']} for data "
          f"beyond 1e6 entries)")
    rows = []
    shapes = [("dpcp", 100, 5000, (18, 36, 90)), ("odl", 60, 4648, (12, 24, 60))]
    shapes += [("dpcp", n, m, cs) for n, m, cs in cfg.get("fusion_large", ())]
    chunks = (512, 1024, 2048)
    for name, n, m, cs in shapes:
        yt = np.random.default_rng(0).standard_normal((n, m))
        reps = cfg["rounds"] * 8 if n * m <= 10**6 else cfg["rounds"]
        for c in cs:
            fns = {"two GEMMs": _data_pass(yt, c, None)[0],
                   **{f"chunks of {b}": _data_pass(yt, c, b)[0] for b in chunks}}
            ts = {k: [] for k in fns}
            for _ in range(reps):
                for k, f in fns.items():
                    t = PC()
                    f()
                    ts[k].append(PC() - t)
            med = {k: float(np.median(v)) for k, v in ts.items()}
            base = med["two GEMMs"]
            for k, v in med.items():
                rows.append(dict(problem=name, n=n, m=m, c=c, variant=k, ms=v * 1e3,
                                 gflops=4.0 * m * n * c / v / 1e9, over_two_gemms=v / base))
            print(f"  {name} n={n} m={m} c={c:3d}: two GEMMs {base * 1e3:6.3f} ms "
                  f"({4.0 * m * n * c / base / 1e9:4.1f} GFLOP/s); " + ", ".join(
                      f"{k} x{med[k] / base:4.2f}" for k in fns if k != "two GEMMs"))
    best = min(r["over_two_gemms"] for r in rows if r["variant"] != "two GEMMs")
    print(f"  best chunked pass / two GEMMs: {best:.2f} (< 1 would mean fusion pays)")
    write_csv(os.path.join(out, "fusion.csv"), rows)
    return rows


# Section 3: scaling ---------------------------------------------------------------------------
def time_steps(solvers: dict, reps: int) -> dict:
    """Median seconds per step, methods interleaved."""
    out = {k: [] for k in solvers}
    for s in solvers.values():
        s.step(1e-4)
    for _ in range(reps):
        for k, s in solvers.items():
            t = PC()
            s.step(1e-4)
            out[k].append(PC() - t)
    return {k: float(np.median(v)) for k, v in out.items()}


def scaling(cfg: dict, out: str) -> list[dict]:
    print("\n== 3. Scaling: seconds per iteration (median); exponent = log-log LSQ slope")
    ells = (5, 10, 20)
    rows = []
    sweeps = [
        ("dpcp-m", "m", [(100, 90, m) for m in cfg["m_sweep"]]),
        ("dpcp-n", "n", [(n, 50, 5000) for n in cfg["n_sweep"]]),
        ("dpcp-p", "p", [(cfg["p_sweep_n"], p, cfg["p_sweep_m"]) for p in cfg["p_sweep"]]),
        ("odl-n", "n", [(n, n, None) for n in cfg["odl_sweep"]]),
    ]
    for sweep, var, points in sweeps:
        for n, p, m in points:
            if sweep.startswith("odl"):
                prob = rssm.problems.ODL.synthetic(n=n, seed=0)
            else:
                prob = dpcp(n, p, m)
            x0 = start(prob)
            methods = {"rsm": None, **{f"rssm l={e}": e for e in ells if e <= p}}
            solvers = {k: make_solver(prob, x0, e) for k, e in methods.items()}
            fl = {k: s.step(1e-4) for k, s in solvers.items()}
            t = time_steps(solvers, cfg["scale_reps"])
            val = {"m": prob.m, "n": n, "p": p}[var]
            for k in methods:
                rows.append(dict(sweep=sweep, var=var, value=val, n=n, p=p, m=prob.m, method=k,
                                 sec_per_iter=t[k], flops=fl[k]))
            print(f"{sweep:8} n={n:5d} p={p:5d} m={prob.m:7d}  " + "  ".join(
                f"{k}: {t[k] * 1e3:9.2f} ms" for k in methods))
            del solvers, prob
    print("\nexponents (measured / flop model; expected 1 in m, n, p for DPCP and 3.5 in n "
          "for ODL, where m = 10 n^1.5 and p = n):")
    fits = []
    for sweep, _var, _ in sweeps:
        for k in ["rsm"] + [f"rssm l={e}" for e in ells]:
            sel = [r for r in rows if r["sweep"] == sweep and r["method"] == k]
            if len(sel) < 2:
                continue
            xs = [r["value"] for r in sel]
            meas = fit_slope(xs, [r["sec_per_iter"] for r in sel])
            model = fit_slope(xs, [r["flops"] for r in sel])
            # The slope between the two largest points: how the cost grows once the blocks
            # are large enough for BLAS to run at full rate.
            last = fit_slope(xs[-2:], [r["sec_per_iter"] for r in sel[-2:]])
            expect = 3.5 if sweep.startswith("odl") else 1.0
            fits.append(dict(sweep=sweep, method=k, exponent=meas, flop_model_exponent=model,
                             expected=expect, within_15pct=abs(meas - expect) <= 0.15 * expect,
                             last_two_points_exponent=last))
            ok = abs(meas - expect) <= 0.15 * expect
            print(f"  {sweep:8} {k:11} {meas:6.3f}  (flop model {model:6.3f}, expected "
                  f"{expect}, within 15%: {'yes' if ok else 'NO'}; between the two largest "
                  f"points {last:6.3f})")
    write_csv(os.path.join(out, "scaling.csv"), rows)
    write_csv(os.path.join(out, "scaling_fits.csv"), fits)
    plot_scaling(rows, fits, os.path.join(out, "scaling.png"))
    return rows


def plot_scaling(rows: list[dict], fits: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    sweeps = list(dict.fromkeys(r["sweep"] for r in rows))
    fig, axes = plt.subplots(1, len(sweeps), figsize=(4.2 * len(sweeps), 3.8))
    for ax, sw in zip(np.atleast_1d(axes), sweeps, strict=True):
        for k in dict.fromkeys(r["method"] for r in rows if r["sweep"] == sw):
            sel = [r for r in rows if r["sweep"] == sw and r["method"] == k]
            slope = next((f["exponent"] for f in fits if f["sweep"] == sw and f["method"] == k),
                         math.nan)
            ax.loglog([r["value"] for r in sel], [r["sec_per_iter"] for r in sel], "o-",
                      label=f"{k} (slope {slope:.2f})")
        # Label the swept values themselves; log minor labels overlap.
        xs = sorted({r["value"] for r in rows if r["sweep"] == sw})
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xticks(xs, [f"{v:g}" for v in xs], fontsize=7)
        ax.set_xlabel(sel[0]["var"])
        ax.set_ylabel("seconds / iteration")
        ax.set_title(sw)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# Memory -------------------------------------------------------------------------------------
def memory(cfg: dict, out: str) -> list[dict]:
    print("\n== 3b. Peak memory (tracemalloc) of building the solver and 5 steps, against "
          "the data plus the 2 m p cache")
    rows = []
    m = cfg["m_sweep"][-1]
    for n, p in ((100, 90), (cfg["p_sweep_n"] // 2, cfg["p_sweep"][1])):
        prob = dpcp(n, p, m)
        x0 = start(prob)
        data = prob.yt.nbytes
        for k, ell in (("rsm", None), ("rssm l=5", 5), ("rssm l=20", 20)):
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
            s = make_solver(prob, x0, ell)
            for _ in range(5):
                s.step(1e-4)
            peak = tracemalloc.get_traced_memory()[1] - base
            tracemalloc.stop()
            del s
            cache = 16.0 * m * p  # Z^T and the weight buffer, p x m each
            total = data + peak
            ratio = total / (data + cache)
            rows.append(dict(n=n, p=p, m=m, method=k, data_mb=data / 1e6, extra_peak_mb=peak / 1e6,
                             cache_2mp_mb=cache / 1e6, extra_over_2mp=peak / cache,
                             total_over_data_plus_2mp=ratio, nxn_mb=8.0 * n * n / 1e6,
                             mxm_mb=8.0 * m * m / 1e6))
            print(f"  n={n} p={p} m={m} {k:10}: data {data / 1e6:7.1f} MB, solver peak "
                  f"{peak / 1e6:7.1f} MB = {peak / cache:4.2f} x (2 m p doubles); "
                  f"(data + peak)/(data + 2 m p) = {ratio:4.2f}")
        del prob
    print("  the solver keeps Z^T (p x m) and a p x m weight buffer (2 m p doubles); no n x n "
          "or m x m array is allocated by the solver")
    write_csv(os.path.join(out, "memory.csv"), rows)
    return rows


# Section 4: time to accuracy ----------------------------------------------------------------
def first_time(res, tol: float) -> float:
    err, t = res.trace["error"], res.trace["time"]
    hit = np.flatnonzero(err <= tol)
    return float(t[hit[0]]) if hit.size else math.inf


def _acc_cases(cfg: dict) -> list[tuple]:
    """(name, problem of a seed, start of a seed, step-size grid, methods, cap) per case.

    Every seed draws its own data; DPCP starts from the spectral initialization (the
    problem's default, as in the paper), ODL from a Haar point. The grids for the paper
    instances are those of ``rssm reproduce --tuned`` (`rssm.experiments.configs`)."""
    from rssm.experiments.configs import PROBLEMS

    n_l, p_l, m_l = cfg["acc_large"]
    paper_methods = (("rsm", None), ("rssm l=3", 3), ("rssm l=5", 5), ("rssm l=10", 10))
    betas = cfg.get("acc_paper_grid_betas")

    def paper_grid(name: str) -> tuple:
        grid = PROBLEMS[name].tuned_grid
        if betas is None:
            return grid
        return tuple(g for g in grid if g["rule"] == "geometric" and g["beta"] in betas)

    large_grid = tuple({"rule": "geometric", "mu0": mu0, "beta": beta}
                       for mu0, beta in cfg["acc_large_grid"])
    return [
        ("dpcp", lambda sd: rssm.problems.DPCP.synthetic(seed=sd), lambda prob, sd: None,
         paper_grid("dpcp"), paper_methods, cfg["acc_cap"]),
        ("odl", lambda sd: rssm.problems.ODL.synthetic(seed=sd), start,
         paper_grid("odl"), paper_methods, cfg["acc_cap"]),
        (f"dpcp n={n_l} p={p_l} m={m_l}", lambda sd: dpcp(n_l, p_l, m_l, seed=sd),
         lambda prob, sd: None, large_grid,
         (("rsm", None), ("rssm l=5", 5), ("rssm l=10", 10)), cfg["acc_large_cap"]),
    ]


def _acc_key(res) -> tuple:
    """Tuning order: first to 1e-8, then first to 1e-4, then the lowest final error."""
    err = res.error if math.isfinite(res.error) else math.inf
    return (first_time(res, 1e-8), first_time(res, 1e-4), err)


def accuracy(cfg: dict, out: str) -> list[dict]:
    from rssm.experiments.configs import make_stepsize, stepsize_label

    tune_seed = 1000
    print(f"\n== 4. Time to error 1e-4 and 1e-8 (solver seconds, median of "
          f"{cfg['acc_seeds']} seeds, each seed its own data). Each method's step size is "
          f"picked from the grid below on separate data (seed {tune_seed}): first to 1e-8, "
          f"else first to 1e-4, else lowest final error. inf = not reached within the cap.")
    rows = []
    for name, make_prob, make_x0, grid, methods, cap in _acc_cases(cfg):
        print(f"\n  {name}: cap {cap} s per run; grid: "
              + ", ".join(stepsize_label(g) for g in grid))
        probs = {sd: make_prob(sd) for sd in (tune_seed, *range(cfg["acc_seeds"]))}

        def go(spec: dict, sd: int, ell, probs=probs, make_x0=make_x0, cap=cap):
            prob = probs[sd]
            return rssm.minimize(
                prob, make_x0(prob, sd), method="rsm" if ell is None else "rssm",
                stepsize=make_stepsize(spec), max_time=cap, target_error=1e-8, seed=sd,
                record=5, options={"n_blocks": ell}
            )

        for label, ell in methods:
            trials = [(spec, go(spec, tune_seed, ell)) for spec in grid]
            spec = min(trials, key=lambda t: _acc_key(t[1]))[0]
            res = [go(spec, sd, ell) for sd in range(cfg["acc_seeds"])]
            t4s = [first_time(r, 1e-4) for r in res]
            t8s = [first_time(r, 1e-8) for r in res]
            t4, t8 = float(np.median(t4s)), float(np.median(t8s))
            fin = float(np.median([r.error for r in res]))
            its = float(np.median([r.n_iter for r in res]))
            rows.append(dict(problem=name, method=label, stepsize=stepsize_label(spec),
                             t_1e4=t4, t_1e8=t8, reached_1e4=sum(map(math.isfinite, t4s)),
                             reached_1e8=sum(map(math.isfinite, t8s)), median_iterations=its,
                             median_final_error=fin, cap_s=cap, seeds=len(res)))
            print(f"  {label:10} {stepsize_label(spec):30} t(1e-4) {t4:8.3f} s "
                  f"({rows[-1]['reached_1e4']}/{len(res)})  t(1e-8) {t8:8.3f} s "
                  f"({rows[-1]['reached_1e8']}/{len(res)})  median final error {fin:.1e}")
        sel = [r for r in rows if r["problem"] == name]
        for key, tol in (("t_1e4", "1e-4"), ("t_1e8", "1e-8")):
            w = min(sel, key=lambda r: (r[key], r["median_final_error"]))
            print(f"  -> fastest to {tol}: {w['method']}"
                  + ("" if math.isfinite(w[key]) else " (none reached it; lowest final error)"))
        del probs
    write_csv(os.path.join(out, "accuracy.csv"), rows)
    return rows


# Peers ----------------------------------------------------------------------------------------
def _plain_numpy_step(prob, kind: str):
    """A plain NumPy RSM/RSSM step, written the obvious way: Yt^T X recomputed in full
    every iteration, fancy-indexed column blocks, tangent projection and SVD polar."""
    yt = data_of(prob)
    m = yt.shape[1]
    is_dpcp = kind == "dpcp"

    def subgrad(x):
        z = yt.T @ x
        if is_dpcp:
            r = np.linalg.norm(z, axis=1)
            return yt @ (z / np.where(r > 0, r, np.inf)[:, None]) / m
        return yt @ np.sign(z)

    def polar(a):
        u, _, vt = np.linalg.svd(a, full_matrices=False)
        return u @ vt

    def rsm(x, gamma, rng):
        g = subgrad(x)
        xtg = x.T @ g
        return polar(x - gamma * (g - x @ (0.5 * (xtg + xtg.T))))

    def rssm_step(x, gamma, rng, blocks):
        i, j = rng.choice(len(blocks), 2, replace=False)
        c = np.concatenate([blocks[i], blocks[j]])
        g = subgrad(x)[:, c]
        y = x.T @ g
        y[c] = 0.5 * (y[c] + y[c].T)
        xi = x[:, c] - gamma * (g - x @ y)
        rest = np.setdiff1d(np.arange(x.shape[1]), c)
        xr = x[:, rest]
        x = x.copy()
        x[:, c] = polar(xi - xr @ (xr.T @ xi))
        return x

    return rsm, rssm_step


def peers(cfg: dict, out: str) -> list[dict]:
    print(f"\n== Peers on the paper's instances: median ms per iteration, and the error "
          f"reached after {cfg['peer_cap']} s with the paper's schedule (RSM's for full-step "
          f"methods, l=5 for block methods); same data, same start, same process")
    rows = []
    try:
        import geoopt  # noqa: F401
        import pymanopt  # noqa: F401
        import torch  # noqa: F401

        have = True
    except ImportError as exc:
        print(f"  peers skipped: {exc} (pip install -e '.[bench]')")
        have = False
    cases = (("dpcp", rssm.problems.DPCP.synthetic(seed=0), PaperSchedule.dpcp()),
             ("odl", rssm.problems.ODL.synthetic(seed=0), PaperSchedule.odl()))
    for name, prob, sched in cases:
        rows += _peers_one(name, prob, sched, cfg["peer_cap"], have)
    write_csv(os.path.join(out, "peers.csv"), rows)
    return rows



def _peers_one(name: str, prob, sched, cap: float, have: bool) -> list[dict]:
    """Peers on one problem: see `peers`."""
    rows = []
    if have:
        import geoopt
        import pymanopt
        import torch
    n, p = prob.shape
    x0 = start(prob, 0) if name == "odl" else prob.initial_point()
    ctx_rsm, ctx_5 = StepContext("rsm", 1), StepContext("rssm", 5)

    def loop(step: Callable, x: np.ndarray, ctx: StepContext, err=prob.error):
        ts = []
        k = 0
        t_all = 0.0
        while t_all < cap:
            gamma = sched(k, ctx)
            t = PC()
            x = step(x, gamma, k)
            dt = PC() - t
            ts.append(dt)
            t_all += dt
            k += 1
            if not np.isfinite(x).all():
                break
        return float(np.median(ts)), k, float(err(x)) if np.isfinite(x).all() else math.nan

    entries = {}
    for label, ell, ctx in (("rssm RSM", None, ctx_rsm), ("rssm RSSM l=5", 5, ctx_5)):
        solver = make_solver(prob, x0, ell)

        def sstep(x, g, k, solver=solver):
            solver.step(g)
            return solver.x

        entries[label] = loop(sstep, solver.x, ctx)
    rsm_np, rssm_np = _plain_numpy_step(prob, name)
    rng = np.random.default_rng(0)
    blocks = Partition.uniform(p, 5).blocks
    entries["plain NumPy RSM"] = loop(lambda x, g, k: rsm_np(x, g, rng), x0.copy(), ctx_rsm)
    entries["plain NumPy RSSM l=5"] = loop(lambda x, g, k: rssm_np(x, g, rng, blocks),
                                           x0.copy(), ctx_5)
    if have:
        man = pymanopt.manifolds.Stiefel(n, p, retraction="polar")
        entries["Pymanopt Stiefel loop"] = loop(
            lambda x, g, k: man.retraction(x, -g * man.projection(x, prob.subgradient(x))),
            x0.copy(), ctx_rsm)
        entries["Pymanopt SteepestDescent"] = _pymanopt_sd(pymanopt, man, prob, x0, cap)
        for glabel, gman in (("Geoopt RSGD Stiefel (Cayley)", geoopt.Stiefel()),
                             ("Geoopt RSGD EuclideanStiefel", geoopt.EuclideanStiefel())):
            entries[glabel] = _geoopt(torch, geoopt, gman, prob, name, x0, sched, ctx_rsm,
                                      cap)
    print(f"\n{name.upper()} n={n} p={p} m={prob.m}")
    base = entries["rssm RSM"][0]
    for label, (t, k, e) in entries.items():
        rows.append(dict(problem=name, method=label, ms_per_iter=t * 1e3,
                         vs_rssm_rsm=t / base, iterations=k, error_after_cap=e, cap_s=cap))
        print(f"  {label:30} {t * 1e3:9.3f} ms/it ({t / base:6.2f} x rssm RSM)  "
              f"{k:7d} its  error {e:.2e}")
    return rows


def _pymanopt_sd(pymanopt, man, prob, x0, cap):
    @pymanopt.function.numpy(man)
    def cost(x):
        return prob.cost(x)

    @pymanopt.function.numpy(man)
    def egrad(x):
        return prob.subgradient(x)

    problem = pymanopt.Problem(man, cost, euclidean_gradient=egrad)
    opt = pymanopt.optimizers.SteepestDescent(max_time=cap, max_iterations=10 ** 6, verbosity=0)
    t = PC()
    res = opt.run(problem, initial_point=x0.copy())
    el = PC() - t
    return el / max(res.iterations, 1), res.iterations, float(prob.error(res.point))


def _geoopt(torch, geoopt, gman, prob, name, x0, sched, ctx, cap):
    yt = torch.from_numpy(data_of(prob))
    m = yt.shape[1]
    param = geoopt.ManifoldParameter(torch.from_numpy(x0.copy()), manifold=gman)
    opt = geoopt.optim.RiemannianSGD([param], lr=1.0)
    ts = []
    k = 0
    while sum(ts) < cap:
        for group in opt.param_groups:
            group["lr"] = sched(k, ctx)
        t = PC()
        opt.zero_grad()
        z = yt.T @ param
        loss = torch.linalg.norm(z, dim=1).sum() / m if name == "dpcp" else z.abs().sum()
        loss.backward()
        opt.step()
        ts.append(PC() - t)
        k += 1
    x = param.detach().numpy().copy()
    err = float(prob.error(x)) if np.isfinite(x).all() else math.nan
    return float(np.median(ts)), k, err


# Driver -------------------------------------------------------------------------------------
def _userenv(cfg: dict, out: str) -> list[dict]:
    from benchmarks.userenv import userenv

    return userenv(cfg, out)


def _load(cfg: dict, out: str) -> list[dict]:
    from benchmarks.userenv import load

    return load(cfg, out)


SECTIONS = {"userenv": _userenv, "load": _load, "periter": periter, "fusion": fusion,
            "scaling": scaling, "memory": memory, "accuracy": accuracy, "peers": peers}


def main(mode: str, threads: int | None, only: list[str] | None, out: str) -> int:
    cfg = CONFIG[mode]
    os.makedirs(out, exist_ok=True)
    desc = machine()
    print(f"rssm {rssm.__version__} benchmarks, mode {mode}\nmachine: {desc}")
    t0 = PC()
    for name, fn in SECTIONS.items():
        if only is None or name in only:
            fn(cfg, out)
    total = PC() - t0
    with open(os.path.join(out, "machine.txt"), "w") as fh:
        fh.write(f"mode {mode}, BLAS threads "
                 f"{'default (no thread variable set)' if threads is None else threads}, "
                 f"{total:.0f} s\n{desc}\n")
    print(f"\ntotal {total:.0f} s; CSV files and scaling.png in {out}")
    return 0
