"""What every solver is made of: a documented state, a direction, and three hooks.

A solver (`RSMSolver`, `RSSMSolver`, or a new one in its own file) implements

* `Solver.direction(state)`: draw what the iteration updates (RSSM: a block pair) and
  return a `Direction`: the negated (partial) Riemannian subgradient on those columns
  and its norms;
* `Solver.candidate(state, d, gamma)`: the new values of those columns for step size
  gamma, without touching the state (a line search evaluates candidates freely);
* `Solver.step_flops(state, d)`: the flop model of a candidate plus its cache update.

`Solver.commit` writes a candidate into the state (the one place an iterate changes).
The loop of `rssm.solvers.loop` drives these hooks; a solver keeps no hidden state of
its own beyond its configuration and `SolverState`.
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass, field

import numpy as np

from rssm.blocks import ColumnSet, PairSelector, Partition, epoch_iterations, pair_count
from rssm.data.store import DataError
from rssm.problem import Oracle, Problem

__all__ = ["Solver", "SolverState", "Direction", "NonFiniteStep", "polar_flops"]


class NonFiniteStep(ArithmeticError):
    """A candidate with non-finite values; the iterate is left unchanged."""


#: A (partial) Riemannian subgradient with ||P(G)|| <= ROUNDING sqrt(p) eps ||G|| is the
#: rounding error of forming it (X Y - G with Y = X^T G sums p products per entry;
#: measured 1-6 eps ||G|| at n = 4-200 where the exact value is 0): 0 to working precision.
#: 16 stopped a smooth cost whose gradient is mostly normal to the manifold (Brockett's
#: tr(X^T (A0 + 1e12 I) X N), p = 4) at 29 eps ||G||, error 1.3e-3 where the run
#: reaches 6.4e-5; with 4 it does.
ROUNDING = 4.0
_EPS = float(np.finfo(np.float64).eps)


def rounding_zero(norm_sq: float, g_sq: float, p: int) -> bool:
    """Whether ``norm_sq`` = ||P(G)||^2 is 0 to working precision for a Euclidean
    (partial) subgradient G of an n x p iterate with ``g_sq`` = ||G||_F^2.

    Such a direction has no sign: the scale-free step rules (gamma = t / ||grad f||) would
    still give it a length t, and on f constant on St(n, n) (DPCP with p = n) RSSM's
    blocks then walked off the manifold (feasibility 0.86 after 300 iterations), each
    long step of noise taking the rounding error of the last along.

    Parameters
    ----------
    norm_sq : float
        ||P(G)||_F^2.
    g_sq : float
        ||G||_F^2.
    p : int
        Number of columns of the iterate.

    Returns
    -------
    bool
        True when ``norm_sq`` is finite, nonzero and at most
        (`ROUNDING` eps)^2 p ``g_sq``.
    """
    if norm_sq == 0.0 or not math.isfinite(norm_sq):
        return False
    return norm_sq <= (ROUNDING * _EPS) ** 2 * p * g_sq


#: The least normal float64: a subgradient whose squared norm is below it (0 or subnormal)
#: has lost the precision the step rules and the tests compute with.
_TINY = float(np.finfo(np.float64).tiny)


def unusable(g: np.ndarray) -> tuple[float, str]:
    """||G||_F^2 of a Euclidean (partial) subgradient, and what makes G unusable ("" for
    nothing): a NaN or an infinity, or entries so small that their squares are 0 in
    float64 or subnormal (checked only where the square is not finite or below the least
    normal number, so a usable G costs
    one pass, which the rounding-zero test needs anyway).

    The solvers stop on such a G before the tangent projection: a G with an infinity
    passed through rssm's products first, with NumPy's "invalid value" warnings; one of
    entries about 1e-169 (f scaled by 1e-170) gave ||P(G)||^2 = 0 and the verdict
    "converged: the Riemannian subgradient is 0" at the start.

    Parameters
    ----------
    g : numpy.ndarray
        The Euclidean (partial) subgradient G.

    Returns
    -------
    g_sq : float
        ||G||_F^2.
    defect : str
        What makes G unusable, or "".
    """
    g_sq = float(np.vdot(g, g))
    if not math.isfinite(g_sq):
        if not bool(np.isfinite(g).all()):
            return g_sq, "the subgradient is not finite"
    elif g_sq < _TINY and g.size:
        top = float(np.abs(g).max())
        if top > 0.0:
            return g_sq, (f"the subgradient's squared norm underflows float64 (its entries "
                          f"reach {top:.3g}; scale f or the data up)")
    return g_sq, ""


def polar_flops(n: int, k: int) -> float:
    """Flop model of `rssm.stiefel.polar` on n x k by the Gram route: Gram 2nk^2,
    eigh ~9k^3, V diag V^T 2k^3, Xi B 2nk^2. Near the manifold `polar` takes 2-4
    Newton-Schulz steps instead (4nk^2 each, 8-16 nk^2 in all), which the model leaves at
    the same count: at the solvers' sizes both are a few percent of an iteration.

    Parameters
    ----------
    n : int
        Number of rows of the matrix.
    k : int
        Number of its columns.

    Returns
    -------
    float
        4 n k^2 + 11 k^3.
    """
    return 4.0 * n * k * k + 11.0 * k**3


@dataclass(eq=False)
class Direction:
    """The direction of one iteration.

    Parameters
    ----------
    cols : ColumnSet or None
        The columns C it moves (None: all, for RSM).
    sel : slice or ndarray
        Index of those columns into X (``X[:, sel]``).
    neg : ndarray, shape (n, |C|), or None
        -P(G_C), the negated (partial) Riemannian subgradient (eq.
        ``eq-partialRiemsubgrad``; eq. ``eq-Rsubdiff`` for RSM). Read-only for everyone:
        the convergence test keeps a reference to it.
    norm_sq : float
        ||P(G_C)||_F^2.
    grad_sq : float
        An unbiased estimate of ||grad f(X)||^2 (`rssm.stepsizes.StepContext.grad_sq`).
    flops : float
        Flop-model count of computing it.
    key : tuple, default=()
        The block pair (i, j) for RSSM, () for RSM: the bundle it belongs to.
    cross_sq : float, default=0.0
        The part of ``grad_sq`` in the off-diagonal blocks of X^T grad f (rotations
        between two different blocks; `rssm.stepsizes.StepContext.cross_sq`); 0 for RSM.
    rotation_sq : float, default=nan
        The part of ``grad_sq`` in X^T grad f, the rotations of the columns among
        themselves (`rssm.stepsizes.StepContext.rotation_sq`).
    defect : str, default=""
        Why the subgradient cannot be used (`unusable`; ``neg`` is None then), or "".
    """

    cols: ColumnSet | None
    sel: slice | np.ndarray
    neg: np.ndarray
    norm_sq: float
    grad_sq: float
    flops: float
    key: tuple = ()
    cross_sq: float = 0.0
    rotation_sq: float = math.nan
    defect: str = ""

    @property
    def size(self) -> int:
        """|C|."""
        return self.neg.shape[1]


@dataclass(eq=False)
class SolverState:
    """Everything a run changes, in one place.

    Parameters
    ----------
    x : ndarray, shape (n, p)
        The working iterate X_k (C order), updated in place by `Solver.commit` alone.
    oracle : Oracle
        The problem's oracle, bound to ``x``.
    k : int, default=0
        Iterations done.
    fun : float, default=nan
        f(X_k) when it was evaluated at iteration k (see ``fun_at``), else NaN.
    fun_at : int, default=-1
        The iteration ``fun`` belongs to (-1: none).
    best_x : ndarray, shape (n, p), optional
        The iterate of least cost seen so far (a copy; when omitted, a copy of ``x``).
    best_fun : float, default=inf
        Its cost (inf before the first evaluation).
    best_k : int, default=-1
        Its iteration.
    step_norm : float, default=nan
        ||X_{k} - X_{k-1}||_F of the last step (NaN before the first).
    gamma : float, default=nan
        The last step size taken (NaN before the first).
    time : float, default=0.0
        Solver seconds so far (`rssm.Result.time`: f at the recorded rows counted, the
        error and the other columns not).
    flops : float, default=0.0
        Flop-model count so far.
    n_cost : int, default=0
        Cost evaluations by the solver (trials and the recorded rows' f included).
    n_clipped : int, default=0
        Steps the loop shortened to `rssm.solvers.max_step`.
    longest_step : float, default=0.0
        The longest step of the rule so far, ||X_{k+1} - X_k||_F.
    """

    x: np.ndarray
    oracle: Oracle
    k: int = 0
    fun: float = math.nan
    fun_at: int = -1
    best_x: np.ndarray = field(default=None)  # type: ignore[assignment]
    best_fun: float = math.inf
    best_k: int = -1
    step_norm: float = math.nan
    gamma: float = math.nan
    time: float = 0.0
    flops: float = 0.0
    n_cost: int = 0
    n_clipped: int = 0
    longest_step: float = 0.0

    def __post_init__(self) -> None:
        if self.best_x is None:
            self.best_x = self.x.copy()

    def cost(self) -> float:
        """f(X_k), evaluated once per iteration; keeps the best iterate up to date."""
        if self.fun_at != self.k:
            self.fun = float(self.oracle.cost())
            self.fun_at = self.k
            self.n_cost += 1
            self.consider()
        return self.fun

    def consider(self) -> None:
        """Make X_k the best iterate if its evaluated cost is lower or equal: among equal
        costs the latest iterate (where f's rounding hides the progress, the point the run
        reached last)."""
        # -inf is no best point (a cost that broke down), nor is NaN (never < anything)
        if self.fun_at == self.k and self.fun <= self.best_fun and self.fun > -math.inf:
            np.copyto(self.best_x, self.x)
            self.best_fun = self.fun
            self.best_k = self.k


class _Unreadable:
    """Stands for an oracle whose data could not be read: every call raises that error."""

    def __init__(self, exc: DataError):
        self._exc = exc

    def __getattr__(self, name: str):
        if name.startswith("_") or name == "cheap_cost":
            raise AttributeError(name)

        def fail(*args, **kwargs):
            raise self._exc
        return fail


class Solver(abc.ABC):
    """Configuration of a method (problem, blocks, pair rule, random stream) and its
    hooks. ``Solver(problem, x0, partition, selector, rng)`` also builds the `state`
    that `step` and the loop work on.

    Parameters
    ----------
    problem : Problem
        The problem to minimize; its oracle (`Problem.make_oracle`) is bound to the
        working iterate.
    x0 : array_like, shape (n, p)
        The starting point; copied as a C-ordered float64 array, the working iterate
        ``state.x``.
    partition : Partition or None
        The column blocks of an RSSM run, or None for a method without blocks (RSM).
    selector : PairSelector or None
        The block-pair rule (bound here to ``partition`` and ``rng``), or None for a
        method without blocks.
    rng : numpy.random.Generator
        The run's random generator.
    """

    method: str = "base"

    def __init__(self, problem: Problem, x0: np.ndarray, partition: Partition | None,
                 selector: PairSelector | None, rng: np.random.Generator):
        self.problem = problem
        self.partition = partition
        self.selector = selector
        self.rng = rng
        if selector is not None and partition is not None:
            selector.bind(partition.n_blocks, rng)
        x = np.array(x0, dtype=np.float64, order="C", copy=True)
        try:
            oracle = problem.make_oracle(x, partition)
        except DataError as exc:
            # the data could not be read to set the run up (a file truncated since the
            # problem was made): the run's first call raises it, and the loop turns it into
            # a `data_error` result at x0, as it does for data lost during the run
            oracle = _Unreadable(exc)
        self.state = SolverState(x=x, oracle=oracle)

    @property
    def n_blocks(self) -> int:
        return 1 if self.partition is None else self.partition.n_blocks

    @property
    def n_pairs(self) -> int:
        """Block pairs (1 for a method without blocks)."""
        return pair_count(self.n_blocks)

    @property
    def epoch(self) -> float:
        """Iterations per epoch: iterations that move p columns in all on average."""
        return epoch_iterations(self.n_blocks)

    @property
    def x(self) -> np.ndarray:
        """The working iterate (``state.x``)."""
        return self.state.x

    @property
    def oracle(self) -> Oracle:
        return self.state.oracle

    @property
    def step_norm(self) -> float:
        """||X_k - X_{k-1}||_F of the last step (``state.step_norm``)."""
        return self.state.step_norm

    # -- hooks ------------------------------------------------------------------------------
    @abc.abstractmethod
    def direction(self, state: SolverState) -> Direction:
        """This iteration's `Direction` at ``state.x`` (``state`` is not changed).

        Parameters
        ----------
        state : SolverState
            The run's state.

        Returns
        -------
        Direction
            The columns the iteration moves and the negated (partial) Riemannian
            subgradient on them.
        """

    @abc.abstractmethod
    def candidate(self, state: SolverState, d: Direction, gamma: float) -> np.ndarray:
        """The new values of the columns ``d.sel`` for step size ``gamma`` (pure).

        Parameters
        ----------
        state : SolverState
            The run's state (not changed).
        d : Direction
            This iteration's direction (from `direction`).
        gamma : float
            The step size.

        Returns
        -------
        numpy.ndarray of shape (n, |C|)
            The candidate values of the columns ``d.sel``.
        """

    @abc.abstractmethod
    def step_flops(self, state: SolverState, d: Direction) -> float:
        """Flop model of one `candidate` plus the cache update of `commit`.

        Parameters
        ----------
        state : SolverState
            The run's state.
        d : Direction
            This iteration's direction.

        Returns
        -------
        float
            The flop-model count.
        """

    def commit(self, state: SolverState, d: Direction, values: np.ndarray) -> None:
        """Write ``values`` into the columns of ``d`` and update the oracle's cache;
        sets ``state.step_norm``. Raises `NonFiniteStep` (state unchanged) when the values
        are not finite.

        Parameters
        ----------
        state : SolverState
            The run's state, changed in place.
        d : Direction
            The direction whose columns ``d.sel`` are written.
        values : numpy.ndarray of shape (n, |C|)
            The new values of those columns (a `candidate`).
        """
        if not np.isfinite(values).all():
            raise NonFiniteStep("the step produced non-finite values")
        old = state.x[:, d.sel]
        diff = values - old
        state.step_norm = float(math.sqrt(np.vdot(diff, diff)))
        state.x[:, d.sel] = values
        state.oracle.update(d.cols)

    # -- convenience ------------------------------------------------------------------------
    def step(self, gamma: float) -> float:
        """One iteration with step size ``gamma`` on `state`; returns its flop count.
        Leaves the state unchanged and raises `NonFiniteStep` for non-finite values.

        Parameters
        ----------
        gamma : float
            The step size.

        Returns
        -------
        float
            The iteration's flop-model count (direction and step).
        """
        st = self.state
        d = self.direction(st)
        self.commit(st, d, self.candidate(st, d, gamma))
        st.k += 1
        return d.flops + self.step_flops(st, d)
