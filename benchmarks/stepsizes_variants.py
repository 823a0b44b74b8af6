"""Variants of `rssm.stepsizes.Auto` for RSSM that were tried and not kept (issue 11).

    python -m benchmarks.stepsizes_variants [--seeds 2] [--out benchmarks/results]

`Auto`'s RSSM rule grows the step length by 1.5 after a step that decreased f and halves
it after one that did not. Its weak spot is RSSM with many blocks (docs/stepsizes.md).
This script runs, on the same instances and starts as `benchmarks.stepsizes` (its
budgets: 600 epochs, i.e. 300 l RSSM iterations), three families of changes beside it:

* **larger growth** (2 or 3 instead of 1.5), with and without a cap of the length at
  sqrt(p) = ||X||_F;
* **sufficient decrease**: a step counts as a success only if
  f(X_{k+1}) <= f(X_k) - c gamma_k ||P(G_C)||^2 (c = 0.1 or 0.3) instead of f(X_{k+1}) < f(X_k);
* **smoother factors** with the same balance point (one failure in about 2.7 steps):
  grow / shrink = 1.22 / 0.71, 1.1 / 0.84, 1.05 / 0.92.

It prints iterations to error 1e-8 / 1e-10 per instance ("-": not within the budget) and,
per variant, how many instances reach 1e-10 and the median iterations over them.
Iteration counts do not depend on the machine's load.

A second part (``--rsm``) tries, for RSM, Armijo trials on every iteration: start from
``up`` times the last length, halve after a failed sufficient-decrease test, at most ``m``
trials; when none passes, step anyway at the last halved length (the success rule's
non-monotone step). It prints iterations and solver seconds to 1e-10, interleaved with auto
in one process, on DPCP, ODL, l1_procrustes, from_functions and sparse_basis.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

from benchmarks.stepsizes import _first, _problems, _run_rssm


def _variants(rsm: bool = False):
    from rssm.stepsizes import Auto, _length

    class Capped(Auto):
        """`Auto` whose length never exceeds sqrt(p) (or, cap=None, no cap)."""

        def __init__(self, cap=True, **kw):
            super().__init__(**kw)
            self.cap = cap

        def __call__(self, k, ctx):
            gamma = super().__call__(k, ctx)
            if self.cap:
                t_max = _length(None, ctx)
                if self._t > t_max:     # gamma = t / g: rescale it with t
                    gamma *= t_max / self._t
                    self._t = t_max
            return gamma

    class SufficientDecrease(Auto):
        """Success only if f(X_{k+1}) <= f(X_k) - c gamma_k ||P(G_C)||^2."""

        def __init__(self, csd=0.3, **kw):
            super().__init__(**kw)
            self.csd = csd

        def reset(self):
            super().reset()
            self._need = 0.0

        def __call__(self, k, ctx):
            f = ctx.cost
            # shift the previous cost so that Auto's plain test f < f_prev becomes the
            # sufficient-decrease test, then let Auto do the rest
            self._f_prev = self._f_prev - self._need
            gamma = super().__call__(k, ctx)
            self._need = self.csd * gamma * ctx.direction_norm**2
            self._f_prev = f
            return gamma

    class Trials(Auto):
        """RSM with up to m Armijo trials per iteration from up * the last length."""

        def __init__(self, up=2.0, m=3, **kw):
            super().__init__(**kw)
            self.up, self.m = up, m

        def __call__(self, k, ctx):
            if not self._started:
                return super().__call__(k, ctx)
            f, g2 = self._observe(ctx)
            g = math.sqrt(g2)
            d2 = ctx.direction_norm**2
            t = self._t * self.up
            for _ in range(self.m):
                gamma = t / g
                if ctx.trial(gamma) <= f - self.c * gamma * d2:
                    self._t = t
                    return gamma
                t *= 0.5
            self._t = t
            return t / g

    if rsm:
        return {"auto": lambda: Auto(),
                "trials up 2, m 1": lambda: Trials(2.0, 1),
                "trials up 2, m 2": lambda: Trials(2.0, 2),
                "trials up 2, m 3": lambda: Trials(2.0, 3),
                "trials up 3, m 2": lambda: Trials(3.0, 2)}
    return {
        "auto (1.5 / 0.5)": lambda: Auto(),
        "grow 2": lambda: Capped(cap=False, grow=2.0),
        "grow 3": lambda: Capped(cap=False, grow=3.0),
        "grow 2, cap sqrt(p)": lambda: Capped(grow=2.0),
        "suff. decrease c=0.1": lambda: SufficientDecrease(csd=0.1),
        "suff. decrease c=0.3": lambda: SufficientDecrease(csd=0.3),
        "suff. decrease c=0.3, grow 2": lambda: SufficientDecrease(csd=0.3, grow=2.0),
        "1.22 / 0.71": lambda: Auto(grow=1.2247, shrink=0.7071),
        "1.1 / 0.84": lambda: Auto(grow=1.1, shrink=0.8414),
        "1.05 / 0.92": lambda: Auto(grow=1.05, shrink=0.917),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.stepsizes_variants",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--rsm", action="store_true", help="the RSM part (trials per iteration)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    args = ap.parse_args(argv)
    import numpy as np

    probs = _problems(False)
    if args.rsm:
        return _rsm(probs, args)
    variants = _variants()
    cases = [(name, ell, seed) for name in ("l1_procrustes", "from_functions", "sparse_basis")
             for ell in (3, 5, 10) for seed in range(1, 1 + args.seeds)]
    cases += [("odl", 5, 1), ("dpcp", 5, 1)]
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "stepsizes_variants.log"), "w")

    def say(msg=""):
        print(msg, flush=True)
        log.write(msg + "\n")

    say(f"# python -m benchmarks.stepsizes_variants "
        f"{' '.join(argv if argv is not None else sys.argv[1:])}")
    say("| problem | l | seed | " + " | ".join(variants) + " |")
    say("|---|---|---|" + "---|" * len(variants))
    reached = {v: [] for v in variants}
    wall = time.perf_counter()
    for name, ell, seed in cases:
        build, _, budget = probs[name]
        prob, x0 = build(seed)
        if ell > prob.shape[1]:
            continue
        cells = []
        for v, make in variants.items():
            with np.errstate(all="ignore"):
                tr = _run_rssm(prob, x0, "rssm", ell, make(), budget, seed)
            i8 = _first(tr[0], tr[1], tr[3], 1e-8)[1]
            i10 = _first(tr[0], tr[1], tr[3], 1e-10)[1]
            reached[v].append(i10)
            cells.append(f"{i8 if i8 >= 0 else '-'} / {i10 if i10 >= 0 else '-'}")
        say(f"| {name} | {ell} | {seed} | " + " | ".join(cells) + " |")
    say("")
    say("| variant | instances to 1e-10 | median iterations there |")
    say("|---|---|---|")
    for v, its in reached.items():
        ok = [i for i in its if i >= 0]
        say(f"| {v} | {len(ok)} / {len(its)} | {np.median(ok) if ok else math.nan:.0f} |")
    say(f"\n# wall time {time.perf_counter() - wall:.0f} s")
    log.close()
    return 0


def _rsm(probs, args) -> int:
    import numpy as np

    variants = _variants(rsm=True)
    path = os.path.join(args.out, "stepsizes_variants_rsm.log")
    os.makedirs(args.out, exist_ok=True)
    log = open(path, "w")

    def say(msg=""):
        print(msg, flush=True)
        log.write(msg + "\n")

    say("# python -m benchmarks.stepsizes_variants --rsm; iterations / solver s to 1e-10")
    say("| problem | seed | " + " | ".join(variants) + " |")
    say("|---|---|" + "---|" * len(variants))
    wall = time.perf_counter()
    for name in ("dpcp", "odl", "l1_procrustes", "from_functions", "sparse_basis"):
        build, _, budget = probs[name]
        for seed in range(1, 1 + args.seeds):
            prob, x0 = build(seed)
            cells = []
            for make in variants.values():
                with np.errstate(all="ignore"):
                    tr = _run_rssm(prob, x0, "rsm", 1, make(), budget, seed)
                t10, i10 = _first(tr[0], tr[1], tr[3], 1e-10)
                cells.append(f"{i10} / {t10:.3g}" if i10 >= 0 else f"- (error {tr[3][-1]:.1e})")
            say(f"| {name} | {seed} | " + " | ".join(cells) + " |")
    say(f"\n# wall time {time.perf_counter() - wall:.0f} s")
    log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
