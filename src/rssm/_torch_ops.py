"""torch's array operations for the kernels of `rssm.stiefel` (used by `rssm.torch`).

The kernels (the partial Riemannian subgradient, eq. ``eq-partialRiemsubgrad``; the
submanifold-block projection, eq. ``eq-projsubmfdblk``; the polar factor, eq.
``eq-polarretr``) are written once for NumPy arrays and torch tensors; `TorchOps` gives
them the few operations the two libraries spell differently.
"""

from __future__ import annotations

import math

import torch

from rssm import stiefel

__all__ = ["TorchOps", "feasibility"]


class TorchOps(stiefel.ArrayOps):
    """The operations `rssm.stiefel`'s kernels need beyond ``@`` and indexing, for torch
    tensors. Each of `finite`, `fro` and the eigenvalue test reads a scalar back (a host
    sync on a GPU)."""

    @staticmethod
    def finite(a) -> bool:
        return bool(torch.isfinite(a).all())

    @staticmethod
    def add_diag(a, value: float) -> None:
        a.diagonal().add_(value)

    @staticmethod
    def fro(a) -> float:
        return float(torch.linalg.matrix_norm(a))

    @staticmethod
    def ns_tol(a) -> float:
        if a.dtype == torch.float64:
            return stiefel.ArrayOps.ns_tol(a)
        eps = torch.finfo(a.dtype).eps  # float32: sqrt(eps), or its rounding level if larger
        return max(math.sqrt(eps), 4.0 * eps * math.sqrt(a.shape[0]) * a.shape[1])

    @staticmethod
    def eigh(a):
        try:
            return torch.linalg.eigh(a.to(torch.float64))
        except torch.linalg.LinAlgError:
            return None

    @staticmethod
    def sqrt(w):
        return torch.sqrt(w)

    @staticmethod
    def like(b, a):
        return b.to(a.dtype)

    @staticmethod
    def cols(a, sel):
        # index_select: advanced indexing a[:, idx] is several times slower on the CPU
        return a[:, sel] if isinstance(sel, slice) else a.index_select(1, sel)

    @staticmethod
    def svd_polar(xi):
        try:
            u, _, vh = torch.linalg.svd(xi, full_matrices=False)
        except torch.linalg.LinAlgError:  # non-finite input: the caller's check refuses it
            return xi
        return u @ vh


def feasibility(w: torch.Tensor) -> float:
    """||W^T W - I||_max of a 2-D tensor, computed in float64.

    Parameters
    ----------
    w : torch.Tensor, shape (n, p)
        The matrix W (any device and real dtype; detached, not changed).

    Returns
    -------
    float
        The largest absolute entry of W^T W - I (0.0 for an empty W).
    """
    w64 = w.detach().to(torch.float64)
    g = w64.T @ w64
    g.diagonal().sub_(1.0)
    return float(g.abs().max()) if g.numel() else 0.0
