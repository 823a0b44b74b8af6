"""Benchmark sections on what the time buys: accuracy against time, and the peers
(Pymanopt, Geoopt, a plain NumPy loop) on the paper's instances (``python -m benchmarks``)."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable

import numpy as np

import rssm
from benchmarks.common import (
    data_of,
    dpcp,
    first_time,
    make_solver,
    plain_numpy_step,
    pymanopt_problem,
    start,
    write_csv,
)
from rssm.blocks import Partition
from rssm.stepsizes import PaperSchedule, StepContext

PC = time.perf_counter


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
    rsm_np, rssm_np = plain_numpy_step(prob, name)
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
    problem = pymanopt_problem(prob, man)
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


