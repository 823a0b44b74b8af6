"""The default call on data rssm did not make (issue #18: "run `rssm.minimize(problem)`
with nothing set on data you did not make").

    python -m benchmarks.real_data

Standardized scikit-learn data sets (breast cancer 569 x 30, digits 1797 x 64 without its
constant pixels, wine 178 x 13), each as `DPCP(X.T, p=n - 5)`, RSM (the default method)
and RSSM with 5 blocks, nothing else set. For each it prints the stop reason and
iterations; whether a second call gives the same bits; whether ``Result.fun`` is at most
every recorded cost (the best point seen); the wall time of the call (after an untimed
one) against a plain NumPy loop of the same iterations (`benchmarks.defaults`); and how
much lower a long, slow run from the returned point gets (3000 RSM steps of
`Geometric(1e-3, 0.995)`), relative: a verdict of convergence that is true leaves it at
rounding. Needs scikit-learn (the test extra).
"""

from __future__ import annotations

import sys
import time

import numpy as np


def main(argv: list[str] | None = None) -> int:
    from sklearn.datasets import load_breast_cancer, load_digits, load_wine
    from sklearn.preprocessing import StandardScaler

    import rssm
    from benchmarks.defaults import _naive
    from rssm.stepsizes import Geometric

    for name, loader in (("breast_cancer", load_breast_cancer), ("digits", load_digits),
                         ("wine", load_wine)):
        x = loader().data
        x = StandardScaler().fit_transform(x[:, x.std(axis=0) > 0])
        prob = rssm.problems.DPCP(x.T, p=x.shape[1] - 5)
        for method, ell in (("rsm", None), ("rssm", 5)):
            kw = dict(method=method, **({"options": {"n_blocks": ell}} if ell else {}))
            rssm.minimize(prob, **kw)
            t = time.perf_counter()
            a = rssm.minimize(prob, **kw)
            wall = time.perf_counter() - t
            b = rssm.minimize(prob, **kw)
            _naive(prob.yt, prob.initial_point(0), ell, a.n_iter)
            naive = _naive(prob.yt, prob.initial_point(0), ell, a.n_iter) * a.n_iter
            ref = rssm.minimize(prob, a.x, method="rsm", stepsize=Geometric(1e-3, 0.995),
                                max_iter=3000, tol=0)
            print(f"{name} {method}: {a.stop_reason.value} after {a.n_iter} its; same bits "
                  f"{np.array_equal(a.x, b.x)}; best point {a.fun <= np.nanmin(a.trace['cost'])}"
                  f"; wall {1e3 * wall:.1f} ms (solver {1e3 * a.time:.1f}) against a plain "
                  f"loop {1e3 * naive:.1f} ms: {wall / naive:.2f}; a long run from it lowers "
                  f"f by {(a.fun - ref.fun) / abs(a.fun):.1e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
