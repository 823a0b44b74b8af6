"""Input checks shared by every public entry point.

Each check raises ``TypeError`` for a wrong kind of object and ``ValueError`` for a
wrong value, and the message names the argument and what is allowed. Both are raised as
the subclasses `InvalidType` and `InvalidValue`, whose ``argument`` attribute holds the
argument's name (the command line maps it to its option; no message is parsed).

Accepted array dtypes are real numeric ones (bool excluded): int, unsigned and float of
any width. They are converted to float64; float32 input is upcast (never kept), so
every computation in rssm runs in float64.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np


class InvalidValue(ValueError):
    """A ValueError about one named argument; ``argument`` holds its name, so a caller
    (the command line) can name its own option without reading the message."""

    def __init__(self, argument: str, message: str):
        super().__init__(message)
        self.argument = argument


class InvalidType(TypeError):
    """A TypeError about one named argument; ``argument`` holds its name."""

    def __init__(self, argument: str, message: str):
        super().__init__(message)
        self.argument = argument


_QUIET = threading.local()


@contextlib.contextmanager
def quieted(*categories: type[Warning]) -> Iterator[None]:
    """rssm's own warnings of these categories left unsaid, in this thread only.

    `warnings.catch_warnings` changes the process's filter list: two threads inside it at
    once (``ODL.synthetic`` or an estimator's ``fit`` in a thread pool) could leave an
    ``ignore`` filter behind, and a later, unrelated call's warning went unseen (a user's
    audit: 5 of 5 runs of 2 threads x 50 calls). The warning sites ask `is_quiet`.
    """
    before = getattr(_QUIET, "categories", ())
    _QUIET.categories = before + categories
    try:
        yield
    finally:
        _QUIET.categories = before


def is_quiet(category: type[Warning]) -> bool:
    """Whether this thread is inside `quieted` for ``category`` (or a base of it)."""
    return any(issubclass(category, c) for c in getattr(_QUIET, "categories", ()))


def describe(value: Any, limit: int = 60) -> str:
    """A short one-line description of ``value`` for error messages (arrays by shape and
    dtype, long reprs cut)."""
    if isinstance(value, np.ndarray):
        return f"an array with shape {value.shape} and dtype {value.dtype}"
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_bool(value: Any, name: str) -> bool:
    """``value`` as a bool, or a TypeError naming ``name``: only True or False (NumPy's
    included) pass; "no", 0 or 2 read as truth values meant the opposite of what was
    written (a user's audit)."""
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidType(name, f"{name} must be True or False, got {describe(value)}")
    return bool(value)


def real_value(out: Any, what: str) -> float:
    """``out``, a user function's value (its cost, its error), as a float; anything but a
    real number (text, a flag, a complex number, None, an array with a dimension, even of
    one entry) raises naming ``what``."""
    try:
        if isinstance(out, (str, bytes, bool, np.bool_, complex, np.complexfloating)):
            raise TypeError   # float("1.5") would accept text, float(True) a flag
        if isinstance(out, np.ndarray) and out.dtype.kind not in "iuf":
            raise TypeError
        if getattr(out, "ndim", 0):
            # an array of one entry, of any library (NumPy 2.2 and older, PyTorch and
            # pandas 2 convert it, some with a warning)
            raise TypeError
        return float(out)
    except (TypeError, ValueError):
        kind = type(out).__name__
        if isinstance(out, np.ndarray):
            kind += (f" with shape {out.shape}" if out.ndim
                     else f" of dtype {out.dtype} (0-d)")
        elif np.ndim(out):
            kind += f" with shape {tuple(np.shape(out))}"
        raise TypeError(f"{what} must return a real number, got {kind}") from None


def type_name(value: Any) -> str:
    """The type of ``value`` for a "must be ..., got ..." message; a class passed where an
    instance belongs is named as such (it read "got ABCMeta")."""
    if isinstance(value, type):
        return f"the class {value.__name__} itself (pass an instance)"
    return type(value).__name__


def check_signature(fn: Any, n_args: int, name: str, call: str) -> None:
    """Refuse a callable that cannot take the ``n_args`` positional arguments rssm calls it
    with (``call``, e.g. ``"callback(progress)"``), before the run: called at the first
    iteration, it raised Python's bare "takes 0 positional arguments but 1 was given",
    naming neither the argument nor the call. Callables without a signature pass."""
    import inspect

    try:
        # the callable rssm calls, not what a functools.wraps decorator wraps (a wrapper
        # taking (x) around f(w, x) was refused as f's signature)
        sig = inspect.signature(fn, follow_wrapped=False)
    except (TypeError, ValueError):      # some builtins have none: called as they are
        return
    try:
        sig.bind(*([None] * n_args))
    except TypeError:
        label = getattr(fn, "__name__", None) or type(fn).__name__
        raise InvalidType(
            name, f"{name} is called as {call}, but {label}{sig} does not accept "
                  f"{n_args} positional argument{'s' if n_args != 1 else ''}") from None


def user_stacklevel(*outside: Any) -> int:
    """The ``stacklevel`` that points a warning at the first frame outside rssm (and
    contextlib, whose frame a ``@single_blas()`` decorator adds, and the packages or
    modules ``outside``, e.g. scikit-learn and joblib for an estimator fitted through a
    pipeline or a search); called by the function that calls `warnings.warn`, which is
    level 1. A fixed count pointed at rssm's own files when the path inside rssm changed."""
    import contextlib
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    inside = [here, os.path.abspath(contextlib.__file__)]
    for mod in outside:
        path = getattr(mod, "__file__", None)
        if path:
            inside.append(os.path.dirname(os.path.abspath(path)))
    prefixes = tuple(inside)
    frame, level = sys._getframe(1), 1
    while frame is not None:
        if not os.path.abspath(frame.f_code.co_filename).startswith(prefixes):
            return level
        frame, level = frame.f_back, level + 1
    return 2



def library_stacklevel() -> int:
    """The ``stacklevel`` for the function that calls this and then `warnings.warn`: the
    first caller outside rssm and, where loaded, scikit-learn and joblib (an estimator
    fitted through a pipeline, a search or ``cross_val_score``: the warning pointed into
    sklearn/pipeline.py or joblib/parallel.py)."""
    import sys

    # one frame more: this function's caller is the one that calls warnings.warn
    return user_stacklevel(sys.modules.get("sklearn"), sys.modules.get("joblib")) - 1


def refuse_masked(value: Any, name: str) -> None:
    """A NumPy masked array with masked entries refused: ``np.asarray`` (and scikit-learn's
    ``check_array``) drops the mask and reads the values under it as data (a user's audit:
    -999 sentinels used as samples)."""
    if isinstance(value, np.ma.MaskedArray) and np.ma.is_masked(value):
        mask = np.ma.getmaskarray(value)
        where = np.argwhere(mask.reshape(mask.shape[0], -1) if mask.ndim else
                            mask.reshape(1, 1))[0]
        raise InvalidValue(
            name, f"{name} is a masked array with {int(mask.sum())} masked entries, the "
                  f"first at {tuple(int(i) for i in where)}; rssm reads every entry, so fill "
                  f"them ({name}.filled(value)) or drop the samples that have them")


def refuse_sparse_or_missing(value: Any, name: str) -> None:
    """A SciPy sparse matrix (which NumPy turns into a 0-d object array), a pandas frame
    with missing values (object dtype) or a NumPy masked array with masked entries refused
    by what it is, not by a dtype it does not have (or by values it does not mean)."""
    refuse_masked(value, name)
    module = type(value).__module__.split(".")
    if module[0] == "scipy" and "sparse" in module:
        raise InvalidType(
            name, f"{name} is a SciPy sparse matrix ({type(value).__name__}), which rssm does "
                  f"not take: pass {name}.toarray() (the data products are dense)")
    if module[0] == "pandas" and hasattr(value, "isna"):
        try:
            missing = np.asarray(value.isna())
        except Exception:       # not a frame after all
            return
        if missing.any():
            where = np.argwhere(missing.reshape(missing.shape[0], -1))[0]
            raise InvalidValue(
                name, f"{name} has {int(missing.sum())} missing values (NaN or pd.NA), the "
                      f"first at row {int(where[0])}, column {int(where[1])}; all entries "
                      "must be finite numbers")


def pandas_numbers(value: Any, name: str) -> Any:
    """A pandas frame or series of numeric columns (NumPy's dtypes or pandas' nullable
    ``Float64``/``Int64``, whose missing values `refuse_sparse_or_missing` refused) as a
    float64 array; anything else as it is.

    ``np.asarray`` makes an object array of a nullable frame, which was refused as "dtype
    object"; a column that holds no real numbers (bool, text, categories) is named.

    Parameters
    ----------
    value : object
        What the user passed.
    name : str
        Its name in the message.

    Returns
    -------
    object
        ``value`` itself, or a float64 array of a numeric pandas frame or series.

    Raises
    ------
    TypeError
        When a column of a pandas frame holds no real numbers.
    """
    if type(value).__module__.split(".")[0] != "pandas" or not hasattr(value, "to_numpy"):
        return value
    check_float64_range(value, name)      # (its longdouble columns, before the cast)
    frame = hasattr(value, "columns")
    dtypes = list(value.dtypes) if frame else [getattr(value, "dtype", None)]
    cols = list(value.columns) if frame else [getattr(value, "name", None)]
    for col, dt in zip(cols, dtypes, strict=True):
        kind = getattr(getattr(dt, "numpy_dtype", dt), "kind", "O")
        if kind not in "iuf":
            which = f"its column {col!r}" if frame else "it"
            raise InvalidType(name, f"{name} must hold real numbers (int or float dtypes, "
                                    f"converted to float64); {which} has dtype {dt}")
    return value.to_numpy(dtype=np.float64)


#: The magnitudes float64 holds (its least subnormal and its largest finite number).
F64_RANGE = (float(np.finfo(np.float64).smallest_subnormal), float(np.finfo(np.float64).max))


def check_float64_range(arr: np.ndarray, name: str) -> None:
    """Refuse floats wider than float64 (``np.longdouble``) whose largest finite magnitude
    float64 cannot hold: cast, all of them read as 0 (data that "converged" at the start) or
    as infinities. Other dtypes and values in range pass; the cast follows.

    Parameters
    ----------
    arr : numpy.ndarray, list or pandas frame or series
        The data as given (a list is read by ``np.asarray``, a frame column by column;
        anything else passes).
    name : str
        Its name in the message.

    Raises
    ------
    ValueError
        When the largest finite magnitude lies outside `F64_RANGE`.
    """
    if isinstance(arr, (list, tuple)):
        try:
            arr = np.asarray(arr)
        except (TypeError, ValueError):        # ragged and the like: named by the caller
            return
    if type(arr).__module__.split(".")[0] == "pandas" and hasattr(arr, "to_numpy"):
        for col in (arr.columns if hasattr(arr, "columns") else [None]):
            part = arr if col is None else arr[col]
            dt = getattr(part, "dtype", None)
            if getattr(dt, "kind", "") == "f" and getattr(dt, "itemsize", 0) > 8:
                check_float64_range(np.asarray(part.to_numpy()), name)
        return
    if not isinstance(arr, np.ndarray):
        return
    if arr.dtype.kind != "f" or arr.dtype.itemsize <= 8 or not arr.size:
        return
    mags = np.abs(np.asarray(arr))        # (an np.matrix's max takes no ``initial``)
    top = mags.max(initial=0, where=np.isfinite(mags))
    if top and not F64_RANGE[0] <= top <= F64_RANGE[1]:
        raise InvalidValue(
            name, f"{name} holds {arr.dtype} values whose largest magnitude, "
                  f"{np.format_float_scientific(top, precision=2)}, lies outside float64's "
                  f"range [{F64_RANGE[0]:.2g}, {F64_RANGE[1]:.2g}]; rssm computes in float64: "
                  "scale the data first (e.g. divide by its largest entry)")


def as_float_matrix(
    value: Any,
    name: str,
    *,
    shape: tuple[int | None, int | None] | None = None,
    allow_empty: bool = False,
    copy: bool = False,
    finite: bool = True,
) -> np.ndarray:
    """Convert ``value`` to a 2-D float64 array or raise a clear error.

    Real dtypes (int, unsigned, float of any width) are converted to float64; complex,
    bool, object and string arrays raise ``TypeError``. With ``finite`` (the default) NaN
    or infinite entries raise ``ValueError``.
    """
    if isinstance(value, (str, bytes)) or value is None:
        raise InvalidType(
            name, f"{name} must be a 2-D array of real numbers, got {type(value).__name__}")
    refuse_sparse_or_missing(value, name)
    value = pandas_numbers(value, name)
    try:
        arr = np.asarray(value)
    except Exception as exc:  # ragged lists and similar
        raise InvalidType(name, f"{name} must be a 2-D array of real numbers: {exc}") from None
    if arr.dtype == object or arr.dtype.kind not in "iuf":
        kind = {"c": "complex", "b": "bool", "O": "object", "U": "str", "S": "bytes"}.get(
            arr.dtype.kind, str(arr.dtype)
        )
        raise InvalidType(
            name,
            f"{name} must hold real numbers (int or float dtypes, converted to float64), "
            f"got dtype {arr.dtype} ({kind})"
        )
    if arr.ndim != 2:
        raise InvalidValue(name, f"{name} must be 2-D, got an array with shape {arr.shape}")
    if not allow_empty and arr.size == 0:
        raise InvalidValue(name, f"{name} must not be empty, got shape {arr.shape}")
    if shape is not None:
        for axis, want in enumerate(shape):
            if want is not None and arr.shape[axis] != want:
                want_text = ", ".join("any" if s is None else str(s) for s in shape)
                raise InvalidValue(name, f"{name} has shape {arr.shape}, expected "
                                         f"({want_text})")
    check_float64_range(arr, name)
    out = np.array(arr, dtype=np.float64, copy=True, order="C") if copy else np.ascontiguousarray(
        arr, dtype=np.float64
    )
    if finite and not np.all(np.isfinite(out)):
        bad = int(np.size(out) - np.count_nonzero(np.isfinite(out)))
        raise InvalidValue(
            name,
            f"{name} contains {bad} NaN or infinite entries; all entries must be finite"
        )
    return out


#: Columns of a metric's arguments must be orthonormal to this tolerance: loose enough
#: for a start accepted with ``minimize(..., atol=1e-3)`` (recorded at iteration 0),
#: tight enough to refuse a zero or scaled X, which read as a perfect recovery.
UNIT_COLUMNS_ATOL = 1e-2


def metric_inputs(x: Any, ref: Any, what: str, names: tuple[str, str] = ("x", "x_star"),
                  same_shape: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The two arguments of an error metric as float64 matrices: finite, with as many
    rows, (``same_shape``: as many columns) and orthonormal columns (points of St(n, .)
    up to `UNIT_COLUMNS_ATOL`; a zero, scaled or repeated X read as a perfect recovery
    before)."""
    a = as_float_matrix(x, names[0])
    b = as_float_matrix(ref, names[1])
    if a.shape[0] != b.shape[0] or (same_shape and a.shape != b.shape):
        need = "the same shape" if same_shape else "as many rows"
        raise InvalidValue(names[0], f"{what}: {names[0]} has shape {a.shape} and "
                                     f"{names[1]} {b.shape}; they need {need}")
    for name, arr in zip(names, (a, b), strict=True):
        norms = np.sqrt(np.einsum("ij,ij->j", arr, arr))
        bad = np.abs(norms - 1.0) > UNIT_COLUMNS_ATOL
        if bad.any():
            j = int(np.argmax(bad))
            raise InvalidValue(name, f"{what}: the columns of {name} must have unit norm "
                                     f"(points of the Stiefel manifold); column {j} has "
                                     f"norm {norms[j]:.6g}")
        # (an audit: five copies of one unit vector read as a perfect recovery, 2e-16,
        # where the distance it stands for is 2.35)
        off = np.abs(arr.T @ arr - np.diag(norms * norms))
        if off.size and off.max() > UNIT_COLUMNS_ATOL:
            i, j = np.unravel_index(int(np.argmax(off)), off.shape)
            raise InvalidValue(name, f"{what}: the columns of {name} must be orthonormal "
                                     f"(points of the Stiefel manifold); columns {i} and "
                                     f"{j} have inner product {arr[:, i] @ arr[:, j]:.6g}")
    return a, b


#: Data whose largest entry lies outside this range is refused: squares and sums of
#: squares of its entries leave float64's normal range (2.2e-308 to 1.8e308), and the
#: norms, Gram matrices and spectral starts built on them turn inf or 0.
DATA_SCALE = (1e-150, 1e150)


def max_abs(arr: np.ndarray) -> float:
    """max |arr| without a copy of ``arr`` (0 for an empty array; NaN stays NaN)."""
    if not arr.size:
        return 0.0
    return max(float(arr.max()), -float(arr.min()))


def shown_outside(top: float, lo: float, hi: float) -> str:
    """``top``, a value outside [lo, hi], as a message shows it: 3 significant digits, or
    all of them where those round onto a bound ("1e+150, outside [1e-150, 1e+150]").

    Parameters
    ----------
    top : float
        The value, outside [lo, hi].
    lo, hi : float
        The bounds.

    Returns
    -------
    str
        The value's text.
    """
    shown = f"{top:.3g}"
    return repr(float(top)) if lo <= float(shown) <= hi else shown


def check_data_scale(top: float, what: str) -> None:
    """Refuse data whose largest magnitude ``top`` lies outside `DATA_SCALE` (0: all-zero
    data, accepted)."""
    lo, hi = DATA_SCALE
    if top and not lo <= top <= hi:
        shown = shown_outside(top, lo, hi)
        raise InvalidValue(what, f"{what}: the largest entry is {shown} in magnitude, "
                           f"outside [{lo:g}, {hi:g}], where float64 squares and their "
                           "sums underflow or overflow; scale the data first (e.g. divide "
                           "by its largest entry)")


def check_array_size(shape: tuple[int, ...], what: str) -> None:
    """Refuse sizes whose array could not even be addressed (NumPy would fail deep inside
    with "Maximum allowed dimension exceeded"); the message names ``what``."""
    entries = 1
    for s in shape:
        entries *= int(s)
    if entries > np.iinfo(np.intp).max // 8:
        raise ValueError(f"{what} = {' x '.join(map(str, shape))} is too large to allocate")


def physical_memory() -> float | None:
    """Bytes of physical memory of this machine, or None where the OS does not say."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE")) * float(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def check_memory(n_bytes: float, what: str) -> None:
    """Refuse, before allocating, a build that needs more than this machine's physical
    memory: raise ``MemoryError`` with one line naming ``what`` (the sizes) and both
    amounts. NumPy would otherwise fail deep inside, or the OS kill the process."""
    total = physical_memory()
    if total is not None and n_bytes > total:
        raise MemoryError(
            f"{what} needs about {n_bytes / 1e9:.3g} GB of memory, more than this machine's "
            f"{total / 1e9:.3g} GB; choose smaller sizes"
        )


def integer_valued(value: Any) -> Any:
    """An integer-valued float (up to 2^53, where floats stop holding every integer) as an
    int, as every integer argument takes it; anything else unchanged."""
    if (isinstance(value, (float, np.floating)) and float(value).is_integer()
            and abs(float(value)) <= 2.0**53):
        return int(value)
    return value


def as_int(
    value: Any,
    name: str,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    minimum_is: str | None = None,
    maximum_is: str | None = None,
) -> int:
    """Check that ``value`` is an integer within [minimum, maximum].

    ``minimum_is`` / ``maximum_is`` name a bound that comes from another argument (e.g.
    ``"m"`` for n <= m), so the message names both arguments.
    """
    value = integer_valued(value)
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        raise InvalidType(
                name,
                f"{name} must be an integer, got {describe(value)} ({type(value).__name__})"
            )
    value = int(value)
    if minimum is not None and value < minimum:
        bound = f"{minimum_is} = {minimum}" if minimum_is else str(minimum)
        raise InvalidValue(name, f"{name} must be >= {bound}, got {value}")
    if maximum is not None and value > maximum:
        bound = f"{maximum_is} = {maximum}" if maximum_is else str(maximum)
        raise InvalidValue(name, f"{name} must be <= {bound}, got {value}")
    return value


def as_positive_float(
    value: Any,
    name: str,
    *,
    allow_zero: bool = False,
    upper: float | None = None,
    upper_inclusive: bool = True,
    upper_is: str | None = None,
) -> float:
    """Check that ``value`` is a finite real number > 0 (or >= 0), optionally bounded
    (``upper_is`` names a bound that comes from another argument)."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.integer, np.floating)):
        raise InvalidType(
            name,
            f"{name} must be a real number, got {describe(value)} ({type(value).__name__})"
        )
    value = float(value)
    if not math.isfinite(value):
        raise InvalidValue(name, f"{name} must be finite, got {value}")
    if value < 0 or (value == 0 and not allow_zero):
        raise InvalidValue(name, f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {value}")
    if upper is not None and (value > upper or (value == upper and not upper_inclusive)):
        bound = f"{upper_is} = {upper:g}" if upper_is else str(upper)
        raise InvalidValue(
            name, f"{name} must be {'<=' if upper_inclusive else '<'} {bound}, got {value}")
    return value


def check_generator(rng: Any, name: str = "rng") -> np.random.Generator:
    """Check that ``rng`` is a ``numpy.random.Generator``."""
    if not isinstance(rng, np.random.Generator):
        raise InvalidType(
            name,
            f"{name} must be a numpy.random.Generator (e.g. numpy.random.default_rng(0)), "
            f"got {type(rng).__name__}"
        )
    return rng


def make_rng(seed: Any, name: str = "seed") -> np.random.Generator:
    """Turn ``seed`` (None, a non-negative int, or a Generator) into a Generator."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        return np.random.default_rng()
    seed = integer_valued(seed)
    if isinstance(seed, bool) or not isinstance(seed, (numbers.Integral, np.integer)):
        raise InvalidType(
            name,
            f"{name} must be None, a non-negative integer or a numpy.random.Generator, "
            f"got {describe(seed)} ({type(seed).__name__})"
        )
    if seed < 0:
        raise InvalidValue(name, f"{name} must be a non-negative integer, got {seed}")
    return np.random.default_rng(int(seed))


def iterations(k: int) -> str:
    """"1 iteration", "k iterations": the count as a message writes it."""
    return f"{k} iteration{'' if k == 1 else 's'}"
