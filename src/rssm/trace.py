"""The `Result` of a run, and its conversion to and from plain data (`Result.to_dict`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

import numpy as np

from rssm.stopping import CONVERGED, StopReason

__all__ = ["Result", "TRACE_COLUMNS"]

#: The standard columns of `Result.trace`, in order (extra `rssm.Record` columns follow).
#: ``stationarity`` is ||P_T(G)||_F at the recorded X when ``Record(stationarity=True)``,
#: else NaN.
TRACE_COLUMNS = ("iteration", "time", "flops", "cost", "error", "stationarity")


def _plain(value: Any) -> Any:
    """JSON-able form of a setting (NumPy scalars and arrays to Python numbers/lists)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):      # (its NaN and inf as below: strict JSON)
        return _plain(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, StopReason):
        return value.value
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def _same(a: Any, b: Any) -> bool:
    """Whether two field values hold the same data: arrays by shape, dtype and entries,
    NaN equal to NaN, containers and dataclasses (the certificate) item by item."""
    if a is b:
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return (a.shape == b.shape and a.dtype == b.dtype
                and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and all(_same(getattr(a, f.name), getattr(b, f.name))
                                          for f in fields(a))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


@dataclass
class Result:
    """Outcome of `rssm.minimize`.

    Attributes
    ----------
    x : ndarray, shape (n, p)
        The best iterate by cost: the point of least f among those the run evaluated
        (every iterate for the data problems and whenever the step rule reads f; the
        recorded ones otherwise). On St(n, p). A run stopped by ``target_error`` (the
        `rssm.stopping.TargetError` criterion) returns the iterate that met the target,
        the last one.
    fun : float
        f(x), as the solver evaluated it.
    n_iter : int
        Iterations done.
    time : float
        Solver wall time in seconds (building the oracle's cache and every iteration,
        the convergence test and f at the recorded rows included, which brings the data
        problems' caches up to date; the error, the stationarity column, your columns,
        callbacks and observers excluded).
    flops : float
        Flop-model count of all iterations.
    stop_reason : StopReason
        Why the run ended.
    trace : dict of str to ndarray
        ``iteration``, ``time``, ``flops``, ``cost``, ``error`` (NaN without a ground truth),
        ``stationarity`` (NaN unless recorded) and any extra `rssm.Record` columns, for the
        iterate X_k at each recording point (the first and the last included).
    error : float
        Ground-truth error of ``x``, or NaN.
    stationarity : float
        ||P_T(G)||_F at the last recorded row when recorded (``rssm.Record(stationarity=
        True)``), else NaN. On a nonsmooth problem it need not vanish; `certificate` does.
    certificate : Certificate or None
        The convergence test's last value (`rssm.solvers.certificate`): the radius of the
        recent iterates and how far their subgradients cancel; None when it was not
        evaluated (the iterates had not settled to ``tol``, or ``tol=0``).
    feasibility : float
        ||x^T x - I||_max.
    method, n_blocks, selection, stepsize, seed, partition
        The run's settings (``n_blocks`` is 1 and ``partition`` None for RSM).
    message : str
        One line on why the run ended.
    threads : str
        The thread setting of the run (`rssm.threads`).
    x_last, fun_last : ndarray, float
        The last iterate and its cost (the trace's last row).
    best_iteration : int
        The iteration of ``x``.
    converged : bool or None
        Whether the criterion that stopped the run means convergence (`success`).
    tol : float or None
        The convergence test's tolerance; None when the test is off (``tol=0``).
    n_cost : int
        Cost evaluations by the solver (rules, trials, best-point tracking, recorded
        rows).
    n_clipped : int
        Steps shortened to the longest step the loop takes (`rssm.solvers.max_step`).
    clip_steps : bool
        Whether the run shortened such steps (``options={"clip_steps": ...}``; False:
        the rule's steps as they were, so ``n_clipped`` is 0 whatever their length).
    """

    x: np.ndarray
    fun: float
    n_iter: int
    time: float
    flops: float
    stop_reason: StopReason
    trace: dict[str, np.ndarray]
    error: float = math.nan
    feasibility: float = math.nan
    method: str = "rssm"
    n_blocks: int = 1
    selection: str | None = None
    stepsize: dict[str, Any] = field(default_factory=dict)
    seed: Any = None
    partition: list[np.ndarray] | None = None
    message: str = ""
    stationarity: float = math.nan
    threads: str = ""
    certificate: Any = None
    x_last: np.ndarray | None = None
    fun_last: float = math.nan
    best_iteration: int = -1
    converged: bool | None = None
    tol: float | None = None
    n_cost: int = 0
    n_clipped: int = 0
    clip_steps: bool = True

    def __eq__(self, other: object) -> bool:
        """Field by field: the arrays (``x``, ``x_last``, the trace, the partition) entry by
        entry, NaN equal to NaN. A Result equals its copy, its pickle and its
        ``from_dict(to_dict(arrays=True))`` (``stepsize``, a description, compared in its
        JSON form); two runs of the same call differ in ``time``
        (and the trace's time column), so compare their ``x`` for the bits."""
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(_same(getattr(self, f.name), getattr(other, f.name)) if f.name != "stepsize"
                   # a description: the same in its JSON form (a rule's inf, tuple or
                   # array setting reads back as "inf" or a list)
                   else _plain(self.stepsize) == _plain(other.stepsize)
                   for f in fields(self))

    __hash__ = None     # mutable, compared by value

    @property
    def success(self) -> bool:
        """True only when a convergence criterion ended the run: the convergence test
        (``converged``), a target error (``target_error``), a stationarity tolerance
        (``stationary``) or a criterion of yours that says it means convergence.

        A run that ends on an iteration or time limit, a stalled step, a callback, an
        interrupt or a non-finite value is not a success, whatever its cost.
        """
        if self.converged is not None:
            return bool(self.converged)
        return self.stop_reason in CONVERGED

    # -- plain data -----------------------------------------------------------------------
    def to_dict(self, *, arrays: bool = False) -> dict[str, Any]:
        """Settings and summary as JSON-able data (the one writer every output uses).

        Parameters
        ----------
        arrays : bool
            Include ``x``, ``x_last`` and the trace as nested lists (default: only their
            shapes; write the arrays themselves with NumPy).

        Returns
        -------
        dict
            Field name -> value as plain Python data (the certificate as a dict, NaN in the
            trace as None), without ``x``, ``x_last`` and ``trace`` unless ``arrays``; plus
            ``success`` and ``shape`` (that of ``x``). `from_dict` reads it back.
        """
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in ("x", "x_last"):
                if arrays and v is not None:
                    out[f.name] = np.asarray(v).tolist()
                continue
            if f.name == "certificate":
                out[f.name] = None if v is None else _plain(vars(v) if hasattr(v, "__dict__")
                                                           else _cert_dict(v))
                continue
            if f.name == "trace":
                if arrays:      # NaN (no ground truth, no stationarity) -> null: strict JSON
                    out["trace"] = {k: [_plain(e) for e in np.asarray(c).tolist()]
                                    for k, c in v.items()}
                continue
            out[f.name] = _plain(v)
        out["success"] = self.success
        out["shape"] = list(self.x.shape)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        """Rebuild a Result from `to_dict` output (``arrays=True`` for x and the trace;
        without them x is NaN of the recorded shape and the trace empty).

        A dict that is not such output (a key missing, a value of another type) raises a
        ValueError (TypeError for a non-dict) that names what is wrong; before, Python's
        KeyError or AttributeError came from inside, and some values (an ``n_iter`` of
        ``"x"``, an ``x`` of None) made a Result that failed later.

        Parameters
        ----------
        data : dict
            What `to_dict` returned (or its JSON read back): at least ``fun``, ``n_iter``,
            ``time``, ``flops``, ``stop_reason`` and ``method``; keys that are not fields
            of Result (``success``, ``shape``) are ignored.

        Returns
        -------
        Result
            The rebuilt result, equal to the original when ``data`` came from
            ``to_dict(arrays=True)``.

        Raises
        ------
        TypeError
            When ``data`` is not a mapping.
        ValueError
            When a key is missing or a value is of the wrong type.
        """
        from collections.abc import Mapping

        if not isinstance(data, Mapping):
            raise TypeError("Result.from_dict takes the dict Result.to_dict() returns, got "
                            f"{type(data).__name__}")
        need = [k for k in ("fun", "n_iter", "time", "flops", "stop_reason", "method")
                if k not in data]
        if need:
            raise ValueError(f"Result.from_dict: the dict has no {', '.join(map(repr, need))} "
                             "(it takes what Result.to_dict() returns)")
        try:
            return cls._from_dict(data)
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            raise ValueError(f"Result.from_dict: {exc} (it takes what Result.to_dict() "
                             "returns)") from None

    @classmethod
    def _from_dict(cls, data) -> Result:
        from rssm._validation import as_int

        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in data.items() if k in names}
        shape = tuple(data.get("shape", (0, 0)))
        kw["x"] = (np.asarray(data["x"], dtype=np.float64) if data.get("x") is not None
                   else np.full(shape, np.nan))
        if kw["x"].ndim != 2:
            raise ValueError(f"x must be a matrix (n x p), got an array of shape "
                             f"{kw['x'].shape}")
        if not isinstance(kw["method"], str):
            raise TypeError(f"method must be a str, got {type(kw['method']).__name__}")
        for key in ("n_iter", "n_blocks", "best_iteration", "n_cost", "n_clipped"):
            if key in kw:
                kw[key] = as_int(kw[key], key, minimum=-1)
        if data.get("x_last") is not None:
            kw["x_last"] = np.asarray(data["x_last"], dtype=np.float64)
        trace = data.get("trace") or {}
        kw["trace"] = {k: np.asarray(v, dtype=np.int64 if k == "iteration" else np.float64)
                       for k, v in trace.items()}
        try:
            kw["stop_reason"] = StopReason(data["stop_reason"])
        except ValueError:
            raise ValueError(f"stop_reason must be one of {[r.value for r in StopReason]}, "
                             f"got {data['stop_reason']!r}") from None
        if kw.get("certificate") is not None:
            from rssm.solvers.certificate import Certificate

            flags = ("converged", "probed", "bundle")   # the bool fields; the rest numbers
            kw["certificate"] = Certificate(**{k: bool(v) if k in flags else _number(v)
                                               for k, v in kw["certificate"].items()})
        for key in ("fun", "time", "flops", "error", "feasibility", "stationarity",
                    "fun_last"):
            if key in kw:
                kw[key] = _number(kw[key])
        if kw.get("partition") is not None:
            kw["partition"] = [np.asarray(b, dtype=np.int64) for b in kw["partition"]]
        return cls(**kw)

    def __repr__(self) -> str:
        n, p = self.x.shape
        blocks = f", l={self.n_blocks} ({self.selection})" if self.method == "rssm" else ""
        best = ("" if self.best_iteration in (-1, self.n_iter)
                else f" (best iterate, from iteration {self.best_iteration})")
        lines = [
            f"rssm.Result: {self.method.upper()}{blocks} on St({n}, {p})",
            f"  converged     {'yes' if self.success else 'no'}: {self.message}",
            f"  stop reason   {self.stop_reason.value}",
            f"  iterations    {self.n_iter}",
            f"  solver time   {self.time:.4g} s",
            f"  flops         {self.flops:.4g}",
            f"  cost          {self.fun:.10g}{best}",
            (f"  error         {self.error:.4g}" if not math.isnan(self.error)
             else "  error         n/a (no ground truth)"),
            f"  feasibility   {self.feasibility:.2e} (||X^T X - I||_max)",
        ]
        if not math.isnan(self.stationarity):
            lines.append(f"  stationarity  {self.stationarity:.3g} (||P_T(G)||_F, last row)")
        if self.threads:
            lines.append(f"  threads       {self.threads}")
        return "\n".join(lines)


def _cert_dict(c: Any) -> dict[str, Any]:
    return {f.name: getattr(c, f.name) for f in fields(c)}


def _number(v: Any) -> float:
    if v is None:
        return math.nan
    if v == "inf":
        return math.inf
    if v == "-inf":
        return -math.inf
    return float(v)
