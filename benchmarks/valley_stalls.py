"""Verdicts of convergence at points that are not minimizers, and the check that catches
them (docs/convergence.md, "A stall part 2 cannot tell from a minimizer, and the zigzag
check").

    python -m benchmarks.valley_stalls
    python -m benchmarks.valley_stalls --full-bundle

On ODL with RSSM, a step that shrinks while X crosses a narrow valley can stop X there, at
error 0.06-0.44 from the dictionary. The recent partial subgradients cancel across the
valley as much as they do at the dictionary (the certificate's ``cancel`` 0.10-0.19,
inside the range of the runs that did reach it), and no move along the bundle's
aggregate lowers f (the line probe passes). For each case this runs `rssm.minimize` twice,
with the zigzag check off (``options={"verify_steps": 0}``: the verdict as it was before
the check) and as the defaults have it (24 steps on a verdict with cancel above 0.01; a step
that lowers f is kept and the run goes on from it), and prints both verdicts,
the error, ``cancel``, and from the point the unchecked run returned:

* f along the negative Riemannian subgradient at lengths 1e-8 to 1e-2 ||X||_F (relative
  to f(X): it rises at stalls and at solutions alike);
* the least f of 12 plain subgradient steps of lengths 1e-2 ||X||_F 0.7^i, and the step
  that first lowered it; and of 600 steps with factor 0.99 (none is a local minimizer:
  the long run lowers f at all three stalls, and at no solution).

The rule that stalls is RSSM's success rule (``Auto(scale="length")``, the default
until `rssm.stepsizes.BlockRule`) or a fast candidate of `benchmarks.step_signals`.

With ``--full-bundle`` it measures the bundle that decides, for RSSM, whether a verdict
gets the zigzag check and whether part 2 holds when the per-pair bundles do not cancel
(`rssm.solvers.certificate.full_cancel`): at ten valley stalls (ODL; RSSM with the success
rule at l = 3, 4, 5, the "switch by the first search" candidate at l = 3, and the default
RSM call on seed 10, each run with the check off) and at the solutions of default runs
(DPCP, ODL, l1 Procrustes, from_functions, the planted sparse basis; RSM and RSSM at
l = 3, 5; seeds 1-5, check off, error below 1e-9), it prints the run's own ``cancel`` and
the full bundle's ratio for 3, 4 and 6 subgradients at step lengths 1e-10 and 1e-6
||X||_F (docs/convergence.md, "RSSM: a bundle of full subgradients").

With ``--l1`` it measures the bundle check (`rssm.solvers.certificate.bundle_probe`,
docs/convergence.md, "Narrow valleys: the bundle check"): default calls (RSM, and RSSM
with l = 3) on f(X) = sum |X^T Y| (St(12, 3), 60 Gaussian samples, seeds 0-11) and on
f(X) = max_k <C_k, X> (St(10, 3), 5 Gaussian C_k, seeds 0-5), with the zigzag deciding
(the check before) and with the bundle check deciding (today's), each verdict tested by 300
plain subgradient steps of 1e-4 ||X||_F 0.99^k from the returned point (a verdict they
refute, lowering f by more than 1e-12 of f, is false); then the zigzag and the bundle
check at the solutions of ``_points`` (error below 1e-9; a check that lowers f there
would withdraw a right verdict) and at its ten ODL stalls.

With ``--check-cost`` it times what the checks of a verdict cost the default call (RSM,
the paper's DPCP and ODL and l1 Procrustes, seeds 1-5): the whole call with the defaults
against ``options={"verify_steps": 0}`` (both checks off), interleaved, best of 3 wall
times, default threads; and the extra cost evaluations.

With ``--ridge`` (docs/convergence.md, "A ridge with a small slope") it runs the default
call on maxima of linear functions, f(X) = max_k <C_k, X> (St(10, 1) with 15 pieces,
St(8, 2) with 12 by RSM and RSSM, St(6, 1) with 10; data seeds 123 and 0-4; seeds 0, 1,
2, 4: 96 calls) and tests every verdict against the least f an independent solver finds
from the returned point (SLSQP on the epigraph problem min t s.t. <C_k, X> <= t,
X^T X = I): a verdict more than 1e-8 of |f| above it is false. ``--ridge-tolerances S C``
sets `BUNDLE_STATIONARY` and `CHECK_ABOVE` for the run (what the docs compare).

Iteration counts and verdicts do not depend on the machine's load; only ``--check-cost``
takes timings.
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

#: (problem, blocks, seed, rule): three stalls, and converged runs on the same problems.
CASES = (
    ("odl", 5, 1, "success rule"),
    ("odl", 3, 2, "switch by the first search"),
    ("odl", 3, 4, "switch by the first search"),
    ("odl", 3, 1, "success rule"),
    ("odl", 5, 3, "success rule"),
    ("dpcp", 5, 1, "success rule"),
    ("l1_procrustes", 5, 1, "success rule"),
)


def _rule(name: str):
    from benchmarks.step_signals import CANDIDATES
    from rssm.stepsizes import Auto

    # "success rule": RSSM's default rule when these stalls were found
    # (``Auto(scale="length")``); today's default, `rssm.stepsizes.BlockRule`, converges
    # on ODL l = 5 seed 1 without a stall.
    return Auto(scale="length") if name == "success rule" else CANDIDATES[name]()


def descent_steps(prob, x: np.ndarray, k: int = 12, first: float = 1e-2,
                  factor: float = 0.7) -> tuple[float, int | None]:
    """k subgradient steps from x (`rssm.solvers.certificate.zigzag_points`), lengths
    first ||X||_F factor^i: (least f over f(x) - 1, the step that first lowered f by more
    than 1e-12 |f(x)|, or None)."""
    from rssm.solvers.certificate import zigzag_points

    f0 = float(prob.cost(x))
    best, hit = f0, None
    for i, y in enumerate(zigzag_points(prob, x, k, first, factor)):
        fy = float(prob.cost(y))
        best = min(best, fy)
        if hit is None and fy < f0 - 1e-12 * abs(f0):
            hit = i + 1
    return best / f0 - 1.0, hit


def line(prob, x: np.ndarray, lengths=(1e-8, 1e-6, 1e-4, 1e-2)) -> list[float]:
    """f along -grad f(X) at ``lengths`` ||X||_F, relative to f(X)."""
    from rssm import stiefel

    f0 = float(prob.cost(x))
    g = prob.riemannian_subgradient(x)
    d = -g / np.linalg.norm(g)
    scale = math.sqrt(x.shape[1])
    return [float(prob.cost(stiefel.polar(x + t * scale * d))) / f0 - 1.0 for t in lengths]


def _points():
    """(stalls, solutions): lists of (label, problem, x, error, run's cancel)."""
    import rssm
    from benchmarks.stepsizes import _problems

    probs = _problems()
    stalls = []
    for ell, seeds, rule in ((3, (7, 8, 11), "success rule"), (4, (7, 8, 15), "success rule"),
                             (5, (1,), "success rule"), (3, (2, 4), "switch by the first search")):
        for seed in seeds:
            prob, x0 = probs["odl"][0](seed)
            r = rssm.minimize(prob, x0, method="rssm", seed=seed, stepsize=_rule(rule),
                              max_iter=4000, options={"n_blocks": ell, "verify_steps": 0})
            stalls.append((f"odl l={ell} seed {seed} ({rule})", prob, r.x, r.error,
                           r.certificate.cancel))
    prob, x0 = probs["odl"][0](10)
    r = rssm.minimize(prob, x0, seed=10, options={"verify_steps": 0})
    stalls.append(("odl rsm seed 10 (default call)", prob, r.x, r.error, r.certificate.cancel))
    sols = []
    for name in ("dpcp", "odl", "l1_procrustes", "from_functions", "sparse_basis"):
        for ell in (None, 3, 5):
            for seed in range(1, 6):
                prob, x0 = probs[name][0](seed)
                r = rssm.minimize(prob, x0, method="rssm" if ell else "rsm", seed=seed,
                                  max_iter=4000, options={"verify_steps": 0,
                                                          **({"n_blocks": ell} if ell else {})})
                if r.success and r.error < 1e-9:
                    sols.append((f"{name} {'rsm' if ell is None else f'l={ell}'}", prob, r.x,
                                 r.error, r.certificate.cancel))
    return stalls, sols


def full_bundle() -> None:
    """``--full-bundle``: the full bundle's ratio at stalls and at solutions."""
    from rssm.solvers.certificate import full_cancel

    stalls, sols = _points()
    settings = [(k, t) for k in (3, 4, 6) for t in (1e-10, 1e-6)]
    head = " | ".join(f"full k={k} t={t:g}" for k, t in settings)
    print(f"point | error | run's cancel | {head}")
    for label, prob, x, err, cancel in stalls:
        vals = " | ".join(f"{full_cancel(prob, x, steps=k, length=t):.3g}" for k, t in settings)
        print(f"stall {label} | {err:.1e} | {cancel:.3g} | {vals}", flush=True)
    groups: dict[str, list] = {}
    for label, prob, x, _err, cancel in sols:
        row = [cancel] + [full_cancel(prob, x, steps=k, length=t) for k, t in settings]
        groups.setdefault(label, []).append(row)
    for label, rows in groups.items():
        cols = list(zip(*rows, strict=True))
        print(f"solutions {label} ({len(rows)}) | below 1e-9 | "
              + " | ".join(f"{min(c):.2g}-{max(c):.2g}" for c in cols), flush=True)


def _l1_cost(seed: int, n: int = 12, p: int = 3, m: int = 60):
    import rssm

    y = np.random.default_rng(seed).standard_normal((n, m))
    return rssm.Problem.from_functions(lambda x: float(np.abs(x.T @ y).sum()),
                                       lambda x: y @ np.sign(y.T @ x), shape=(n, p))


def _short_steps_drop(prob, x: np.ndarray, length: float = 1e-4, steps: int = 300) -> float:
    """How far 300 plain normalized subgradient steps of ``length`` 0.99^k lower f from x,
    relative to f(x)."""
    from rssm import stiefel

    y, f0 = x.copy(), float(prob.cost(x))
    best = f0
    for k in range(steps):
        g = stiefel.tangent_projection(y, prob.subgradient(y))
        y = stiefel.polar(y - length * 0.99**k * g / np.linalg.norm(g))
        best = min(best, float(prob.cost(y)))
    return (f0 - best) / abs(f0)


def _max_linear(seed: int, n: int = 10, p: int = 3, k: int = 5):
    import rssm

    c = np.random.default_rng(seed).standard_normal((k, n, p))
    flat = c.reshape(k, -1)
    return rssm.Problem.from_functions(lambda x: float((flat @ x.ravel()).max()),
                                       lambda x: c[int(np.argmax(flat @ x.ravel()))],
                                       shape=(n, p))


def _count(tally: dict, key: str, res, drop: float) -> None:
    """Runs, verdicts of convergence, and verdicts that short steps refute, per key."""
    t = tally.setdefault(key, [0, 0, 0])
    t[0] += 1
    t[1] += res.success
    t[2] += res.success and drop > 1e-12


def _print_tally(tally: dict) -> None:
    for tag, (runs, conv, false) in tally.items():
        print(f"{tag}: {conv} of {runs} called converged, {false} of them refuted by short "
              "steps", flush=True)


def l1_valleys(seeds: int = 12) -> None:
    """``--l1``: verdicts with the zigzag deciding and with the bundle check deciding."""
    import warnings

    import rssm
    from rssm.solvers import certificate as C
    from rssm.solvers import loop

    bundle = loop._bundle

    def zigzag_decides(cert, c, solver, st):       # the check before the bundle check
        return loop._zigzag(cert, solver, st)

    tally: dict[str, list[int]] = {}
    print("cost | seed | method | check | stop | iterations | f | short steps lower f by "
          "(relative) | cost evaluations")
    cases = [("l1", s, _l1_cost(s)) for s in range(seeds)]
    cases += [("max", s, _max_linear(s)) for s in range(6)]
    for name, seed, prob in cases:
        for method, opts in (("rsm", None), ("rssm l=3", {"n_blocks": 3})):
            for tag, check in (("zigzag", zigzag_decides), ("bundle", bundle)):
                loop._bundle = check
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        r = rssm.minimize(prob, seed=0, options=opts)
                finally:
                    loop._bundle = bundle
                drop = _short_steps_drop(prob, r.x)
                _count(tally, f"{name} {tag}", r, drop)
                print(f"{name} | {seed} | {method} | {tag} | {r.stop_reason.value} | "
                      f"{r.n_iter} | {r.fun:.6f} | {drop:.1e} | {r.n_cost}", flush=True)
    _print_tally(tally)
    stalls, sols = _points()
    for kind, points in (("solutions (error below 1e-9)", sols), ("ODL stalls", stalls)):
        zz = bb = 0
        steps = []
        for _label, prob, x, _err, _cancel in points:
            zz += not C.zigzag(prob, x)[0]
            ok, k = C.bundle_probe(prob, x)
            bb += not ok
            steps.append(k)
        print(f"{len(points)} {kind}: the zigzag lowers f at {zz}, the bundle check at "
              f"{bb} (trial points {min(steps)}-{max(steps)})", flush=True)


def _polyhedral(seed: int, shift: float = 0.0, n: int = 20, p: int = 4, m: int = 50):
    import rssm

    q = np.random.default_rng(seed).standard_normal((m, n))
    return rssm.Problem.from_functions(lambda x: float(np.abs(q @ x).sum()) + shift,
                                       lambda x: q.T @ np.sign(q @ x), shape=(n, p))


def polyhedral(seeds: int = 8) -> None:
    """``--polyhedral``: f(X) = ||Q X||_1 (Q 50 x 20 Gaussian, St(20, 4): 70 tangent
    dimensions, about 19 kinks active per column at a minimizer), the default call with a
    budget of 20000 iterations, and the default call (its budget) with 1e6 added to f."""
    import warnings

    import rssm

    print("seed | shift | stop | iterations | f - shift | short steps lower f by (relative "
          "to f) | cost evaluations")
    tally: dict[str, list[int]] = {}
    for seed in range(seeds):
        for shift, kw in ((0.0, {"max_iter": 20000}), (1e6, {})):
            prob = _polyhedral(seed, shift)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = rssm.minimize(prob, **kw)
            drop = _short_steps_drop(prob, r.x, length=1e-5)
            _count(tally, f"shift {shift:g}", r, drop)
            print(f"{seed} | {shift:g} | {r.stop_reason.value} | {r.n_iter} | "
                  f"{r.fun - shift:.6f} | {drop:.1e} | {r.n_cost}", flush=True)
    _print_tally(tally)


def _ridge_call(n: int, p: int, k: int, data_seed: int, method, seed: int) -> tuple:
    """One default call on max_k <C_k, X> and SLSQP's least f from its point."""
    import warnings

    from scipy.optimize import minimize as sp_minimize

    import rssm

    c = np.random.default_rng(data_seed).standard_normal((k, n, p))
    flat = c.reshape(k, -1)
    prob = rssm.Problem.from_functions(lambda x: float(np.max(flat @ x.ravel())),
                                       lambda x: c[int(np.argmax(flat @ x.ravel()))].copy(),
                                       shape=(n, p))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = rssm.minimize(prob, method=method, seed=seed)
    iu = np.triu_indices(p)
    cons = [{"type": "ineq", "fun": lambda z: z[-1] - flat @ z[:-1],
             "jac": lambda z: np.c_[-flat, np.ones(k)]},
            {"type": "eq",
             "fun": lambda z: (z[:-1].reshape(n, p).T @ z[:-1].reshape(n, p) - np.eye(p))[iu]}]
    z = sp_minimize(lambda z: z[-1], np.r_[r.x.ravel(), r.fun],
                    jac=lambda z: np.r_[np.zeros(n * p), 1.0], constraints=cons,
                    method="SLSQP", options={"ftol": 1e-15, "maxiter": 1000}).x
    u, _, vt = np.linalg.svd(z[:-1].reshape(n, p), full_matrices=False)
    least = prob.cost(u @ vt)
    return r, least


def ridge(tolerances: list[float] | None = None) -> None:
    """``--ridge``: verdicts on maxima of linear functions, tested by SLSQP."""
    from rssm.solvers import certificate, loop

    if tolerances:
        certificate.BUNDLE_STATIONARY = tolerances[0]
        certificate.CHECK_ABOVE = loop.CHECK_ABOVE = tolerances[1]
    print(f"# BUNDLE_STATIONARY = {certificate.BUNDLE_STATIONARY:g}, CHECK_ABOVE = "
          f"{loop.CHECK_ABOVE:g}")
    print("shape | pieces | data seed | method | seed | stop | iterations | f above SLSQP's "
          "(relative) | verdict")
    verdicts = false = 0
    for data_seed in (123, 0, 1, 2, 3, 4):
        for n, p, k in ((10, 1, 15), (8, 2, 12), (6, 1, 10)):
            for method in ((None,) if p == 1 else (None, "rssm")):
                for seed in (0, 1, 2, 4):
                    r, least = _ridge_call(n, p, k, data_seed, method, seed)
                    above = (r.fun - least) / abs(least)
                    tag = ""
                    if r.success:
                        verdicts += 1
                        tag = "false" if above > 1e-8 else "right"
                        false += tag == "false"
                    print(f"St({n}, {p}) | {k} | {data_seed} | {method or 'rsm'} | {seed} | "
                          f"{r.stop_reason.value} | {r.n_iter} | {above:.1e} | {tag}",
                          flush=True)
    print(f"verdicts {verdicts} of 96, false {false}")


def check_cost(rounds: int = 3) -> None:
    """``--check-cost``: wall time of the default call with and without the checks."""
    import time

    import rssm
    from benchmarks.stepsizes import _problems

    probs = _problems()
    print("problem | seed | its (on / off) | error (on / off) | extra cost evaluations | "
          "wall s on / off | on / off")
    for name in ("dpcp", "odl", "l1_procrustes"):
        ratios = []
        for seed in range(1, 6):
            prob, x0 = probs[name][0](seed)
            best = {"on": math.inf, "off": math.inf}
            res = {}
            for _ in range(rounds):
                for tag, opts in (("on", None), ("off", {"verify_steps": 0})):
                    t0 = time.perf_counter()
                    res[tag] = rssm.minimize(prob, x0, seed=seed, options=opts)
                    best[tag] = min(best[tag], time.perf_counter() - t0)
            on, off = res["on"], res["off"]
            ratios.append(best["on"] / best["off"])
            print(f"{name} | {seed} | {on.n_iter} / {off.n_iter} | {on.error:.1e} / "
                  f"{off.error:.1e} | {on.n_cost - off.n_cost} | {best['on']:.4f} / "
                  f"{best['off']:.4f} | {ratios[-1]:.2f}", flush=True)
        print(f"{name}: median on / off {float(np.median(ratios)):.2f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.valley_stalls",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-iter", type=int, default=3000)
    ap.add_argument("--full-bundle", action="store_true",
                    help="only: the full bundle's ratio at stalls and at solutions")
    ap.add_argument("--l1", action="store_true",
                    help="only: the bundle check on l1 and max costs, at solutions and stalls")
    ap.add_argument("--polyhedral", action="store_true",
                    help="only: verdicts on ||Q X||_1, 70 tangent dimensions")
    ap.add_argument("--check-cost", action="store_true",
                    help="only: wall time of the default call with and without the checks")
    ap.add_argument("--ridge", action="store_true",
                    help="only: verdicts on maxima of linear functions, tested by SLSQP")
    ap.add_argument("--ridge-tolerances", type=float, nargs=2, default=None,
                    metavar=("STATIONARY", "CHECK_ABOVE"),
                    help="with --ridge: BUNDLE_STATIONARY and CHECK_ABOVE for the run")
    args = ap.parse_args(argv)
    if args.ridge:
        ridge(args.ridge_tolerances)
        return 0
    if args.polyhedral:
        polyhedral()
        return 0
    if args.check_cost:
        check_cost()
        return 0
    if args.l1:
        l1_valleys()
        return 0
    if args.full_bundle:
        full_bundle()
        return 0
    import rssm
    from benchmarks.stepsizes import _problems

    probs = _problems()
    for name, ell, seed, rule in CASES:
        prob, x0 = probs[name][0](seed)
        res = rssm.minimize(prob, x0, method="rssm", stepsize=_rule(rule), seed=seed,
                            max_iter=args.max_iter,
                            options={"n_blocks": ell, "verify_steps": 0})
        checked = rssm.minimize(prob, x0, method="rssm", stepsize=_rule(rule), seed=seed,
                                max_iter=args.max_iter, options={"n_blocks": ell})
        cert = res.certificate
        best, hit = descent_steps(prob, res.x)
        long_best, _ = descent_steps(prob, res.x, k=600, factor=0.99)
        print(f"{name} l={ell} seed {seed} {rule}: unchecked success {res.success} after "
              f"{res.n_iter} its, error {prob.error(res.x):.1e}; checked success "
              f"{checked.success} after {checked.n_iter} its ({checked.stop_reason.value}), "
              f"error {prob.error(checked.x):.1e}; unchecked cancel "
              f"{cert.cancel if cert else math.nan:.2g}; along -grad f "
              + " ".join(f"{v:+.1e}" for v in line(prob, res.x))
              + f"; 12 subgradient steps: least f {best:+.1e} (first lower at step {hit})"
              + f"; 600 steps (factor 0.99): least f {long_best:+.1e}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
