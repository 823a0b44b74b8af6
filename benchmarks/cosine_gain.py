"""Cosine control on overshooting steps (issue #18, item 5; `BlockRule`'s per-epoch branch).

    python -m benchmarks.cosine_gain [--quick]

`BlockRule` on costs that ignore rotations (DPCP) moves log t_k by an epoch's mean cosine
m of successive block subgradients. Cutting the length half as hard where m < 0
(``NEG_GAIN = 0.5``) shortens DPCP's late phase, but on smooth costs it kept the steps at
the edge of stability; the kept rule does it only while the mean estimate of
||grad f||^2 is at least (``SHARP`` g_0)^2, as near a sharp minimizer. This prints, for
the rule before (``NEG_GAIN = 1``), the ungated cut (``SHARP = 0``), gates of 0.1, 0.2
and 0.3, and a control that moves only the path (the first beta 0.701 instead of 0.7):

* DPCP (the paper's instance, `benchmarks.stepsizes`' harness), RSSM l = 3 and 5, seeds
  6-45: iterations to error 1e-10 (rejected trials as half an iteration), mean over the
  seeds every variant reaches, and how many seeds are faster or slower than the rule
  before;
* the default calls ``rssm.minimize(DPCP.synthetic(seed=s), method="rssm",
  options={"n_blocks": l}, seed=s)``, l = 2-6 and 10, seeds 0-7: converged, mean
  iterations;
* the 510 calls of `benchmarks.rotation_invariant` against the rule before: verdicts
  gained and lost, calls more than 1.5x slower or faster, calls on their budget both ways
  at a higher f.

Iteration counts only (no timing); about 15 minutes here.
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings

import numpy as np

import rssm
import rssm.stepsizes.blockrule as blockrule

VARIANTS = (
    ("before (NEG_GAIN = 1)", {"NEG_GAIN": 1.0}),
    ("ungated (SHARP = 0)", {"NEG_GAIN": 0.5, "SHARP": 0.0}),
    ("SHARP = 0.1", {"NEG_GAIN": 0.5, "SHARP": 0.1}),
    ("SHARP = 0.2", {"NEG_GAIN": 0.5, "SHARP": 0.2}),
    ("SHARP = 0.3 (kept)", {"NEG_GAIN": 0.5, "SHARP": 0.3}),
    ("control: before, BETA0 = 0.701", {"NEG_GAIN": 1.0, "BETA0": 0.701}),
)


def _with(constants: dict, fn):
    saved = {k: getattr(blockrule, k) for k in constants}
    for k, v in constants.items():
        setattr(blockrule, k, v)
    try:
        return fn()
    finally:
        for k, v in saved.items():
            setattr(blockrule, k, v)


def dpcp_iterations(seeds: range) -> dict:
    """key -> iterations to 1e-10 per seed (inf where not reached)."""
    from benchmarks.stepsizes import _problems, first_at, run_rule
    from rssm.stepsizes import Auto

    build, epochs, _ = _problems()["dpcp"]
    out = {}
    for key in ("rssm-l3", "rssm-l5"):
        its = []
        for seed in seeds:
            prob, x0 = build(seed)
            h = first_at(run_rule(prob, x0, key, Auto(), epochs, seed), 1e-10)
            its.append(h[0] + 0.5 * h[1] if h else math.inf)
        out[key] = np.array(its)
    return out


def default_calls(blocks: tuple, seeds: range) -> dict:
    out = {}
    for ell in blocks:
        for seed in seeds:
            p = rssm.problems.DPCP.synthetic(seed=seed)
            r = rssm.minimize(p, method="rssm", options={"n_blocks": ell}, seed=seed)
            out[(ell, seed)] = (bool(r.success), int(r.n_iter))
    return out


def main(argv: list[str] | None = None) -> int:
    from benchmarks import rotation_invariant as ri

    ap = argparse.ArgumentParser(prog="python -m benchmarks.cosine_gain",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="seeds 6-10, l = 3 and 5 default calls on 2 seeds, the quick "
                         "rotation-invariant set")
    args = ap.parse_args(argv)
    seeds = range(6, 11) if args.quick else range(6, 46)
    blocks = (3, 5) if args.quick else (2, 3, 4, 5, 6, 10)
    dseeds = range(2) if args.quick else range(8)
    results = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, consts in VARIANTS:
            results[name] = (
                _with(consts, lambda: dpcp_iterations(seeds)),
                _with(consts, lambda: default_calls(blocks, dseeds)),
                ri.run(blockrule.RISE, args.quick, **consts),
            )
            print(f"# ran {name}", flush=True)
    base_its, base_calls, base_rot = results[VARIANTS[0][0]]
    print(f"DPCP, seeds {seeds.start}-{seeds.stop - 1}: iterations to 1e-10 (mean over the "
          "seeds every variant reaches; seeds faster / slower than the rule before)")
    reach = {k: np.all([np.isfinite(r[0][k]) for r in results.values()], axis=0)
             for k in base_its}
    for name, (its, calls, rot) in results.items():
        cells = []
        for k, v in its.items():
            b = base_its[k]
            cells.append(f"{k}: {v[reach[k]].mean():.1f} ({int(np.isfinite(v).sum())} reach; "
                         f"{int((v < b).sum())} faster, {int((v > b).sum())} slower)")
        conv = sum(ok for ok, _ in calls.values())
        per_l = " ".join(f"l={ell} {np.mean([calls[(ell, s)][1] for s in dseeds]):.1f}"
                         for ell in blocks)
        c = ri.compare(base_rot, rot)
        print(f"{name}: {'; '.join(cells)} | default calls {conv} of {len(calls)} converge, "
              f"mean iterations {per_l} | rotation-invariant {c['converged']} of "
              f"{len(rot)} converge: {ri.counts_text(c)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
