"""Bridges from a cost written in PyTorch, JAX or Pymanopt to NumPy oracles
(`Problem.from_torch`, `Problem.from_jax`, `Problem.from_pymanopt`).

They live here, beside the core, so that the core never imports `rssm.interop`: the
integrations depend on the core, not the reverse (`rssm.interop.pymanopt` builds its
problems from `pymanopt_oracles`).

Both libraries are optional; they are imported only when a bridge is built, and a
missing one raises ImportError naming the extra to install.

Arrays cross the boundary without copies where the library allows it:

* PyTorch: for the subgradient ``torch.from_numpy`` shares the iterate's memory (a
  read-only array, which torch cannot wrap, is copied; torch refuses an in-place change of
  a leaf that requires grad), and ``Tensor.numpy()`` shares the gradient's memory (copied
  where autograd left it broadcast, with strides 0). The
  cost alone gets a copy (n p numbers, next to the cost's own products): without grad a
  cost that changed X in place would change the solver's iterate.
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

import sys
import warnings
from collections.abc import Callable

import numpy as np

from rssm._validation import library_stacklevel

__all__ = ["torch_oracles", "jax_oracles", "pymanopt_oracles"]


def _import(name: str):
    try:
        return __import__(name)
    except ImportError:
        raise ImportError(
            f"Problem.from_{name} needs {name}, which is not installed; "
            f'install the optional extra with pip install "rssm[{name}]"'
        ) from None


_TRACED = ("X is a traced jax array: jax.numpy functions only, no NumPy calls or float() "
           "on values derived from X")

#: The jax.errors that a NumPy call or float() on a traced X raises (others, a shape
#: mismatch among them, got the hint of `_TRACED` too, which pointed at the wrong fix; an
#: audit).
_TRACER_ERRORS = ("ConcretizationTypeError", "TracerArrayConversionError",
                  "TracerIntegerConversionError", "TracerBoolConversionError")

#: Float dtypes below float64 that a cost's closed-over data may have.
_LOW_FLOATS = ("float32", "float16", "bfloat16")


def _jax_note(jax, exc: BaseException, shape) -> str:
    """The note for an exception raised while JAX traced the cost."""
    if any(isinstance(exc, getattr(jax.errors, name, ())) for name in _TRACER_ERRORS):
        return _TRACED
    at = f" of shape {tuple(shape)}" if shape is not None else ""
    return f"X is a float64 jax array{at}, as shape= gave"


def _jax_warnings(jax, own: Callable, xj) -> None:
    """Warn, once per problem, about a cost whose value does not depend on X through JAX
    (a constant, or X under ``jax.lax.stop_gradient``: subgradient 0, so a run stops at
    once, as `torch_oracles` warns) and about float32 (or lower) arrays it closes over
    (their values carry that rounding, though the cost is computed in float64: recovery
    errors of 3e-8 where float64 data gives 7e-13; the torch bridge refuses such a mix, an
    audit found JAX silent). Read from the cost's jaxpr; nothing is said where it cannot
    be traced."""
    try:
        closed = jax.make_jaxpr(own)(xj)
    except Exception:
        return
    low = list(dict.fromkeys(
        f"{aval.dtype}{list(aval.shape)}" for aval in _jaxpr_consts(closed)
        if str(getattr(aval, "dtype", "")) in _LOW_FLOATS and getattr(aval, "shape", ())))
    if low:
        warnings.warn(
            "the cost given to Problem.from_jax closes over " + ", ".join(low[:3])
            + (" and more" if len(low) > 3 else "") + " data: its values carry that "
            "precision's rounding (1e-7 for float32) although the cost is computed in "
            "float64; make the arrays from NumPy float64, or with jnp.asarray inside "
            "jax.enable_x64() (JAX's default makes float32)", UserWarning,
            stacklevel=library_stacklevel())
    if not any(_depends(closed.jaxpr, [True] * len(closed.jaxpr.invars))):
        warnings.warn(
            "the cost given to Problem.from_jax returned a value that does not depend on X "
            "through jax operations (a constant, or X under jax.lax.stop_gradient?); its "
            "subgradient is 0, so a run stops at once", UserWarning,
            stacklevel=library_stacklevel())


#: Primitives that call one jaxpr on their operands, in order (a jitted function called in
#: the cost, `jax.jit` on the cost itself, `jax.checkpoint`): the dependence is followed
#: inside. Others with inner jaxprs count every output as depending on every operand:
#: `cond`, `scan`, `while_loop`, and `custom_jvp`/`custom_vjp`, whose rule may give a
#: gradient where the primal computation has none.
_CALLS = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr",
          "core_call": "call_jaxpr", "remat": "jaxpr", "checkpoint": "jaxpr"}


def _inner_jaxprs(value):
    """The jaxprs (closed or not) in an equation's parameter ``value``."""
    if hasattr(value, "jaxpr") and hasattr(value, "consts"):       # ClosedJaxpr
        yield value
    elif hasattr(value, "eqns") and hasattr(value, "invars"):        # Jaxpr
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _inner_jaxprs(v)


def _jaxpr_consts(jaxpr, depth: int = 0) -> list:
    """The abstract values of the constants of ``jaxpr`` and of the jaxprs inside it (the
    data a cost closes over sits in a nested jaxpr's constants when the cost, or a
    function it calls, is jitted; the review of the first check found it looked at the
    top level only)."""
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    out = [v.aval for v in getattr(inner, "constvars", ())]
    if depth > 50:
        return out
    for eqn in getattr(inner, "eqns", ()):
        for value in eqn.params.values():
            for sub in _inner_jaxprs(value):
                out += _jaxpr_consts(sub, depth + 1)
    return out


def _depends(jaxpr, given: list[bool], depth: int = 0) -> list[bool]:
    """Which outputs of ``jaxpr`` depend on its inputs flagged in ``given``, through
    operations other than ``stop_gradient`` (which cuts it, as ``detach`` does in torch)."""
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    deps = {id(v) for v, g in zip(inner.invars, given, strict=False) if g}
    for eqn in inner.eqns:
        name = str(eqn.primitive)
        if name == "stop_gradient":
            continue
        flags = [id(v) in deps for v in eqn.invars]
        if not any(flags):
            continue
        sub = eqn.params.get(_CALLS.get(name, ""), None)
        sub_inner = getattr(sub, "jaxpr", sub)
        if (sub is not None and depth < 50 and hasattr(sub_inner, "invars")
                and len(sub_inner.invars) == len(flags)
                and len(sub_inner.outvars) == len(eqn.outvars)):
            outs = _depends(sub, flags, depth + 1)
        else:
            outs = [True] * len(eqn.outvars)
        deps.update(id(v) for v, d in zip(eqn.outvars, outs, strict=True) if d)
    return [id(v) in deps for v in inner.outvars]


#: Exceptions carry notes (PEP 678) from Python 3.11 on.
_HAS_NOTES = sys.version_info >= (3, 11)


def _note(exc: BaseException, where: str, what: str) -> None:
    """Say on ``exc`` that it came from the user's cost inside ``where`` (the library's
    own message named neither: "unsupported operand type(s) for @: 'numpy.ndarray' and
    'Tensor'" for a JAX cost given to from_torch; a user's audit). The exception itself
    is kept (Python 3.11+ shows the note under it). Python 3.10 has no notes and shows
    none: there the note goes into ``__notes__`` as 3.11 keeps it, and at the end of a
    one-string message too, which 3.10 shows, where the exception's text is that string
    (not a KeyError, whose argument is the key, nor a class with a ``__str__`` of its
    own)."""
    note = f"(raised by the cost given to rssm.Problem.{where}; {what})"
    if note in getattr(exc, "__notes__", ()):
        return                 # (once: a cost may raise one stored exception many times)
    if _HAS_NOTES:
        exc.add_note(note)
        return
    try:
        exc.__notes__ = [*getattr(exc, "__notes__", ()), note]
    except (AttributeError, TypeError):
        return
    if (len(exc.args) == 1 and isinstance(exc.args[0], str)
            and type(exc).__str__ is BaseException.__str__):
        exc.args = (f"{exc.args[0]}\n{note}",)


def torch_oracles(cost: Callable) -> tuple[Callable, Callable]:
    """(value, subgradient) NumPy functions for a PyTorch ``cost(X: Tensor) -> Tensor``."""
    torch = _import("torch")

    def as_tensor(x: np.ndarray, copy: bool = False):
        x = np.asarray(x, dtype=np.float64)
        if copy or not x.flags.writeable or any(st < 0 for st in x.strides):
            x = x.copy()          # (torch cannot wrap negative strides: x[:, ::-1])
        return torch.from_numpy(x)

    checked: list[bool] = []

    def call(xt):
        try:
            if checked:
                return cost(xt)
            # the first evaluation looks for tensors of a lower precision mixed with
            # float64 ones: torch promotes them in elementwise operations without a word
            # (only a product refuses them), and the cost then carried their rounding
            # (recovery errors of 1e-8 where float64 data gives 2e-12; a user's audit)
            mode = _mixed_precision_mode(torch, xt)
            with mode:
                out = cost(xt)
        except RuntimeError as exc:
            text = str(exc)
            low = text.lower()
            if "double" in low and ("float" in low or "half" in low):
                raise TypeError(
                    "the cost given to Problem.from_torch failed on X, a torch.float64 "
                    "tensor (rssm computes in float64): make the tensors it uses float64 "
                    f"(e.g. A.double()) or cast X inside it; torch said: {text}") from exc
            _note(exc, "from_torch", _what(xt))
            raise
        except Exception as exc:
            _note(exc, "from_torch", _what(xt))
            raise
        if mode.found is not None:
            name, dtypes = mode.found
            raise TypeError(
                f"the cost given to Problem.from_torch mixes X (torch.float64) with a "
                f"tensor of {' and '.join(dtypes)} in {name}: torch promotes it without a "
                "word and the cost then carries its rounding; make the tensors it uses "
                "float64 (e.g. A.double())")
        checked.append(True)
        return out

    def value(x: np.ndarray) -> float:
        with torch.no_grad():
            out = call(as_tensor(x, copy=True))
        return _scalar(out, torch)

    warned: list[bool] = []

    def subgradient(x: np.ndarray) -> np.ndarray:
        xt = as_tensor(x).requires_grad_(True)
        with torch.enable_grad():
            out = call(xt)
            _scalar(out, torch)
            if not out.requires_grad:  # no path from X to the cost in torch's graph
                if not warned:
                    warned.append(True)
                    warnings.warn(
                        "the cost given to Problem.from_torch returned a value that does not "
                        "depend on X through torch operations (X detached, or turned into "
                        "NumPy and back?); its subgradient is taken as 0, so a run stops at "
                        "once", UserWarning, stacklevel=library_stacklevel())
                return np.zeros(xt.shape)
            # allow_unused: a cost that reads other tensors with grad but not X
            (g,) = torch.autograd.grad(out, xt, allow_unused=True)
        if g is None:
            return np.zeros(xt.shape)
        g = g.detach().numpy()
        # autograd may hand back a broadcast gradient (of X.sum(): strides (0, 0)), whose
        # entries share one cell: a caller's in-place change would write them all
        return np.ascontiguousarray(g) if 0 in g.strides else g

    return value, subgradient


def _what(xt) -> str:
    return f"X is a torch.float64 tensor of shape {tuple(xt.shape)}, as shape= gave"


#: Tensor methods that cast (their operands' dtypes differ by design).
_CASTS = frozenset({"to", "type", "type_as", "double", "float", "half", "bfloat16",
                    "_to_copy", "copy_", "new_tensor", "as_tensor", "tensor"})


def _mixed_precision_mode(torch, xt):
    """A `torch.overrides.TorchFunctionMode` that records (in ``found``) the first torch
    operation given a float64 tensor and a floating tensor of another dtype with at least
    one dimension, where the float64 one has a dimension too or derives from ``xt`` (X).

    0-d tensors of another dtype are constants (``torch.tensor(0.)`` as an accumulator or
    a bound), not data whose rounding the cost would carry (a review found all of them
    refused), and are left alone. A 0-d float64 tensor is a constant too unless it comes
    from X: torch lets an operand with a dimension decide the dtype against a 0-d one, so
    ``w * (A @ X - B).abs().sum()`` with a float32 ``w`` of shape (1,) made the whole cost
    float32 (80 times less accurate in a run; a user's audit). So the mode follows which
    tensors derive from X: by id, each forgotten when its tensor is freed (holding them
    would keep every intermediate of the first evaluation alive).
    """
    import weakref

    from torch.overrides import TorchFunctionMode

    def tensors(values):
        for v in values:
            if isinstance(v, torch.Tensor):
                yield v
            elif isinstance(v, (list, tuple)):
                yield from (u for u in v if isinstance(u, torch.Tensor))

    derived: dict[int, weakref.ref] = {}

    def mark(t) -> None:
        i = id(t)
        if i not in derived:
            derived[i] = weakref.ref(t, lambda _, i=i: derived.pop(i, None))

    def from_x(t) -> bool:
        ref = derived.get(id(t))
        return ref is not None and ref() is t

    mark(xt)

    class MixedPrecision(TorchFunctionMode):
        found: tuple[str, list[str]] | None = None

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = getattr(func, "__name__", None) or repr(func)
            ins = list(tensors((*args, *kwargs.values())))
            xdep = any(from_x(t) for t in ins)
            # casts are what the message asks for (A.to(X), A.type_as(X), or X cast to
            # A's dtype by choice)
            check = self.found is None and name not in _CASTS
            low = [t for t in ins if t.is_floating_point() and t.dim() > 0
                   and t.dtype != torch.float64] if check else []
            if low and any(t.dtype == torch.float64 and t.dim() > 0 for t in ins):
                self.found = (name, sorted({str(t.dtype) for t in low}))
                low = []
            out = func(*args, **kwargs)
            outs = list(tensors(out if isinstance(out, (list, tuple)) else (out,)))
            if low and any(t.dtype == torch.float64 and from_x(t) for t in ins):
                # a 0-d value of X beside lower-precision data: refused where the result
                # took their dtype (a comparison's bool result carries no rounding, and X
                # cast by choice is the user's; a review found both refused)
                data = {str(t.dtype) for t in low if not from_x(t)}
                if data and any(o.is_floating_point() and o.dtype != torch.float64
                                for o in outs):
                    self.found = (name, sorted(data))
            if xdep:
                for t in outs:
                    mark(t)
            return out

    return MixedPrecision()


def _scalar(out, torch) -> float:
    if not isinstance(out, torch.Tensor) or out.numel() != 1:
        raise TypeError(
            "the cost given to Problem.from_torch must return a scalar torch.Tensor, "
            f"got {type(out).__name__}"
            + (f" with shape {tuple(out.shape)}" if hasattr(out, "shape") else "")
        )
    if out.is_complex():
        raise TypeError("the cost given to Problem.from_torch must return a real scalar, "
                        f"got dtype {out.dtype}")
    return float(out.item())


def jax_oracles(cost: Callable, shape: tuple[int, int] | None = None
                ) -> tuple[Callable, Callable]:
    """(value, subgradient) NumPy functions for a JAX ``cost(X: Array) -> scalar Array``,
    evaluated at points of ``shape`` (n, p)."""
    jax = _import("jax")
    x64 = getattr(jax, "enable_x64", None)
    if x64 is None:
        from jax.experimental import enable_x64 as x64

    # JAX reads the arrays a cost closes over when it traces it, as constants, and caches
    # traces by function: traced apart (the cost at its first call, the gradient at its
    # own), data changed in between gave a cost of the old data and a gradient of the new
    # (a user's audit: Y *= 2 after a first cost), and a second problem built from the
    # same function after the change reused the first one's trace for its cost. So each
    # problem traces a function of its own, and compiles the cost and its gradient at the
    # first evaluation of either, from the same data.
    def own(X):
        return cost(X)

    value_jit = jax.jit(own)
    grad_jit = jax.jit(jax.grad(own))
    compiled: dict = {}

    def _compiled(xj, which: str):
        # compiled for one shape: a point of another is refused by name (the first call's
        # shape was fixed for good, and others got XLA's "compiled with float64[4,2] and
        # called with float64[5,2] ... enable_x64 mode?"; a review)
        if shape is not None and tuple(xj.shape) != tuple(shape):
            raise ValueError(f"x has shape {tuple(xj.shape)}, expected {tuple(shape)} (the "
                             "problem's shape, for which the cost given to "
                             "Problem.from_jax is compiled)")
        if "value" not in compiled:
            try:
                compiled["value"] = value_jit.lower(xj).compile()
            except Exception as exc:
                _note(exc, "from_jax", _jax_note(jax, exc, xj.shape))
                raise
            _jax_warnings(jax, own, xj)
            try:
                compiled["grad"] = grad_jit.lower(xj).compile()
            except Exception:       # (not differentiable: the subgradient says so)
                pass
        if which == "grad" and "grad" not in compiled:
            try:
                compiled["grad"] = grad_jit.lower(xj).compile()
            except Exception as exc:
                _note(exc, "from_jax", "raised while JAX differentiated it")
                raise
        return compiled[which]

    def value(x: np.ndarray) -> float:
        with x64(True):
            xj = jax.device_put(np.asarray(x, dtype=np.float64))
            out = _compiled(xj, "value")(xj)
            if getattr(out, "shape", None) != ():
                raise TypeError(
                    "the cost given to Problem.from_jax must return a scalar, got shape "
                    f"{getattr(out, 'shape', type(out).__name__)}"
                )
            if np.iscomplexobj(out):
                raise TypeError("the cost given to Problem.from_jax must return a real "
                                f"scalar, got dtype {out.dtype}")
            return float(out)

    def subgradient(x: np.ndarray) -> np.ndarray:
        with x64(True):
            xj = jax.device_put(np.asarray(x, dtype=np.float64))
            return np.asarray(_compiled(xj, "grad")(xj))

    return value, subgradient


def _stiefel_shape(pymanopt, manifold) -> tuple[int, int]:
    """(n, p) of a ``pymanopt.manifolds.Stiefel(n, p)`` with k = 1, or a ValueError."""
    if not isinstance(manifold, pymanopt.manifolds.Stiefel):
        raise ValueError(
            "problem.manifold must be pymanopt.manifolds.Stiefel(n, p): rssm optimizes over "
            f"the Stiefel manifold only, got {manifold}"
        )
    k = getattr(manifold, "_k", 1)
    if k != 1:
        raise ValueError(
            f"problem.manifold is a product of k = {k} Stiefel manifolds "
            "(pymanopt.manifolds.Stiefel(n, p, k=k)); rssm handles k = 1 only: run one "
            "problem per factor"
        )
    n, p = getattr(manifold, "_n", None), getattr(manifold, "_p", None)
    if n is None or p is None:  # not Pymanopt 2.2's attributes: read a point's shape
        n, p = np.shape(manifold.random_point())
    return int(n), int(p)


def _pymanopt_gradient(problem) -> Callable[[np.ndarray], np.ndarray]:
    """The Euclidean gradient of ``problem`` (or its Riemannian one), or a ValueError."""
    try:
        return problem.euclidean_gradient
    except NotImplementedError:
        pass
    if getattr(problem, "_riemannian_gradient", None) is not None:
        return problem.riemannian_gradient
    raise ValueError(
        "problem has no gradient: its cost uses Pymanopt's NumPy back end, which cannot "
        "differentiate; pass euclidean_gradient= (a function decorated like the cost) to "
        "pymanopt.Problem, or write the cost with an autodiff back end "
        "(@pymanopt.function.pytorch, .jax or .autograd)"
    )


def pymanopt_oracles(problem) -> tuple[tuple[int, int], Callable, Callable]:
    """(shape, value, subgradient) of a ``pymanopt.Problem`` over ``Stiefel(n, p)``.

    The subgradient is the problem's Euclidean gradient (autodiff's for an autodiff back
    end, else its ``euclidean_gradient`` or ``riemannian_gradient``; for the embedded
    metric P_T of the Riemannian one is P_T(G), so RSM's and RSSM's projections give the
    same direction). Raises TypeError for anything but a ``pymanopt.Problem`` and
    ValueError for another manifold, a product (k > 1) or no gradient.
    """
    pymanopt = _import("pymanopt")
    if not isinstance(problem, pymanopt.Problem):
        raise TypeError(f"problem must be a pymanopt.Problem, got {type(problem).__name__}")
    shape = _stiefel_shape(pymanopt, problem.manifold)
    grad = _pymanopt_gradient(problem)
    label = ("the pymanopt problem's riemannian_gradient" if grad == getattr(
        problem, "riemannian_gradient", None) and getattr(
        problem, "_riemannian_gradient", None) is not None
             else "the pymanopt problem's euclidean_gradient (autodiff's for an autodiff "
                  "back end)")

    def subgradient(x: np.ndarray) -> np.ndarray:
        g = np.asarray(grad(x), dtype=np.float64)
        if g.shape != shape:
            # (FunctionProblem's own check named a "subgradient" the user never wrote)
            raise ValueError(f"{label} returned an array of shape {g.shape} at a point of "
                             f"Stiefel{shape}, expected {shape}")
        return g

    return shape, problem.cost, subgradient
