"""Bridges from a cost written in PyTorch or JAX to NumPy oracles (`Problem.from_torch`,
`Problem.from_jax`).

Both libraries are optional; they are imported only when a bridge is built, and a
missing one raises ImportError naming the extra to install.

Arrays cross the boundary without copies where the library allows it:

* PyTorch: ``torch.from_numpy`` shares the iterate's memory (a read-only array, which
  torch cannot wrap, is copied), and ``Tensor.numpy()`` shares the gradient's memory.
* JAX: ``jax.device_put`` aliases a NumPy array on the CPU when its buffer is 64-byte
  aligned and copies it otherwise; ``numpy.asarray`` of the result shares its memory
  (read-only). Costs are evaluated in float64 inside ``jax.enable_x64`` (the global
  ``jax_enable_x64`` flag is left as it is).

The subgradient returned is the one reverse-mode autodiff computes. Where the cost is
smooth it is the gradient. At kinks autodiff applies the chain rule with fixed
conventions for the primitives (d|t|/dt at 0 is 0 in torch and 1 in jax, relu'(0) = 0,
tied arguments of max share the derivative equally); for costs built as sums of such
pieces with no cancellation (l1 norms, l2 norms of nonzero rows, max of smooth pieces)
the result is an element of the Clarke subdifferential, but not in general:
relu(t) - relu(-t) equals t, yet both return 0 at t = 0, outside the Clarke
subdifferential {1}; and jnp.linalg.norm has a NaN gradient at 0. See docs/custom.md.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["torch_oracles", "jax_oracles"]


def _import(name: str):
    try:
        return __import__(name)
    except ImportError:
        raise ImportError(
            f"Problem.from_{name} needs {name}, which is not installed; "
            f'install the optional extra with pip install "rssm[{name}]"'
        ) from None


def torch_oracles(cost: Callable) -> tuple[Callable, Callable]:
    """(value, subgradient) NumPy functions for a PyTorch ``cost(X: Tensor) -> Tensor``."""
    torch = _import("torch")

    def as_tensor(x: np.ndarray):
        x = np.asarray(x, dtype=np.float64)
        if not x.flags.writeable:
            x = x.copy()
        return torch.from_numpy(x)

    def value(x: np.ndarray) -> float:
        with torch.no_grad():
            out = cost(as_tensor(x))
        return _scalar(out, torch)

    def subgradient(x: np.ndarray) -> np.ndarray:
        xt = as_tensor(x).requires_grad_(True)
        with torch.enable_grad():
            out = cost(xt)
            _scalar(out, torch)
            if not out.requires_grad:  # cost does not depend on X
                return np.zeros(xt.shape)
            (g,) = torch.autograd.grad(out, xt)
        return g.detach().numpy()

    return value, subgradient


def _scalar(out, torch) -> float:
    if not isinstance(out, torch.Tensor) or out.numel() != 1:
        raise TypeError(
            "the cost given to Problem.from_torch must return a scalar torch.Tensor, "
            f"got {type(out).__name__}"
            + (f" with shape {tuple(out.shape)}" if hasattr(out, "shape") else "")
        )
    return float(out.item())


def jax_oracles(cost: Callable) -> tuple[Callable, Callable]:
    """(value, subgradient) NumPy functions for a JAX ``cost(X: Array) -> scalar Array``."""
    jax = _import("jax")
    x64 = getattr(jax, "enable_x64", None)
    if x64 is None:
        from jax.experimental import enable_x64 as x64

    value_jit = jax.jit(cost)
    grad_jit = jax.jit(jax.grad(cost))

    def value(x: np.ndarray) -> float:
        with x64(True):
            out = value_jit(jax.device_put(np.asarray(x, dtype=np.float64)))
            if getattr(out, "shape", None) != ():
                raise TypeError(
                    "the cost given to Problem.from_jax must return a scalar, got shape "
                    f"{getattr(out, 'shape', type(out).__name__)}"
                )
            return float(out)

    def subgradient(x: np.ndarray) -> np.ndarray:
        with x64(True):
            g = grad_jit(jax.device_put(np.asarray(x, dtype=np.float64)))
            return np.asarray(g)

    return value, subgradient
