"""The bundle check's least-norm searches from the last answer, against searches from
scratch (issue #18, "cheap by default"; a data scientist's audit of the estimators).

    python -m benchmarks.bundle_warm_start

The convergence test's bundle check (`rssm.solvers.certificate.bundle_probe`) grows its
bundle by one Riemannian subgradient per null step, up to 128 on sparse PCA's sizes, and
asks `rssm.solvers.minnorm.min_norm_point` for the least-norm point of its hull after
each. From scratch, every search repeats Wolfe's active-set steps (about 32 affine solves
a search on a 10000 x 50 table): `OrthogonalSparsePCA(5)` spent 54 of its 58 s there.
Started from the last answer (``start=``, once the bundle holds
`rssm.solvers.certificate.WARM_FROM` vectors), a search adds the new vector and moves on.
The least-norm point is the same; its weights, and so the trial points, may differ by
rounding, which can change a run's path after a check.

Each case runs both ways in one process, one after the other (cold first), default
threads; wall time of the whole call and how it ended (iterations, stop reason, f or the
error). One run each: the ratios are large next to the machine's noise.
"""

from __future__ import annotations

import argparse
import time
import warnings


def _cases():
    import numpy as np
    from sklearn.datasets import load_breast_cancer, load_digits, load_wine

    import rssm
    from rssm.estimators import OrthogonalSparsePCA

    rng = np.random.default_rng(0)
    wide = rng.standard_normal((10000, 50)) @ rng.standard_normal((50, 50))
    tables = [("wine", load_wine().data), ("breast cancer", load_breast_cancer().data),
              ("digits", load_digits().data), ("10000 x 50", wide)]
    for name, x in tables:
        for k in (3, 5):
            def fit(x=x, k=k):
                est = OrthogonalSparsePCA(k, random_state=0).fit(x)
                return f"{est.n_iter_} its, {est.stop_reason_}, f {float(est.result_.fun):.9g}"
            yield f"OrthogonalSparsePCA({k}) on {name}", fit
    for seed in (1, 2, 3):
        for ell in (None, 5):
            def call(seed=seed, ell=ell):
                prob = rssm.problems.SparsePCA.synthetic(seed=seed)
                res = rssm.minimize(prob, seed=seed, method="rssm" if ell else None,
                                    options={"n_blocks": ell} if ell else None)
                return f"{res.n_iter} its, {res.stop_reason.value}, error {res.error:.1e}"
            yield f"SparsePCA.synthetic(seed={seed}) {'l=5' if ell else 'RSM'}", call


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m benchmarks.bundle_warm_start",
                            description=__doc__.split("\n\n")[0]).parse_args(argv)
    import rssm.solvers.certificate as cert
    from rssm.solvers.minnorm import min_norm_point

    def cold(gram, max_iter=200, start=None):
        return min_norm_point(gram, max_iter)

    warnings.simplefilter("ignore")      # the runs that end on their budget say so below
    print("case | from scratch: wall, end | from the last answer: wall, end | ratio")
    for label, fn in _cases():
        out = {}
        for mode, impl in (("cold", cold), ("warm", min_norm_point)):
            cert.min_norm_point = impl
            t = time.perf_counter()
            end = fn()
            out[mode] = (time.perf_counter() - t, end)
        cert.min_norm_point = min_norm_point
        (tc, ec), (tw, ew) = out["cold"], out["warm"]
        print(f"{label} | {tc:.2f} s, {ec} | {tw:.2f} s, {ew} | {tw / tc:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
