"""What the scikit-learn estimators share: the one call of `rssm.minimize`, the record of
a run, input checks, and reading an array a chunk of samples at a time.

Arrays come in scikit-learn's layout, one sample per row (n_samples x n_features).
In-memory arrays go through scikit-learn's ``validate_data`` (``check_array``), which sets
``n_features_in_`` and ``feature_names_in_``. Out-of-core arrays (`rssm.data.is_out_of_core`:
a `numpy.memmap` such as ``np.load(path, mmap_mode="r")``, an h5py or Zarr dataset, a Dask
array) are never read whole: their shape and dtype are checked here, their entries chunk by
chunk, and the solver streams them through `rssm.data.samples`.
"""

from __future__ import annotations

import copy
import numbers
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning

import rssm
from rssm._validation import (
    DATA_SCALE,
    InvalidType,
    InvalidValue,
    check_float64_range,
    library_stacklevel,
    max_abs,
    refuse_masked,
)
from rssm.data import ChunkedData, is_out_of_core
from rssm.solvers.api import one_block

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _sk_validate_data
except ImportError:  # pragma: no cover - scikit-learn 1.3 to 1.5
    _sk_validate_data = None

#: Bytes of float64 data per chunk when an estimator reads an array itself.
CHUNK_BYTES = 32 * 2**20

#: Solver settings every estimator exposes; None means rssm's default (not forwarded).
SOLVER_PARAMS = ("method", "n_blocks", "stepsize", "max_iter", "tol")


class InvalidParameterError(ValueError, TypeError):
    """A wrong estimator parameter: a ValueError (docs/estimators.md, "Errors") and a
    TypeError for a value of the wrong type, as scikit-learn's own parameter errors are.
    The message names the estimator and the parameter."""


def _solve(problem: rssm.Problem, x0: np.ndarray | None, params: dict[str, Any]) -> rssm.Result:
    """The estimators' only call of `rssm.minimize`.

    ``params`` holds the settings the user set (keys of `SOLVER_PARAMS` and ``seed``); the
    others are left to rssm's defaults. ``n_blocks`` goes into ``options`` and ``tol`` is
    the convergence test's (`rssm.solvers.certificate`). With one column (p = 1) RSM is
    used whatever ``method`` and ``n_blocks`` say: RSSM needs two blocks (on St(n, 1) RSM
    is what one block would do), and the column count can come from the data
    (``RobustSubspace(n_components="auto")``).
    """
    kw = dict(params)
    if problem.shape[1] < 2:
        # St(n, 1) has one block: RSSM's pairs do not exist, and RSM is its one-block
        # step; a subspace dimension chosen from the data ("auto") can land here.
        kw["method"] = "rsm"
        kw.pop("n_blocks", None)
    if "n_blocks" in kw:
        kw["options"] = {"n_blocks": kw.pop("n_blocks")}
    return rssm.minimize(problem, x0, **kw)


def as_seed(random_state: Any) -> int | np.random.Generator:
    """scikit-learn's ``random_state`` as an rssm seed: ints as they are, a
    `numpy.random.Generator` as it is, a `numpy.random.RandomState` as one int drawn from
    it, and None as one int drawn from NumPy's global `RandomState` (scikit-learn's
    convention: fits with None differ, and ``np.random.seed`` makes them repeat)."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None:
        random_state = np.random.mtrand._rand
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(np.iinfo(np.int32).max))
    if isinstance(random_state, (numbers.Integral, np.integer)) and not isinstance(
            random_state, (bool, np.bool_)) and random_state >= 0:
        return int(random_state)
    raise ValueError(
        "random_state must be None, a non-negative int, a numpy.random.RandomState or a "
        f"numpy.random.Generator, got {random_state!r}")


class SolverMixin:
    """Runs the solver with the estimator's settings and records the run.

    Attributes set by `_run`: ``result_`` (the `rssm.Result`), ``n_iter_``,
    ``stop_reason_`` (the convergence word, `rssm.StopReason` value such as
    ``"max_iter"``) and ``converged_`` (``result_.success``).
    """

    def _solver_params(self, random_start: bool = False,
                       p: int | None = None) -> dict[str, Any]:
        """The settings the user set, and the seed when the run draws something: a
        random start, or RSSM's block pairs (``method="rssm"``, or blocks without a
        method, on two columns or more). ``random_state=None`` then takes one int from
        NumPy's global state; a run that draws nothing leaves that state alone."""
        params = {k: getattr(self, k) for k in SOLVER_PARAMS if getattr(self, k) is not None}
        if "stepsize" in params and isinstance(params["stepsize"], rssm.stepsizes.StepSize):
            # fit must not change a parameter (scikit-learn's rule): a rule keeps its state
            # on itself, so two estimators given one rule and fitted in two threads mixed
            # their states (components 1e-2 from sequential fits)
            params["stepsize"] = copy.deepcopy(params["stepsize"])
        method = params.get("method")
        if method is not None and (not isinstance(method, str)
                                   or method.lower() not in ("rsm", "rssm")):
            # checked here: a one-column fit takes RSM whatever method says, and a bad one
            # was accepted there without a word
            raise InvalidParameterError(f"{type(self).__name__}: method must be None, 'rsm' "
                                        f"or 'rssm', got {method!r}")
        # (method in any case: "RSSM" ran RSSM with seed 0 whatever random_state said)
        # (one block without a method is RSM, which draws nothing: a user's review found
        # n_blocks=1 taking an int from NumPy's global state)
        rssm_run = ((method is not None and method.lower() == "rssm")
                    or (method is None and "n_blocks" in params
                        and not one_block(params["n_blocks"]))) and (p is None or p >= 2)
        if random_start or rssm_run or self.random_state is not None:
            try:
                params["seed"] = as_seed(self.random_state)
            except ValueError as exc:
                raise InvalidParameterError(f"{type(self).__name__}: {exc}") from None
        return params

    def _columns_meaning(self, p: int) -> str:
        """What the p columns of the run's iterate are, in the estimator's parameters
        (for messages)."""
        if getattr(self, "n_components", p) is None:
            return f"number of components ({p}, one per feature with n_components=None)"
        return f"number of components (n_components = {p})"

    def _run(self, problem: rssm.Problem, x0: np.ndarray | None = None,
             random_start: bool = False) -> rssm.Result:
        try:
            res = _solve(problem, x0, self._solver_params(random_start, problem.shape[1]))
        except (InvalidValue, InvalidType) as exc:
            if exc.argument not in SOLVER_PARAMS + ("options",):
                raise
            text = str(exc).replace("options: ", "")
            p = problem.shape[1]
            if "<= p =" in text:
                # in the estimator's words (an audit: "2 <= n_blocks <= p = 5" refused 0
                # where 1 runs RSM, and named a p the user never chose)
                method = str(getattr(self, "method", None) or "").lower()
                low = 2 if method == "rssm" else 1
                text = (f"n_blocks must be an integer from {low} to {p}, the "
                        f"{self._columns_meaning(p)}, got {self.n_blocks!r}"
                        + (" for method='rssm'" if low == 2 else
                           " (method='rsm' does not use it, and it is checked so that one "
                           "n_blocks serves both methods)" if method == "rsm" else
                           "; 1 runs RSM"))
            elif "is relative (the recent iterates" in text:
                # (an audit: the solver's words, X for the iterate where X is the data)
                text = (f"tol must be in [0, 1), got {self.tol!r}: the run stops when its "
                        "recent iterates lie within tol times the size of the solution's "
                        "basis of each other, which at 1 or more holds from the start; "
                        "the default is 1e-10, 0 turns the test off")
            raise InvalidParameterError(f"{type(self).__name__}: {text}") from None
        self._interrupted_run = res.stop_reason.value == "interrupted"   # raised once fitted
        hold = getattr(self, "_hold_after_run", None)
        if self._interrupted_run and hold is not None:
            # the run so far is the fit: a further Ctrl-C while its attributes are set is
            # held (`interruptible_fit` raises once they are), as minimize holds one
            # while it winds down
            hold.__enter__()
        self.result_ = res
        self.n_iter_ = int(res.n_iter)
        self.stop_reason_ = res.stop_reason.value
        self.converged_ = bool(res.success)
        if not res.success and not self._interrupted_run:
            # (an interrupted run raises KeyboardInterrupt once fitted: `interruptible_fit`)
            # the advice fits a run that ran out of budget; another stop's message says
            # what happened (a non-finite value, data that went away, a stall)
            advice = ("; raise max_iter or set tol"
                      if res.stop_reason.value in ("max_iter", "max_time") else "")
            warnings.warn(
                f"{type(self).__name__} did not converge: the solver stopped with "
                f"{res.stop_reason.value!r} ({res.message}){advice}",
                ConvergenceWarning, stacklevel=library_stacklevel())
        return res


def check_X(est: Any, X: Any, *, reset: bool) -> Any:
    """``X`` checked as scikit-learn does: a C-ordered float64 array for in-memory input (via
    ``validate_data``; one layout, so that a Fortran-ordered array or a DataFrame of the
    same numbers gives the same bits as a C-ordered array), the array itself, its shape
    and dtype checked, for out-of-core input.

    Sets ``n_features_in_`` (and ``feature_names_in_``) when ``reset``; otherwise checks the
    number of features against the fitted one.
    """
    name = type(est).__name__
    if isinstance(X, ChunkedData):
        raise TypeError(f"{name} takes the array itself (one sample per row), not "
                        "rssm.data.samples(...): it streams out-of-core arrays on its own")
    if not is_out_of_core(X):
        # (scikit-learn's check_array drops a mask and reads what is under it)
        refuse_masked(X, "X")
        check_float64_range(X, "X")        # (longdouble below float64's range read as 0)
        kw = dict(reset=reset, dtype=np.float64, order="C")
        if _sk_validate_data is not None:
            out = _sk_validate_data(est, X, **kw)
        else:  # pragma: no cover - scikit-learn < 1.6
            out = est._validate_data(X, **kw)
        if reset:
            # (the fit only: transform, scores and predict are per sample, and a sample's
            # output must not depend on its batch; refused alone, a sample at 1e-160 was
            # scored beside one at unit scale: a user's audit)
            _check_scale(out, name)
        return out
    shape, dtype = tuple(X.shape), np.dtype(X.dtype)
    if len(shape) != 2:
        raise ValueError(f"Expected a 2D array (n_samples, n_features), got an array with "
                         f"shape {shape}")
    if dtype.kind not in "iuf":
        # (an audit: a bool memmap was refused where the same array in memory is taken,
        # converted by scikit-learn's check; rssm's data layer reads numbers only, so say
        # what to do)
        hint = ("; in memory (np.asarray(X)) it is converted to 0 and 1 as scikit-learn "
                "converts it, out of core store it as uint8 or a float dtype"
                if dtype.kind == "b" else "")
        raise ValueError(f"{name} reads an out-of-core X as real numbers (int or float "
                         f"dtypes), got dtype {dtype}{hint}")
    if shape[0] < 1 or shape[1] < 1:
        raise ValueError(f"Found array with shape {shape} while a minimum of 1 sample and 1 "
                         f"feature is required by {name}.")
    if reset:
        est.n_features_in_ = shape[1]
        if hasattr(est, "feature_names_in_"):
            del est.feature_names_in_
        # One pass before the fit reads anything else: the checks of in-memory input
        # (finite entries, the scale), a chunk at a time.
        top = 0.0
        for _, _, blk in row_chunks(X):
            top = max(top, max_abs(blk))
        _check_top(top, name)
    elif shape[1] != est.n_features_in_:
        raise ValueError(f"X has {shape[1]} features, but {name} is expecting "
                         f"{est.n_features_in_} features as input.")
    elif hasattr(est, "feature_names_in_"):
        # an array has no feature names: scikit-learn warns for an in-memory one, and so
        # for a memory-mapped one here (an audit: transform(memmap) after fit(DataFrame)
        # was silent where transform(ndarray) warned)
        warnings.warn(f"X does not have valid feature names, but {name} was fitted with "
                      "feature names", UserWarning, stacklevel=library_stacklevel())
    return X


#: Data whose largest entry lies outside this range is refused by ``fit`` (in memory and
#: out of core): squares and sums of squares of its entries leave float64's normal range
#: (2.2e-308 to 1.8e308). The problems' own range (`rssm._validation.DATA_SCALE`).
SCALE_RANGE = DATA_SCALE


def _check_scale(X: np.ndarray, name: str) -> None:
    """Refuse data at a scale where float64 sums of squares underflow or overflow (at
    1e-300 the estimators' norms were 0 and the fits "converged" at iteration 1 on wrong
    answers; at 1e160 they ended non_finite or raised LAPACK errors)."""
    _check_top(max_abs(X), name)


def _check_top(top: float, name: str) -> None:
    """`_check_scale` on the largest magnitude ``top`` of X's entries."""
    lo, hi = SCALE_RANGE
    if top and not lo <= top <= hi:
        raise ValueError(f"{name}: the largest entry of X is {top:.3g} in magnitude, outside "
                         f"[{lo:g}, {hi:g}], where float64 squares and their sums underflow "
                         "or overflow; scale X first (e.g. X / np.abs(X).max(), or a "
                         "StandardScaler)")


def row_chunks(X: Any, rows: int | None = None) -> Iterator[tuple[int, int, np.ndarray]]:
    """(lo, hi, X[lo:hi] as float64) over X a chunk of samples at a time.

    Out-of-core chunks are checked for NaN and infinite entries (in-memory arrays were
    checked by `check_X`)."""
    m, n = X.shape
    lazy = is_out_of_core(X)
    step = max(1, CHUNK_BYTES // (8 * n)) if rows is None else rows
    for lo in range(0, m, step):
        hi = min(m, lo + step)
        raw = np.asarray(X[lo:hi])
        check_float64_range(raw, "X")          # (longdouble below float64's range read as 0)
        blk = np.asarray(raw, dtype=np.float64)
        if lazy and not np.isfinite(blk).all():
            bad = lo + int(np.argmin(np.isfinite(blk).all(axis=1)))
            raise ValueError(f"X has NaN or infinite entries (the first in sample {bad}, "
                             "counting from 0); all entries must be finite")
        yield lo, hi, blk


def map_rows(X: Any, fn: Callable[[np.ndarray], np.ndarray], width: int | None) -> np.ndarray:
    """``fn`` applied to X a chunk of samples at a time; the results stacked into an
    in-memory (n_samples,) array (``width`` None) or (n_samples, width) array."""
    m = X.shape[0]
    out = np.empty((m,) if width is None else (m, width))
    for lo, hi, blk in row_chunks(X):
        out[lo:hi] = fn(blk)
    return out


def flip_signs(rows: np.ndarray) -> np.ndarray:
    """Rows multiplied by -1 where needed so that each row's entry of largest magnitude is
    positive (a deterministic sign, as scikit-learn's PCA fixes its components')."""
    if rows.size == 0:
        return rows
    idx = np.argmax(np.abs(rows), axis=1)
    s = np.sign(rows[np.arange(rows.shape[0]), idx])
    s[s == 0] = 1.0
    out = rows * s[:, None]
    out += 0.0          # -0.0 (a flipped zero) -> 0.0
    return out


def check_int(value: Any, name: str, lo: int, hi: int, est: str, extra: str = "") -> int:
    """``value`` as an int in [lo, hi] or a one-line ValueError naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral,
                                                                    np.integer)):
        raise ValueError(f"{est}: {name} must be an int{extra}, got {value!r}")
    if not lo <= value <= hi:
        raise ValueError(f"{est}: {name} must be an int in [{lo}, {hi}]{extra}, got {value}")
    return int(value)


def check_float(value: Any, name: str, est: str, *, lo: float = 0.0, hi: float = np.inf,
                open_lo: bool = True, open_hi: bool = True) -> float:
    """``value`` as a finite float in the given interval or a one-line ValueError."""
    ok = isinstance(value, (numbers.Real, np.floating, np.integer)) and not isinstance(
        value, (bool, np.bool_))
    v = float(value) if ok else np.nan
    inside = (lo < v if open_lo else lo <= v) and (v < hi if open_hi else v <= hi)
    if not (ok and np.isfinite(v) and inside):
        left, right = "(" if open_lo else "[", ")" if open_hi else "]"
        raise ValueError(f"{est}: {name} must be a number in {left}{lo:g}, {hi:g}{right}, "
                         f"got {value!r}")
    return v


def interruptible_fit(fit: Callable) -> Callable:
    """An estimator's ``fit`` under Ctrl-C. The solver turns a Ctrl-C into a result
    marked interrupted, which the fit used to finish quietly (a loop or a grid search of
    fits went on); and one that came after the run, while the attributes were set, left a
    mix of the new fit's and the earlier fit's. Now a fit whose run was interrupted sets
    every attribute from the run so far, then raises `KeyboardInterrupt` (a further Ctrl-C
    while they are set is held); a fit that raises anything else, or is interrupted after
    a run that was not, puts the earlier fit's attributes back (or none), then raises it."""
    import functools

    from rssm._interrupt import HeldInterrupt

    def fitted(est) -> dict:
        return {k: v for k, v in vars(est).items() if k.endswith("_") and not k.startswith("_")}

    @functools.wraps(fit)
    def wrapper(self, X, y=None, **kwargs):
        saved = fitted(self)
        self._interrupted_run = False
        # entered by `_run` when the run was interrupted: a second Ctrl-C 1-5 ms after the
        # first landed while a sparse PCA fit computed its attributes and left it unfitted,
        # the run lost (a user's audit)
        hold = self._hold_after_run = HeldInterrupt()
        try:
            try:
                out = fit(self, X, y, **kwargs)
            except BaseException:
                # any exception (a Ctrl-C after the run, a warning raised as an error, a
                # bad parameter found late): the earlier fit's attributes, not a mix
                with HeldInterrupt():
                    for k in fitted(self):
                        delattr(self, k)
                    vars(self).update(saved)
                    self._interrupted_run = False
                raise
        finally:
            hold.__exit__(None, None, None)
            vars(self).pop("_hold_after_run", None)
        if self._interrupted_run:
            self._interrupted_run = False
            raise KeyboardInterrupt
        return out

    return wrapper
