"""The `Problem` protocol and the oracles the solvers call.

A problem is min f(X) over St(n, p) (eq. ``mainpb``) with f weakly convex. It gives

* ``cost(X)``: f(X);
* ``subgradient(X)``: one element of the Clarke subdifferential of f at X (n x p);
* ``partial_subgradient(X, cols)``: the partial subgradient for a column set C. By
  Proposition ``prop-structural`` the partial subdifferential is the full one restricted
  to the columns C, so the default slices a full subgradient (correct, but it costs a full
  subgradient per RSSM iteration);
* ``make_oracle(X, partition)``: a stateful `Oracle` bound to the solver's iterate. Data
  problems override it with an incremental oracle that keeps Y^T X cached and updates only
  the columns that changed, so an RSSM iteration costs O(m n |C|) and not O(m n p);
* flop counts for each oracle call;
* optionally ``error(X)`` against a known ground truth.
"""

from __future__ import annotations

import abc
import warnings
from collections.abc import Callable

import numpy as np

from rssm import stiefel
from rssm._validation import (
    as_float_matrix,
    as_int,
    as_positive_float,
    check_signature,
    integer_valued,
    is_quiet,
    real_value,
    type_name,
    user_stacklevel,
)
from rssm.blocks import Partition
from rssm.oracle import GenericOracle, Oracle
from rssm.stepsizes import as_stepsize
from rssm.threads import single_blas

__all__ = ["Problem", "Oracle", "GenericOracle", "FunctionProblem", "FullSubgradientWarning",
           "start_rng"]

#: The tolerance to which a float32 start is checked (`Problem.check_x`): an orthonormal
#: matrix rounded to float32 is off St(n, p) by about 1e-7.
FLOAT32_ATOL = stiefel.FLOAT32_ATOL


def start_rng(rng, name: str = "rng") -> np.random.Generator:
    """The generator of `Problem.initial_point`: a Generator as is, an int s as
    ``numpy.random.default_rng([s, 1])``, None as s = 0.

    Parameters
    ----------
    rng : None, int or numpy.random.Generator
        The seed s (a non-negative int; None for 0), or a generator.
    name : str
        The argument's name in error messages.

    Returns
    -------
    numpy.random.Generator
        ``rng`` itself, or ``numpy.random.default_rng([s, 1])``.

    Raises
    ------
    TypeError
        When ``rng`` is none of these (a bool included).
    ValueError
        When the seed is negative.
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        rng = 0
    # an integer-valued float (3.0) as every other seed argument takes it (it was refused
    # here only; a user's audit)
    rng = integer_valued(rng)
    if isinstance(rng, bool) or not isinstance(rng, (int, np.integer)):
        raise TypeError(
            f"{name} must be None, a non-negative int seed or a numpy.random.Generator, got "
            f"{type(rng).__name__}"
        )
    if rng < 0:
        raise ValueError(f"{name} must be a non-negative int seed, got {rng}")
    return np.random.default_rng([int(rng), 1])


def _shape_pair(shape, label: str, maximum_is: str | None = None) -> tuple[int, int]:
    """(n, p) from ``shape``, a pair (tuple, list, or a 1-D array such as ``x.shape`` of an
    array) of integers with 1 <= p <= n; errors name it ``label`` (`checked_shape` and
    `Problem.from_functions` share it)."""
    if isinstance(shape, np.ndarray) and shape.ndim == 1:
        shape = tuple(shape.tolist())   # (x.shape of an array, or np.array([n, p]))
    if not isinstance(shape, (tuple, list)) or len(shape) != 2:
        raise TypeError(f"{label} must be a pair (n, p), got {shape!r}")
    n = as_int(shape[0], f"{label}[0] (n)", minimum=1)
    p = as_int(shape[1], f"{label}[1] (p)", minimum=1, maximum=n, maximum_is=maximum_is)
    return n, p


def checked_shape(problem) -> tuple[int, int]:
    """``problem.shape`` as (n, p), checked: a pair of integers 1 <= p <= n (a subclass of
    `Problem` sets it; one without it, or with (10,), "10x4" or (4, 10), met a bare
    AttributeError or an unpacking error inside the solver; a user's audit). A pair of
    integer-valued floats or a NumPy array is stored back as Python ints where it can be.

    Parameters
    ----------
    problem : Problem
        The problem.

    Returns
    -------
    tuple of int
        (n, p).

    Raises
    ------
    TypeError, ValueError
        Naming the subclass and what ``shape`` must be.
    """
    name = type(problem).__name__
    shape = getattr(problem, "shape", None)
    if shape is None:
        raise TypeError(f"{name} sets no shape: a subclass of rssm.Problem must set "
                        "self.shape = (n, p), the size of X on St(n, p)")
    n, p = _shape_pair(shape, f"{name}.shape", maximum_is=f"{name}.shape[0] (n)")
    if not (type(shape) is tuple and all(type(v) is int for v in shape)):
        try:
            problem.shape = (n, p)
        except Exception:     # (a read-only property, a frozen class: used as given)
            pass
    return n, p


class NoGroundTruth(ValueError):
    """`Problem.error` of a problem without a ground truth (a run records NaN for it)."""


class Problem(abc.ABC):
    """A nonsmooth, weakly convex objective over St(n, p).

    Subclasses must set ``shape = (n, p)`` and implement `cost` and `subgradient`.
    Everything else has a correct default.
    """

    #: (n, p): the problem lives on St(n, p).
    shape: tuple[int, int]
    #: Short name used in results and plots.
    name: str = "problem"

    @abc.abstractmethod
    def cost(self, x: np.ndarray) -> float:
        """f(X).

        Parameters
        ----------
        x : numpy.ndarray, shape (n, p)
            The point X of St(n, p) at which to evaluate f.

        Returns
        -------
        float
            The cost f(X).
        """

    @abc.abstractmethod
    def subgradient(self, x: np.ndarray) -> np.ndarray:
        """An element of the Clarke subdifferential of f at X, shape (n, p).

        Parameters
        ----------
        x : numpy.ndarray, shape (n, p)
            The point X of St(n, p).

        Returns
        -------
        numpy.ndarray, shape (n, p)
            A Euclidean (Clarke) subgradient G of f at X.
        """

    def partial_subgradient(self, x: np.ndarray, cols: slice | np.ndarray) -> np.ndarray:
        """Partial subgradient for the columns ``cols`` (Prop. ``prop-structural``).

        The default slices a full subgradient: correct for every f, at full cost.

        Parameters
        ----------
        x : numpy.ndarray, shape (n, p)
            The point X of St(n, p).
        cols : slice or numpy.ndarray of int
            The columns C of X to differentiate in: a slice when C is one contiguous run,
            else a sorted integer array; ``X[:, cols]`` are the columns concerned.

        Returns
        -------
        numpy.ndarray, shape (n, c)
            The columns ``cols`` of a subgradient of f at X, c the number of columns in
            ``cols`` (by Prop. ``prop-structural``, an element of the partial
            subdifferential for C).
        """
        # (as float64: a subclass's subgradient may return a list, float32 or a tensor,
        # which RSM took and RSSM's slice refused with "list indices must be integers";
        # a user's audit)
        return np.ascontiguousarray(np.asarray(self.subgradient(x), dtype=np.float64)[:, cols])

    def riemannian_subgradient(self, x: np.ndarray) -> np.ndarray:
        """P_T(subgradient(X)), the Riemannian subgradient (eq. ``eq-Rsubdiff``).

        Parameters
        ----------
        x : numpy.ndarray, shape (n, p)
            The point X of St(n, p).

        Returns
        -------
        numpy.ndarray, shape (n, p)
            The projection of `subgradient` onto the tangent space of St(n, p) at X, in
            float64.
        """
        # (as float64: a subclass's subgradient may return a list, float32 or a tensor)
        return stiefel._tangent_projection(np.asarray(x, dtype=np.float64),
                                           np.asarray(self.subgradient(x), dtype=np.float64))

    def make_oracle(self, x: np.ndarray, partition: Partition | None) -> Oracle:
        """A stateful oracle bound to the solver's iterate ``x``.

        Parameters
        ----------
        x : numpy.ndarray, shape (n, p)
            The solver's working iterate; the solver updates it in place and tells the
            oracle which columns changed (`Oracle.update`).
        partition : Partition or None
            The column blocks of an RSSM run, or None for RSM (every column at once).

        Returns
        -------
        Oracle
            The oracle the solver calls (the default, `GenericOracle`, calls this
            problem's `cost`, `subgradient` and `partial_subgradient`; data problems
            return an incremental one).
        """
        if (partition is not None
                and type(self).partial_subgradient is Problem.partial_subgradient
                and not getattr(self, "_warned_full", False)
                and not is_quiet(FullSubgradientWarning)):
            # (as for from_functions: a direct subclass without a partial subgradient ran
            # RSSM on full subgradients without a word; a user's audit)
            try:
                self._warned_full = True
            except Exception:     # (an immutable subclass, a frozen dataclass: warned each
                pass              # run rather than failing it; a review)
            warnings.warn(
                f"{type(self).__name__} has no partial subgradient, so each RSSM iteration "
                "computes a full subgradient and keeps |C| of its p columns; define "
                "partial_subgradient(x, cols) for O(|C|) iterations",
                FullSubgradientWarning, stacklevel=user_stacklevel())
        return GenericOracle(self, x, partition)

    def _exact_fit_level(self, f: float) -> float | None:
        """For a cost f >= 0 whose least value 0 an exact fit reaches: the level below
        which a computed f is 0 to rounding, when ``f`` (the cost at a run's start) is at
        or below it, so that the start is a global minimizer and the run stops there
        ``converged``; None (the default) otherwise."""
        return None

    # -- ground truth ---------------------------------------------------------------------
    @property
    def has_error(self) -> bool:
        """True when `error` is available (a ground truth is known): by default, when a
        subclass defines `error` (one that defined it without this property had it
        ignored: no error column, ``target_error`` refused). An `error` that defers to
        this class's where an instance has no truth (`NoGroundTruth`) reads NaN in a run."""
        return type(self).error is not Problem.error

    def error(self, x: np.ndarray) -> float:
        """Distance to the ground truth; only when `has_error` is True.

        Parameters
        ----------
        x : numpy.ndarray, shape (n, p)
            The point X of St(n, p) to measure.

        Returns
        -------
        float
            The distance of X to the known solution (its metric is the problem's own).

        Raises
        ------
        NoGroundTruth
            When the problem has no ground truth (the default).
        """
        raise NoGroundTruth(f"{type(self).__name__} has no ground truth, so error(X) is "
                            "undefined")

    def _error_of_iterate(self, x: np.ndarray) -> float:
        """`error` at an iterate of a run, which the trace records (float64, C-ordered, on
        St(n, p) to 1e-12, never changed by the caller). The default calls `error` on a
        copy (a user's may change its X); the built-ins whose `error` is their own skip
        the checks of their metric's inputs, which cost 50 of the 60 us of a row on a
        small DPCP, and give the same bits."""
        return self.error(x.copy())

    def _fast_error(self, cls: type, truth: str) -> bool:
        """Whether `_error_of_iterate` may skip `error` for ``cls``'s own: ``error`` is that
        class's (not a subclass's, nor one set on the instance or patched by a mock) and the
        ground truth ``truth`` is still the array the constructor checked (not one
        assigned since, which `error` would check and convert)."""
        return (getattr(self.error, "__func__", None) is cls.error
                and getattr(self, truth, None) is not None
                and getattr(self, truth) is getattr(self, "_checked_truth", None))

    def _error_input(self, x) -> np.ndarray:
        """``x`` for `error`: a finite float64 matrix of this problem's shape (before, a
        matrix with fewer columns read as error 0, or broadcast)."""
        return as_float_matrix(x, "x", shape=self.shape)

    # -- starts and defaults --------------------------------------------------------------
    @single_blas()
    def initial_point(self, rng: int | np.random.Generator | None = None) -> np.ndarray:
        """A starting point; the default is Haar random on St(n, p).

        Parameters
        ----------
        rng : None, int or numpy.random.Generator
            A Generator is used as is. An int s stands for the stream
            ``numpy.random.default_rng([s, 1])``, the start that ``rssm solve --seed s`` and
            ``rssm reproduce`` use (and a stream apart from the data of ``synthetic(seed=s)``).
            None is the seeded default, s = 0: the same start every call.

        Returns
        -------
        numpy.ndarray
            An n x p matrix with orthonormal columns (a point of St(n, p)).
        """
        return stiefel.random_point(*self.shape, start_rng(rng))

    def default_stepsize(self):
        """The rule `rssm.minimize` uses when the caller gives none; None (the default)
        means ``"auto"`` (`rssm.stepsizes.Auto`). Custom problems return the ``stepsize=``
        they were built with."""
        return None

    def default_max_epochs(self) -> int | None:
        """The iteration budget, in epochs, of `rssm.minimize` when the caller sets no
        limit (no ``max_iter`` or ``max_time``, and no limit inside ``stop``: a
        `MaxIterations`, a `MaxTime` or a criterion whose ``limits_run`` is True); None
        (the default) means
        `rssm.solvers.options.DEFAULT_MAX_EPOCHS`. A built-in whose default rule decays
        slowly returns the epochs that rule needs to settle."""
        return None

    def reference_stepsize(self):
        """A hand-set rule of this problem kept for comparison (the paper's schedule for
        DPCP and ODL, a geometric rule for the other built-ins), or None. Not used unless
        asked for: ``rssm solve --stepsize paper|geometric`` fills the parameters not
        given from it."""
        return None

    # -- flop model -----------------------------------------------------------------------
    def subgradient_flops(self) -> float:
        """Flops of one `subgradient` call; 0 when unknown (then flop counts cover only
        the geometry)."""
        return 0.0

    def partial_subgradient_flops(self, c: int) -> float:
        """Flops of one `partial_subgradient` call on c columns (default: a full one).

        Parameters
        ----------
        c : int
            The number of columns of the call.

        Returns
        -------
        float
            The flop count; 0 when unknown.
        """
        return self.subgradient_flops()

    def check_x(self, x, name: str = "x0", atol: float = 1e-8) -> np.ndarray:
        """Validate a point: 2-D real finite array of this problem's shape, on the manifold.

        A float32 start is checked to `FLOAT32_ATOL` (1e-5) and a float16 one to 2e-2
        instead of ``atol``, which a rounded orthonormal matrix cannot meet (its rounding
        is about 1e-7 and 1e-3). Any start off St(n, p) by more than
        `rssm.stiefel.PROJECT_ABOVE` (1e-13) is then projected onto it in float64
        (`rssm.stiefel.polar`), so the run starts on the manifold to rounding and returns
        no point off it (a start accepted at 8e-9 had a lower cost than every feasible
        point, and came back as the best one).

        Parameters
        ----------
        x : array_like, shape (n, p)
            The point to check.
        name : str
            The argument's name in error messages.
        atol : float
            Tolerance of the orthonormality check of a float64 start.

        Returns
        -------
        numpy.ndarray, shape (n, p)
            A float64 copy of ``x`` on St(n, p): its values, or their polar factor where
            ``x`` is off the manifold by more than `rssm.stiefel.PROJECT_ABOVE`.

        Raises
        ------
        TypeError, ValueError
            When ``x`` is not a real finite matrix of this problem's shape, or is off
            St(n, p) by more than the tolerance.
        """
        return stiefel.checked_point(x, name, self.shape, atol)

    def __repr__(self) -> str:
        shape = getattr(self, "shape", None)
        try:
            n, p = shape
        except (TypeError, ValueError):         # (a subclass that set none, or a bad one)
            return f"{type(self).__name__}(shape={shape!r})"
        return f"{type(self).__name__}(n={n}, p={p})"

    # -- bring your own objective -------------------------------------------------------
    @classmethod
    def from_functions(
        cls,
        cost: Callable[[np.ndarray], float],
        subgradient: Callable[[np.ndarray], np.ndarray],
        partial_subgradient: Callable[[np.ndarray, slice | np.ndarray], np.ndarray] | None = None,
        *,
        shape: tuple[int, int],
        name: str = "custom",
        stepsize=None,
        error: Callable[[np.ndarray], float] | None = None,
        subgradient_flops: float = 0.0,
    ) -> FunctionProblem:
        """A problem from plain NumPy callables.

        Parameters
        ----------
        cost : callable
            ``cost(X) -> float``, f(X) for X of shape (n, p).
        subgradient : callable
            ``subgradient(X) -> ndarray (n, p)``, an element of the Clarke subdifferential.
        partial_subgradient : callable, optional
            ``partial_subgradient(X, cols) -> ndarray (n, |C|)``, the subgradient's columns
            ``cols`` (a slice or a sorted integer array; index with ``X[:, cols]``). Without
            it the full subgradient is sliced, and RSSM warns once
            (`FullSubgradientWarning`) that each iteration then costs a full subgradient.
        shape : tuple of int
            (n, p): the problem lives on St(n, p).
        name : str
            Label in results.
        stepsize : StepSize, callable or float, optional
            Returned by `default_stepsize`, the rule `rssm.minimize` uses when given none.
            Without it the default is ``"auto"`` (`rssm.stepsizes.Auto`, which needs no
            scale of f).
        error : callable, optional
            ``error(X) -> float``, a distance to a known solution (enables ``target_error``).
        subgradient_flops : float
            Flops of one ``subgradient`` call, for the flop counts (0: unknown).

        Returns
        -------
        FunctionProblem
            The problem, which calls the given functions.

        Examples
        --------
        >>> import numpy as np, rssm
        >>> y = np.random.default_rng(0).standard_normal((8, 100))
        >>> prob = rssm.Problem.from_functions(
        ...     lambda X: np.abs(y.T @ X).sum(), lambda X: y @ np.sign(y.T @ X),
        ...     lambda X, c: y @ np.sign(y.T @ X[:, c]), shape=(8, 4), stepsize=1e-3)
        >>> res = rssm.minimize(prob, options={"n_blocks": 2}, max_iter=100, seed=0)
        >>> bool(res.fun < res.trace["cost"][0])
        True
        """
        return FunctionProblem(
            cost, subgradient, partial_subgradient, shape=shape, name=name, stepsize=stepsize,
            error=error, subgradient_flops=subgradient_flops,
        )

    @classmethod
    def from_torch(
        cls,
        cost: Callable,
        *,
        shape: tuple[int, int],
        name: str = "torch",
        stepsize=None,
        error: Callable[[np.ndarray], float] | None = None,
    ) -> FunctionProblem:
        """A problem from a PyTorch cost ``cost(X: torch.Tensor) -> scalar tensor``; the
        subgradient is the one autograd returns (float64, CPU).

        Needs the optional extra ``rssm[torch]``. The iterate is shared with torch through
        ``torch.from_numpy`` (no copy). Autograd's result is a Clarke subgradient for
        sums of l1/l2 norms and max of smooth pieces, but not for every formula of the
        same function (see `rssm._autodiff` and docs/custom.md). Other parameters as in
        `from_functions`; RSSM slices a full subgradient (`FullSubgradientWarning`).

        Parameters
        ----------
        cost : callable
            ``cost(X) -> scalar tensor`` for a ``torch.Tensor`` X of shape (n, p).
        shape : tuple of int
            (n, p): the problem lives on St(n, p).
        name : str
            Label in results.
        stepsize : StepSize, callable or float, optional
            The problem's default rule, as in `from_functions`.
        error : callable, optional
            ``error(X) -> float``, a distance to a known solution (enables ``target_error``).

        Returns
        -------
        FunctionProblem
            The problem, whose subgradient is the one autograd returns.

        Examples
        --------
        >>> import rssm
        >>> prob = rssm.Problem.from_torch(lambda X: X.abs().sum(), shape=(5, 2))  # doctest: +SKIP
        """
        from rssm._autodiff import torch_oracles

        _check_cost(cost, "Problem.from_torch")
        value, grad = torch_oracles(cost)
        return FunctionProblem(value, grad, None, shape=shape, name=name, stepsize=stepsize,
                               error=error)

    @classmethod
    def from_jax(
        cls,
        cost: Callable,
        *,
        shape: tuple[int, int],
        name: str = "jax",
        stepsize=None,
        error: Callable[[np.ndarray], float] | None = None,
    ) -> FunctionProblem:
        """A problem from a JAX cost ``cost(X: jax.Array) -> scalar``; the subgradient is
        ``jax.grad(cost)`` (both jitted, evaluated in float64 on the CPU).

        Needs the optional extra ``rssm[jax]``. The iterate is handed over with
        ``jax.device_put``, which aliases 64-byte aligned buffers and copies others; the
        gradient comes back without a copy. Same caveats and parameters as `from_torch`.
        The arrays ``cost`` closes over are read once, as constants, when the first
        evaluation traces the cost and its gradient together: change them afterwards and
        neither changes (build a new problem for new data).

        Parameters
        ----------
        cost : callable
            ``cost(X) -> scalar`` for a ``jax.Array`` X of shape (n, p), traceable by JAX.
        shape : tuple of int
            (n, p): the problem lives on St(n, p).
        name : str
            Label in results.
        stepsize : StepSize, callable or float, optional
            The problem's default rule, as in `from_functions`.
        error : callable, optional
            ``error(X) -> float``, a distance to a known solution (enables ``target_error``).

        Returns
        -------
        FunctionProblem
            The problem, whose subgradient is the one ``jax.grad`` returns.

        Examples
        --------
        >>> import rssm
        >>> prob = rssm.Problem.from_jax(lambda X: abs(X).sum(), shape=(5, 2))  # doctest: +SKIP
        """
        from rssm._autodiff import jax_oracles

        _check_cost(cost, "Problem.from_jax")
        value, grad = jax_oracles(cost, shape)
        return FunctionProblem(value, grad, None, shape=shape, name=name, stepsize=stepsize,
                               error=error)

    @classmethod
    def from_pymanopt(
        cls,
        problem,
        *,
        name: str = "pymanopt",
        stepsize=None,
        error: Callable[[np.ndarray], float] | None = None,
    ) -> FunctionProblem:
        """A problem from a ``pymanopt.Problem`` over ``pymanopt.manifolds.Stiefel(n, p)``:
        its cost, and its Euclidean gradient from any of Pymanopt's back ends (autodiff, or
        an explicit ``euclidean_gradient``/``riemannian_gradient``).

        Needs the optional extra ``rssm[pymanopt]``. Other manifolds, products
        (``Stiefel(n, p, k=k)`` with k > 1) and a NumPy-back-end cost without a gradient
        raise ValueError. Other parameters as in `from_functions`; RSSM slices a full
        gradient (`FullSubgradientWarning`). See `rssm.interop.pymanopt`, which also has
        Pymanopt-style optimizers.

        Parameters
        ----------
        problem : pymanopt.Problem
            A problem over ``pymanopt.manifolds.Stiefel(n, p)``; its manifold gives the
            shape (n, p).
        name : str
            Label in results.
        stepsize : StepSize, callable or float, optional
            The problem's default rule, as in `from_functions`.
        error : callable, optional
            ``error(X) -> float``, a distance to a known solution (enables ``target_error``).

        Returns
        -------
        FunctionProblem
            The problem, with Pymanopt's cost and Euclidean gradient as its cost and
            subgradient.

        Examples
        --------
        >>> import rssm
        >>> prob = rssm.Problem.from_pymanopt(pymanopt_problem)  # doctest: +SKIP
        """
        from rssm._autodiff import pymanopt_oracles

        shape, value, grad = pymanopt_oracles(problem)
        return FunctionProblem(value, grad, None, shape=shape, name=name, stepsize=stepsize,
                               error=error)


class FullSubgradientWarning(UserWarning):
    """RSSM runs on a problem without a partial oracle, so every iteration evaluates a full
    subgradient and keeps only the columns of the chosen blocks."""


def _check_cost(cost, where: str) -> None:
    """Refuse a cost for ``where`` (the autodiff constructors) that rssm cannot call as
    cost(X), before the run (it failed inside `rssm.minimize` with "'int' object is not
    callable")."""
    if not callable(cost) or isinstance(cost, type):
        raise TypeError(f"the cost given to {where} must be a function of X, called as "
                        f"cost(X), got {type_name(cost)}")
    check_signature(cost, 1, "cost", "cost(X)")


class FunctionProblem(Problem):
    """A `Problem` built from callables; see `Problem.from_functions`.

    Parameters
    ----------
    cost : callable
        ``cost(X) -> float``, f(X) for X of shape (n, p).
    subgradient : callable
        ``subgradient(X) -> ndarray (n, p)``, an element of the Clarke subdifferential.
    partial_subgradient : callable, optional
        ``partial_subgradient(X, cols) -> ndarray (n, c)``: the subgradient's columns
        ``cols`` (a slice or a sorted integer array; index with ``X[:, cols]``), c the
        number of columns in ``cols``. None (the default): the full subgradient is sliced,
        and RSSM warns once (`FullSubgradientWarning`).
    shape : tuple of int
        (n, p), 1 <= p <= n: the problem lives on St(n, p).
    name : str
        Label in results.
    stepsize : StepSize, callable or float, optional
        Returned by `default_stepsize` (any spec `rssm.stepsizes.as_stepsize` accepts);
        None: ``"auto"``.
    error : callable, optional
        ``error(X) -> float``, a distance to a known solution (enables ``target_error``).
    subgradient_flops : float
        Flops of one ``subgradient`` call, for the flop counts (0: unknown).

    Raises
    ------
    TypeError, ValueError
        When a function is not callable or does not take the arguments it is called
        with, or ``shape``, ``name`` or ``subgradient_flops`` is invalid.
    """

    def __init__(self, cost, subgradient, partial_subgradient=None, *, shape, name="custom",
                 stepsize=None, error=None, subgradient_flops: float = 0.0):
        for arg, fn in (("cost", cost), ("subgradient", subgradient)):
            if not callable(fn):
                raise TypeError(f"{arg} must be callable, got {type(fn).__name__}")
        if partial_subgradient is not None and not callable(partial_subgradient):
            raise TypeError(
                "partial_subgradient must be callable or None, got "
                f"{type(partial_subgradient).__name__}"
            )
        if error is not None and not callable(error):
            raise TypeError(f"error must be callable or None, got {type(error).__name__}")
        for arg, fn, call in (("cost", cost, "cost(x)"), ("subgradient", subgradient,
                                                          "subgradient(x)"),
                              ("partial_subgradient", partial_subgradient,
                               "partial_subgradient(x, cols)"), ("error", error, "error(x)")):
            if fn is not None:
                check_signature(fn, 2 if arg == "partial_subgradient" else 1, arg, call)
        n, p = _shape_pair(shape, "shape")
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, got {type(name).__name__}")
        self.shape = (n, p)
        self.name = name
        self._cost, self._grad, self._error = cost, subgradient, error
        self._partial = partial_subgradient
        self._stepsize = None if stepsize is None else as_stepsize(stepsize)
        self._flops = as_positive_float(subgradient_flops, "subgradient_flops", allow_zero=True)
        #: The one-time `FullSubgradientWarning` was given (RSSM without a partial oracle).
        self.warned = False

    @property
    def has_partial(self) -> bool:
        """True when a partial-subgradient callable was given."""
        return self._partial is not None

    def cost(self, x) -> float:
        return real_value(self._cost(x), "cost")

    def _check(self, g, what: str, cols: int) -> np.ndarray:
        if callable(getattr(g, "detach", None)) and callable(getattr(g, "cpu", None)):
            # a torch tensor that still requires grad, or lives on a GPU: its values (torch's
            # own refusal did not name the callable)
            g = g.detach().cpu()
        if g is None:
            raise TypeError(f"{what} returned None, not an array (a missing return?)")
        if callable(getattr(g, "toarray", None)) and hasattr(g, "nnz"):
            raise TypeError(f"{what} returned a sparse matrix ({type(g).__name__}); return "
                            "a dense NumPy array (e.g. its .toarray())")
        g = np.asarray(g)
        if g.dtype.kind not in "iuf":
            raise TypeError(f"{what} must return real numbers, got an array of dtype "
                            f"{g.dtype}" + (" (a complex subgradient: f is a real function "
                                            "of real X)" if g.dtype.kind == "c" else "")
                            + (" (a mask, not a subgradient: a comparison such as "
                               "np.sign(...) > 0 gives booleans)" if g.dtype.kind == "b"
                               else ""))
        g = np.asarray(g, dtype=np.float64)
        want = (self.shape[0], cols)
        if g.shape != want:
            raise ValueError(f"{what} returned an array of shape {g.shape}, expected {want}")
        return g

    def subgradient(self, x) -> np.ndarray:
        return self._check(self._grad(x), "subgradient", self.shape[1])

    def partial_subgradient(self, x, cols) -> np.ndarray:
        if self._partial is None:
            return super().partial_subgradient(x, cols)
        c = len(range(*cols.indices(self.shape[1]))) if isinstance(cols, slice) else len(cols)
        return self._check(self._partial(x, cols), "partial_subgradient", c)

    def make_oracle(self, x, partition) -> Oracle:
        if (partition is not None and self._partial is None and not self.warned
                and not is_quiet(FullSubgradientWarning)):
            self.warned = True
            warnings.warn(
                f"{self.name!r} has no partial subgradient, so each RSSM iteration computes a "
                "full subgradient and keeps |C| of its p columns; pass partial_subgradient= to "
                "Problem.from_functions (or build a rssm.problems.CompositeProblem) for "
                "O(|C|) iterations",
                FullSubgradientWarning,
                stacklevel=user_stacklevel(),
            )
        return GenericOracle(self, x, partition)

    @property
    def has_error(self) -> bool:
        return self._error is not None

    def error(self, x) -> float:
        if self._error is None:
            return super().error(x)
        return real_value(self._error(x), "error")

    def default_stepsize(self):
        return self._stepsize

    def subgradient_flops(self) -> float:
        return self._flops

    def partial_subgradient_flops(self, c: int) -> float:
        return self._flops * (c / self.shape[1] if self._partial is not None else 1.0)

    def __repr__(self) -> str:
        n, p = self.shape
        return f"FunctionProblem(name={self.name!r}, n={n}, p={p}, partial={self.has_partial})"


