"""How the default calls end, over many seeds (issue #18, items 1 and 3).

    python -m benchmarks.default_verdicts

`rssm.minimize(prob, x0, method=m, seed=s, options={"n_blocks": l})` with nothing else
set (the default rule, tolerance and budget) on 210 runs: the paper's ODL with RSSM at
l = 3, 4, 5, 6, 8 and RSM, seeds 1-15; DPCP, l1 Procrustes, from_functions and the
planted sparse basis (as in `benchmarks.stepsizes`) with RSSM at l = 3, 5 and RSM, seeds
1-10. Each run is counted as

* ``ok``: stopped ``converged`` at error below 1e-6;
* ``budget``: did not stop converged (its stop reason, iterations and error printed);
* ``FALSE``: stopped converged at error 1e-6 or above (printed with its certificate).
  Each is then probed with short RSM steps from the returned point (lengths 1e-4, 3e-4
  and 1e-3 ||X||_F decaying by 0.98, 600 iterations): the error they end at, how far f
  rises on the way and the lowest f they reach, relative to the returned f. Ending at
  the same error, with f rising on the way and barely lower at best, marks the basin of
  a spurious local minimizer: the verdict of stationarity is near right, the answer is
  not the solution.

Iteration counts and verdicts do not depend on the machine's load; no timing is taken
(about 5 minutes here).
"""

from __future__ import annotations

import argparse
import collections
import sys


def cases() -> list[tuple[str, int | None, int]]:
    out = [("odl", ell, s) for ell in (3, 4, 5, 6, 8) for s in range(1, 16)]
    out += [("odl", None, s) for s in range(1, 16)]
    others = ("dpcp", "l1_procrustes", "from_functions", "sparse_basis")
    out += [(n, ell, s) for n in others for ell in (3, 5, None) for s in range(1, 11)]
    return out


def _probe(prob, res) -> None:
    """Short RSM steps from a wrong verdict's point (see the module docstring)."""
    import numpy as np

    import rssm
    from rssm.stepsizes import Geometric

    x, f0 = res.x, float(res.fun)
    g = float(np.linalg.norm(prob.riemannian_subgradient(x)))
    for length in (1e-4, 3e-4, 1e-3):
        run = rssm.minimize(prob, x, method="rsm", max_iter=600, tol=0, record=1,
                            stepsize=Geometric(length * np.sqrt(x.shape[1]) / g, 0.98))
        c = np.asarray(run.trace["cost"])
        print(f"  steps of {length:g} ||X||_F: error {run.error:.2e}; f rises by "
              f"{(c.max() - f0) / abs(f0):.1e} at most, its least is "
              f"{(c.min() - f0) / abs(f0):+.1e} (relative)", flush=True)


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m benchmarks.default_verdicts",
                            description=__doc__.split("\n\n")[0]).parse_args(argv)
    import rssm
    from benchmarks.stepsizes import _problems

    probs = _problems()
    count: collections.Counter = collections.Counter()
    for name, ell, seed in cases():
        prob, x0 = probs[name][0](seed)
        res = rssm.minimize(prob, x0, method="rssm" if ell else "rsm", seed=seed,
                            options={"n_blocks": ell} if ell else None)
        tag = ("ok" if res.success and res.error < 1e-6
               else "FALSE" if res.success else "budget")
        count[tag] += 1
        if tag != "ok":
            print(f"{tag}: {name} {'rsm' if ell is None else f'l={ell}'} seed {seed}: "
                  f"{res.stop_reason.value} after {res.n_iter} its, error {res.error:.1e}"
                  + (f"; {res.certificate.summary()}" if tag == "FALSE" else ""),
                  flush=True)
        if tag == "FALSE":
            _probe(prob, res)
    print(" ".join(f"{k} {count[k]}" for k in ("ok", "budget", "FALSE"))
          + f" of {sum(count.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
