"""Checks of a problem's oracles: `check_subgradient`.

A wrong subgradient does not crash a subgradient method; it makes it wander. This module
tells which oracle is wrong, at a random smooth point near a given X:

1. ``subgradient`` against central finite differences of ``cost`` along random tangent
   directions (curves X(t) = Retr_X(t xi), eq. ``eq-polarretr``): at a point where f is
   differentiable, d/dt f(X(t)) at 0 equals <G, xi> for every Euclidean subgradient G;
2. ``partial_subgradient(X, C)`` against the columns C of ``subgradient(X)`` on random
   column sets (Prop. ``prop-structural``);
3. the solver's `Oracle` (``make_oracle``): its cost, full and partial subgradients at the
   start and again after the columns of a block pair moved and ``update`` was called, so a
   stale or drifting cache is caught; once with a permuted partition (block pairs whose
   columns form several runs) and once with the default contiguous partition
   (`rssm.blocks.Partition.uniform`, whose adjacent pairs are one run: the path every
   default RSSM run takes), where the oracle is driven by real RSSM steps
   (`rssm.solvers.rssm.RSSMSolver`) and compared after each with a from-scratch oracle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from rssm import stiefel
from rssm._validation import as_int, as_positive_float, make_rng, quieted, real_value
from rssm.blocks import Partition
from rssm.problem import FullSubgradientWarning, Problem, checked_shape

__all__ = ["check_subgradient", "SubgradientCheck", "CheckItem"]


@dataclass(frozen=True)
class CheckItem:
    """One comparison: its name, the largest relative discrepancy, the tolerance, and what
    a failure means.

    Parameters
    ----------
    name : str
        The comparison's name (``report[name]`` of a `SubgradientCheck` finds it).
    max_error : float
        The largest relative discrepancy found.
    tol : float
        The largest discrepancy accepted; the item is `ok` when ``max_error <= tol``.
    meaning : str
        What a failure means: which oracle is likely wrong.
    """

    name: str
    max_error: float
    tol: float
    meaning: str

    @property
    def ok(self) -> bool:
        """True when the discrepancy is within the tolerance (``max_error <= tol``)."""
        return bool(self.max_error <= self.tol)

    def line(self) -> str:
        """One line: 'OK' or 'DISAGREES' with the numbers and, on failure, the culprit.

        Returns
        -------
        str
            ``"<name>: OK (...)"`` or ``"<name>: DISAGREES (...): <meaning>"``.
        """
        head = f"{self.name}: "
        if self.ok:
            return head + f"OK (max relative error {self.max_error:.1e} <= {self.tol:.0e})"
        return head + (
            f"DISAGREES (max relative error {self.max_error:.1e} > {self.tol:.0e}): {self.meaning}"
        )


@dataclass
class SubgradientCheck:
    """Report of `check_subgradient`. ``str(report)`` says plainly which oracle disagrees.

    Attributes
    ----------
    problem : str
        ``repr`` of the checked problem.
    items : list of CheckItem
        The comparisons made.
    x : ndarray
        The random smooth point where they were made.
    """

    problem: str
    items: list[CheckItem] = field(default_factory=list)
    x: np.ndarray | None = None

    @property
    def ok(self) -> bool:
        """True when every comparison agrees."""
        return all(it.ok for it in self.items)

    @property
    def failures(self) -> list[CheckItem]:
        """The comparisons that disagree."""
        return [it for it in self.items if not it.ok]

    def __getitem__(self, name: str) -> CheckItem:
        for it in self.items:
            if it.name == name:
                return it
        raise KeyError(f"no check named {name!r}; checks: {[it.name for it in self.items]}")

    def __str__(self) -> str:
        verdict = "all oracles agree" if self.ok else f"{len(self.failures)} check(s) disagree"
        return "\n".join([f"check_subgradient({self.problem}): {verdict}"]
                         + ["  " + it.line() for it in self.items])

    __repr__ = __str__


def _worse(worst: float, err: float) -> float:
    """The larger discrepancy; NaN counts as infinite (max(0, nan) is 0 in Python)."""
    return math.inf if math.isnan(err) else max(worst, err)


def _rel(diff: np.ndarray, ref: np.ndarray) -> float:
    den = float(np.linalg.norm(ref))
    num = float(np.linalg.norm(diff))
    if not math.isfinite(num):
        return math.inf
    return num / den if den > 0 else num


def _fd_error(problem: Problem, x: np.ndarray, g: np.ndarray, xi: np.ndarray) -> float:
    """The least, over the steps h, of |central difference of cost along the retraction
    curve in direction ``xi`` - <G, xi>|."""
    an = float(np.sum(g * xi))
    best = math.inf
    # down to 1e-8: a piecewise-linear cost with many kinks (ODL at n = 30, 49290 terms
    # |x_i^T y_j|) had one of them crossed within 1e-6 on every seed tried, a
    # "disagreement" of 3e-5 to 7e-5 on a correct subgradient (a user's audit); at 1e-8
    # rounding, about eps |f| / h, is still far below the tolerance there
    for h in (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8):
        fp = problem.cost(stiefel.retract(x, h * xi))
        fm = problem.cost(stiefel.retract(x, -h * xi))
        best = min(best, abs((fp - fm) / (2.0 * h) - an))
    return best


def check_subgradient(
    problem: Problem,
    x: np.ndarray | None = None,
    rng=None,
    *,
    n_directions: int = 6,
    n_column_sets: int = 6,
    radius: float = 1e-2,
    fd_tol: float = 1e-5,
    tol: float = 1e-8,
) -> SubgradientCheck:
    """Compare a problem's subgradient oracles with finite differences and with each other.

    Parameters
    ----------
    problem : Problem
        The problem to check.
    x : ndarray, shape (n, p), optional
        Where to check (on St(n, p)); default ``problem.initial_point(rng)``. The checks run
        at a random point within distance ``radius`` of it, where f is differentiable with
        probability one for the piecewise-smooth costs of this field (at X itself, e.g. a
        ground truth, it may not be).
    rng : numpy.random.Generator or int, optional
        Randomness of the point, directions and column sets.
    n_directions : int
        Random tangent directions for the finite-difference check.
    n_column_sets : int
        Random column sets for the partial-versus-full and oracle checks.
    radius : float
        Distance of the random smooth point from ``x``.
    fd_tol : float
        Tolerance of the finite-difference check, relative to
        ``max(||P_T(G)||_F, 1e-6 (||G||_F + |f(X)|))``: the absolute floor keeps a cost that
        is constant on the manifold (P_T(G) ~ 0, e.g. DPCP's cost at p = n, on O(n)) from being
        judged against rounding noise, while a wrong subgradient, whose tangent part is of
        the order of ||G||, is still caught.
    tol : float
        Tolerance of the partial-versus-full and oracle checks (they should agree to
        rounding), relative to the norm of the reference.

    Returns
    -------
    SubgradientCheck
        ``report.ok`` is True when all agree; ``print(report)`` names the one that does not.

    Examples
    --------
    >>> import rssm
    >>> from rssm.diagnostics import check_subgradient
    >>> prob = rssm.problems.DPCP.synthetic(n=10, d=2, n_inliers=50, n_outliers=50, seed=0)
    >>> check_subgradient(prob, rng=0).ok
    True
    """
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be an rssm Problem, got {type(problem).__name__}")
    rng = make_rng(rng, "rng")
    n_dir = as_int(n_directions, "n_directions", minimum=1)
    n_sets = as_int(n_column_sets, "n_column_sets", minimum=1)
    radius = as_positive_float(radius, "radius")
    fd_tol = as_positive_float(fd_tol, "fd_tol")
    tol = as_positive_float(tol, "tol")
    n, p = checked_shape(problem)
    x0 = problem.initial_point(rng) if x is None else problem.check_x(x, "x", atol=1e-6)

    # St(1, 1) = {-1, 1} has no tangent directions: no curve to take differences along
    # (an audit: a RuntimeWarning, then "xi contains 1 NaN or infinite entries")
    flat = n == 1 and p == 1

    def tangent(at: np.ndarray) -> np.ndarray:
        xi = stiefel._tangent_projection(at, rng.standard_normal((n, p)))
        return np.zeros_like(xi) if flat else xi / np.linalg.norm(xi)

    xs = stiefel.retract(x0, radius * tangent(x0))
    report = SubgradientCheck(repr(problem), x=xs)
    g = np.asarray(problem.subgradient(xs.copy()), dtype=np.float64)
    if g.shape != (n, p):
        # the bug this check is for (a transposed or flattened subgradient) must be
        # reported, not crash the comparisons below
        report.items.append(CheckItem(f"subgradient(X) has X's shape {(n, p)}", math.inf,
                                      0.0, f"it returned shape {g.shape}"))
        return report
    rg = stiefel._tangent_projection(xs, g)
    raw = problem.cost(xs.copy())
    out = np.asarray(raw)
    if out.shape != () and out.size != 1:
        report.items.append(CheckItem("cost(X) is a number", math.inf, 0.0,
                                      f"it returned an array of shape {out.shape}"))
        return report
    try:
        f_xs = real_value(out.reshape(()) if out.dtype.kind in "iuf" else raw, "cost")
    except TypeError as exc:
        # (reported, not raised: a cost that forgot its return gave float()'s words, from
        # inside the checker; a user's audit)
        report.items.append(CheckItem("cost(X) is a number", math.inf, 0.0, str(exc)))
        return report
    # Non-finite values (a NaN gradient, as jnp.linalg.norm has at 0, or a norm that
    # overflows) are reported as such: the comparisons below would crash or read 0.
    broken = []
    if not math.isfinite(f_xs):
        broken.append(f"cost(X) = {f_xs}")
    n_bad = int(np.count_nonzero(~np.isfinite(g)))
    if n_bad:
        broken.append(f"subgradient(X) has {n_bad} NaN or infinite entries")
    else:
        with np.errstate(over="ignore"):
            g_norm = float(np.linalg.norm(g))
        if not math.isfinite(g_norm):
            broken.append("||subgradient(X)||_F overflows float64")
    if broken:
        report.items.append(CheckItem("the oracles' values are finite", math.inf, 0.0,
                                      "; ".join(broken)))
        return report
    # absolute floor: central differences of f carry rounding ~ eps |f| / h, and P_T(G)
    # of a correct G on a cost constant on the manifold is itself rounding ~ eps ||G||.
    scale = max(float(np.linalg.norm(rg)), 1e-6 * (float(np.linalg.norm(g)) + abs(f_xs)))

    # 1. finite differences of cost along retraction curves.
    worst = 0.0
    for _ in range(0 if flat else n_dir):
        best = _fd_error(problem, xs, g, tangent(xs))
        worst = _worse(worst, best / scale if scale > 0 else best)
    report.items.append(CheckItem(
        "subgradient vs finite differences of cost" + (
            " (none: St(1, 1) = {-1, 1} has no tangent directions)" if flat else ""),
        worst, fd_tol,
        "problem.subgradient(X) is not a derivative of problem.cost at a smooth point "
        "(wrong formula, sign or scale in one of the two)",
    ))

    # 2. partial_subgradient against columns of subgradient.
    # slices as RSSM's default blocks give them (two adjacent contiguous blocks: most
    # start past column 0, where an oracle that reads the first |C| columns goes wrong),
    # and random index sets
    sets: list[np.ndarray | slice] = [slice(0, max(1, p // 2))]
    if p >= 3:
        bounds = np.cumsum([0] + [b.size for b in Partition.uniform(p, min(5, p)).blocks])
        sets += [slice(int(bounds[i]), int(bounds[i + 2])) for i in range(len(bounds) - 2)]
    for _ in range(n_sets - 1):
        c = int(rng.integers(1, p + 1))
        sets.append(np.sort(rng.choice(p, size=c, replace=False)))
    worst = 0.0
    for cols in sets:
        part = np.asarray(problem.partial_subgradient(xs.copy(), cols), dtype=np.float64)
        ref = g[:, cols]
        worst = _worse(worst, math.inf if part.shape != ref.shape else _rel(part - ref, ref))
    report.items.append(CheckItem(
        "partial_subgradient vs columns of subgradient", worst, tol,
        "problem.partial_subgradient(X, C) differs from problem.subgradient(X)[:, C]",
    ))

    # 3. the stateful oracle, before and after incremental updates.
    if p >= 2:
        l = min(p, 3)
        perm = rng.permutation(p)
        partition = Partition([perm[b] for b in np.array_split(np.arange(p), l)], p)
    else:
        partition = None
    xw = np.array(xs, order="C", copy=True)
    oracle = _quiet_oracle(problem, xw, partition)
    e_cost = e_full = e_part = 0.0
    for step in range(n_sets + 1):
        gw = np.asarray(problem.subgradient(xw.copy()), dtype=np.float64)
        fw = problem.cost(xw.copy())
        e_cost = _worse(e_cost, abs(oracle.cost() - fw) / max(abs(fw), 1e-300))
        e_full = _worse(e_full, _rel(np.asarray(oracle.subgradient()) - gw, gw))
        if partition is None:
            break
        i, j = sorted(rng.choice(partition.n_blocks, size=2, replace=False).tolist())
        cols = partition.columns(i, j)
        ref = gw[:, cols.index]
        try:
            part = np.asarray(oracle.partial_subgradient(cols))
        except (TypeError, ValueError):
            # (the oracle refuses a partial of the wrong shape; check 2 scored it, and the
            # report was lost to the exception; a user's audit)
            part = None
        e_part = _worse(e_part, math.inf if part is None or part.shape != ref.shape
                        else _rel(part - ref, ref))
        if step < n_sets:  # move the columns C on their submanifold block (by 0.1), update
            sel = cols.selector
            move = stiefel.block_tangent_projection(xw, sel, rng.standard_normal((n, cols.size)))
            xw[:, sel] = stiefel.project_submanifold_block(
                xw, sel, xw[:, sel] + 0.1 * move / np.linalg.norm(move))
            oracle.update(cols)
    if not flat:
        # finite differences at the point the moves above reached: a subgradient that
        # never changes after its first call (a cache never refreshed) agrees with itself
        # everywhere, and with the differences at the first point, and passed every check
        # (a run then ended at error 1.9; a user's audit)
        g2 = np.asarray(problem.subgradient(xw.copy()), dtype=np.float64)
        f2 = problem.cost(xw.copy())
        if g2.shape == (n, p) and np.isfinite(g2).all() and math.isfinite(f2):
            rg2 = stiefel._tangent_projection(xw, g2)
            scale2 = max(float(np.linalg.norm(rg2)),
                         1e-6 * (float(np.linalg.norm(g2)) + abs(f2)))
            worst2 = 0.0
            for _ in range(min(2, n_dir)):
                worst2 = _worse(worst2, _fd_error(problem, xw, g2, tangent(xw)) / scale2)
            report.items.append(CheckItem(
                "subgradient vs finite differences of cost, at a second point", worst2,
                fd_tol, "problem.subgradient(X) agrees with the differences of cost at the "
                "first point but not at a point the checks moved to (a subgradient cached "
                "once and never updated, or one of another X)"))
    report.items.append(CheckItem(
        "oracle cost vs cost", e_cost, tol,
        "make_oracle(...).cost() differs from problem.cost(X) (stale or wrong cache)",
    ))
    report.items.append(CheckItem(
        "oracle subgradient vs subgradient", e_full, tol,
        "make_oracle(...).subgradient() differs from problem.subgradient(X) (stale or wrong cache)",
    ))
    if partition is not None:
        report.items.append(CheckItem(
            "oracle partial_subgradient vs columns of subgradient (after updates)", e_part, tol,
            "make_oracle(...).partial_subgradient(C) differs from problem.subgradient(X)[:, C] "
            "(a wrong partial oracle, or a cache the incremental update leaves stale)",
        ))
        try:
            report.items.append(_check_contiguous(problem, xs, rng, n_sets + 1, tol))
            report.items.append(_check_partials_alone(problem, xs, n_sets + 1, tol))
        except np.linalg.LinAlgError as exc:    # a step along a NaN partial subgradient
            report.items.append(CheckItem(
                "oracle after RSSM steps on contiguous blocks vs a from-scratch oracle",
                math.inf, tol,
                f"a step along the oracle's partial subgradient failed ({exc}): it holds "
                "NaN or infinite values"))
        except (TypeError, ValueError) as exc:
            # the oracle refused what the problem's partial subgradient returned (a
            # partial that ignores its columns): reported, not raised (a user's audit)
            report.items.append(CheckItem(
                "oracle after RSSM steps on contiguous blocks vs a from-scratch oracle",
                math.inf, tol, f"the oracle failed on the partial subgradient: {exc}"))
    return report


_ALONE = "oracle partial_subgradient over RSSM steps with no full call between (as a run)"


def _check_partials_alone(problem: Problem, xs: np.ndarray, n_steps: int,
                          tol: float) -> CheckItem:
    """Partial subgradients as a run asks them: RSSM steps on the default contiguous
    partition, each asking only the partial subgradient of its pair, with no full
    subgradient or cost call in between; compared afterwards with the columns of
    ``problem.subgradient`` at each X the run passed. The other checks call the full
    subgradient before each partial one, and a user's partial oracle whose cache that
    call refreshes (a norm loss keeping its row norms, updating only the columns asked)
    passed them while it was off by 6e-2 in a run (a user's audit)."""
    partition, pairs, x, o, gamma = _contiguous_run(problem, xs)
    seen = []
    for step in range(max(n_steps, 2 * len(pairs))):
        cols = partition.columns(*pairs[step % len(pairs)])
        g = np.array(o.partial_subgradient(cols), dtype=np.float64)
        seen.append((x.copy(), cols, g))
        if not np.isfinite(g).all():
            break
        x[:, cols.selector] = stiefel.submanifold_step(x, cols.selector, g, gamma)
        o.update(cols)
    worst = 0.0
    for xk, cols, g in seen:
        ref = np.asarray(problem.subgradient(xk.copy()), dtype=np.float64)[:, cols.index]
        worst = _worse(worst, math.inf if g.shape != ref.shape else _rel(g - ref, ref))
    return CheckItem(
        _ALONE, worst, tol,
        "the oracle's partial subgradients, asked one pair after another as RSSM asks them, "
        "differ from the columns of problem.subgradient(X) at the same X (a partial oracle "
        "whose cache goes stale between full calls)",
    )


def _quiet_oracle(problem: Problem, x: np.ndarray, partition: Partition | None):
    """``problem.make_oracle`` without its one-time `FullSubgradientWarning` (and without
    using it up for the user's own run)."""
    with quieted(FullSubgradientWarning):
        return problem.make_oracle(x, partition)


def _contiguous_run(problem: Problem, xs: np.ndarray):
    """(the default contiguous partition of up to 3 blocks, its pairs in lexicographic
    order, a C-ordered copy of ``xs``, an oracle bound to it, a step length that moves a
    pair by about 0.05 in Frobenius norm): the setting of checks 4 and 5."""
    p = problem.shape[1]
    partition = Partition.uniform(p, min(p, 3))
    pairs = [(i, j) for i in range(partition.n_blocks) for j in range(i + 1, partition.n_blocks)]
    x = np.array(xs, order="C", copy=True)
    o = _quiet_oracle(problem, x, partition)
    g0 = stiefel._tangent_projection(
        xs, np.asarray(problem.subgradient(xs.copy()), dtype=np.float64))
    return partition, pairs, x, o, 0.05 / max(float(np.linalg.norm(g0)), 1e-300)


def _check_contiguous(problem: Problem, xs: np.ndarray, rng: np.random.Generator,
                      n_steps: int, tol: float) -> CheckItem:
    """The default partition's path: contiguous blocks (`Partition.uniform`), the oracle
    driven by RSSM steps (eqs. ``eq-partialRiemsubgrad`` and ``eq-projsubmfdblk``) with the
    pairs in lexicographic order (adjacent pairs, whose columns are one run, among them); after
    each step its cost, full and partial subgradients are compared with those of an oracle
    built from scratch at the same X."""
    partition, pairs, x, o, gamma = _contiguous_run(problem, xs)
    worst = 0.0
    for step in range(max(n_steps, len(pairs))):
        cols = partition.columns(*pairs[step % len(pairs)])  # (0,1), (0,2), (1,2), ...
        sel = cols.selector
        g = np.asarray(o.partial_subgradient(cols), dtype=np.float64)
        if not np.isfinite(g).all():
            return CheckItem("oracle after RSSM steps on contiguous blocks vs a from-scratch "
                             "oracle", math.inf, tol, "the partial subgradient is not finite")
        new = stiefel.submanifold_step(x, sel, g, gamma)  # the RSSM step (RSSMSolver.step)
        if not np.isfinite(new).all():
            return CheckItem("oracle after RSSM steps on contiguous blocks vs a from-scratch "
                             "oracle", math.inf, tol, "the partial subgradient is not finite")
        x[:, sel] = new
        o.update(cols)
        fresh = _quiet_oracle(problem, np.array(x, order="C", copy=True), partition)
        worst = _worse(worst, abs(o.cost() - fresh.cost()) / max(abs(fresh.cost()), 1e-300))
        gf = np.asarray(fresh.subgradient(), dtype=np.float64)
        worst = _worse(worst, _rel(np.asarray(o.subgradient()) - gf, gf))
        for i in range(partition.n_blocks):
            for j in range(i + 1, partition.n_blocks):
                cols = partition.columns(i, j)
                part = np.asarray(o.partial_subgradient(cols))
                ref = np.asarray(fresh.partial_subgradient(cols))
                worst = _worse(worst, math.inf if part.shape != ref.shape
                            else _rel(part - ref, ref))
    return CheckItem(
        "oracle after RSSM steps on contiguous blocks vs a from-scratch oracle", worst, tol,
        "after RSSM steps on the default contiguous partition (Partition.uniform), the "
        "incremental oracle's cost or subgradients differ from an oracle built from scratch "
        "at the same X (a cache the update of a contiguous column run leaves stale)",
    )
