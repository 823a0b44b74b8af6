"""Riemannian subgradient method (RSM; Li et al. 2021), the paper's baseline.

X+ = P_St(X - gamma P_T(G)), G a Euclidean subgradient: a full Riemannian subgradient
step (eq. ``eq-Rsubdiff``) and the polar retraction (eq. ``eq-polarretr``).

Paper labels (``eq-...``, ``alg-...``) are those of the LaTeX source of A. Y.-M. Cheung,
J. Wang, M.-C. Yue, A. M.-C. So, "Randomized Submanifold Subgradient Method for
Optimization over Stiefel Manifolds", arXiv:2409.01770; here ``eq-Rsubdiff`` = eq. (3),
``eq-polarretr`` = eq. (4) (table: docs/paper-map.md).
"""

from __future__ import annotations

import numpy as np

from rssm import stiefel
from rssm.solvers.base import Solver, polar_flops


class RSMSolver(Solver):
    """RSM: one full subgradient, tangent projection and polar retraction per iteration."""

    method = "rsm"

    def direction(self) -> tuple[float, float]:
        x = self.x
        n, p = x.shape
        g = self.oracle.subgradient()
        neg = stiefel._tangent_direction(x, g)                     # -P_T(G), eq. eq-Rsubdiff
        norm_sq = float(np.vdot(neg, neg))
        self._pending = (None, slice(None), neg, p)
        self._dir_flops = (
            self.oracle.flops_subgradient()
            + 4.0 * n * p * p      # X^T G, X sym(.)
            + 2.0 * n * p          # 0.5 *, - G
            + 2.0 * n * p          # ||P_T(G)||^2
        )
        return norm_sq, norm_sq

    def _candidate(self, gamma: float) -> np.ndarray:
        return stiefel._full_apply(self.x, self._pending[2], gamma)

    def _apply_flops(self) -> float:
        n, p = self.x.shape
        return 2.0 * n * p + polar_flops(n, p) + self.oracle.flops_update(p)
