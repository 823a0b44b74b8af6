"""The default RSM call where the gap rule's steps freeze (issue #18, items 3 and 6).

    python -m benchmarks.frozen_rsm [--max-iter N] [--method rsm|rssm]
    python -m benchmarks.frozen_rsm --sparse-pca-real
    python -m benchmarks.frozen_rsm --sparse-pca-decay 0.993 0.995 0.997

Runs `rssm.minimize(prob, seed=s, method=m)` with nothing else set (the default budget
unless ``--max-iter``) on problems where the default RSM rule's steps used to freeze:

* ODL with noisy samples: the paper's instance (`ODL.synthetic(n, seed=s)`) with Gaussian
  noise of relative size 1 % and 10 % added to Y, n = 20 and 40, seeds 1-3 (12 runs;
  the error to the planted dictionary then floors at about noise^2 / 4);
* ODL on standardized scikit-learn data (breast cancer 569 x 30, wine 178 x 13, iris
  150 x 4; p = n), seeds 0-2 (9 runs);
* ``--sparse``: sparse PCA and the planted sparse basis with ``stepsize="auto"`` (their
  default is their own geometric rule), seeds 0-9.

For each run it prints the stop reason, iterations, f, the error where there is a ground
truth, the wall time, and how much lower f gets in 1000 short RSM steps from the returned
point (`Geometric(1e-5, 0.999)`), relative: about 0 where a verdict of convergence is
true (nearby local minima of these polyhedral costs can lie lower by 1e-7 relative).
Iteration counts and verdicts do not depend on the machine's load.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np


def noisy_odl(n: int, noise: float, seed: int):
    """The paper's ODL with dense noise of relative size ``noise`` added to Y."""
    import rssm

    base = rssm.problems.ODL.synthetic(n=n, seed=seed)
    y = np.asarray(base.y)
    rng = np.random.default_rng([seed, 9])
    y = y + noise * np.linalg.norm(y) / np.sqrt(y.size) * rng.standard_normal(y.shape)
    return rssm.problems.ODL(y, n, base.dictionary)


def instances(sparse: bool):
    import rssm

    for n in (20, 40):
        for noise in (0.01, 0.1):
            for seed in (1, 2, 3):
                yield f"odl n={n} noise {noise} seed {seed}", noisy_odl(n, noise, seed), seed, {}
    from sklearn.datasets import load_breast_cancer, load_iris, load_wine
    from sklearn.preprocessing import StandardScaler

    for name, loader in (("breast_cancer", load_breast_cancer), ("wine", load_wine),
                         ("iris", load_iris)):
        x = loader().data
        x = StandardScaler().fit_transform(x[:, x.std(axis=0) > 0])
        for seed in (0, 1, 2):
            yield f"odl {name} seed {seed}", rssm.problems.ODL(x.T, x.shape[1]), seed, {}
    if sparse:
        for cls in (rssm.problems.SparsePCA, rssm.problems.PlantedSparseBasis):
            for seed in range(10):
                yield (f"{cls.__name__} auto seed {seed}", cls.synthetic(seed=seed), seed,
                       {"stepsize": "auto"})


class _Restarting:
    """`Geometric(restart=True)` whose restart slows the decay to beta^power (the rule's
    own: power 1/2) or keeps it (power 1)."""

    def __init__(self, power: float):
        self.power = power

    def __enter__(self):
        from rssm.stepsizes import schedules

        self._orig = schedules.Geometric.__call__
        power = self.power

        def call(rule, k, ctx):
            if rule.restart and ctx.escapes != rule._escapes:
                rule._escapes = ctx.escapes
                rule._beta = rule._beta ** power
                rule._k0 = k
            return rule.mu0 * rule._beta ** ((k - rule._k0) / ctx.epoch)

        schedules.Geometric.__call__ = call
        return self

    def __exit__(self, *exc):
        from rssm.stepsizes import schedules

        schedules.Geometric.__call__ = self._orig
        return False


def sparse_pca_real(max_iter: int = 40000) -> None:
    """``--sparse-pca-real``: sparse PCA's default call (RSM, its own restarting decay) on
    standardized breast cancer, wine and digits, 5 loadings, mu = 0.1, 0.3, 1, 2, with a
    budget of ``max_iter``, for the restart's slowing beta^(1/2) (the default), beta^(2/3)
    and none (beta kept)."""
    from sklearn.datasets import load_breast_cancer, load_digits, load_wine
    from sklearn.preprocessing import StandardScaler

    import rssm
    from rssm.problems import SparsePCA

    for label, power in (("beta^(1/2) (default)", 0.5), ("beta^(2/3)", 2 / 3),
                         ("beta kept", 1.0)):
        its = []
        with _Restarting(power):
            for name, load in (("breast_cancer", load_breast_cancer), ("wine", load_wine),
                               ("digits", load_digits)):
                x = load().data
                x = StandardScaler().fit_transform(x[:, x.std(axis=0) > 0])
                for mu in (0.1, 0.3, 1.0, 2.0):
                    prob = SparsePCA.from_data(x, 5, mu=mu)
                    res = rssm.minimize(prob, prob.initial_point(0), seed=0, max_iter=max_iter)
                    its.append(res.n_iter if res.success else None)
                    print(f"{label} | {name} | mu {mu:g} | {res.stop_reason.value} | "
                          f"{res.n_iter} | f {res.fun:.10g}", flush=True)
        done = [n for n in its if n is not None]
        print(f"{label}: converged {len(done)} of {len(its)}, within 20000: "
              f"{sum(n <= 20000 for n in done)}, median {int(np.median(done))} iterations",
              flush=True)


def sparse_pca_decay(decays, max_iter: int = 40000) -> None:
    """``--sparse-pca-decay B ...``: sparse PCA's default rule with its decay per epoch set
    to each B (its restart kept), on what the estimator's defaults fit (standardized breast
    cancer, wine and digits with 3 and 5 loadings, linnerud with 2, mu = 0.2) and on the
    planted instances (`SparsePCA.synthetic`, seeds 0-4, RSM and RSSM with l = 5), with a
    budget of ``max_iter``: stop reason, iterations, f, error to the planted loadings."""
    from sklearn.datasets import load_breast_cancer, load_digits, load_linnerud, load_wine
    from sklearn.preprocessing import StandardScaler

    import rssm
    import rssm.problems.sparse_pca as sp
    from rssm.problems import SparsePCA

    def cases():
        for name, load in (("breast_cancer", load_breast_cancer), ("wine", load_wine),
                           ("digits", load_digits)):
            x = load().data
            x = StandardScaler().fit_transform(x[:, x.std(axis=0) > 0])
            for r in (3, 5):
                yield f"{name} r {r}", SparsePCA.from_data(x, r, mu=0.2), 0, {}
        x = StandardScaler().fit_transform(load_linnerud().data)
        yield "linnerud r 2", SparsePCA.from_data(x, 2, mu=0.2), 0, {}
        for seed in range(5):
            prob = SparsePCA.synthetic(seed=seed)
            yield f"synthetic seed {seed} rsm", prob, seed, {}
            yield (f"synthetic seed {seed} rssm l=5", prob, seed,
                   {"method": "rssm", "options": {"n_blocks": 5}})

    kept = sp.DEFAULT_DECAY
    try:
        for beta in decays:
            sp.DEFAULT_DECAY = beta
            its = []
            for label, prob, seed, kw in cases():
                res = rssm.minimize(prob, prob.initial_point(seed), seed=seed,
                                    max_iter=max_iter, **kw)
                its.append(res.n_iter if res.success else None)
                err = f"{res.error:.2e}" if prob.has_error else "-"
                print(f"{beta:g} | {label} | {res.stop_reason.value} | {res.n_iter} | "
                      f"f {res.fun:.10g} | error {err}", flush=True)
            done = [n for n in its if n is not None]
            print(f"{beta:g}: converged {len(done)} of {len(its)}, within 20000: "
                  f"{sum(n <= 20000 for n in done)}, median {int(np.median(done))} "
                  "iterations", flush=True)
    finally:
        sp.DEFAULT_DECAY = kept


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.frozen_rsm",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-iter", type=int, default=None)
    ap.add_argument("--method", default="rsm", choices=("rsm", "rssm"))
    ap.add_argument("--sparse", action="store_true")
    ap.add_argument("--sparse-pca-real", action="store_true",
                    help="only: sparse PCA's restart variants on scikit-learn's tables")
    ap.add_argument("--sparse-pca-decay", type=float, nargs="+", default=None,
                    metavar="BETA",
                    help="only: sparse PCA's default rule with these decays per epoch")
    args = ap.parse_args(argv)
    if args.sparse_pca_decay:
        sparse_pca_decay(args.sparse_pca_decay)
        return 0
    if args.sparse_pca_real:
        sparse_pca_real()
        return 0
    import rssm
    from rssm.stepsizes import Geometric

    groups: dict[str, list] = {}
    for tag, prob, seed, kw in instances(args.sparse):
        if args.method == "rssm":
            kw = dict(kw, options={"n_blocks": min(5, prob.shape[1])})
        if args.max_iter:
            kw = dict(kw, max_iter=args.max_iter)
        t = time.perf_counter()
        res = rssm.minimize(prob, seed=seed, method=args.method, **kw)
        wall = time.perf_counter() - t
        ref = rssm.minimize(prob, res.x, method="rsm", stepsize=Geometric(1e-5, 0.999),
                            max_iter=1000, tol=0)
        low = (res.fun - ref.fun) / abs(res.fun)
        err = "" if math.isnan(res.error) else f", error {res.error:.2e}"
        print(f"{tag}: {res.stop_reason.value} after {res.n_iter} its, f {res.fun:.10g}"
              f"{err}, {wall:.2f} s; 1000 short steps lower f by {low:.0e}", flush=True)
        groups.setdefault(tag.rsplit(" seed", 1)[0].split(" noise")[0].split(" auto")[0],
                          []).append((res.success, res.n_iter))
    for key, runs in groups.items():
        its = [n for ok, n in runs if ok]
        print(f"{key}: converged {len(its)} of {len(runs)}"
              + (f", median {int(np.median(its))} iterations" if its else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
