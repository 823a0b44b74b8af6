"""The `Problem` protocol and the oracles the solvers call.

A problem is min f(X) over St(n, p) (eq. ``mainpb``) with f weakly convex. It gives

* ``cost(X)``: f(X);
* ``subgradient(X)``: one element of the Clarke subdifferential of f at X (n x p);
* ``partial_subgradient(X, cols)``: the partial subgradient for a column set C. By
  Proposition ``prop-structural`` the partial subdifferential is the full one restricted
  to the columns C, so the default slices a full subgradient (correct, but it costs a full
  subgradient per RSSM iteration);
* ``make_oracle(X, partition)``: a stateful `Oracle` bound to the solver's iterate. Data
  problems override it with an incremental oracle that keeps Y^T X cached and updates only
  the columns that changed, so an RSSM iteration costs O(m n |C|) and not O(m n p);
* flop counts for each oracle call;
* optionally ``error(X)`` against a known ground truth.
"""

from __future__ import annotations

import abc

import numpy as np

from rssm import stiefel
from rssm._validation import as_float_matrix, check_generator
from rssm.blocks import ColumnSet, Partition

__all__ = ["Problem", "Oracle", "GenericOracle"]


class Oracle:
    """Subgradient oracle bound to the solver's working iterate ``x`` (an n x p array that
    the solver updates in place, calling `update` after each change).

    Subclasses override the methods below; the base class is the generic fallback
    (see `GenericOracle`).
    """

    def __init__(self, problem: Problem, x: np.ndarray, partition: Partition | None):
        self.problem = problem
        self.x = x
        self.partition = partition

    # -- values -------------------------------------------------------------------------
    def cost(self) -> float:
        """f(X) at the current iterate."""
        return float(self.problem.cost(self.x))

    def subgradient(self) -> np.ndarray:
        """A Euclidean subgradient of f at the current iterate (n x p)."""
        return self.problem.subgradient(self.x)

    def partial_subgradient(self, cols: ColumnSet) -> np.ndarray:
        """A partial Euclidean subgradient for the columns ``cols`` (n x |C|)."""
        return self.problem.partial_subgradient(self.x, cols.selector)

    def update(self, cols: ColumnSet | None) -> None:
        """Tell the oracle that the columns ``cols`` of ``x`` changed (None: all)."""

    def refresh(self) -> None:
        """Recompute every cache from scratch."""

    # -- flop model ---------------------------------------------------------------------
    def flops_subgradient(self) -> float:
        """Flops of one full subgradient at the current iterate (cache assumed current)."""
        return float(self.problem.subgradient_flops())

    def flops_partial(self, c: int) -> float:
        """Flops of one partial subgradient on c columns."""
        return float(self.problem.partial_subgradient_flops(c))

    def flops_update(self, c: int) -> float:
        """Flops of updating the cache after c columns changed."""
        return 0.0


class GenericOracle(Oracle):
    """Fallback oracle: full subgradient, sliced to the requested columns. No cache."""


class Problem(abc.ABC):
    """A nonsmooth, weakly convex objective over St(n, p).

    Subclasses must set ``shape = (n, p)`` and implement `cost` and `subgradient`.
    Everything else has a correct default.
    """

    #: (n, p): the problem lives on St(n, p).
    shape: tuple[int, int]
    #: Short name used in results and plots.
    name: str = "problem"

    @abc.abstractmethod
    def cost(self, x: np.ndarray) -> float:
        """f(X)."""

    @abc.abstractmethod
    def subgradient(self, x: np.ndarray) -> np.ndarray:
        """An element of the Clarke subdifferential of f at X, shape (n, p)."""

    def partial_subgradient(self, x: np.ndarray, cols: slice | np.ndarray) -> np.ndarray:
        """Partial subgradient for the columns ``cols`` (Prop. ``prop-structural``).

        The default slices a full subgradient: correct for every f, at full cost.
        """
        return np.ascontiguousarray(self.subgradient(x)[:, cols])

    def riemannian_subgradient(self, x: np.ndarray) -> np.ndarray:
        """P_T(subgradient(X)), the Riemannian subgradient (eq. ``eq-Rsubdiff``)."""
        return stiefel.tangent_projection(x, self.subgradient(x))

    def make_oracle(self, x: np.ndarray, partition: Partition | None) -> Oracle:
        """A stateful oracle bound to the solver's iterate ``x``."""
        return GenericOracle(self, x, partition)

    # -- ground truth ---------------------------------------------------------------------
    @property
    def has_error(self) -> bool:
        """True when `error` is available (a ground truth is known)."""
        return False

    def error(self, x: np.ndarray) -> float:
        """Distance to the ground truth; only when `has_error` is True."""
        raise ValueError(f"{type(self).__name__} has no ground truth, so error(X) is undefined")

    # -- starts and defaults --------------------------------------------------------------
    def initial_point(self, rng: np.random.Generator | None = None) -> np.ndarray:
        """A starting point; the default is Haar random on St(n, p)."""
        if rng is None:
            raise TypeError(f"{type(self).__name__}.initial_point needs a numpy.random.Generator")
        check_generator(rng)
        return stiefel.random_point(*self.shape, rng)

    def default_stepsize(self):
        """The step-size rule used when the caller gives none, or None if there is none."""
        return None

    # -- flop model -----------------------------------------------------------------------
    def subgradient_flops(self) -> float:
        """Flops of one `subgradient` call; 0 when unknown (then flop counts cover only
        the geometry)."""
        return 0.0

    def partial_subgradient_flops(self, c: int) -> float:
        """Flops of one `partial_subgradient` call on c columns (default: a full one)."""
        return self.subgradient_flops()

    def check_x(self, x, name: str = "x0", atol: float = 1e-8) -> np.ndarray:
        """Validate a point: 2-D real finite array of this problem's shape, on the manifold."""
        arr = as_float_matrix(x, name, shape=self.shape, copy=True)
        stiefel.check_point(arr, atol=atol, name=name)
        return arr

    def __repr__(self) -> str:
        n, p = self.shape
        return f"{type(self).__name__}(n={n}, p={p})"
