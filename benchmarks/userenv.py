"""Speed where users run rssm: default thread settings, the peers beside it, and one other
busy process on the machine (issue #10).

Run as ``python -m benchmarks --only userenv load`` (or ``python -m benchmarks.userenv``).
Nothing here sets a thread variable: "default" is what ``pip install .`` gives, i.e.
``minimize(threads="auto")`` for rssm and the pools as they are for the peers; "1 thread"
is the same code under ``threadpool_limits(1)`` (BLAS and OpenMP). Everything is measured
interleaved in one process, rounds alternating between methods and settings; medians.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import rssm
from rssm.blocks import Partition
from rssm.stepsizes import Constant

PC = time.perf_counter
GAMMA = 1e-4          # small constant step: the iterate stays near the start, cost is steady
METHODS = {"rsm": None, "rssm l=3": 3, "rssm l=5": 5, "rssm l=10": 10}


def pools() -> str:
    return ", ".join(f"{i['internal_api']} {i['num_threads']}" for i in threadpool_info())


def _rssm_iters(prob, x0, ell, iters: int, threads) -> tuple[float, float, str]:
    """Seconds and flops per iteration of one `minimize` run (solver time only)."""
    res = rssm.minimize(
        prob, x0, method="rsm" if ell is None else "rssm", stepsize=Constant(GAMMA),
        max_iter=iters, record=10**9, seed=0, threads=threads, options={"n_blocks": ell or 2}
    )
    return res.time / res.n_iter, res.flops / res.n_iter, res.threads


def _timed(step: Callable[[], None], iters: int) -> float:
    step()
    t = PC()
    for _ in range(iters):
        step()
    return (PC() - t) / iters


def _gemm_ref(prob, x0, c: int) -> Callable[[], None]:
    """The two products of an iteration on c columns alone (2 m n c flops each)."""
    yt = prob.yt if hasattr(prob, "yt") else prob.y
    w = np.ones((c, yt.shape[1]))
    z = np.empty((c, yt.shape[1]))
    xc = np.ascontiguousarray(x0[:, :c])

    def run() -> None:
        np.matmul(w, yt.T)
        np.matmul(xc.T, yt, out=z)

    return run


def _peer_steps(name: str, prob, x0) -> dict[str, Callable[[], None]]:
    """One iteration of each peer, as a closure over its own iterate."""
    from benchmarks.common import plain_numpy_step as _plain_numpy_step

    out: dict[str, Callable[[], None]] = {}
    n, p = prob.shape
    rsm_np, rssm_np = _plain_numpy_step(prob, name)
    rng = np.random.default_rng(0)
    blocks = Partition.uniform(p, 5).blocks
    st = {"np_rsm": x0.copy(), "np_rssm": x0.copy()}

    def np_rsm():
        st["np_rsm"] = rsm_np(st["np_rsm"], GAMMA, rng)

    def np_rssm():
        st["np_rssm"] = rssm_np(st["np_rssm"], GAMMA, rng, blocks)

    out["plain NumPy RSM"] = np_rsm
    out["plain NumPy RSSM l=5"] = np_rssm
    try:
        import pymanopt
    except ImportError:
        pymanopt = None
    if pymanopt is not None:
        man = pymanopt.manifolds.Stiefel(n, p, retraction="polar")
        st["pm"] = x0.copy()

        def pm():
            x = st["pm"]
            st["pm"] = man.retraction(x, -GAMMA * man.projection(x, prob.subgradient(x)))

        out["Pymanopt RSM loop"] = pm
    try:
        import geoopt
        import torch
    except ImportError:
        geoopt = None
    if geoopt is not None:
        yt = torch.from_numpy(prob.yt if hasattr(prob, "yt") else prob.y)
        m = yt.shape[1]
        param = geoopt.ManifoldParameter(torch.from_numpy(x0.copy()),
                                         manifold=geoopt.EuclideanStiefel())
        opt = geoopt.optim.RiemannianSGD([param], lr=GAMMA)

        def go():
            opt.zero_grad()
            z = yt.T @ param
            loss = torch.linalg.norm(z, dim=1).sum() / m if name == "dpcp" else z.abs().sum()
            loss.backward()
            opt.step()

        out["Geoopt RSGD (EuclideanStiefel)"] = go
    return out


def userenv(cfg: dict, out: str) -> list[dict]:
    rounds, its, peer_its = cfg.get("ue_rounds", 5), cfg.get("ue_iters", 200), cfg.get(
        "ue_peer_iters", 20)
    print(f"\n== U. Default threads (what `pip install .` gives) and 1 thread, per iteration;"
          f" pools: {pools()}; {rounds} interleaved rounds, rssm {its} iterations per run "
          f"(threads='auto'), peers {peer_its}")
    rows: list[dict] = []
    settings = {"default": None, "1 thread": 1}
    for name, prob in (("dpcp", rssm.problems.DPCP.synthetic(seed=0)),
                       ("odl", rssm.problems.ODL.synthetic(seed=0))):
        n, p = prob.shape
        x0 = prob.initial_point(np.random.default_rng(10_000))
        cs = {k: p if ell is None else int(Partition.uniform(p, ell).sizes[:2].sum())
              for k, ell in METHODS.items()}
        refs = {k: _gemm_ref(prob, x0, c) for k, c in cs.items()}
        peers = _peer_steps(name, prob, x0)
        t = {(k, s): [] for k in list(METHODS) + list(peers) for s in settings}
        tref = {(k, s): [] for k in METHODS for s in settings}
        fl: dict[str, float] = {}
        chose: dict[str, str] = {}
        for _ in range(rounds):
            for s, lim in settings.items():
                for k, ell in METHODS.items():
                    sec, f, th = _rssm_iters(prob, x0, ell, its,
                                             "auto" if lim is None else 1)
                    t[(k, s)].append(sec)
                    fl[k] = f
                    if lim is None:
                        chose[k] = th
                with threadpool_limits(lim):
                    for k, ref in refs.items():
                        tref[(k, s)].append(_timed(ref, 3))
                    for k, step in peers.items():
                        t[(k, s)].append(_timed(step, peer_its))
        med = {key: float(np.median(v)) for key, v in t.items()}
        mref = {key: float(np.median(v)) for key, v in tref.items()}
        m = prob.m
        print(f"\n{name.upper()} n={n} p={p} m={m}")
        print(f"{'method':>32} {'default ms':>10} {'1 thr ms':>9} {'1->2 x':>7} "
              f"{'GFLOP/s':>8} {'BLAS 2thr':>9} {'frac':>5} {'BLAS 1->2':>9}  vs rssm RSM")
        base = med[("rsm", "default")]
        base1 = med[("rsm", "1 thread")]
        for k in list(METHODS) + list(peers):
            d, o = med[(k, "default")], med[(k, "1 thread")]
            row = dict(problem=name, method=k, ms_default=d * 1e3, ms_1thread=o * 1e3,
                       speedup_1_to_default=o / d, vs_rsm_default=d / base,
                       vs_rsm_1thread=o / base1)
            extra = ""
            if k in METHODS:
                rate = fl[k] / d / 1e9
                ref_rate = 4.0 * m * n * cs[k] / mref[(k, "default")] / 1e9
                ref_up = mref[(k, "1 thread")] / mref[(k, "default")]
                row.update(gflops=rate, blas_ref_gflops=ref_rate, frac_of_ref=rate / ref_rate,
                           blas_ref_speedup=ref_up, threads=chose[k])
                extra = f"{rate:8.1f} {ref_rate:9.1f} {rate / ref_rate:5.2f} {ref_up:9.2f}"
            else:
                extra = " " * 34
            rows.append(row)
            print(f"{k:>32} {d * 1e3:10.3f} {o * 1e3:9.3f} {o / d:7.2f} {extra}  "
                  f"{d / base:5.2f} / {o / base1:5.2f}")
        pm = med.get(("Pymanopt RSM loop", "default"))
        r5 = med[("rssm l=5", "default")] / base
        r10 = med[("rssm l=10", "default")] / base
        mine = [r for r in rows if r["problem"] == name and r["method"] in METHODS]
        print("targets (default threads): "
              + (f"Pymanopt loop / rssm RSM = {pm / base:.2f} (>= 2: "
                 f"{'met' if pm / base >= 2 else 'NOT met'}); " if pm else "")
              + f"RSSM l=5 / RSM = {r5:.3f} (<= 0.45: {'met' if r5 <= 0.45 else 'NOT met'}); "
              f"l=10 / RSM = {r10:.3f} (<= 0.30: {'met' if r10 <= 0.30 else 'NOT met'}); "
              f"min fraction of 2-thread BLAS rate = {min(r['frac_of_ref'] for r in mine):.2f}"
              f" (>= 0.60: {'met' if all(r['frac_of_ref'] >= 0.6 for r in mine) else 'NOT met'})")
        print("auto's choices: " + "; ".join(f"{k}: {v}" for k, v in chose.items()))
    from benchmarks.common import write_csv

    write_csv(os.path.join(out, "userenv.csv"), rows)
    return rows


# Under load --------------------------------------------------------------------------------
_BUSY = "import time\nt = time.time()\nwhile time.time() - t < {secs}:\n    pass\n"


def _busy(secs: float) -> subprocess.Popen:
    """A second Python job that keeps one core busy (a shared laptop or CI runner)."""
    return subprocess.Popen([sys.executable, "-c", _BUSY.format(secs=secs)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _torch_case():
    import torch

    from rssm.problem import FullSubgradientWarning

    data = rssm.problems.DPCP.synthetic(n=20, d=3, n_inliers=200, n_outliers=100, seed=0)
    y = torch.from_numpy(data.yt)
    prob = rssm.Problem.from_torch(lambda x: torch.linalg.vector_norm(y.T @ x, dim=1).mean(),
                                   shape=data.shape, error=data.error)
    warnings.simplefilter("ignore", FullSubgradientWarning)
    return prob, data.initial_point(), 600, 4


def load(cfg: dict, out: str) -> list[dict]:
    rounds = cfg.get("load_rounds", 2)
    cases: list[tuple] = [("README DPCP snippet, RSSM l=5",
              rssm.problems.DPCP.synthetic(n=100, d=10, n_inliers=1500, n_outliers=3500,
                                           seed=0), None, cfg.get("load_iters", 300), 5)]
    try:
        prob, x0, iters, ell = _torch_case()
        cases.append(("examples/autodiff_torch.py (from_torch)", prob, x0, iters, ell))
    except ImportError as exc:
        print(f"  torch case skipped: {exc}")
    print(f"\n== L. One other busy process on the machine (a Python spin loop); solver seconds "
          f"per run, median of {rounds} interleaved rounds; pools: {pools()}")
    rows = []
    busy = _busy(3600)
    try:
        time.sleep(0.5)
        res: dict[tuple[str, str], list[float]] = {}
        notes: dict[str, str] = {}
        for _ in range(rounds):
            for label, prob, x0, iters, ell in cases:
                for setting in ("auto", None, 1):
                    r = rssm.minimize(
                        prob, x0 if x0 is not None else prob.initial_point(), method="rssm",
                        stepsize=Constant(GAMMA if x0 is None
                                                                      else 0.02),
                        max_iter=iters, record=10**9, seed=1, threads=setting,
                        options={"n_blocks": ell}
                    )
                    res.setdefault((label, str(setting)), []).append(r.time)
                    if setting == "auto":
                        notes[label] = r.threads
    finally:
        busy.kill()
        busy.wait()
    for label, *_ in cases:
        a, d, o = (float(np.median(res[(label, s)])) for s in ("auto", "None", "1"))
        rows.append(dict(case=label, s_auto=a, s_pools_as_they_are=d, s_1thread=o,
                         auto_vs_1thread=a / o, pools_vs_1thread=d / o))
        print(f"  {label:42} auto {a:7.2f} s | pools as they are {d:7.2f} s | 1 thread "
              f"{o:7.2f} s   (auto / 1 thread = {a / o:.2f}; as-they-are / 1 thread = "
              f"{d / o:.1f})\n  {'':42} auto: {notes[label]}")
    from benchmarks.common import write_csv

    write_csv(os.path.join(out, "load.csv"), rows)
    return rows


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m benchmarks.userenv", description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    args = ap.parse_args()
    cfg = dict(ue_rounds=2, ue_iters=60, load_rounds=1, load_iters=100) if args.quick else {}
    os.makedirs(args.out, exist_ok=True)
    userenv(cfg, args.out)
    load(cfg, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
