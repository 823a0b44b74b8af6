"""PyTorch optimizers for parameters with orthonormal columns: `RSSM` and `RSM`.

A parameter W of shape (n, p), n >= p, with W^T W = I is a point of St(n, p). After
``loss.backward()`` its ``.grad`` is a Euclidean (sub)gradient G of the loss, and
``optimizer.step()`` moves W on the manifold:

* `RSSM` draws a random pair {i, j} of its column blocks (Algorithm ``alg-RSSM``, line 2)
  and replaces the columns C = C_i U C_j by the submanifold step of line 3: the partial
  Riemannian subgradient P(G_C) (eq. ``eq-partialRiemsubgrad``), then the projection onto
  the submanifold block ``M_{W_-C}`` (Lemma ``lem-projsubmfdblk``, eq. ``eq-projsubmfdblk``).
  The geometry costs four n x p x c products and an n x c polar factor, O(n p c)
  (Prop. ``prop-periteration``), against O(n p^2) for a full retraction. The other
  columns are not touched. Autograd still computes the whole gradient: the saving is in
  the step, not in the backward pass.
* `RSM` takes the full Riemannian step polar(W - gamma P_T(G)) (eqs. ``eq-Rsubdiff``,
  ``eq-polarretr``).

The geometry is the solvers' own: the kernels of `rssm.stiefel` (written once for NumPy
arrays and torch tensors), given torch's few extra operations by `_TorchOps`; pairs are
numbered as `rssm.blocks.pair_table` does and blocks are `rssm.blocks.Partition.uniform`.
Everything runs as torch operations on the parameter's own device and dtype (float32 or
float64); a c x c eigendecomposition, when the polar factor needs one, runs in float64,
which keeps float32 parameters orthonormal to about 1e-6 over many steps. Needs the
optional extra ``rssm[torch]``.

Step sizes
----------
``lr`` is a positive number or a rule from `rssm.stepsizes` (any callable
``rule(k, ctx) -> float``). The step of parameter W at its k-th step is

    gamma_k = group["lr"] * rule(k, ctx)      (a rule)
    gamma_k = group["lr"]                     (a number)

so a PyTorch LR scheduler, which rescales ``param_groups[i]["lr"]``, works in both cases
(with a rule, ``group["lr"]`` starts at 1 and multiplies the rule). ``ctx`` is a
`TorchStepContext`: the fields of `rssm.stepsizes.StepContext` (``method``, ``n_blocks``,
``epoch``) that plain schedules read, plus what an adaptive rule needs and the step has
already computed: the loss returned by the closure (``cost``; None without a closure)
and the norm of the (partial) Riemannian subgradient (``subgradient_norm``). A rule may
keep its own memory between calls (best cost so far, last step).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

try:
    import torch
except ImportError:  # pragma: no cover - exercised only without torch
    raise ImportError(
        'rssm.torch needs PyTorch, which is not installed; install it with pip install '
        '"rssm[torch]"'
    ) from None

from rssm import stiefel
from rssm._interrupt import HeldInterrupt
from rssm._torch_ops import TorchOps, feasibility
from rssm.blocks import Partition, pair_table
from rssm.stepsizes import (
    AdaptiveGeometric,
    Auto,
    Backtracking,
    BlockRule,
    Constant,
    Geometric,
    Polyak,
    PolyakBest,
    PolyakLevel,
    StepSize,
    as_stepsize,
)

#: Rules that read StepContext fields only `rssm.minimize` fills (grad_sq, trial, cost at
#: every step): refused by the optimizers with a message instead of an AttributeError.
_NEEDS_RUN = (Auto, BlockRule, Polyak, PolyakLevel, PolyakBest, AdaptiveGeometric,
              Backtracking)

__all__ = ["RSSM", "RSM", "TorchStepContext", "feasibility"]

_OPS = TorchOps()


@dataclass(frozen=True)
class TorchStepContext:
    """What a step-size rule sees at one optimizer step of one parameter.

    Parameters
    ----------
    method : str
        ``"rssm"`` or ``"rsm"``.
    n_blocks : int
        Number of column blocks l of this parameter (1 for RSM).
    cost : float or None, default=None
        The loss the closure returned at this step (the current point), None when
        `step` was called without a closure.
    subgradient_norm : float, default=nan
        Frobenius norm of the Riemannian subgradient the step moves along: the partial
        one P(G_C) for RSSM (eq. ``eq-partialRiemsubgrad``), P_T(G) for RSM.
    """

    method: str
    n_blocks: int
    cost: float | None = None
    subgradient_norm: float = math.nan

    @property
    def epoch(self) -> float:
        """Steps per epoch: l/2 for RSSM (each step moves about 2/l of the columns), 1 for RSM."""
        return self.n_blocks / 2.0 if self.method == "rssm" else 1.0


def _is_number(value: Any) -> bool:
    """A real number (NumPy scalars included), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _rounded_zero(lr: float, group: dict) -> bool:
    """``lr`` is below 0 by a rounding of the group's first lr as PyTorch's schedulers
    record it (``initial_lr``): by 1e-12 of it at most."""
    if not (math.isfinite(lr) and lr < 0):
        return False
    ref = group.get("initial_lr")
    if isinstance(ref, torch.Tensor) and ref.numel() == 1:
        ref = float(ref)
    # (finite: an initial_lr of inf, set by hand, let every negative lr through, a review)
    return _is_number(ref) and math.isfinite(ref) and lr >= -1e-12 * abs(float(ref))


def _as_rule(lr: Any) -> tuple[float, StepSize | None]:
    """(initial group lr, rule or None) from the ``lr`` argument."""
    if isinstance(lr, (bool, np.bool_)):
        raise TypeError(f"lr must be a positive number or a step-size rule, got {lr!r}")
    if _is_number(lr) or (isinstance(lr, torch.Tensor) and lr.numel() == 1):
        value = float(lr)
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"lr must be a finite number > 0, got {value!r}")
        return value, None
    if isinstance(lr, _NEEDS_RUN):
        raise TypeError(
            f"lr={type(lr).__name__}(...) needs what only rssm.minimize's loop provides (the "
            "A_X^{-1} gradient estimate grad_sq and its cross-block part, trial steps, or f at "
            "every step); the torch "
            "optimizers take a number or a schedule (Constant, Geometric, InverseSqrt, "
            "PaperSchedule, a callable (k, ctx)) and PyTorch LR schedulers"
        )
    if isinstance(lr, Geometric) and lr.restart:
        raise TypeError(
            f"lr={lr!r} with restart=True starts again where rssm.minimize's loop finds the "
            "steps frozen, which an optimizer step cannot tell; pass Geometric(mu0, beta) "
            "(restart=False), or restart it yourself with a PyTorch LR scheduler")
    if isinstance(lr, StepSize) or callable(lr):
        return 1.0, as_stepsize(lr, "lr")
    raise TypeError(
        "lr must be a positive number or a step-size rule (an rssm.stepsizes.StepSize or a "
        f"callable (k, ctx) -> float), got {type(lr).__name__}"
    )


class _StiefelOptimizer(torch.optim.Optimizer):
    """Shared parts of `RSSM` and `RSM`: argument checks, step-size rule, state, step loop."""

    method = "base"

    def __init__(self, params: Iterable, lr: Any, defaults: dict, *,
                 generator: torch.Generator | None = None, seed: int | None = None,
                 check_finite: bool = True, atol: float | None = None):
        lr0, rule = _as_rule(lr)
        own = generator is None or self.method == "rsm"      # (RSM draws nothing)
        if generator is not None and seed is not None:
            raise ValueError("pass generator or seed, not both")
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
        if seed is not None:
            if (isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral)
                    or not 0 <= seed < 2**63):
                raise ValueError(f"seed must be an int in [0, 2**63) (Python or NumPy), got "
                                 f"{seed!r}")
            generator = torch.Generator().manual_seed(int(seed))
        elif generator is None:
            # Follow torch's seed without drawing from its global generator (torch's own
            # optimizers draw nothing; drawing here shifted the user's later dropout and
            # shuffling draws): torch.manual_seed(s) makes runs reproducible.
            generator = torch.Generator().manual_seed(torch.initial_seed() % 2**63)
        # the optimizer's own generator (seed= or neither) may be replaced by one on the
        # device a state dict's draws came from; a user's own is not
        self._own_generator = own
        self._generator = generator
        self._rule = rule
        self._check_finite = bool(check_finite)
        if atol is not None and not (_is_number(atol) and math.isfinite(atol) and atol > 0):
            raise ValueError(f"atol must be a number > 0 or None, got {atol!r}")
        self._atol = None if atol is None else float(atol)
        super().__init__(params, {"lr": lr0, **defaults})

    # -- checks ---------------------------------------------------------------------------
    def add_param_group(self, param_group: dict) -> None:
        """Add a parameter group (as `torch.optim.Optimizer.add_param_group`), checking its
        parameters and options as the constructor does; a refused group is not added.

        Parameters
        ----------
        param_group : dict
            The group: its tensors under ``"params"`` and, optionally, its own options
            (``"lr"``, a finite number > 0; for `RSSM` ``"n_blocks"``); the options it
            omits are the optimizer's defaults.
        """
        super().add_param_group(param_group)
        gi, group = len(self.param_groups) - 1, self.param_groups[-1]
        try:
            lr = group["lr"]
            if isinstance(lr, StepSize) or (callable(lr) and not isinstance(lr, torch.Tensor)):
                # (a user's audit: "must be a finite number > 0" read as if rules were not
                # taken at all, while lr= takes one)
                raise ValueError(
                    f"param_groups[{gi}]['lr'] is a step-size rule ({lr!r}): a rule is set "
                    "for the whole optimizer, as its lr= argument; a group's lr is a finite "
                    "number > 0 that scales the rule's steps for that group")
            if not ((_is_number(lr) or (isinstance(lr, torch.Tensor) and lr.numel() == 1))
                    and math.isfinite(float(lr)) and float(lr) > 0):
                raise ValueError(f"param_groups[{gi}]['lr'] must be a finite number > 0, "
                                 f"got {lr!r}")
            for pi, w in enumerate(group["params"]):
                self._check_param(w, f"param_groups[{gi}]['params'][{pi}]", group)
        except (TypeError, ValueError):
            self.param_groups.pop()
            raise

    def _check_param(self, w: torch.Tensor, name: str, group: dict) -> None:
        if w.dtype not in (torch.float32, torch.float64):
            raise TypeError(
                f"{name} has dtype {w.dtype}; {type(self).__name__} handles float32 and "
                "float64 parameters"
            )
        if w.dim() != 2:
            raise ValueError(
                f"{name} has shape {tuple(w.shape)}; {type(self).__name__} needs a 2-D "
                "parameter (n, p) with n >= p and orthonormal columns (batches of matrices "
                "are not supported: use one parameter per matrix)"
            )
        n, p = w.shape
        if n < p:
            raise ValueError(
                f"{name} has shape ({n}, {p}) with n < p; orthonormal columns need n >= p "
                "(store the transpose and use it as W.T)"
            )
        atol = self._atol if self._atol is not None else (
            1e-8 if w.dtype == torch.float64 else 1e-4)
        dev = feasibility(w)
        if not dev <= atol:
            hint = ("initialize it with torch.nn.init.orthogonal_(W) (orthonormal columns "
                    "for n >= p)")
            if w.dtype == torch.float64 and dev <= 1e-4:
                # orthonormal at float32's precision: made in float32, then .double()
                hint = ("it looks orthonormal at float32's precision (made in float32, then "
                        "converted?): call torch.nn.init.orthogonal_(W) after .double(), or "
                        "pass atol=1e-4")
            raise ValueError(
                f"{name} does not have orthonormal columns: ||W^T W - I||_max = {dev:.3e} "
                f"exceeds {atol:.0e}; {hint}"
            )
        self._check_group(group, name, p)

    def _check_group(self, group: dict, name: str, p: int) -> None:
        """Method-specific checks of one parameter's group (block counts)."""

    # -- state ----------------------------------------------------------------------------
    #: Attributes of the optimizer beyond torch's (``defaults``, ``state``,
    #: ``param_groups``) that a copy must keep; the generator goes as its state.
    _KEEP = ("_rule", "_check_finite", "_atol", "_own_generator")

    def __getstate__(self) -> dict:
        # torch keeps only defaults, state and param_groups: a deepcopy or pickle of the
        # optimizer could not step ("no attribute '_rule'"); keep the rest too
        out = super().__getstate__()
        out.update({k: self.__dict__[k] for k in self._KEEP})
        out["_generator_state"] = (str(self._generator.device),
                                   self._generator.get_state())
        return out

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        gen = state.pop("_generator_state", None)
        super().__setstate__(state)
        if gen is not None:
            device, rng_state = gen
            self._generator = torch.Generator(device=device)
            self._generator.set_state(rng_state)
        self._reset_caches()

    def _reset_caches(self) -> None:
        """Caches rebuilt on demand (none here; `RSSM` keeps pair tables and indices)."""

    def state_dict(self) -> dict:
        """torch's state dict (each parameter's step count, blocks and pending pair draws)
        and the generator's state (``"generator_state"``), so that a run resumed with
        `load_state_dict` draws the same block pairs as one never stopped."""
        out = super().state_dict()
        out["generator_state"] = self._generator.get_state()
        out["generator_device"] = str(self._generator.device)
        return out

    def load_state_dict(self, state_dict: dict) -> None:
        """torch's `load_state_dict`, and the generator's state when the dict holds one
        (dicts saved before it did resume with the generator as it is).

        A state saved from a generator on another device (a CUDA generator's state differs
        from a CPU one's) replaces the optimizer's own generator (built from ``seed`` or
        torch's seed) by one on that device; with a ``generator`` of your own, or where
        that device is not here, it is refused before anything is loaded.

        Parameters
        ----------
        state_dict : dict
            A dict returned by `state_dict`.
        """
        state_dict = dict(state_dict)
        gen = state_dict.pop("generator_state", None)
        device = state_dict.pop("generator_device", None)
        target = None if gen is None else self._generator_for(gen, device)
        super().load_state_dict(state_dict)
        if target is not None:
            target.set_state(gen)
            self._generator = target

    def _generator_for(self, gen: torch.Tensor, device: str | None) -> torch.Generator:
        """The generator that takes the saved state ``gen`` (checked on a copy first)."""
        here = self._generator.device
        try:
            torch.Generator(device=here).set_state(gen)
            return self._generator
        except (RuntimeError, TypeError) as exc:
            first = exc
        where = f"a {device} generator" if device else "a generator of another device"
        if device is not None and getattr(self, "_own_generator", False):
            try:
                other = torch.Generator(device=device)
                other.set_state(gen)
                return other
            except (RuntimeError, TypeError) as exc:
                first = exc
        reason = str(first).split(". ")[0]
        if device is not None and device.startswith("cuda") and not torch.cuda.is_available():
            reason = "CUDA is not available here"
        advice = (f"build the optimizer with generator=torch.Generator(device={device!r})"
                  if device else "build the optimizer with a generator on the device the "
                  "state dict was saved from")
        raise ValueError(
            f"{type(self).__name__}.load_state_dict: the block-pair draws were saved from "
            f"{where}, whose state this optimizer's {here} generator cannot take ({reason}); "
            f"{advice} to resume the same draws, or delete the dict's 'generator_state' to "
            "go on with this optimizer's own draws (nothing was loaded)") from None

    @property
    def rule(self) -> StepSize:
        """The step-size rule (a `rssm.stepsizes.Constant` (1) when ``lr`` is a number)."""
        return self._rule if self._rule is not None else Constant(1.0)

    @property
    def generator(self) -> torch.Generator:
        """The generator of the block-pair draws."""
        return self._generator

    def _factor(self, k: int, n_blocks: int, cost: float | None,
                direction: torch.Tensor) -> float:
        """The rule's factor of the step (1 without a rule), given the step's direction
        (its norm is ``ctx.subgradient_norm``)."""
        if self._rule is None:
            return 1.0
        norm = float(torch.linalg.vector_norm(direction))
        out = self._rule(k, TorchStepContext(self.method, n_blocks, cost, norm))
        if isinstance(out, torch.Tensor) and out.numel() == 1 and not out.is_complex():
            out = float(out)                     # a scalar tensor, as ``lr`` may be
        if not (_is_number(out) and math.isfinite(out) and out > 0):
            raise ValueError(f"the step-size rule returned gamma_{k} = {out!r}; it must be a "
                             "finite number > 0")
        return float(out)

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None):
        """Move every parameter with a gradient by one step; return the closure's loss.

        Parameters
        ----------
        closure : callable, optional
            Re-evaluates the model and returns the loss (as for any torch optimizer); with
            a step-size rule its value, one number, is passed to the rule as
            ``ctx.cost`` (without one, whatever it returns is returned, per-sample losses
            included).

        Returns
        -------
        object or None
            The loss ``closure`` returned, None without a closure.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        cost = None
        if loss is not None and self._rule is not None:
            # (only a rule reads the loss: a closure returning per-sample losses after
            # backward() on their mean is fine for torch.optim.SGD, and so here without
            # a rule; a user's audit)
            try:
                cost = float(loss)
            except (TypeError, ValueError, RuntimeError):
                shape = tuple(getattr(loss, "shape", ()))
                raise ValueError(
                    f"the closure returned a loss of shape {shape}; the step-size rule "
                    f"{self._rule!r} reads it as ctx.cost, one number: return the scalar "
                    "loss (e.g. its mean)") from None
        # Every parameter's step is computed (and, where needed, checked finite) before any
        # is written: a refused step leaves every parameter and step count as it was (one
        # refused parameter of several used to leave the others moved, their counts ahead)
        pending = []
        for gi, group in enumerate(self.param_groups):
            lr = group["lr"]
            if isinstance(lr, torch.Tensor):
                lr = float(lr)
            if _is_number(lr) and _rounded_zero(lr, group):
                # a scheduler that anneals to 0 can land a rounding below it (LinearLR with
                # end_factor=0 gave -7.4e-19 from lr 0.05, a user's audit): a zero step
                lr = 0.0
            if not (_is_number(lr) and math.isfinite(lr) and lr >= 0):
                # set after construction (a hand edit of param_groups; 0 is allowed, where
                # an annealing LR scheduler ends)
                raise ValueError(f"param_groups[{gi}]['lr'] must be a finite number >= 0, "
                                 f"got {group['lr']!r}")
            for w in group["params"]:
                if w.grad is None:
                    continue
                if w.dtype not in (torch.float32, torch.float64):
                    # changed after construction (model.half()): the step would lose
                    # the manifold at that precision
                    raise TypeError(f"a parameter of param_groups[{gi}] now has dtype "
                                    f"{w.dtype}; {type(self).__name__} handles float32 "
                                    "and float64 parameters")
                if w.grad.is_sparse:
                    raise RuntimeError(f"{type(self).__name__} does not support sparse gradients")
                state = self.state[w]
                k = int(state.get("step", 0))
                move = None
                if lr > 0:        # lr = 0: no move (a retraction would still round X)
                    move = self._update(w, w.grad, float(lr), k, group, state, cost)
                pending.append((w, state, k, move))
        # Ctrl-C is held over the writes (it moved one parameter of two, or left a moved
        # parameter's count behind), then raised with the step whole
        with HeldInterrupt() as held:
            for w, state, k, move in pending:
                if move is not None:
                    new, sel, extra = move
                    if new is not None:
                        self._commit(w, new, sel)
                    state.update(extra)
                state["step"] = k + 1
        if held.interrupted:
            raise KeyboardInterrupt
        return loss

    def _update(self, w, grad, lr, k, group, state, cost):
        """One step on ``w`` (the subclass's method: `RSSM` or `RSM`), not yet written:
        ``(new, sel, state_updates)`` for `_commit` (``new`` None: no move)."""
        raise NotImplementedError(f"{type(self).__name__} must implement _update "
                                  "(use rssm.torch.RSSM or rssm.torch.RSM)")

    def _checked(self, new: torch.Tensor, unchecked: bool) -> torch.Tensor:
        """``new``; after the SVD fallback (``unchecked``) non-finite values are refused."""
        if unchecked and self._check_finite and not _OPS.finite(new):
            raise FloatingPointError(
                f"{type(self).__name__}.step produced non-finite values (a non-finite gradient "
                "or a step size that overflows); no parameter was changed"
            )
        return new

    def _commit(self, w: torch.Tensor, new: torch.Tensor, sel) -> None:
        """Write ``new`` into the columns ``sel`` of ``w`` (all for None)."""
        if sel is None:
            w.copy_(new)
        elif isinstance(sel, slice):
            w[:, sel] = new
        else:
            w.index_copy_(1, sel, new)


class RSSM(_StiefelOptimizer):
    """Randomized submanifold subgradient method (Algorithm ``alg-RSSM``) as a
    ``torch.optim.Optimizer``.

    Each `step` draws, for every parameter with a gradient, a pair {i, j} of its column
    blocks uniformly at random and moves the columns C = C_i U C_j by the submanifold step
    (Lemma ``lem-projsubmfdblk``); the other columns stay bit for bit the same.

    Parameters
    ----------
    params : iterable
        Tensors or parameter groups (dicts), as for any torch optimizer. Every tensor is
        2-D, (n, p) with n >= p, float32 or float64, with orthonormal columns
        (||W^T W - I||_max <= ``atol``; `torch.nn.init.orthogonal_` gives such a start).
    lr : float or StepSize or callable
        A constant step, or a rule ``rule(k, ctx) -> gamma_k`` from `rssm.stepsizes`
        (``ctx`` a `TorchStepContext`); then ``group["lr"]`` starts at 1 and scales the
        rule, so LR schedulers keep working.
    n_blocks : int, optional
        Number of column blocks l, 2 <= l <= p; the columns are split into contiguous
        blocks whose sizes differ by at most one. Default: min(5, p). A group may set its
        own ``n_blocks``.
    generator : torch.Generator, optional
        Source of the block-pair draws (drawn on the generator's device).
    seed : int, optional
        Seed of a fresh CPU generator (instead of ``generator``). With neither, the
        generator is seeded from ``torch.initial_seed()``, so ``torch.manual_seed`` makes
        runs reproducible, and torch's global generator is not drawn from (the model's
        later random draws are those it would have with any other optimizer; two
        optimizers built under one seed draw the same pairs unless given seeds).
    check_finite : bool
        Refuse (FloatingPointError, no parameter changed) a step with non-finite values.
        The Gram-route test of the polar factor already proves the usual step finite; an
        explicit check runs only after the SVD fallback. (On a GPU a step synchronizes
        with the host 4-6 times per parameter: `benchmarks.torch_cuda`.)
    atol : float, optional
        Tolerance of the orthonormality check at construction (default 1e-8 for float64,
        1e-4 for float32).

    Examples
    --------
    >>> import torch, rssm.torch
    >>> w = torch.nn.Parameter(torch.nn.init.orthogonal_(torch.empty(10, 6, dtype=torch.float64)))
    >>> opt = rssm.torch.RSSM([w], lr=1e-2, n_blocks=3, seed=0)
    >>> for _ in range(20):
    ...     opt.zero_grad()
    ...     loss = (w - 1.0).abs().sum()
    ...     loss.backward()
    ...     _ = opt.step()
    >>> rssm.torch.feasibility(w) < 1e-12
    True
    """

    method = "rssm"

    def __init__(self, params: Iterable, lr: Any = 1e-3, n_blocks: int | None = None, *,
                 generator: torch.Generator | None = None, seed: int | None = None,
                 check_finite: bool = True, atol: float | None = None):
        if n_blocks is not None:
            if (isinstance(n_blocks, (bool, np.bool_))
                    or not isinstance(n_blocks, numbers.Integral)):
                raise TypeError(f"n_blocks must be an int (Python or NumPy) or None, got "
                                f"{type(n_blocks).__name__}")
            n_blocks = int(n_blocks)
        self._index_cache: dict[tuple, torch.Tensor | slice] = {}
        self._pairs: dict[int, list[tuple[int, int]]] = {}
        super().__init__(params, lr, {"n_blocks": n_blocks}, generator=generator, seed=seed,
                         check_finite=check_finite, atol=atol)

    def _reset_caches(self) -> None:
        self._index_cache = {}
        self._pairs = {}

    def _check_group(self, group: dict, name: str, p: int) -> None:
        nb = group["n_blocks"]
        if isinstance(nb, np.integer):      # as the constructor takes it
            nb = group["n_blocks"] = int(nb)
        if p < 2:
            raise ValueError(
                f"{name} has p = {p} column; RSSM needs p >= 2 columns to form 2 blocks "
                "(use rssm.torch.RSM)"
            )
        if nb is not None and not (isinstance(nb, int) and 2 <= nb <= p):
            raise ValueError(f"n_blocks must satisfy 2 <= n_blocks <= p = {p} for {name}, "
                             f"got {nb!r}")

    def _partition(self, w: torch.Tensor, group: dict, state: dict) -> None:
        """Set the parameter's contiguous blocks (`Partition.uniform`) in ``state`` as
        (start, stop) bounds, so that `state_dict` holds them: at its first step, and again
        where the group's ``n_blocks`` was changed since."""
        bounds = state.get("bounds")
        p = w.shape[1]
        if bounds is not None:
            if bounds[-1][1] != p:
                raise ValueError(
                    f"{type(self).__name__}: the state of this parameter holds blocks of "
                    f"{bounds[-1][1]} columns but the parameter has p = {p} (a state dict "
                    "saved for another model?)")
            if group["n_blocks"] in (None, len(bounds)):
                return
            state.pop("pairs", None)     # pairs drawn among the old blocks
        nb = group["n_blocks"] if group["n_blocks"] is not None else min(5, p)
        part = Partition.uniform(p, nb)
        state["bounds"] = [(int(b[0]), int(b[-1]) + 1) for b in part.blocks]

    def _pair(self, n_blocks: int, state: dict) -> tuple[int, int]:
        """{i, j} ~ Uniform over the binom(l, 2) unordered pairs (Algorithm alg-RSSM, line 2),
        numbered as `rssm.blocks.pair_table`. Pair numbers are drawn from the generator 256
        at a time per parameter, which is deterministic for a given generator state."""
        buf = state.get("pairs")
        if not buf:
            gen = self._generator
            buf = torch.randint(0, n_blocks * (n_blocks - 1) // 2, (256,), generator=gen,
                                device=gen.device).tolist()
            buf.reverse()
            state["pairs"] = buf
        table = self._pairs.get(n_blocks)
        if table is None:
            table = self._pairs[n_blocks] = [(int(a), int(b)) for a, b in
                                             zip(*pair_table(n_blocks), strict=True)]
        return table[buf.pop()]

    def _selector(self, w: torch.Tensor, bounds: list, i: int, j: int):
        """The columns C = C_i U C_j: a slice when contiguous (views), else an index tensor
        kept per device on the optimizer (load_state_dict would cast one kept in state)."""
        key = (w.device, tuple(bounds[i]), tuple(bounds[j]))
        sel = self._index_cache.get(key)
        if sel is None:
            cols = Partition([range(a, b) for a, b in bounds]).columns(i, j)
            sel = cols.selector if isinstance(cols.selector, slice) else torch.as_tensor(
                cols.index, device=w.device)
            if len(self._index_cache) < 4096:
                self._index_cache[key] = sel
        return sel

    def _update(self, w, grad, lr, k, group, state, cost):
        self._partition(w, group, state)
        bounds = state["bounds"]
        i, j = self._pair(len(bounds), state)
        sel = self._selector(w, bounds, i, j)
        x = w.detach()
        g = _OPS.cols(grad.detach().to(x.dtype), sel)
        neg, _ = stiefel.block_descent_direction(x, sel, g)     # -P(G_C), eq-partialRiemsubgrad
        if not bool(torch.any(neg != 0)):
            return None, sel, {"last_pair": (i, j)}     # no direction: W stays, bit for bit
        gamma = lr * self._factor(k, len(bounds), cost, neg)
        new, unchecked = stiefel.block_candidate(x, sel, neg, gamma, _OPS)  # eq-projsubmfdblk
        return self._checked(new, unchecked), sel, {"last_pair": (i, j)}


class RSM(_StiefelOptimizer):
    """Riemannian subgradient method as a ``torch.optim.Optimizer``: each `step` moves
    every parameter by polar(W - gamma P_T(G)) (eqs. ``eq-Rsubdiff``, ``eq-polarretr``).

    Parameters as in `RSSM`, without ``n_blocks``, ``generator`` and ``seed`` (RSM draws
    nothing). The polar retraction costs O(n p^2) per step.

    Parameters
    ----------
    params : iterable
        Tensors or parameter groups (dicts), as for any torch optimizer. Every tensor is
        2-D, (n, p) with n >= p, float32 or float64, with orthonormal columns
        (||W^T W - I||_max <= ``atol``).
    lr : float or StepSize or callable, default=1e-3
        A constant step, or a rule ``rule(k, ctx) -> gamma_k`` from `rssm.stepsizes`
        (``ctx`` a `TorchStepContext`); then ``group["lr"]`` starts at 1 and scales the
        rule.
    check_finite : bool, default=True
        Refuse (FloatingPointError, no parameter changed) a step with non-finite values.
    atol : float, optional
        Tolerance of the orthonormality check at construction (default 1e-8 for float64,
        1e-4 for float32).
    """

    method = "rsm"

    def __init__(self, params: Iterable, lr: Any = 1e-3, *, check_finite: bool = True,
                 atol: float | None = None):
        super().__init__(params, lr, {}, generator=torch.Generator().manual_seed(0),
                         check_finite=check_finite, atol=atol)

    def _update(self, w, grad, lr, k, group, state, cost) -> None:
        x = w.detach()
        neg = stiefel.descent_direction(x, grad.detach().to(x.dtype))   # -P_T(G), eq-Rsubdiff
        if not bool(torch.any(neg != 0)):
            # no direction: W stays, bit for bit (the retraction of W itself rounded it
            # away from a minimizer; torch.optim.SGD leaves it too)
            return None, None, {}
        gamma = lr * self._factor(k, 1, cost, neg)
        new, unchecked = stiefel.full_candidate(x, neg, gamma, _OPS)    # eq-polarretr
        return self._checked(new, unchecked), None, {}
