"""The context a step-size rule reads at iteration k (`StepContext`).

The solver loop owns this class; rules only read it.
"""

from __future__ import annotations

import math


class StepContext:
    """What a step-size rule may read at iteration k, besides k itself.

    The solver computes the step's direction (the partial Riemannian subgradient of RSSM,
    eq. ``eq-partialRiemsubgrad``, or the Riemannian subgradient of RSM) *before* it asks
    the rule for gamma_k, so a rule can use its norm, the cost f(X_k) (evaluated only
    when a rule reads it, from the oracle's cache) and, for line searches, the cost at a
    trial point. Plain schedules read only ``method``, ``n_blocks`` and ``epoch``.

    Parameters
    ----------
    method : str
        ``"rssm"`` or ``"rsm"``.
    n_blocks : int
        Number of blocks l (1 for RSM, which updates all columns at once).
    shape : tuple of int, optional
        (n, p) of the problem (set by the solver loop).

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
    previous_gamma : float or None
        gamma_{k-1} (None at k = 0).
    previous_cost : float or None
        f(X_{k-1}) when some rule evaluated it at iteration k - 1, else None.
    """

    __slots__ = ("method", "n_blocks", "shape", "iteration", "direction_norm", "grad_sq",
                 "previous_gamma", "previous_cost", "_cost", "_cost_fn", "_trial_fn")

    def __init__(self, method: str, n_blocks: int, shape: tuple[int, int] | None = None):
        self.method = method
        self.n_blocks = int(n_blocks)
        self.shape = shape
        self.iteration = 0
        self.direction_norm = math.nan
        self.grad_sq = math.nan
        self.previous_gamma: float | None = None
        self.previous_cost: float | None = None
        self._cost: float | None = None
        self._cost_fn = None
        self._trial_fn = None

    @property
    def epoch(self) -> float:
        """Iterations per epoch: l/2 for RSSM (each step moves ~2/l of the columns), 1 for RSM."""
        return self.n_blocks / 2.0 if self.method == "rssm" else 1.0

    @property
    def n_pairs(self) -> int:
        """binom(l, 2) block pairs for RSSM, 1 for RSM."""
        return self.n_blocks * (self.n_blocks - 1) // 2 if self.method == "rssm" else 1

    @property
    def cost(self) -> float:
        """f(X_k), evaluated on first use in iteration k (O(m) from the data problems'
        caches; one call of the user's cost for a `rssm.problem.FunctionProblem`)."""
        if self._cost is None:
            if self._cost_fn is None:
                raise ValueError("StepContext.cost is only available during a run")
            self._cost = float(self._cost_fn())
        return self._cost

    @property
    def decreased(self) -> bool | None:
        """f(X_k) < f(X_{k-1}), or None when f(X_{k-1}) was not evaluated."""
        if self.previous_cost is None:
            return None
        return self.cost < self.previous_cost

    def trial(self, gamma: float) -> float:
        """f at the point this iteration's step with ``gamma`` would give (X_k unchanged).

        Costs one retraction and one cache update; when the rule then returns this same
        gamma, the solver keeps the trial point instead of computing it again.
        """
        if self._trial_fn is None:
            raise ValueError("StepContext.trial is only available during a run")
        self.cost  # noqa: B018  (f(X_k) is cached before x moves to the trial point)
        return float(self._trial_fn(float(gamma)))

    def _begin(self, k: int, direction_norm: float, grad_sq: float) -> None:
        """Called by the solver loop once the direction of iteration k is known."""
        self.previous_cost = self._cost
        self._cost = None
        self.iteration = k
        self.direction_norm = direction_norm
        self.grad_sq = grad_sq

    def __repr__(self) -> str:
        return f"StepContext(method={self.method!r}, n_blocks={self.n_blocks})"
