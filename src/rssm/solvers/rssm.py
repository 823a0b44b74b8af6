"""Randomized submanifold subgradient method (RSSM), Algorithm ``alg-RSSM``.

At each iteration: draw a block pair {i, j} (line 2), compute the partial Riemannian
subgradient on the columns C_ij (eq. ``eq-partialRiemsubgrad``), and replace X_ij by the
projection of ``X_ij - gamma * (that subgradient)`` onto the submanifold block
``M_{X_-ij}`` (eq. ``eq-projsubmfdblk``, Lemma ``lem-projsubmfdblk``). The other columns are not
touched: they stay bit-for-bit the same.
"""

from __future__ import annotations

import math

import numpy as np

from rssm import stiefel
from rssm.solvers.base import Direction, Solver, SolverState, polar_flops, rounding_zero, unusable

__all__ = ["RSSMSolver"]


class RSSMSolver(Solver):
    """RSSM with a `rssm.blocks.Partition` and a `rssm.blocks.PairSelector`.

    Parameters
    ----------
    problem : Problem
        The problem to minimize.
    x0 : array_like, shape (n, p)
        The starting point; copied as a C-ordered float64 array, the working iterate
        ``state.x``.
    partition : Partition
        The column blocks C_1, ..., C_l.
    selector : PairSelector
        The block-pair rule, bound here to ``partition`` and ``rng``; the pairs of a rule
        other than the built-in ones (`rssm.blocks.SELECTION_RULES`) are checked as they
        are drawn (ValueError for a pair that is not two different block numbers).
    rng : numpy.random.Generator
        The run's random generator.
    """

    method = "rssm"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._masks: dict[tuple[int, int], tuple] = {}
        from rssm.blocks import SELECTION_RULES

        # a selector of the user's: check each pair it draws (the built-in ones are right)
        self._check_pairs = type(self.selector) not in tuple(SELECTION_RULES.values())

    def _pair(self) -> tuple[int, int]:
        i, j = self.selector.next_pair()
        if not self._check_pairs:
            return i, j
        ell = self.partition.n_blocks
        ok = (all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
                  for v in (i, j)) and 0 <= i < ell and 0 <= j < ell and i != j)
        if not ok:
            raise ValueError(f"{type(self.selector).__name__}.next_pair must return two "
                             f"different block numbers in 0..{ell - 1}, got {(i, j)!r}")
        return (int(i), int(j)) if i < j else (int(j), int(i))

    def _off_block(self, cols, i: int) -> tuple:
        """The index of the off-diagonal block (C_i rows, C_j columns) within a |C| x |C|
        matrix on C = C_i u C_j (an `numpy.ix_` pair, cached per pair)."""
        key = cols.blocks
        m = self._masks.get(key)
        if m is None:
            in_i = np.isin(cols.index, self.partition.blocks[i])
            m = self._masks[key] = np.ix_(np.flatnonzero(in_i), np.flatnonzero(~in_i))
        return m

    def direction(self, state: SolverState) -> Direction:
        x = state.x
        n, p = x.shape
        i, j = self._pair()
        cols = self.partition.columns(i, j)
        sel = cols.selector
        c = cols.size
        g = state.oracle.partial_subgradient(cols)                # n x c, Prop. prop-structural
        g_sq, defect = unusable(g)
        if defect:                    # the loop stops, saying why
            return Direction(cols, sel, None, math.nan, math.nan, 0.0, (i, j), defect=defect)
        neg, s = stiefel.block_descent_direction(x, sel, g)         # eq. eq-partialRiemsubgrad
        norm_sq = float(np.vdot(neg, neg))
        if rounding_zero(norm_sq, g_sq, p):
            neg, norm_sq = np.zeros_like(neg), 0.0     # 0 to working precision: no move
            s = np.zeros_like(s)
        # ||P(G_C) I_C^T||^2 in the A_X^{-1} metric (eqs. eq-scaling-coordrep, eq-cindepNorm2):
        # X^T P(G_C) = S = skew(X_C^T G_C) on the rows C; A_X^{-1} multiplies its diagonal
        # blocks S_ii, S_jj and the X_perp part by l/2 and its off-diagonal blocks by binom(l,2).
        ell = self.partition.n_blocks
        s_sq = float(np.vdot(s, s))
        s_off = s[self._off_block(cols, i)]
        off = 2.0 * float(np.vdot(s_off, s_off))
        perp = max(norm_sq - s_sq, 0.0)
        cross_sq = 0.5 * ell * (ell - 1) * off
        grad_sq = 0.5 * ell * (s_sq - off + perp) + cross_sq
        rotation_sq = 0.5 * ell * (s_sq - off) + cross_sq      # X^T P(G_C): all of S
        flops = (state.oracle.flops_partial(c)
                 + 4.0 * n * p * c      # X^T G, X Y (tangent)
                 + n * c + 3.0 * c * c  # X Y - G; sym and skew of Y[C]
                 + 2.0 * n * c)         # ||P(G_C)||^2
        return Direction(cols, sel, neg, norm_sq, grad_sq, flops, (i, j), cross_sq,
                         rotation_sq)

    def candidate(self, state: SolverState, d: Direction, gamma: float) -> np.ndarray:
        # eq. eq-projsubmfdblk through Lemma lem-projsubmfdblk's general form
        return stiefel.block_step(state.x, d.sel, d.neg, gamma)

    def step_flops(self, state: SolverState, d: Direction) -> float:
        n, p = state.x.shape
        c = d.size
        return (4.0 * n * p * c        # X^T Xi, X W (block projection)
                + 3.0 * n * c          # gamma *, + X_C, Xi - X W
                + polar_flops(n, c)    # Gram route
                + state.oracle.flops_update(c))
