"""What keeping the best of every iterate costs (issue #18, "the best point it saw").

    python -m benchmarks.best_every_iterate [--rounds 3]

`rssm.Result.x` is the iterate of least f. On a data problem f comes from the caches in
the pass that computes the subgradient, so by default the loop evaluates it at every
iterate (``rssm.Record(best=None)``) even when the step rule does not read f (a plain
schedule, RSSM's per-sweep rule, the sparse problems' own rules); ``Record(best=False)``
keeps only the evaluated iterates (the recorded rows and the rule's reads). For each
case both are run interleaved in one process, default threads, best of ``--rounds``
wall-clock times of the whole ``rssm.minimize`` call, and the ratio printed (on/off);
the runs' paths are the same bits (checked), only the returned point may differ.

Cases: the default calls whose rule does not read f at every iterate (sparse PCA's own
rule with RSM and RSSM, RSSM on the paper's ODL at l = 3, 5), and a plain geometric
schedule with RSSM on the paper's DPCP. The default RSM call on DPCP and ODL reads f
anyway (Auto) and is not listed: it costs nothing there.
"""

from __future__ import annotations

import argparse
import time


def cases():
    from rssm.problems import DPCP, ODL, SparsePCA

    odl, spca, dpcp = ODL.synthetic(seed=1), SparsePCA.synthetic(seed=1), DPCP.synthetic(seed=1)
    return [
        ("sparse PCA (100 x 5), RSM, its default rule", spca, {}),
        ("sparse PCA (100 x 5), RSSM l=5, its default rule", spca,
         {"method": "rssm", "options": {"n_blocks": 5}}),
        ("paper ODL, RSSM l=3, default rule", odl, {"method": "rssm", "options": {"n_blocks": 3}}),
        ("paper ODL, RSSM l=5, default rule", odl, {"method": "rssm", "options": {"n_blocks": 5}}),
        ("paper DPCP, RSSM l=5, Geometric(0.1, 0.7), 150 its", dpcp,
         {"method": "rssm", "options": {"n_blocks": 5}, "stepsize": "geometric:mu0=0.1,beta=0.7",
          "max_iter": 150, "tol": 0}),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.best_every_iterate",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    import numpy as np

    import rssm

    print("| case | iterations | best of every iterate (s) | of the evaluated ones (s) | "
          "ratio | the same path | f(x) lower by |")
    print("|---|---|---|---|---|---|---|")
    for label, prob, kw in cases():
        times = {True: [], False: []}
        res = {}
        for _ in range(args.rounds):
            for every in (False, True):
                rec = rssm.Record(best=None if every else False)
                t = time.perf_counter()
                res[every] = rssm.minimize(prob, seed=1, record=rec, **kw)
                times[every].append(time.perf_counter() - t)
        on, off = min(times[True]), min(times[False])
        same = np.array_equal(res[True].x_last, res[False].x_last)
        gain = res[False].fun - res[True].fun
        print(f"| {label} | {res[True].n_iter} | {on:.3f} | {off:.3f} | {on / off:.2f} | "
              f"{same} | {gain:.2g} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
