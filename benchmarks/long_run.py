"""Long-run reliability check: feasibility and cache exactness over 10^6 RSSM iterations.

Runs RSSM through the library's own loop (`rssm.solvers.run`) on small problems and checks

* after every iteration: ||X^T X - I||_max (promise: <= 1e-12);
* every ``--check-every`` iterations: the oracle's incremental caches against a
  from-scratch recomputation at the same iterate (promise: within 1e-10). For DPCP the
  caches are Z^T = X^T Yt (absolute deviation), the per-block squared row norms ``bn``
  (absolute) and the cost (relative to max(1, |f|)); for ODL Z^T and the cost.

The DPCP weights ``inv_norm`` = 1/(m ||z_j||) are printed too, as a relative deviation,
but are not part of the promise: they are a function of the cache with condition number
about 1/||z_j||, which grows without bound as inlier rows z_j -> 0 near the solution, so
even two from-scratch computations with different summation orders differ there. The
caches are never updated by differences (changed rows are recomputed from X), so their
deviation stays at rounding level however long the run.

Usage (from the repository root)::

    python benchmarks/long_run.py                  # 10^6 iterations per case (minutes)
    python benchmarks/long_run.py --iters 10000    # quick version (the test suite runs this)

The exit status is 1 when a promise is broken. The iteration rate printed includes the
per-iteration feasibility check (a p x p Gram matrix, a few microseconds).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np

import rssm
from rssm import stiefel
from rssm.blocks import Partition, make_selector
from rssm.solvers import RSMSolver, RSSMSolver, run
from rssm.stepsizes import Constant, as_stepsize
from rssm.stopping import AnyOf, CallbackStop, MaxIterations

#: Promises checked by this script (docs/guarantees.md).
FEASIBILITY_TOL = 1e-12
CACHE_TOL = 1e-10


@dataclass
class Case:
    """One long-run configuration."""

    label: str
    problem: str  # "dpcp" or "odl"
    n: int
    p: int
    n_blocks: int
    stepsize: str  # "paper" or a constant, e.g. "0.01"
    method: str = "rssm"


#: The cases run by default: the issue's n=20, p=12 with l=4 and with l=p (one column per
#: block), a constant step that keeps the iterate moving for the whole run, and ODL.
CASES = (
    Case("dpcp n=20 p=12 l=4 paper step", "dpcp", 20, 12, 4, "paper"),
    Case("dpcp n=20 p=12 l=12 paper step", "dpcp", 20, 12, 12, "paper"),
    Case("dpcp n=20 p=12 l=4 constant 1e-2", "dpcp", 20, 12, 4, "0.01"),
    Case("odl n=12 p=12 l=4 constant 1e-3", "odl", 12, 12, 4, "0.001"),
)


@dataclass
class Report:
    """Figures of one long run."""

    label: str
    iterations: int
    max_feasibility: float
    final_feasibility: float
    max_dev_zt: float
    max_dev_bn: float
    max_rel_dev_inv_norm: float
    max_rel_dev_cost: float
    n_checks: int
    final_cost: float
    final_error: float
    solver_seconds: float
    iterations_per_second: float
    stop_reason: str

    @property
    def max_cache_deviation(self) -> float:
        """Largest absolute cache deviation (Z^T, block norms, cost)."""
        return max(self.max_dev_zt, self.max_dev_bn, self.max_rel_dev_cost)

    def ok(self, feas_tol: float = FEASIBILITY_TOL, cache_tol: float = CACHE_TOL) -> bool:
        """True when every promise held (``inv_norm`` is informational)."""
        return self.max_feasibility <= feas_tol and self.max_cache_deviation <= cache_tol


def make_problem(case: Case, seed: int) -> rssm.Problem:
    """The synthetic instance of ``case`` (fixed seed)."""
    if case.problem == "dpcp":
        return rssm.problems.DPCP.synthetic(
            n=case.n, d=case.n - case.p, n_inliers=60, n_outliers=40, seed=seed
        )
    if case.problem == "odl":
        prob = rssm.problems.ODL.synthetic(n=case.n, theta=0.3, m=200, seed=seed)
        if case.p != case.n:
            raise ValueError(f"odl cases need p = n, got n={case.n}, p={case.p}")
        return prob
    raise ValueError(f"problem must be 'dpcp' or 'odl', got {case.problem!r}")


def cache_deviations(oracle, problem: rssm.Problem, partition: Partition | None) -> dict:
    """Compare ``oracle``'s caches with a from-scratch recomputation at ``oracle.x``.

    Returns the max absolute deviation of Z^T (vs X^T Yt computed directly), of the
    block norms ``bn`` (vs a freshly built oracle), the max relative deviation of
    ``inv_norm`` (vs a fresh oracle) and the deviation of the cost from
    ``problem.cost(x)`` relative to max(1, |f|). Entries that a problem's oracle does
    not keep are 0.
    """
    x = np.array(oracle.x, copy=True)
    fresh = problem.make_oracle(x, partition)
    out = {"zt": 0.0, "bn": 0.0, "inv_norm": 0.0, "cost": 0.0}
    if hasattr(oracle, "zt"):
        direct = x.T @ oracle.yt
        out["zt"] = float(np.max(np.abs(oracle.zt - direct)))
    if hasattr(oracle, "bn"):
        out["bn"] = float(np.max(np.abs(oracle.bn - fresh.bn)))
        ref = fresh.inv_norm
        scale = np.where(ref != 0, np.abs(ref), 1.0)
        out["inv_norm"] = float(np.max(np.abs(oracle.inv_norm - ref) / scale))
    ref_cost = float(problem.cost(x))
    out["cost"] = abs(oracle.cost() - ref_cost) / max(1.0, abs(ref_cost))
    return out


def long_run(case: Case, n_iter: int, check_every: int = 100, seed: int = 0) -> Report:
    """Run ``case`` for ``n_iter`` iterations with all checks; return its `Report`."""
    problem = make_problem(case, seed)
    n, p = problem.shape
    rng = np.random.default_rng(seed + 1)
    x0 = problem.initial_point(np.random.default_rng(seed + 2))
    base = RSSMSolver if case.method == "rssm" else RSMSolver
    partition = Partition.uniform(p, case.n_blocks) if case.method == "rssm" else None
    selector = make_selector("uniform") if case.method == "rssm" else None

    class Checked(base):
        """The solver with ||X^T X - I||_max taken after every step."""

        max_feas = 0.0

        def commit(self, state, d, values) -> None:
            super().commit(state, d, values)
            g = state.x.T @ state.x
            g.flat[:: p + 1] -= 1.0
            dev = float(np.max(np.abs(g)))
            if not dev <= self.max_feas:  # also catches NaN
                self.max_feas = dev

    solver = Checked(problem, x0, partition, selector, rng)
    worst = {"zt": 0.0, "bn": 0.0, "inv_norm": 0.0, "cost": 0.0}
    n_checks = 0

    def check(progress) -> bool:
        nonlocal n_checks
        for key, val in cache_deviations(solver.oracle, problem, partition).items():
            worst[key] = max(worst[key], val)
        n_checks += 1
        return False

    if case.stepsize == "paper":
        step = problem.reference_stepsize()
    else:
        step = Constant(float(case.stepsize))
    stop = AnyOf(MaxIterations(n_iter), CallbackStop(check))
    res = run(solver, as_stepsize(step), stop, check_every, track_best=False,
              settings={"seed": seed, "selection": "uniform"})
    return Report(
        label=case.label,
        iterations=res.n_iter,
        max_feasibility=max(solver.max_feas, stiefel.feasibility(x0)),
        final_feasibility=res.feasibility,
        max_dev_zt=worst["zt"],
        max_dev_bn=worst["bn"],
        max_rel_dev_inv_norm=worst["inv_norm"],
        max_rel_dev_cost=worst["cost"],
        n_checks=n_checks,
        final_cost=res.fun,
        final_error=res.error,
        solver_seconds=res.time,
        iterations_per_second=res.n_iter / res.time if res.time > 0 else float("inf"),
        stop_reason=str(res.stop_reason),
    )


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=1_000_000, help="iterations per case")
    ap.add_argument("--check-every", type=int, default=100,
                    help="iterations between cache checks (feasibility is checked every step)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases", default="all",
                    help="comma-separated case numbers (0-based) or 'all'")
    args = ap.parse_args(argv)
    if args.iters < 1 or args.check_every < 1:
        ap.error("--iters and --check-every must be positive integers")
    if args.cases == "all":
        chosen = list(CASES)
    else:
        try:
            chosen = [CASES[int(c)] for c in args.cases.split(",")]
        except (ValueError, IndexError):
            ap.error(f"--cases must be 'all' or numbers in 0..{len(CASES) - 1}, got {args.cases!r}")
    print(f"rssm {rssm.__version__}, numpy {np.__version__}; {args.iters} iterations per case, "
          f"caches checked every {args.check_every}; promises: feasibility <= "
          f"{FEASIBILITY_TOL:g}, cache deviation <= {CACHE_TOL:g}", flush=True)
    all_ok = True
    for case in chosen:
        t0 = time.perf_counter()
        rep = long_run(case, args.iters, args.check_every, args.seed)
        wall = time.perf_counter() - t0
        ok = rep.ok()
        all_ok &= ok
        print(f"\n[{'ok' if ok else 'FAILED'}] {rep.label}  ({wall:.1f} s wall)")
        for key, val in asdict(rep).items():
            if key != "label":
                print(f"  {key:<24} {val:.3e}" if isinstance(val, float) else f"  {key:<24} {val}")
        print(f"  {'max_cache_deviation':<24} {rep.max_cache_deviation:.3e}", flush=True)
    print("\nall promises held" if all_ok else "\nSOME PROMISE FAILED")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
