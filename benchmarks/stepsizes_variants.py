"""The step-size rules tried for the default and not kept (issue 18), and the measurement
behind the default method.

`CANDIDATES` maps a name to a factory; ``python -m benchmarks.stepsizes --candidates``
runs them beside ``auto`` and the geometric grid (docs/stepsizes.md, "the candidates").
Each reads only the `rssm.stepsizes.StepContext` API, sets a step *length* t (gamma =
t / g, g^2 the averaged estimate of ||grad f||^2, as `rssm.stepsizes.Auto` does), starts
with Auto's Armijo search and is capped like it:

* ``previous auto``: the default before issue 18: t times 1.2 (RSM) or 1.5 (RSSM) after
  a step that decreased f, times 0.5 after one that did not;
* ``success rule``: `Auto(scale="length")`, Auto's RSSM rule (1.3 / 0.6 below 5 blocks,
  1.4 / 0.6 from 5 on) used for RSM too (1.3 / 0.6 there);
* ``gap for RSSM too``: `Auto(scale="gap")`, the RSM rule of Auto used for RSSM as well;
* ``learned decay``: the success rule plus a learned drift r, log t += u + r, where u is
  the success rule's step and r += 0.3 u (in [log 0.25, 0]): the integral term that lets
  a length rule follow a fast geometric decay without lagging;
* ``restart``: a geometric decay t *= 0.5 per epoch; three steps in a row that
  decrease f with rho >= 0.9 (rho = the decrease over its linear prediction: the step was
  too short) slow the decay (q <- sqrt(q)) and grow t by 2 per step until one fails;
* ``race``: two trials per iteration, at 0.5 t and 1.5 t; the lower f wins and is taken
  (a short race of lengths at every step; one trial is kept, one is not);
* `Backtracking` and `PolyakLevel` of `rssm.stepsizes` (Armijo trials on every
  iteration; Polyak's step towards an adaptive target level).

``python -m benchmarks.stepsizes_variants --caps`` runs the fastest geometric schedules of
ODL (paper size, seed 1) with their steps capped at 1 (the radius of Lemma 3.2), at
sqrt(|C|) and at the diameter 2 sqrt(|C|) of the columns moved, and without a cap: the
measurement behind `rssm.stepsizes.max_step_length`.

``python -m benchmarks.stepsizes_variants`` runs the default rule with every method
(RSM; RSSM with l = 2, 3, 5, 10) on the paper's DPCP and ODL and on l1 Procrustes,
5 seeds, and prints the converted time (see `benchmarks.stepsizes`) to 1e-8 and 1e-10:
the measurement behind the default method (docs/stepsizes.md, "the default method").
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time

from rssm.stepsizes import Auto, Backtracking, PolyakLevel, StepSize
from rssm.stepsizes._common import GradMean, max_gamma


class _Length(StepSize):
    """Shared machinery: gamma = t / g, Auto's first search, the cap, and rho of the last
    step (its decrease of f over gamma ||P(G_C)||^2)."""

    def reset(self):
        self._mean = GradMean()
        self._t = math.nan
        self._prev = None

    def _update(self, t, rho, ctx):
        raise NotImplementedError

    def __call__(self, k, ctx):
        f = ctx.cost
        g = math.sqrt(self._mean(ctx))
        if self._prev is None:
            first = Auto(patience=8)
            self._t = first._first(ctx, f, g)
        else:
            fp, gp, d2p = self._prev
            self._t = self._update(self._t, (fp - f) / (gp * d2p), ctx)
        self._t = min(self._t, max_gamma(ctx) * g)
        gamma = self._t / g
        self._prev = (f, gamma, ctx.direction_norm**2)
        return gamma


class LearnedDecay(_Length):
    """The success rule with an integral term: log t += u + r, r += kappa u, r in
    [r_min, 0] (r_min = log 0.25)."""

    def __init__(self, grow=1.2, shrink=0.5, kappa=0.3, r_min=-1.3862943611198906,
                 patience=8):
        self.grow, self.shrink, self.kappa = grow, shrink, kappa
        self.r_min, self.patience = r_min, patience
        self.reset()

    def reset(self):
        super().reset()
        self._r = 0.0
        self._fails = 0

    def _update(self, t, rho, ctx):
        if rho > 0:
            self._fails = 0
            u = math.log(self.grow)
        else:
            self._fails += 1
            if self._fails > self.patience:
                return t
            u = math.log(self.shrink)
        self._r = min(0.0, max(self.r_min, self._r + self.kappa * u))
        return t * math.exp(u + self._r)


class Restart(_Length):
    """Geometric decay at q per epoch; `runs` too-short steps in a row (rho >= hi) slow it
    (q <- q^(1/2)) and switch to growing t by `up` per step until one fails."""

    def __init__(self, q0=0.5, hi=0.9, runs=3, up=2.0):
        self.q0, self.hi, self.runs, self.up = q0, hi, runs, up
        self.reset()

    def reset(self):
        super().reset()
        self._q = self.q0
        self._growing = False
        self._short = 0

    def _update(self, t, rho, ctx):
        if self._growing:
            if rho > 0:
                return t * self.up
            self._growing = False
            return t * 0.5
        self._short = self._short + 1 if rho >= self.hi else 0
        if self._short >= self.runs:
            self._short = 0
            self._q = math.sqrt(self._q)
            self._growing = True
            return t * self.up
        return t * self._q ** (1.0 / ctx.epoch)


class Race(_Length):
    """Two trials per iteration, at a t and b t; the lower cost wins and is taken."""

    def __init__(self, a=0.5, b=1.5):
        self.a, self.b = a, b
        self.reset()

    def __call__(self, k, ctx):
        if self._prev is None:
            gamma = super().__call__(k, ctx)
            return gamma
        g = math.sqrt(self._mean(ctx))
        top = max_gamma(ctx)
        g_short, g_long = min(self.a * self._t / g, top), min(self.b * self._t / g, top)
        f_long = ctx.trial(g_long)
        gamma = g_short if ctx.trial(g_short) <= f_long else g_long
        if gamma == g_long:
            ctx.trial(g_long)       # the loop keeps the last trial when it is the step
        self._t = gamma * g
        return gamma


class PreviousAuto(Auto):
    """The default before issue 18: the success rule on the length, 1.2 / 0.5 for RSM and
    1.5 / 0.5 for RSSM (here with the exact mean, the first search from the diameter and
    the cap)."""

    def __init__(self):
        super().__init__(scale="length", shrink=0.5)

    def __call__(self, k, ctx):
        self.grow = 1.5 if ctx.method == "rssm" else 1.2
        return super().__call__(k, ctx)

    def describe(self):
        return {"rule": "PreviousAuto"}


#: name -> factory of the candidates not kept (see the module docstring)
CANDIDATES = {
    "previous auto": PreviousAuto,
    "success rule": lambda: Auto(scale="length"),
    "gap for RSSM too": lambda: Auto(scale="gap"),
    "learned decay": LearnedDecay,
    "restart": Restart,
    "race": Race,
    "Backtracking": Backtracking,
    "PolyakLevel": PolyakLevel,
}


class Capped(StepSize):
    """``rule`` with gamma ||P(G_C)||_F capped at ``length`` (None: no cap)."""

    def __init__(self, rule, length):
        self.rule, self.length = rule, length

    def reset(self):
        self.rule.reset()

    def __call__(self, k, ctx):
        gamma = self.rule(k, ctx)
        return gamma if self.length is None else min(gamma, self.length / ctx.direction_norm)


def caps(say) -> None:
    """ODL (paper size, seed 1): iterations to 1e-10 of the fastest geometric schedules
    under four caps of the step's length; then Auto on seeds 1-5 with its steps clipped
    at 1 after it chose them (as a solver loop that clips would)."""
    import numpy as np

    from benchmarks.stepsizes import _problems, first_at, run_rule
    from rssm.stepsizes import Geometric

    build, epochs, _ = _problems()["odl"]
    prob, x0 = build(1)
    g0 = float(np.linalg.norm(prob.riemannian_subgradient(x0)))
    p = prob.shape[1]
    say("| ODL seed 1 | schedule (t = first length) | no cap | cap 1 | cap sqrt(\\|C\\|) | "
        "cap 2 sqrt(\\|C\\|) |")
    say("|---|---|---|---|---|---|")
    for key, t, beta in (("rsm", 100, 0.6), ("rsm", 30, 0.7), ("rsm", 10, 0.8),
                         ("rssm-l3", 30, 0.8), ("rssm-l3", 100, 0.8)):
        c = p if key == "rsm" else 2 * math.ceil(p / int(key[6:]))
        cells = []
        for length in (None, 1.0, math.sqrt(c), 2 * math.sqrt(c)):
            run = run_rule(prob, x0, key, Capped(Geometric(t / g0, beta), length), epochs, 1)
            hit = first_at(run, 1e-10)
            cells.append(f"{hit[0]}" if hit else f"- ({run['error'][-1]:.1g})")
        say(f"| {key} | t={t}, beta={beta} | " + " | ".join(cells) + " |")
    say("")
    say("| ODL, Auto clipped as a loop would clip it | seeds 1-5: iterations to 1e-10 "
        "(final error) |")
    say("|---|---|")
    for key in ("rsm", "rssm-l3"):
        for length in (None, 1.0):
            cells = []
            for seed in range(1, 6):
                prob, x0 = build(seed)
                run = run_rule(prob, x0, key, Capped(Auto(), length), epochs, seed)
                hit = first_at(run, 1e-10)
                cells.append(f"{hit[0]}" if hit else f"- ({run['error'][-1]:.1g})")
            say(f"| {key}, {'no clip' if length is None else 'clip at 1'} | "
                + " ".join(cells) + " |")


def main(argv=None) -> int:
    """The default method: auto with RSM and RSSM (l = 2, 3, 5, 10), converted time."""
    from benchmarks.stepsizes import _problems, calibrate, first_at, run_rule
    from benchmarks.suite import machine

    ap = argparse.ArgumentParser(prog="python -m benchmarks.stepsizes_variants",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--problems", nargs="*", default=["dpcp", "odl", "l1_procrustes"])
    ap.add_argument("--caps", action="store_true",
                    help="the cap study on ODL instead (iterations to 1e-10 under 4 caps)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                   "stepsizes"))
    args = ap.parse_args(argv)
    if args.caps:
        caps(print)
        return 0
    probs = _problems()
    keys = ("rsm", "rssm-l2", "rssm-l3", "rssm-l5", "rssm-l10")
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "default_method.log"), "w")

    def say(msg=""):
        print(msg, flush=True)
        log.write(msg + "\n")

    say(f"# python -m benchmarks.stepsizes_variants {' '.join(argv or sys.argv[1:])}")
    say(f"# {machine()}")
    rows = []
    wall0 = time.perf_counter()
    for name in args.problems:
        build, epochs, exact = probs[name]
        for seed in range(1, args.seeds + 1):
            prob, x0 = build(seed)
            for key in keys:
                t_iter, t_trial = calibrate(prob, x0, key)
                run = run_rule(prob, x0, key, Auto(), epochs, seed, exact=exact)
                row = dict(problem=name, seed=seed, method=key, t_iter=t_iter)
                for lv in (1e-8, 1e-10):
                    hit = first_at(run, lv)
                    row[f"it_{lv:g}"] = None if hit is None else hit[0]
                    row[f"conv_{lv:g}"] = (None if hit is None
                                           else hit[0] * t_iter + hit[1] * t_trial)
                rows.append(row)
            say(f"{name} seed {seed}: {time.perf_counter() - wall0:.0f} s so far")
    with open(os.path.join(args.out, "default_method.csv"), "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    say("\n| problem | method | ms per iteration | seeds to 1e-10 | median it 1e-8 / 1e-10 | "
        "median converted s to 1e-8 / 1e-10 | time to 1e-10 / RSM's, per seed |")
    say("|---|---|---|---|---|---|---|")
    for name in args.problems:
        base = {r["seed"]: r for r in rows if r["problem"] == name and r["method"] == "rsm"}
        for key in keys:
            sel = [r for r in rows if r["problem"] == name and r["method"] == key]

            def med(col, sel=sel):
                v = sorted(r[col] for r in sel if r[col] is not None)
                return v[len(v) // 2] if v else None

            def fmt(v, spec):
                return "-" if v is None else format(v, spec)

            rat = []
            for r in sel:
                b = base[r["seed"]]["conv_1e-10"]
                rat.append("-" if r["conv_1e-10"] is None or b is None
                           else f"{r['conv_1e-10'] / b:.2f}")
            n10 = sum(r["conv_1e-10"] is not None for r in sel)
            say(f"| {name} | {key} | {fmt(med('t_iter') * 1e3, '.2f')} | {n10} of {len(sel)} "
                f"| {fmt(med('it_1e-08'), '.0f')} / {fmt(med('it_1e-10'), '.0f')} | "
                f"{fmt(med('conv_1e-08'), '.3g')} / {fmt(med('conv_1e-10'), '.3g')} | "
                f"{' '.join(rat)} |")
    say(f"\n# wall time {time.perf_counter() - wall0:.0f} s")
    log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
