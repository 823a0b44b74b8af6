"""Data at scale: per-iteration time and peak memory of DPCP in memory, streamed from a
memmap (cache in memory or on disk) and data-parallel on Dask (1 and 2 worker processes).

Run ``python -m benchmarks.data_scale`` (``--quick``: m up to 2e5, one round). Sizes: the
paper's DPCP (n = 100, p = 90, m = 5000) and a sweep up to m = 2e6 (1.6 GB of data,
written once to ``--data-dir``, by default /tmp/rssm-data-bench, never into the repo).

Every measurement runs in a fresh child process with one BLAS thread (and, in memory and
for memmaps, the default ``threads="auto"``: the chunks on as many workers as cores), so
its peak memory is its own: ``heap`` is the tracemalloc peak (NumPy's and Python's allocations: the
O(n p + chunk) claim), ``rss`` the peak resident set (VmHWM, which also counts pages of
memory-mapped files); for Dask, ``worker_rss`` is the largest worker's VmHWM. The
per-iteration time is the solver's time over the steps (recording and setup excluded);
``setup`` is the wall time to build the problem and its oracle (reading the data once).
At the paper size the variants run round-robin, ``--rounds`` times, and medians are kept.
Results: benchmarks/results/data_scale.csv, data_scale.png, data_scale_model.csv.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
N, D, P, BLOCKS = 100, 10, 90, 5
VARIANTS = ("memory", "memmap", "memmap-disk", "dask1", "dask2")


def _env() -> dict:
    env = dict(os.environ)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    src = str(ROOT / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def make_file(path: Path, m: int, seed: int = 0) -> None:
    """DPCP data as in Section 5.1, m samples as rows of an .npy file: 30% inliers S g/||g||
    in a Haar d-subspace, 70% outliers o/||o||, written a chunk at a time."""
    import numpy as np

    from rssm import stiefel

    rng = np.random.default_rng(seed)
    s = stiefel.random_point(N, D, rng)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(m, N))
    k = 100_000
    for lo in range(0, m, k):
        hi = min(lo + k, m)
        g = s @ rng.standard_normal((D, hi - lo))
        o = rng.standard_normal((N, hi - lo))
        inl = rng.random(hi - lo) < 0.3
        blk = np.where(inl, g, o)
        out[lo:hi] = (blk / np.linalg.norm(blk, axis=0)).T
    out.flush()
    del out


def _vmhwm() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def child(variant: str, path: str, m: int, method: str, iters: int) -> dict:
    """One measurement (runs in its own process)."""
    import tracemalloc

    import numpy as np

    import rssm
    from rssm import stiefel
    from rssm.data import samples
    from rssm.problems import DPCP

    tracemalloc.start()
    t0 = time.perf_counter()
    x0 = stiefel.random_point(N, P, np.random.default_rng(0))
    mm = np.load(path, mmap_mode="r")[:m]
    client = cluster = None
    worker_rss = float("nan")
    if variant == "memory":
        prob = DPCP(np.asarray(mm).T, P)
    elif variant in ("memmap", "memmap-disk"):
        cache = "memory" if variant == "memmap" else "disk"
        prob = DPCP(samples(mm, cache=cache, check_finite=False), P)
    else:
        from distributed import Client, LocalCluster

        from rssm.data.distributed import from_npy
        from rssm.data.store import default_chunk_size

        workers = int(variant[-1])
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
        # chunks of the in-memory partition of m samples (the same bits as in memory)
        arr = from_npy(path, chunk_size=default_chunk_size(m, N))[:m]
        prob = DPCP(samples(arr, check_finite=False), P)
    try:
        res = rssm.minimize(
            prob, x0, method=method, max_iter=iters, record=iters, seed=1, tol=0,
            options={"n_blocks": BLOCKS}
        )
        wall = time.perf_counter() - t0
        if client is not None:
            hw = client.run(_vmhwm)
            worker_rss = max(hw.values())
    finally:
        if client is not None:
            client.close()
            cluster.close()
    _, heap = tracemalloc.get_traced_memory()
    # tol=0: no convergence test, every variant runs the same iterations (a run may still
    # stall; the time is divided by the iterations it ran)
    return dict(variant=variant, method=method, m=m, iters=res.n_iter,
                per_iter_s=res.time / max(res.n_iter, 1), setup_s=wall - res.time,
                heap_mb=heap / 2**20, rss_mb=_vmhwm(), worker_rss_mb=worker_rss,
                cost=res.fun, chunks=len(prob.data.bounds), threads=res.threads)


def _spawn(variant: str, path: Path, m: int, method: str, iters: int) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.data_scale", "--child", variant, str(path),
           str(m), method, str(iters)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=ROOT,
                         timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"{variant} m={m} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _iters(m: int, method: str) -> int:
    # about 2-10 s of solver time per measurement at one BLAS thread
    base = 4e8 if method == "rssm" else 1.5e8
    return int(min(200, max(4, base / (N * m))))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.data_scale", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="m up to 2e5, one round")
    ap.add_argument("--rounds", type=int, default=None, help="rounds at the paper size (3)")
    ap.add_argument("--data-dir", default="/tmp/rssm-data-bench")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--summarize", metavar="CSV", default=None,
                    help="only redraw the summary, plot and model from a saved CSV")
    ap.add_argument("--child", nargs=5, metavar=("VARIANT", "PATH", "M", "METHOD", "ITERS"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        v, path, m, method, iters = args.child
        print(json.dumps(child(v, path, int(m), method, int(iters))))
        return 0

    if args.summarize:
        with open(args.summarize, newline="") as fh:
            rows = [{k: (v if k in ("section", "variant", "method") else
                         int(v) if k in ("m", "iters", "chunks") else float(v))
                         for k, v in r.items()}
                    for r in csv.DictReader(fh)]
        summarize(rows, Path(args.out), Path(args.summarize).stem)
        return 0
    m_large = 200_000 if args.quick else 2_000_000
    rounds = args.rounds or (1 if args.quick else 3)
    sweep = [5000, 50_000, 500_000, m_large] if not args.quick else [5000, 50_000, m_large]
    ddir = Path(args.data_dir)
    ddir.mkdir(parents=True, exist_ok=True)
    path = ddir / f"dpcp_n{N}_m{m_large}.npy"
    if not path.exists():
        t = time.perf_counter()
        make_file(path, m_large)
        print(f"wrote {path} ({path.stat().st_size / 1e9:.2f} GB) in "
              f"{time.perf_counter() - t:.1f} s", flush=True)
    rows: list[dict] = []

    def note(r: dict, section: str) -> None:
        r["section"] = section
        rows.append(r)
        print(f"{section:6s} {r['variant']:12s} {r['method']:5s} m={r['m']:>8d} "
              f"{r['chunks']:3d} chunks  cost {r['cost']:.17g}  "
              f"{r['per_iter_s'] * 1e3:10.2f} ms/iter  setup {r['setup_s']:6.2f} s  "
              f"heap {r['heap_mb']:8.1f} MB  rss {r['rss_mb']:8.1f} MB  "
              f"worker rss {r['worker_rss_mb']:8.1f} MB", flush=True)

    print(f"machine: {os.cpu_count()} logical CPUs, load average {os.getloadavg()}; "
          "1 BLAS thread per process, the client's chunk workers: threads='auto'",
          flush=True)
    # 1. the paper's size: overhead of each path, round-robin rounds
    for _ in range(rounds):
        for method in ("rssm", "rsm"):
            for v in VARIANTS:
                note(_spawn(v, path, 5000, method, _iters(5000, method)), "paper")
    # 2. how the cost grows with m (RSSM, l = 5)
    for m in sweep[1:]:
        for v in ("memory", "memmap-disk", "dask2") + (
                ("memmap", "dask1") if m == m_large else ()):
            note(_spawn(v, path, m, "rssm", _iters(m, "rssm")), "sweep")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = "data_scale_quick" if args.quick else "data_scale"
    print(f"load average at the end {os.getloadavg()}", flush=True)
    cols = ["section", "variant", "method", "m", "iters", "per_iter_s", "setup_s", "heap_mb",
            "rss_mb", "worker_rss_mb", "cost", "chunks"]
    with open(out / f"{name}.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, cols)
        w.writeheader()
        for r in rows:
            w.writerow({c: r[c] for c in cols})
    summarize(rows, out, name)
    return 0


def _median(vals: list[float]) -> float:
    s = sorted(vals)
    k = len(s)
    return s[k // 2] if k % 2 else 0.5 * (s[k // 2 - 1] + s[k // 2])


def summarize(rows: list[dict], out: Path, name: str) -> None:
    """Medians at the paper size, the sweep plot and the labelled model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    print("\nmedian per-iteration time at the paper size (n=100, p=90, m=5000), ratio to "
          "in memory:")
    med: dict[tuple[str, str], float] = {}
    for method in ("rssm", "rsm"):
        for v in VARIANTS:
            t = [r["per_iter_s"] for r in rows if r["section"] == "paper"
                 and r["variant"] == v and r["method"] == method]
            med[v, method] = _median(t)
        for v in VARIANTS:
            print(f"  {method:5s} {v:12s} {med[v, method] * 1e3:9.2f} ms  "
                  f"x{med[v, method] / med['memory', method]:.2f}")
    # per-iteration time against m (RSSM)
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    series = {}
    for v in VARIANTS:
        pts = {}
        for r in rows:
            if r["method"] == "rssm" and r["variant"] == v:
                pts.setdefault(r["m"], []).append(r["per_iter_s"])
        if pts:
            ms = sorted(pts)
            series[v] = (ms, [_median(pts[m]) for m in ms])
            ax.loglog(ms, series[v][1], "o-", label=v)
    ax.set_xlabel("samples m (n = 100, p = 90)")
    ax.set_ylabel("seconds per RSSM iteration (l = 5)")
    ax.set_title(f"DPCP per-iteration time ({os.cpu_count()} logical CPUs, 1 BLAS "
                 "thread/process)", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / f"{name}.png", dpi=120)
    plt.close(fig)
    # A MODEL for W workers (labelled as such; only W = 1, 2 are measured):
    #   t_W(m) = c m / W + L_W,   L_W = L + delta (W - 1),
    # c the measured in-memory time per sample at the largest m, L the per-iteration
    # latency measured at the paper size (the Dask time minus its share of compute, mean of
    # 1 and 2 workers), delta an assumed extra cost per worker for the client's fan-out and
    # gather (0: all messages overlap; 2 ms: they are handled one after another).
    if "memory" not in series or "dask1" not in series or "dask2" not in series:
        return
    m_max = series["memory"][0][-1]
    c = series["memory"][1][-1] / m_max
    lat1 = med["dask1", "rssm"] - c * 5000
    lat2 = med["dask2", "rssm"] - c * 5000 / 2
    lat = 0.5 * (lat1 + lat2)
    print(f"\nMODEL (measured: W = 1, 2 only): c = {c * 1e9:.0f} ns per sample and RSSM "
          f"iteration (in memory, m = {m_max}); latency L1 = {lat1 * 1e3:.1f} ms, "
          f"L2 = {lat2 * 1e3:.1f} ms, L = {lat * 1e3:.1f} ms; L_W = L + delta (W - 1), "
          "delta = 0 or 2 ms (assumed)")
    with open(out / f"{name}_model.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["workers", "delta_s", "latency_s", "breakeven_m", "t_iter_m2e6_s",
                    "t_iter_m2e8_s"])
        for delta in (0.0, 0.002):
            for wk in (1, 2, 4, 8, 16, 32, 64):
                lw = lat + delta * (wk - 1)
                be = lw / (c * (1 - 1 / wk)) if wk > 1 else float("inf")
                t6 = c * 2e6 / wk + lw
                t8 = c * 2e8 / wk + lw
                w.writerow([wk, delta, f"{lw:.4g}", f"{be:.4g}", f"{t6:.4g}", f"{t8:.4g}"])
                print(f"  delta={delta * 1e3:.0f} ms W={wk:2d}: latency {lw * 1e3:6.1f} ms, "
                      f"beats one in-memory process for m > {be:9.3g}; m=2e6: {t6:.3f} "
                      f"s/iter, m=2e8: {t8:.2f} s/iter")


if __name__ == "__main__":
    sys.exit(main())
