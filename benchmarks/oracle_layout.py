"""Per-iteration time of the chunked in-memory oracle against the code before it.

Run ``python -m benchmarks.oracle_layout`` (``--quick``: fewer iterations and rounds).

Two child processes serve timing requests, one importing rssm from this tree and one from
the old tree (main's commit 345b821, extracted with ``git archive`` unless ``--old`` names
a source folder); the parent sends them the same requests alternately, round after round,
so both see the same machine load. A request runs ``rssm.minimize`` on the paper's DPCP
(``DPCP.synthetic(seed=1)``: n = 100, p = 90, m = 5000) or ODL (``ODL.synthetic(seed=1)``:
n = p = 60, m = 4648) with a fixed step ``stepsize=1e-3``, a fixed number of iterations,
``stationarity=False`` and recording only at the start and the end; the time per
iteration is ``Result.time / n_iter`` (oracle and geometry; recording excluded). Each
child runs one warm-up call per configuration first. Methods: RSM, RSSM with l = 5 and 10.

Thread settings: ``threads=1`` and ``threads=2`` in both trees (the old tree ran its
oracles on one BLAS thread either way: it had no chunk workers), the old tree with
``threads=None`` (the BLAS pool left at its default, 2 threads on a 2-core machine): the
"2-thread BLAS" reference, and the new tree at 2 workers without the loop's reading of f
before each direction (``new@2nb``: the data oracle's ``cheap_cost`` off, as in the old
loop, which kept no best iterate): the layout alone. Ratios new / old < 1 mean the new
code is faster. Medians (and best) over the rounds; the machine's load average is printed
before and after. The new tree includes the loop of issues 18/20 (convergence test, best
iterate), so new / old is the whole change, new@2nb / old the layout's part.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OLD_COMMIT = "345b821"
METHODS = (("rsm", None), ("rssm", 5), ("rssm", 10))


def serve() -> None:
    """Child: answer JSON requests on stdin with JSON results on stdout."""
    import numpy as np

    import rssm

    probs, starts, warm = {}, {}, set()
    for line in sys.stdin:
        req = json.loads(line)
        name = req["problem"]
        if name not in probs:
            cls = rssm.problems.DPCP if name == "dpcp" else rssm.problems.ODL
            probs[name] = cls.synthetic(seed=1)
            starts[name] = probs[name].initial_point(np.random.default_rng([1, 1]))
        prob, x0 = probs[name], starts[name]
        threads = req["threads"]
        kw = dict(method=req["method"], stepsize=1e-3, max_iter=req["iters"], seed=0,
                  record_every=req["iters"], stationarity=False, threads=threads)
        oracle_cls = getattr(getattr(rssm.data, "engine", None), "DataOracle", None)
        if oracle_cls is not None:
            # "nobest": the loop does not read f before each direction (as 345b821)
            oracle_cls.cheap_cost = not req.get("nobest", False)
        if req["method"] == "rssm":
            kw["n_blocks"] = req["l"]
        key = (name, req["method"], req["l"], threads, req.get("nobest", False))
        if key not in warm:
            rssm.minimize(prob, x0, **{**kw, "max_iter": max(5, req["iters"] // 10),
                                       "record_every": max(5, req["iters"] // 10)})
            warm.add(key)
        res = rssm.minimize(prob, x0, **kw)
        print(json.dumps({"per_iter": res.time / res.n_iter, "fun": res.fun}), flush=True)


class _Child:
    def __init__(self, src: Path):
        env = dict(os.environ)
        env["PYTHONPATH"] = str(src)
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=env, cwd=str(src.parent))

    def ask(self, req: dict) -> dict:
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the child serving {req} died")
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _old_tree(path: str | None) -> tuple[Path, tempfile.TemporaryDirectory | None]:
    if path:
        return Path(path).resolve(), None
    tmp = tempfile.TemporaryDirectory(prefix="rssm-old-")
    archive = subprocess.run(["git", "archive", OLD_COMMIT, "src"], cwd=ROOT,
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", tmp.name], input=archive, check=True)
    return Path(tmp.name) / "src", tmp


def _median(v: list[float]) -> float:
    s = sorted(v)
    k = len(s)
    return s[k // 2] if k % 2 else 0.5 * (s[k // 2 - 1] + s[k // 2])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.oracle_layout", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", default=None, help=f"old source folder (default: {OLD_COMMIT})")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=200, help="iterations per RSSM run")
    ap.add_argument("--quick", action="store_true", help="3 rounds, 60 iterations")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve:
        serve()
        return 0
    rounds, iters = (3, 60) if args.quick else (args.rounds, args.iters)
    old_src, tmp = _old_tree(args.old)
    kids = {"old": _Child(old_src), "new": _Child(ROOT / "src")}
    settings = {"old": (1, 2, None), "new": (1, 2, "2nb")}
    print(f"load average before: {os.getloadavg()}; {os.cpu_count()} logical CPUs", flush=True)
    times: dict[tuple, list[float]] = {}
    funs: dict[tuple, set] = {}
    try:
        for r in range(rounds):
            order = ("old", "new") if r % 2 == 0 else ("new", "old")
            for problem in ("dpcp", "odl"):
                for method, ell in METHODS:
                    n_it = iters if method == "rssm" else max(10, iters // 3)
                    for tree in order:
                        for threads in settings[tree]:
                            req = dict(problem=problem, method=method, l=ell,
                                       threads=2 if threads == "2nb" else threads,
                                       iters=n_it, nobest=threads == "2nb")
                            ans = kids[tree].ask(req)
                            key = (problem, method, ell, tree, threads)
                            times.setdefault(key, []).append(ans["per_iter"])
                            if threads != "2nb":
                                funs.setdefault((problem, method, ell, tree), set()).add(
                                    round(ans["fun"], 9))
            print(f"round {r + 1}/{rounds} done", flush=True)
    finally:
        for kid in kids.values():
            kid.close()
        if tmp is not None:
            tmp.cleanup()
    print(f"load average after: {os.getloadavg()}\n")
    for stat, fn in (("median", _median), ("best", min)):
        print(f"{stat} ms per iteration over {rounds} rounds (oracle + geometry); "
              "ratios new / old")
        print(f"{'problem':7s} {'method':9s} {'old@1':>8s} {'old@2':>8s} {'old@None':>9s} "
              f"{'new@1':>8s} {'new@2':>8s} {'new@2nb':>8s} {'new1/old1':>10s} "
              f"{'new2/old2':>10s} {'new2/oldNone':>13s} {'nb2/old2':>9s} {'nb2/oldNone':>12s}")
        for problem in ("dpcp", "odl"):
            for method, ell in METHODS:
                t = {(tr, th): fn(times[(problem, method, ell, tr, th)]) * 1e3
                     for tr in ("old", "new") for th in settings[tr]}
                label = method if ell is None else f"rssm l={ell}"
                print(f"{problem:7s} {label:9s} {t['old', 1]:8.3f} {t['old', 2]:8.3f} "
                      f"{t['old', None]:9.3f} {t['new', 1]:8.3f} {t['new', 2]:8.3f} "
                      f"{t['new', '2nb']:8.3f} "
                      f"{t['new', 1] / t['old', 1]:10.3f} {t['new', 2] / t['old', 2]:10.3f} "
                      f"{t['new', 2] / t['old', None]:13.3f} "
                      f"{t['new', '2nb'] / t['old', 2]:9.3f} "
                      f"{t['new', '2nb'] / t['old', None]:12.3f}")
        print()
    same = all(len(funs[(p, m, e, "new")]) == 1 for p in ("dpcp", "odl") for m, e in METHODS)
    print(f"\nnew code: the same final cost at threads=1 and 2 in every round: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
