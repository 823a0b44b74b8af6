"""The convergence test's share of a default RSSM run's time as l grows.

    python -m benchmarks.certificate_share [--blocks 5 10 16 30] [--seeds 0 1 2]

The paper's DPCP instance (`DPCP.synthetic(seed=1)`), `rssm.minimize(prob,
options={"n_blocks": l}, seed=s, threads=1)`: the time spent in
`GoldsteinTest.evaluate` (timed around each call) against the solver time, and the
number of calls that took over 1 ms. The test's work per evaluation grows with binom(l, 2)
while an iteration's falls with l, so its share must stay small at large l (at l = 30 one
pair not drawn within the window made every iteration solve the other 434 least-norm
problems and drop them: 70 % of the run's time on seed 0).
"""

from __future__ import annotations

import argparse
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.certificate_share",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, nargs="+", default=[5, 10, 16, 30])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = ap.parse_args(argv)

    import rssm
    from rssm.problems import DPCP
    from rssm.solvers import certificate

    real = certificate.GoldsteinTest.evaluate
    spent: list[float] = []

    def timed(self):
        t = time.perf_counter()
        try:
            return real(self)
        finally:
            spent.append(time.perf_counter() - t)

    prob = DPCP.synthetic(seed=1)
    certificate.GoldsteinTest.evaluate = timed
    try:
        for l in args.blocks:
            for seed in args.seeds:
                spent.clear()
                res = rssm.minimize(prob, options={"n_blocks": l}, seed=seed, threads=1,
                                    max_iter=6000)
                total = sum(spent)
                print(f"l = {l:2d} seed {seed} | {res.stop_reason.value} | {res.n_iter} "
                      f"iterations | solver {res.time:.2f} s | convergence test "
                      f"{total:.2f} s ({100 * total / res.time:.0f} %) | calls over 1 ms: "
                      f"{sum(d > 1e-3 for d in spent)}", flush=True)
    finally:
        certificate.GoldsteinTest.evaluate = real
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
