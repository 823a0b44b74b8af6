"""The benchmark sections of ``python -m benchmarks`` (issue 4 targets 1-4 and the peers).

Every comparison is measured interleaved in one process (methods alternate round by round
and medians are taken), so load from other processes on a shared machine hits all methods
alike. Sizes are scaled down from the issue's where a full run would exceed its time
budget; each section prints what it ran.
"""

from __future__ import annotations

import os
import time

import rssm
from benchmarks.common import machine  # noqa: F401  (kept name)
from benchmarks.perf import fusion, memory, periter, scaling
from benchmarks.quality import accuracy, peers

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


# Driver -------------------------------------------------------------------------------------
def _userenv(cfg: dict, out: str) -> list[dict]:
    from benchmarks.userenv import userenv

    return userenv(cfg, out)


def _load(cfg: dict, out: str) -> list[dict]:
    from benchmarks.userenv import load

    return load(cfg, out)


def _defaults(cfg: dict, out: str) -> list[dict]:
    from benchmarks.defaults import main as defaults_main

    defaults_main((["--quick"] if cfg is CONFIG["quick"] else []) + ["--out", out])
    return []


SECTIONS = {"defaults": _defaults, "userenv": _userenv, "load": _load, "periter": periter,
            "fusion": fusion, "scaling": scaling, "memory": memory, "accuracy": accuracy,
            "peers": peers}


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
