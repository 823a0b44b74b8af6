"""Riemannian subgradient method (RSM; Li et al. 2021), the paper's baseline.

X+ = P_St(X - gamma P_T(G)), G a Euclidean subgradient: a full Riemannian subgradient
step (eq. ``eq-Rsubdiff``) and the polar retraction (eq. ``eq-polarretr``).
"""

from __future__ import annotations

import math

import numpy as np

from rssm import stiefel
from rssm.solvers.base import Direction, Solver, SolverState, polar_flops, rounding_zero, unusable

__all__ = ["RSMSolver"]


class RSMSolver(Solver):
    """RSM: one full subgradient, tangent projection and polar retraction per iteration.

    Parameters
    ----------
    problem : Problem
        The problem to minimize.
    x0 : array_like, shape (n, p)
        The starting point; copied as a C-ordered float64 array, the working iterate
        ``state.x``.
    partition : None
        No column blocks (RSM moves every column at once; `rssm.minimize` passes None).
    selector : None
        No block-pair rule (`rssm.minimize` passes None).
    rng : numpy.random.Generator
        The run's random generator.
    """

    method = "rsm"

    def direction(self, state: SolverState) -> Direction:
        x = state.x
        n, p = x.shape
        g = state.oracle.subgradient()
        g_sq, defect = unusable(g)
        if defect:                    # the loop stops, saying why
            return Direction(None, slice(None), None, math.nan, math.nan, 0.0, defect=defect)
        neg, y = stiefel.descent_direction_parts(x, g)            # -P_T(G), eq. eq-Rsubdiff
        norm_sq = float(np.vdot(neg, neg))
        if rounding_zero(norm_sq, g_sq, p):
            neg, norm_sq = np.zeros_like(neg), 0.0     # 0 to working precision: no move
        # X^T P_T(G) = skew(X^T G): the rotations of the columns among themselves, 0 when
        # f(XQ) = f(X) for every orthogonal Q (p^2 flops from the X^T G formed anyway)
        skew = y - y.T
        rotation_sq = 0.25 * float(np.vdot(skew, skew))
        flops = (state.oracle.flops_subgradient()
                 + 4.0 * n * p * p      # X^T G, X sym(.)
                 + 2.0 * n * p          # 0.5 *, - G
                 + 2.0 * n * p)         # ||P_T(G)||^2
        return Direction(None, slice(None), neg, norm_sq, norm_sq, flops,
                         rotation_sq=rotation_sq)

    def candidate(self, state: SolverState, d: Direction, gamma: float) -> np.ndarray:
        return stiefel.full_retraction_step(state.x, d.neg, gamma)

    def step_flops(self, state: SolverState, d: Direction) -> float:
        n, p = state.x.shape
        return 2.0 * n * p + polar_flops(n, p) + state.oracle.flops_update(p)
