"""The default call against Pymanopt's default on the paper's DPCP, wall clock (issue #18,
item 5: "the default call ahead of Pymanopt's SteepestDescent on the paper's DPCP").

    python -m benchmarks.default_vs_pymanopt [--seeds 5] [--rounds 3]

For each seed s the paper's DPCP instance ``DPCP.synthetic(seed=s)`` is solved from the
same start X0 = ``prob.initial_point(s)`` (the spectral start) by

* ``rssm.minimize(prob, seed=s)``: nothing else set (RSM, ``stepsize="auto"``, the
  convergence test, default threads), the whole call timed;
* Pymanopt 2.2's ``SteepestDescent()`` with its defaults (Armijo line search, its own
  stopping rules) on its ``Stiefel(n, p)`` manifold with rssm's cost and Euclidean
  subgradient of the problem, ``verbosity=0``, default threads, the whole ``run`` timed;

interleaved, best of ``--rounds`` wall times. Both stop on their own. Printed per seed:
iterations, why each stopped, the final error (largest principal angle measure of the
problem, ``prob.error``) and wall seconds, with the ratio rssm / Pymanopt.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import rssm

PC = time.perf_counter


def _pymanopt(prob, x0):
    import pymanopt

    from benchmarks.common import pymanopt_problem

    problem = pymanopt_problem(prob)
    opt = pymanopt.optimizers.SteepestDescent(verbosity=0)
    t = PC()
    res = opt.run(problem, initial_point=x0.copy())
    return PC() - t, res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.default_vs_pymanopt",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f}; best of {args.rounds} wall times")
    print("seed | rssm default: it, stop, error, wall s | Pymanopt default: it, stop, error, "
          "wall s | rssm / Pymanopt wall")
    ratios = []
    for s in range(1, args.seeds + 1):
        prob = rssm.problems.DPCP.synthetic(seed=s)
        x0 = prob.initial_point(s)
        best_r = best_p = float("inf")
        res_r = res_p = None
        for _ in range(args.rounds):
            t = PC()
            res_r = rssm.minimize(prob, seed=s)
            best_r = min(best_r, PC() - t)
            w, res_p = _pymanopt(prob, x0)
            best_p = min(best_p, w)
        err_p = prob.error(res_p.point)
        stop_p = str(res_p.stopping_criterion).split(";")[0].strip().rstrip(".")
        ratios.append(best_r / best_p)
        print(f"{s} | {res_r.n_iter}, {res_r.stop_reason.value}, {res_r.error:.1e}, "
              f"{best_r:.3f} | {res_p.iterations}, {stop_p}, {err_p:.1e}, {best_p:.3f} | "
              f"{best_r / best_p:.2f}")
    ratios.sort()
    print(f"median rssm / Pymanopt wall: {ratios[len(ratios) // 2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
