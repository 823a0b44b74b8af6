"""What a step-size rule may read at iteration k: `StepContext`.

The solver computes the step's direction (the partial Riemannian subgradient of RSSM,
eq. ``eq-partialRiemsubgrad``, or the Riemannian subgradient of RSM) *before* it asks the
rule for gamma_k, so a rule can use its norm, the cost f(X_k) and, for line searches, the
cost at a trial point. Every query is pure: nothing a rule calls moves the iterate.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from rssm.blocks import epoch_iterations, pair_count

__all__ = ["StepContext"]


class StepContext:
    """What a step-size rule may read at iteration k, besides k itself.

    Built by the solver loop (`rssm.minimize`); plain schedules read only ``method``,
    ``n_blocks`` and ``epoch``.

    Parameters
    ----------
    method : str
        ``"rssm"`` or ``"rsm"``.
    n_blocks : int
        Number of blocks l (1 for RSM, which updates all columns at once).
    shape : tuple of int, optional
        (n, p) of the problem.
    cost : callable, optional
        ``cost() -> f(X_k)`` (the loop's; evaluated once per iteration, on first use).
    trial : callable, optional
        ``trial(gamma) -> f`` at the point this iteration's step with ``gamma`` would give,
        without moving X_k.
    best : callable, optional
        ``best() -> the least f seen so far``.
    partition : Partition, optional
        The run's block partition (RSSM); the attribute of the same name.
    selection : str, optional
        The name of RSSM's pair rule; the attribute of the same name.

    Attributes
    ----------
    iteration : int
        k.
    direction_norm : float
        ||P(G_C)||_F, the Frobenius norm of the (partial) Riemannian subgradient the step
        uses; the step moves X by about gamma times this. NaN outside a run.
    grad_sq : float
        An unbiased estimate of ||grad f(X_k)||^2, the squared norm of the full Riemannian
        subgradient: ||P(G_C) I_C^T||^2 in the A_X^{-1} metric (eq. ``eq-cindepNorm2`` of
        Lemma ``lem-cindep``) for RSSM, ||grad f(X_k)||^2 itself for RSM. NaN outside a run.
    cross_sq : float
        The part of ``grad_sq`` that lies in the off-diagonal blocks of X^T grad f(X_k):
        binom(l, 2) (||S_ij||^2 + ||S_ji||^2), S = X_C^T P(G_C), an unbiased estimate of
        the squared norm of the rotations *between* blocks, which only the drawn pair can
        make (once in binom(l, 2) iterations on average). It is 0 whenever f(XQ) = f(X)
        for every orthogonal Q (DPCP, any function of the subspace span(X)): X^T grad f
        is then 0. 0 for RSM; NaN outside a run.
    rotation_sq : float
        The part of ``grad_sq`` that lies in X^T grad f(X_k) (the rotations of the columns
        among themselves; the rest is the X_perp part): ||skew(X^T G)||^2 for RSM, and
        for RSSM its unbiased estimate (the diagonal blocks weighted by l/2 and
        ``cross_sq``). 0 whenever f(XQ) = f(X) for every orthogonal Q. NaN outside a run.
    max_gamma : float
        The longest step the loop takes: gamma is clipped to this, which makes the step
        ``gamma * direction_norm`` at most `rssm.solvers.max_step` long (see there).
    previous_gamma : float or None
        gamma_{k-1} (None at k = 0).
    previous_cost : float or None
        f(X_{k-1}) when it was evaluated at iteration k - 1, else None.
    direction : ndarray or None
        -P(G_C), the negated (partial) Riemannian subgradient of this iteration (n x |C|;
        eq. ``eq-partialRiemsubgrad``, eq. ``eq-Rsubdiff`` for RSM), read-only; None
        outside a run. For rules that compare successive subgradients (Kesten-type
        tests, bundles); keep a copy, not the array, across iterations.
    columns : slice or ndarray or None
        Which columns of X the direction belongs to (``X[:, columns]``).
    pair : tuple
        The block pair (i, j) the direction moves (RSSM), () for RSM.
    partition : Partition or None
        The run's `rssm.blocks.Partition` (RSSM), None for RSM.
    selection : str or None
        The name of RSSM's pair rule ("uniform", "cyclic", "shuffled", or a custom
        selector's ``name``), None for RSM.
    escapes : int
        How many times the loop found the steps frozen so far (the iterates settled to
        ``tol`` where no bundle of subgradients cancels) and, for RSSM, how many verdicts
        of convergence its checks refuted, moving X to a lower point (docs/convergence.md,
        "The escape"). A rule whose steps decayed may start again when it grows
        (`rssm.stepsizes.BlockRule` does; `rssm.stepsizes.Auto`'s RSM rule turns to a
        geometric decay).
    """

    __slots__ = ("method", "n_blocks", "shape", "iteration", "direction_norm", "grad_sq",
                 "cross_sq", "rotation_sq", "partition",
                 "max_gamma", "previous_gamma", "previous_cost", "direction", "columns",
                 "pair", "escapes", "selection", "_cost", "_cost_fn", "_trial_fn",
                 "_best_fn", "_raised")

    def __init__(self, method: str, n_blocks: int, shape: tuple[int, int] | None = None, *,
                 cost: Callable[[], float] | None = None,
                 trial: Callable[[float], float] | None = None,
                 best: Callable[[], float] | None = None, partition=None,
                 selection: str | None = None):
        self.method = method
        self.selection = selection
        self.partition = partition
        self.n_blocks = int(n_blocks)
        self.shape = shape
        self.iteration = 0
        self.direction_norm = math.nan
        self.grad_sq = math.nan
        self.cross_sq = math.nan
        self.rotation_sq = math.nan
        self.max_gamma = math.inf
        self.previous_gamma: float | None = None
        self.previous_cost: float | None = None
        self.direction: np.ndarray | None = None
        self.columns: slice | np.ndarray | None = None
        self.pair: tuple = ()
        self.escapes = 0
        self._cost: float | None = None
        self._cost_fn = cost
        self._trial_fn = trial
        self._best_fn = best
        self._raised: Exception | None = None   # what f raised when a rule read it

    @property
    def epoch(self) -> float:
        """Iterations per epoch: l/2 for RSSM (each step moves ~2/l of the columns), 1 for RSM."""
        return epoch_iterations(self.n_blocks)

    @property
    def n_pairs(self) -> int:
        """binom(l, 2) block pairs for RSSM, 1 for RSM."""
        return pair_count(self.n_blocks)

    @property
    def cost(self) -> float:
        """f(X_k), evaluated on first use in iteration k (O(m) from the data problems'
        caches; one call of the user's cost for a `rssm.problem.FunctionProblem`)."""
        if self._cost is None:
            if self._cost_fn is None:
                raise ValueError("StepContext.cost is only available during a run")
            try:
                self._cost = float(self._cost_fn())
            except Exception as exc:
                self._raised = exc
                raise
        return self._cost

    @property
    def best_cost(self) -> float:
        """The least f seen so far in the run (f(X_k) included once it was read)."""
        if self._best_fn is None:
            raise ValueError("StepContext.best_cost is only available during a run")
        return float(self._best_fn())

    @property
    def decreased(self) -> bool | None:
        """f(X_k) < f(X_{k-1}), or None when f(X_{k-1}) was not evaluated."""
        if self.previous_cost is None:
            return None
        return self.cost < self.previous_cost

    def trial(self, gamma: float) -> float:
        """f at the point this iteration's step with ``gamma`` would give; X_k is not moved.

        Costs one retraction and a cost evaluation at the candidate; when the rule then
        returns this same gamma, the loop takes the candidate it already has. A gamma
        above `max_gamma` is evaluated at `max_gamma`, as the step would be.

        Parameters
        ----------
        gamma : float
            The step size to try.

        Returns
        -------
        float
            f at the candidate point.

        Raises
        ------
        ValueError
            Outside a run (no trial function).
        """
        if self._trial_fn is None:
            raise ValueError("StepContext.trial is only available during a run")
        try:
            return float(self._trial_fn(min(float(gamma), self.max_gamma)))
        except Exception as exc:
            self._raised = exc
            raise

    def advance(self, k: int, direction_norm: float, grad_sq: float,
                max_gamma: float = math.inf, direction: np.ndarray | None = None,
                columns: slice | np.ndarray | None = None, pair: tuple = (),
                cross_sq: float = 0.0, rotation_sq: float = math.nan) -> None:
        """Start iteration k (called by the loop once the direction is known).

        Sets the attributes of the same names (``iteration`` from ``k``), keeps the last
        f(X_k) read as ``previous_cost``, and forgets the cost of the previous iterate.

        Parameters
        ----------
        k : int
            The iteration.
        direction_norm : float
            ||P(G_C)||_F.
        grad_sq : float
            The estimate of ||grad f(X_k)||^2.
        max_gamma : float
            The longest step size the loop takes this iteration.
        direction : numpy.ndarray, shape (n, |C|), optional
            -P(G_C); kept as a read-only view.
        columns : slice or numpy.ndarray of int, optional
            The columns of X the direction belongs to.
        pair : tuple
            The block pair (i, j) (RSSM), () for RSM.
        cross_sq : float
            The part of ``grad_sq`` in the off-diagonal blocks.
        rotation_sq : float
            The part of ``grad_sq`` in X^T grad f(X_k).
        """
        if direction is not None:
            direction = direction.view()
            direction.flags.writeable = False
        self.direction = direction
        self.columns = columns
        self.pair = pair
        self.previous_cost = self._cost
        self._cost = None
        self._raised = None
        self.iteration = k
        self.direction_norm = direction_norm
        self.grad_sq = grad_sq
        self.cross_sq = cross_sq
        self.rotation_sq = rotation_sq
        self.max_gamma = max_gamma

    def __repr__(self) -> str:
        return f"StepContext(method={self.method!r}, n_blocks={self.n_blocks})"
