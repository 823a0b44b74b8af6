"""The `Oracle`: a problem's values and subgradients at the solver's working iterate.

An oracle is bound to the iterate the solver updates in place and is told which columns
changed (`Oracle.update`), so data problems can keep incremental caches (their oracle is
`rssm.data.engine.DataOracle`). The base class is the generic fallback: it calls the
problem's own ``cost``, ``subgradient`` and ``partial_subgradient``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rssm._validation import real_value
from rssm.blocks import ColumnSet, Partition

__all__ = ["Oracle", "GenericOracle"]


class Oracle:
    """Subgradient oracle bound to the solver's working iterate ``x`` (an n x p array that
    the solver updates in place, calling `update` after each change).

    Subclasses override the methods below; the base class is the generic fallback
    (see `GenericOracle`).

    Parameters
    ----------
    problem : Problem
        The `rssm.Problem` whose values and subgradients the oracle gives.
    x : numpy.ndarray, shape (n, p)
        The solver's working iterate, held by reference (not copied): the solver changes
        it in place and calls `update`.
    partition : Partition or None
        The column blocks of an RSSM run, or None for RSM.
    """

    #: True when `cost` is cheap next to an iteration (the data problems' caches), so the
    #: loop evaluates f at every iterate to keep the best one.
    cheap_cost = False

    def __init__(self, problem: Any, x: np.ndarray, partition: Partition | None):
        # ``problem``: the `rssm.Problem` whose values the oracle gives.
        self.problem = problem
        self.x = x
        self.partition = partition

    # -- values -------------------------------------------------------------------------
    def _call(self, what: str, *args: Any) -> Any:
        """The problem's ``what`` at the current iterate, given its own copy of X (n p
        numbers, next to the function's own products): a function that changed X in place
        (``X -= X.mean(0)``) changed the solver's iterate and left it off the manifold
        (feasibility 0.19 after an RSSM run, no word); one that perturbs X and puts it
        back (finite differences) is as free to do so as before."""
        return getattr(self.problem, what)(self.x.copy(), *args)

    def cost(self) -> float:
        """f(X) at the current iterate.

        Returns
        -------
        float
            The cost f(X) of the problem at ``x``.
        """
        return real_value(self._call("cost"), "cost")

    def subgradient(self) -> np.ndarray:
        """A Euclidean subgradient of f at the current iterate (n x p).

        Returns
        -------
        numpy.ndarray, shape (n, p)
            An element of the Clarke subdifferential of f at ``x``.

        Raises
        ------
        ValueError
            When the problem's subgradient is not a real array of shape (n, p).
        """
        return _checked(self._call("subgradient"), self.x.shape, "subgradient")

    def partial_subgradient(self, cols: ColumnSet) -> np.ndarray:
        """A partial Euclidean subgradient for the columns ``cols`` (n x ``|C|``).

        Parameters
        ----------
        cols : ColumnSet
            The columns C: the problem's ``partial_subgradient`` receives
            ``cols.selector`` (a slice when C is one contiguous run, else the sorted index
            array ``cols.index``).

        Returns
        -------
        numpy.ndarray, shape (n, c)
            The columns C of a subgradient of f at ``x``, c = ``cols.size``, in the order
            of ``cols.index``.

        Raises
        ------
        ValueError
            When the problem's result is not a real array of shape (n, c).
        """
        g = self._call("partial_subgradient", cols.selector)
        return _checked(g, (self.x.shape[0], cols.size), "partial_subgradient")

    def cost_at(self, cols: ColumnSet | None, sel, values: np.ndarray) -> float:
        """f at X with the columns ``cols`` (index ``sel``) replaced by ``values``; a pure
        query (X and the caches are unchanged). The default evaluates the problem's cost
        on a copy.

        Parameters
        ----------
        cols : ColumnSet or None
            The columns replaced (None: all of them), for oracles with caches.
        sel : slice or numpy.ndarray of int
            The same columns as an index of ``x`` (``x[:, sel]``), usually
            ``cols.selector``.
        values : numpy.ndarray, shape (n, c)
            The new columns, c the number of columns ``sel`` selects.

        Returns
        -------
        float
            f at the modified point.
        """
        x = self.x.copy()
        x[:, sel] = values
        return real_value(self.problem.cost(x), "cost")

    def update(self, cols: ColumnSet | None) -> None:
        """Tell the oracle that the columns ``cols`` of ``x`` changed (None: all).

        Parameters
        ----------
        cols : ColumnSet or None
            The columns of ``x`` that the solver changed; None: any of them.
        """

    def refresh(self) -> None:
        """Recompute every cache from scratch."""

    # -- flop model ---------------------------------------------------------------------
    def flops_subgradient(self) -> float:
        """Flops of one full subgradient at the current iterate (cache assumed current).

        Returns
        -------
        float
            The flop count (0 when the problem does not know it).
        """
        return float(self.problem.subgradient_flops())

    def flops_partial(self, c: int) -> float:
        """Flops of one partial subgradient on c columns.

        Parameters
        ----------
        c : int
            The number of columns.

        Returns
        -------
        float
            The flop count (0 when the problem does not know it).
        """
        return float(self.problem.partial_subgradient_flops(c))

    def flops_update(self, c: int) -> float:
        """Flops of updating the cache after c columns changed.

        Parameters
        ----------
        c : int
            The number of columns that changed.

        Returns
        -------
        float
            The flop count (0 for the base class, which keeps no cache).
        """
        return 0.0


def _checked(g, shape: tuple[int, int], what: str) -> np.ndarray:
    """Refuse an oracle result of the wrong shape or kind (a user problem's bug) by name."""
    g = np.asarray(g)
    if g.shape != shape or g.dtype.kind not in "iuf":
        raise ValueError(
            f"the problem's {what} returned an array with shape {g.shape} and dtype {g.dtype}; "
            f"expected real numbers with shape {shape}"
        )
    return g


class GenericOracle(Oracle):
    """Fallback oracle: full subgradient, sliced to the requested columns. No cache.

    Parameters
    ----------
    problem : Problem
        The `rssm.Problem` whose ``cost``, ``subgradient`` and ``partial_subgradient``
        the oracle calls.
    x : numpy.ndarray, shape (n, p)
        The solver's working iterate, held by reference (not copied).
    partition : Partition or None
        The column blocks of an RSSM run, or None for RSM.
    """
