"""Per-iteration time before and after a change, side by side (issue #20 item 7, #19).

    python -m benchmarks.ab [--ref REF] [--rounds 5] [--iters 200] [--quick]
    python -m benchmarks.ab --calls [--ref REF] [--rounds 3]

Exports the tree of git revision REF (default: the commit before issue #18's work,
7ae9de0) to a temporary folder and times ``rssm.minimize`` with a fixed step
(``Constant(1e-3)``, no convergence test where the code has one, recording every 10**6
iterations) on the paper's DPCP and ODL instances, RSM and RSSM with l = 5 and 10, in the
default thread setting of each tree and with one thread, alternating the two trees round
by round (a child process per measurement, so both import their own ``rssm``). It prints
the median solver time per iteration of each tree and the ratio after/before.

With ``--calls``: the wall time of the whole default call ``rssm.minimize(prob, seed=1)``
(and with ``method="rssm"``), nothing else set, on small and paper instances (`CALLS`):
best of 5 calls in each child (after one untimed call), the two trees alternating round
by round; it prints both trees' iterations too (a change that moves the path shows there).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
import rssm
from rssm.stepsizes import Constant
name, method, threads = sys.argv[1], sys.argv[2], sys.argv[5]
ell, iters = int(sys.argv[3]), int(sys.argv[4])
threads = "auto" if threads == "auto" else int(threads)
if name == "dpcp":
    prob = rssm.problems.DPCP.synthetic(seed=1)
else:
    prob = rssm.problems.ODL.synthetic(seed=1)
x0 = prob.initial_point(0)
def run(n):
    try:   # the new signature
        return rssm.minimize(prob, x0, method=method, stepsize=Constant(1e-3), max_iter=n,
                             record=10**6, tol=0, threads=threads,
                             options={"n_blocks": ell} if method == "rssm" else None)
    except TypeError:
        return rssm.minimize(prob, x0, method=method, n_blocks=ell, stepsize=Constant(1e-3),
                             max_iter=n, record_every=10**6, stationarity=False,
                             threads=threads)
run(5)
t = time.perf_counter()
res = run(iters)
wall = time.perf_counter() - t
print(json.dumps({"solver": res.time / res.n_iter, "wall": wall / res.n_iter}))
"""

_CALL_CHILD = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
import rssm
P = rssm.problems
make = {"l1_procrustes": lambda: P.L1Procrustes.synthetic(seed=1),
        "dpcp n30": lambda: P.DPCP.synthetic(n=30, d=3, n_inliers=270, n_outliers=630, seed=1),
        "odl n20": lambda: P.ODL.synthetic(n=20, seed=1),
        "dpcp": lambda: P.DPCP.synthetic(seed=1), "odl": lambda: P.ODL.synthetic(seed=1)}
prob = make[sys.argv[1]]()
kw = {} if sys.argv[2] == "default" else {"method": sys.argv[2]}
rssm.minimize(prob, seed=1, **kw)
best = float("inf")
for _ in range(5):
    t = time.perf_counter()
    res = rssm.minimize(prob, seed=1, **kw)
    best = min(best, time.perf_counter() - t)
print(json.dumps({"wall": best, "n_iter": res.n_iter}))
"""

#: The default calls ``--calls`` times: (problem, method or "default").
CALLS = [("l1_procrustes", "default"), ("l1_procrustes", "rssm"), ("dpcp n30", "default"),
         ("odl n20", "rssm"), ("dpcp", "default"), ("dpcp", "rssm"), ("odl", "default"),
         ("odl", "rssm")]

CASES = [("dpcp", "rsm", 1), ("dpcp", "rssm", 5), ("dpcp", "rssm", 10),
         ("odl", "rsm", 1), ("odl", "rssm", 5), ("odl", "rssm", 10)]


def export(ref: str, dest: Path) -> Path:
    """The tree of ``ref`` under ``dest`` (git archive), returned as its src folder."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "src"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest / "src"


def child(src: Path, case: tuple, iters: int, threads: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, "-c", _CHILD, case[0], case[1], str(case[2]),
                          str(iters), threads], env=env, capture_output=True, text=True,
                         timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def call_child(src: Path, case: tuple) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, "-c", _CALL_CHILD, case[0], case[1]], env=env,
                         capture_output=True, text=True, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def calls(before: Path, after: Path, ref: str, rounds: int) -> None:
    """The ``--calls`` table: the default call's wall time under both trees."""
    print(f"before: {ref}; after: working tree; default calls rssm.minimize(prob, seed=1), "
          f"best of 5 per child, best of {rounds} rounds; default threads; load average "
          f"{os.getloadavg()[0]:.2f}")
    print("case | method | before ms (iterations) | after ms (iterations) | after/before")
    for case in CALLS:
        b = a = None
        for _ in range(rounds):
            rb, ra = call_child(before, case), call_child(after, case)
            b = rb if b is None or rb["wall"] < b["wall"] else b
            a = ra if a is None or ra["wall"] < a["wall"] else a
        print(f"{case[0]} | {case[1]} | {1e3 * b['wall']:.1f} ({b['n_iter']}) | "
              f"{1e3 * a['wall']:.1f} ({a['n_iter']}) | {a['wall'] / b['wall']:.3f}",
              flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.ab", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", default="7ae9de0", help="the 'before' revision")
    ap.add_argument("--rounds", type=int, default=None, help="default 5 (3 with --calls)")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--quick", action="store_true", help="DPCP only, 2 rounds, 60 iterations")
    ap.add_argument("--calls", action="store_true", help="the whole default call's wall "
                    "time instead (CALLS)")
    args = ap.parse_args(argv)
    if args.calls:
        with tempfile.TemporaryDirectory() as tmp:
            calls(export(args.ref, Path(tmp)), ROOT / "src", args.ref, args.rounds or 3)
        return 0
    cases = CASES[:3] if args.quick else CASES
    rounds, iters = (2, 60) if args.quick else (args.rounds or 5, args.iters)
    with tempfile.TemporaryDirectory() as tmp:
        before = export(args.ref, Path(tmp))
        after = ROOT / "src"
        print(f"before: {args.ref}; after: working tree; {rounds} rounds, {iters} iterations, "
              f"load average {os.getloadavg()[0]:.2f}")
        print("case | threads | before ms/it | after ms/it | after/before")
        for threads in ("auto", "1"):
            for case in cases:
                b, a = [], []
                for _ in range(rounds):
                    b.append(child(before, case, iters, threads)["solver"])
                    a.append(child(after, case, iters, threads)["solver"])
                mb, ma = statistics.median(b), statistics.median(a)
                label = f"{case[0]} {case[1]}" + (f" l={case[2]}" if case[1] == "rssm" else "")
                print(f"{label} | {threads} | {1e3 * mb:.3f} | {1e3 * ma:.3f} | {ma / mb:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
