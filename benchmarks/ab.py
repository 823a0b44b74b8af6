"""Per-iteration time before and after a change, side by side (issue #20 item 7, #19).

    python -m benchmarks.ab [--ref REF] [--rounds 5] [--iters 200] [--quick]

Exports the tree of git revision REF (default: the commit before issue #18's work,
7ae9de0) to a temporary folder and times ``rssm.minimize`` with a fixed step
(``Constant(1e-3)``, no convergence test where the code has one, recording every 10**6
iterations) on the paper's DPCP and ODL instances, RSM and RSSM with l = 5 and 10, in the
default thread setting of each tree and with one thread, alternating the two trees round
by round (a child process per measurement, so both import their own ``rssm``). It prints
the median solver time per iteration of each tree and the ratio after/before.
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.ab", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", default="7ae9de0", help="the 'before' revision")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--quick", action="store_true", help="DPCP only, 2 rounds, 60 iterations")
    args = ap.parse_args(argv)
    cases = CASES[:3] if args.quick else CASES
    rounds, iters = (2, 60) if args.quick else (args.rounds, args.iters)
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
