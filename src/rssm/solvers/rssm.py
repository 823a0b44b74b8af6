"""Randomized submanifold subgradient method (RSSM), Algorithm ``alg-RSSM``.

At each iteration: draw a block pair {i, j} (line 2), compute the partial Riemannian
subgradient on the columns C_ij (eq. ``eq-partialRiemsubgrad``), and replace X_ij by the
projection of X_ij - gamma * (that subgradient) onto the submanifold block M_{X_-ij}
(eq. ``eq-projsubmfdblk``, Lemma ``lem-projsubmfdblk``). The other columns are not
touched: they stay bit-for-bit the same.

Paper labels (``eq-...``, ``alg-...``) are those of the LaTeX source of A. Y.-M. Cheung,
J. Wang, M.-C. Yue, A. M.-C. So, "Randomized Submanifold Subgradient Method for
Optimization over Stiefel Manifolds", arXiv:2409.01770; here ``lem-projsubmfdblk`` =
Lemma 3.2, ``prop-structural`` = Prop. 3.3, ``alg-RSSM`` = Algorithm 1,
``eq-partialRiemsubgrad`` = eq. (11), ``eq-projsubmfdblk`` = eq. (12) (table:
docs/paper-map.md).
"""

from __future__ import annotations

from rssm import stiefel
from rssm.solvers.base import Solver, _commit_check, polar_flops


class RSSMSolver(Solver):
    """RSSM with a `rssm.blocks.Partition` and a `rssm.blocks.PairSelector`."""

    method = "rssm"

    def step(self, gamma: float) -> float:
        x = self.x
        n, p = x.shape
        i, j = self.selector.next_pair()
        cols = self.partition.columns(i, j)
        sel = cols.selector
        c = cols.size
        g = self.oracle.partial_subgradient(cols)                 # n x c, Prop. prop-structural
        # eq. eq-partialRiemsubgrad then eq. eq-projsubmfdblk (general form of
        # Lemma lem-projsubmfdblk), fused: see rssm.stiefel._submanifold_step.
        new = stiefel._submanifold_step(x, sel, g, gamma)
        _commit_check(new)
        x[:, sel] = new
        self.oracle.update(cols)
        return (
            self.oracle.flops_partial(c)
            + 8.0 * n * p * c      # X^T G, X Y (tangent); X^T Xi, X W (block projection)
            + 4.0 * n * c + c * c  # X Y - G, gamma *, + X_C, Xi - X W; sym(Y[C])
            + polar_flops(n, c)    # Gram route; the SVD fallback of steps with
            #                        gamma ||P(G_C)|| >~ 3 (beyond gamma < 1/L) is not counted
            + self.oracle.flops_update(c)
        )
