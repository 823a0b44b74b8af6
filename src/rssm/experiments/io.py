"""Result files of ``rssm reproduce``: the tidy CSV and the JSON settings, written atomically.

Each write goes to a temporary file in the destination folder and is then moved over the
destination with `os.replace`, so a reader (or a reproduction killed half-way) sees either
the previous complete file or the new complete file, never a torn one.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import platform
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_info

__all__ = [
    "CSV_COLUMNS",
    "RUN_KEY",
    "atomic_write_text",
    "replace_atomically",
    "append_rows",
    "read_rows",
    "finished_runs",
    "write_json",
    "read_json",
    "read_run_json",
    "trace_rows",
]

#: Columns of the tidy CSV, one row per recorded point of one run.
CSV_COLUMNS = ("part", "problem", "method", "blocks", "seed", "stepsize", "iteration",
               "time", "flops", "cost", "error")
#: Columns that identify a run.
RUN_KEY = ("part", "problem", "method", "seed", "stepsize")


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def replace_atomically(tmp: str | os.PathLike, path: str | os.PathLike) -> None:
    """Give ``tmp`` the usual file mode (mkstemp makes it 0600) and move it over ``path``.

    Parameters
    ----------
    tmp : str or os.PathLike
        The temporary file, in the same folder as ``path``; its mode becomes 0666 less
        the umask.
    path : str or os.PathLike
        The destination (replaced with `os.replace`).
    """
    os.chmod(tmp, _umask_mode())
    os.replace(tmp, path)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and `os.replace`.

    Parameters
    ----------
    path : str or os.PathLike
        The destination; its folder is created if missing.
    text : str
        The content, written as UTF-8 without newline translation.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        replace_atomically(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _fmt(value) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)
    return str(value)


def trace_rows(meta: dict, trace: dict[str, np.ndarray]) -> list[list[str]]:
    """CSV rows of one run: the ``meta`` columns repeated, then the trace columns.

    Parameters
    ----------
    meta : dict
        The run's labels: the first six `CSV_COLUMNS` (``part``, ``problem``,
        ``method``, ``blocks``, ``seed``, ``stepsize``) as keys.
    trace : dict of str to numpy.ndarray
        The recorded points: arrays of equal length under ``iteration``, ``time``,
        ``flops``, ``cost`` and ``error``.

    Returns
    -------
    list of list of str
        One row of `CSV_COLUMNS` cells per recorded point.
    """
    n = len(trace["iteration"])
    head = [_fmt(meta[c]) for c in CSV_COLUMNS[:6]]
    rows = []
    for i in range(n):
        rows.append(head + [
            str(int(trace["iteration"][i])),
            _fmt(float(trace["time"][i])),
            _fmt(float(trace["flops"][i])),
            _fmt(float(trace["cost"][i])),
            _fmt(float(trace["error"][i])),
        ])
    return rows


def append_rows(path: str | os.PathLike, rows: Iterable[Sequence[str]]) -> None:
    """Append ``rows`` to the CSV at ``path`` (created with a header if absent), atomically:
    the old content plus the new rows go to a temporary file that replaces ``path``.

    Parameters
    ----------
    path : str or os.PathLike
        The CSV file.
    rows : iterable of sequence of str
        Rows of `CSV_COLUMNS` cells (as `trace_rows` makes them).
    """
    path = Path(path)
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    buf = io.StringIO()
    if not old:
        buf.write(",".join(CSV_COLUMNS) + "\n")
    else:
        buf.write(old if old.endswith("\n") else old + "\n")
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerows(rows)
    atomic_write_text(path, buf.getvalue())


def read_rows(path: str | os.PathLike) -> list[dict]:
    """Rows of a results CSV as dicts with typed values.

    Parameters
    ----------
    path : str or os.PathLike
        The results CSV (UTF-8, a byte order mark allowed).

    Returns
    -------
    list of dict
        One dict per row, `CSV_COLUMNS` as keys: ``blocks``, ``seed`` and ``iteration``
        as int, ``time``, ``flops``, ``cost`` and ``error`` as float, the others as str.

    Raises
    ------
    ValueError
        If the file lacks any column of `CSV_COLUMNS`.
    """
    path = Path(path)
    reader = None
    try:
        # (utf-8-sig: a CSV saved again by a spreadsheet starts with a byte order mark,
        # which made the first column's name "\ufeffpart": "missing column(s) part")
        with path.open(encoding="utf-8-sig", newline="") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in CSV_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                names = set(reader.fieldnames or [])
                # (a user plotted the trace.csv of `rssm solve --out` and was told only
                # which columns it lacked)
                hint = ("; it looks like the trace.csv of one run (rssm solve --out): "
                        "rssm plot draws the results.csv that rssm reproduce writes"
                        if {"iteration", "cost"} <= names and "part" not in names else "")
                raise ValueError(f"{path} is not an rssm results CSV: missing column(s) "
                                 f"{', '.join(missing)}{hint}")
            return [_typed_row(path, reader.line_num, row) for row in reader]
    except UnicodeDecodeError:
        # an audit: a binary file (X.npy) or Latin-1 text gave the bare codec error (and
        # the error's position counts from the reader's last chunk, not the file's start)
        data = path.read_bytes()
        try:
            data.decode("utf-8")
            at = ""
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            at = f" at byte {exc.start}, line {line}"
        raise ValueError(f"{path} is not an rssm results CSV: not UTF-8 text{at}") from None
    except csv.Error as exc:
        # (a cell over the csv module's field limit said which file, not where in it;
        # the reader counts the lines it has finished, not the one it failed on)
        at = f", line {reader.line_num + 1}" if reader is not None else ""
        raise ValueError(f"{path}{at} is not an rssm results CSV: {exc}") from None


_TYPES = {"part": str, "problem": str, "method": str, "blocks": int, "seed": int,
          "stepsize": str, "iteration": int, "time": float, "flops": float, "cost": float,
          "error": float}


def _typed_row(path: Path, line: int, row: dict) -> dict:
    if any(c.strip() for c in row.get(None) or ()):
        # csv.DictReader files cells beyond the header under None: a row that was cut and
        # glued to the next, or columns added by hand (empty ones, a trailing comma a
        # spreadsheet wrote, are let through)
        raise ValueError(f"{path}, line {line}: {len(row) - 1 + len(row[None])} cells, the "
                         f"header has {len(row) - 1}")
    out = {}
    for c, kind in _TYPES.items():
        if row[c] is not None and "\x00" in row[c]:
            # an audit: a NUL byte inside a name cell was read without a word (and carried
            # into the run's key and the figures' legends)
            raise ValueError(f"{path}, line {line}: column {c} holds a NUL byte")
        try:
            out[c] = row[c] if kind is str else kind(row[c])
        except (TypeError, ValueError):
            # an audit: one bad cell said only "could not convert string to float"
            what = "missing" if row[c] is None else f"{row[c]!r}, not " + (
                "an integer" if kind is int else "a number")
            raise ValueError(f"{path}, line {line}: column {c} is {what}") from None
    # values no run writes, which the log axes dropped without a word (an audit: an error
    # of inf left a gap in a band, a time of -1 vanished)
    for c in ("time", "flops"):
        if not (math.isfinite(out[c]) and out[c] >= 0):
            raise ValueError(f"{path}, line {line}: column {c} is {row[c]!r}; it must be a "
                             "finite number >= 0")
    if out["error"] < 0 or out["error"] == math.inf:
        raise ValueError(f"{path}, line {line}: column error is {row['error']!r}; it must be "
                         "a finite number >= 0 (or nan where unknown)")
    return out


def finished_runs(rows: Iterable[dict]) -> set[tuple]:
    """The `RUN_KEY` tuples present in ``rows`` (a run's rows are written all at once).

    Parameters
    ----------
    rows : iterable of dict
        Rows as `read_rows` gives them.

    Returns
    -------
    set of tuple
        The distinct (part, problem, method, seed, stepsize) of the rows.
    """
    return {tuple(r[c] for c in RUN_KEY) for r in rows}


def _json_default(obj):
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"cannot write {type(obj).__name__} to JSON")


def write_json(path: str | os.PathLike, data: dict) -> None:
    """Write ``data`` as indented JSON, atomically.

    Parameters
    ----------
    path : str or os.PathLike
        The destination.
    data : dict
        JSON data; NumPy integers, floats and arrays are written as numbers and lists.
    """
    atomic_write_text(path, json.dumps(data, indent=2, default=_json_default) + "\n")


def read_json(path: str | os.PathLike) -> dict:
    """Read a JSON file.

    Parameters
    ----------
    path : str or os.PathLike
        The file (UTF-8).

    Returns
    -------
    dict
        Its content, as `json.load` gives it.
    """
    with Path(path).open(encoding="utf-8") as fh:
        return json.load(fh)


def read_run_json(path: str | os.PathLike) -> dict:
    """Read the ``results.json`` of a reproduction, or raise a ValueError that names the
    file and what is wrong with it (a damaged one gave a bare "Expecting value: line 1
    column 1 (char 0)", or a KeyError traceback where it held another object).

    Parameters
    ----------
    path : str or os.PathLike
        The ``results.json`` file.

    Returns
    -------
    dict
        Its content.

    Raises
    ------
    ValueError
        When the file is not JSON or not laid out as `rssm reproduce` writes it.
    """
    try:
        doc = read_json(path)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc.msg}, line {exc.lineno} column "
                         f"{exc.colno})") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not valid JSON (not UTF-8 text)") from None
    settings = doc.get("settings") if isinstance(doc, dict) else None
    if not (isinstance(settings, dict) and isinstance(settings.get("problems"), dict)):
        raise ValueError(f"{path} is not a results.json written by rssm reproduce (no "
                         "'settings' object with its 'problems')")
    wrong = _run_json_problem(doc)
    if wrong:
        raise ValueError(f"{path} is not a results.json written by rssm reproduce ({wrong})")
    return doc


def _run_json_problem(doc: dict) -> str:
    """What in a results.json differs from what `rssm reproduce` writes ("" if nothing
    the figures and the report read): each problem's settings against the built-in
    configuration of that name, key by key and by type, and the shapes of the lists and
    objects beside them (an audit: foreign values gave KeyError and AttributeError
    tracebacks)."""
    import numbers

    from rssm.experiments.configs import PROBLEMS

    for name, cfg in doc["settings"]["problems"].items():
        if name not in PROBLEMS:
            return f"settings.problems names {name!r}, which rssm reproduce does not run"
        if not isinstance(cfg, dict):
            return f"settings.problems.{name} is not an object"
        for key, ref in PROBLEMS[name].as_dict().items():
            if key not in cfg:
                return f"settings.problems.{name} has no {key!r}"
            val = cfg[key]
            same = (isinstance(val, numbers.Real) and not isinstance(val, bool)
                    if isinstance(ref, numbers.Real) and not isinstance(ref, bool)
                    else isinstance(val, (list, tuple)) if isinstance(ref, (list, tuple))
                    else isinstance(val, type(ref)))
            if not same:
                return f"settings.problems.{name}.{key} is {type(val).__name__}, not " \
                       f"{type(ref).__name__}"
    shapes = (("runs", list, dict), ("history", list, dict), ("tuned_choice", dict, dict))
    for key, outer, inner in shapes:
        val = doc.get(key, outer())
        items = val.values() if isinstance(val, dict) else val
        if not isinstance(val, outer) or not all(isinstance(v, inner) for v in items):
            return f"{key} is not {'a list' if outer is list else 'an object'} of objects"
    if not isinstance(doc.get("machine", {}), dict):
        return "machine is not an object"
    return ""


def machine_info() -> dict:
    """Where and with what the runs ran: platform, CPUs, Python, numpy and its BLAS."""
    info = {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or "unknown",
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "rssm": _version(),
        "thread_env": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                  "MKL_NUM_THREADS") if k in os.environ},
        "pools": [f"{i['internal_api']} ({i['num_threads']} threads)"
                  for i in threadpool_info()],
    }
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg.get("Build Dependencies", {}).get("blas", {})
        info["blas"] = {k: blas.get(k) for k in ("name", "version", "openblas configuration")
                        if blas.get(k) is not None}
    except (TypeError, AttributeError):  # numpy < 1.26 has no mode="dicts"
        info["blas"] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return info


def _version() -> str:
    from rssm import __version__

    return __version__
