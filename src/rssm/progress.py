"""`Progress`: what the stopping criteria, callbacks and observers see of a run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Progress"]


@dataclass(frozen=True)
class Progress:
    """A snapshot handed to stopping criteria and user callbacks.

    Parameters
    ----------
    iteration : int
        Iterations done.
    time : float
        Solver seconds so far (`rssm.Result.time`: f at the recorded rows counted, the
        error and the other columns not).
    flops : float
        Flop-model count so far.
    cost : float or None, default=None
        f(X) at a recording point, else None.
    error : float or None, default=None
        Ground-truth error at a recording point when the problem has one, else None.
    x : numpy.ndarray of shape (n, p) or None, default=None
        At a recording point, a read-only copy of the iterate (a snapshot: storing it keeps
        that iterate; the copy costs one n x p array per recording point, made outside the
        timed region), else None.
    stationarity : float or None, default=None
        At a recording point, ||P_T(G)||_F for the oracle's subgradient G at X (eq.
        ``eq-Rsubdiff``; see `MinStationarity`), else None.
    step_norm : float or None, default=None
        ||X_k - X_{k-1}||_F of the last step (None before the first). Only the columns
        a step changed enter, so it costs O(n |C|) per RSSM iteration.
    best_cost : float or None, default=None
        The least f seen so far (over the iterates whose cost was evaluated).
    certificate : Certificate or None, default=None
        The convergence certificate's last value (`rssm.solvers.certificate`), when one
        was evaluated at this iteration.
    """

    iteration: int
    time: float
    flops: float
    cost: float | None = None
    error: float | None = None
    x: np.ndarray | None = None
    stationarity: float | None = None
    step_norm: float | None = None
    best_cost: float | None = None
    certificate: Any = None
