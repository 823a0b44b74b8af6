"""Riemannian subgradient method (RSM; Li et al. 2021), the paper's baseline.

X+ = P_St(X - gamma P_T(G)), G a Euclidean subgradient: a full Riemannian subgradient
step (eq. ``eq-Rsubdiff``) and the polar retraction (eq. ``eq-polarretr``).

Paper labels (``eq-...``, ``alg-...``) are those of the LaTeX source of A. Y.-M. Cheung,
J. Wang, M.-C. Yue, A. M.-C. So, "Randomized Submanifold Subgradient Method for
Optimization over Stiefel Manifolds", arXiv:2409.01770; here ``eq-Rsubdiff`` = eq. (3),
``eq-polarretr`` = eq. (4) (table: docs/paper-map.md).
"""

from __future__ import annotations

from rssm import stiefel
from rssm.solvers.base import Solver, _commit_check, polar_flops


class RSMSolver(Solver):
    """RSM: one full subgradient, tangent projection and polar retraction per iteration."""

    method = "rsm"

    def step(self, gamma: float) -> float:
        x = self.x
        n, p = x.shape
        g = self.oracle.subgradient()
        new = stiefel._full_step(x, g, gamma)    # polar(X - gamma P_T(G)), fused
        _commit_check(new)
        x[...] = new
        self.oracle.update(None)
        return (
            self.oracle.flops_subgradient()
            + 4.0 * n * p * p      # X^T G, X sym(.)
            + 4.0 * n * p          # 0.5 *, - G, gamma *, + X
            + polar_flops(n, p)
            + self.oracle.flops_update(p)
        )
