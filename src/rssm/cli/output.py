"""``rssm solve --out``: where the run goes, checked before the run, and the writers.

``--out FILE.csv`` writes the trace, ``--out FILE.json`` the settings, summary and trace,
``--out DIR`` (no suffix, or an existing folder) the solution ``X.npy``, ``trace.csv`` and
``settings.json``. Before the run, `plan` refuses (one line, exit 2) a target it could
not write: a path under a file, a file where a folder is named, a folder that cannot be
created or written, and an earlier result (a file, or a folder holding a run) unless
``--overwrite``. Every file is written to a temporary file in its folder and moved into
place; a write that fails (disk full, file size limit) removes its temporary file, keeps
the files already written, and is reported in one line by `WriteError`.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rssm.cli._common import UsageError

__all__ = ["Target", "plan", "WriteError", "write", "RUN_FILES"]

#: The files of a run folder.
RUN_FILES = ("X.npy", "trace.csv", "settings.json")


@dataclass(frozen=True)
class Target:
    """A checked ``--out``: ``path`` and whether it is a run folder.

    Parameters
    ----------
    path : pathlib.Path
        The file or folder the run is written to.
    folder : bool
        True for a run folder (``X.npy``, ``trace.csv``, ``settings.json``), False for
        one ``.csv`` or ``.json`` file.
    """

    path: Path
    folder: bool


class WriteError(Exception):
    """A result file could not be written; the message is one line (exit status 1)."""


def _first_existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists."""
    for p in (path, *path.parents):
        if p.exists() or p.is_symlink():
            return p
    return Path(".")


def _probe(folder: Path) -> str | None:
    """Why a file cannot be created in ``folder``, or None (create and remove one)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".rssm-probe.", dir=folder)
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(fd)
    os.unlink(tmp)
    return None


def plan(out: str | None, overwrite: bool) -> Target | None:
    """Check ``--out`` before the run; raise `UsageError` (exit 2) when it cannot be
    written or would replace an earlier result without ``overwrite``.

    Parameters
    ----------
    out : str or None
        The value of ``--out``: a ``.csv`` or ``.json`` file, or a folder (no suffix, a
        trailing separator, or an existing folder); None when not given.
    overwrite : bool
        ``--overwrite``: an earlier result file, or a folder holding a run, may be
        replaced.

    Returns
    -------
    Target or None
        The checked target, or None when ``out`` is None.

    Raises
    ------
    UsageError
        When the target cannot be written, or holds an earlier result and ``overwrite``
        is False.
    """
    if out is None:
        return None
    if not out.strip():
        # Path("") is ".": the run's files would land in the current folder unasked
        raise UsageError("argument --out: empty; name a .csv or .json file or a folder")
    if out.strip() == "-":
        raise UsageError("argument --out: '-' (standard output) is not supported; the "
                         "summary goes to stdout, name a .csv or .json file or a folder for "
                         "the results")
    path = Path(out)
    # a trailing separator names a folder, whatever its name ("run.v3/", as the README's
    # "--out run/"); Path drops it, so read it from the text
    slash = out.endswith(("/", os.sep))
    folder = slash or path.is_dir() or not path.suffix
    if not folder and path.suffix.lower() not in (".csv", ".json"):
        raise UsageError(f"argument --out: file name must end in .csv or .json (or name a "
                         f"folder: no suffix, or a trailing /), got {path.name!r}")
    if folder and path.exists() and not path.is_dir():
        raise UsageError(f"argument --out: {out} is a file; name a folder (no suffix) or a "
                         ".csv or .json file")
    parent = path.parent if str(path.parent) else Path(".")
    base = _first_existing(path if folder else parent)
    if not base.is_dir():
        raise UsageError(f"argument --out: {out} lies under {base}, which is a file, not a "
                         "folder")
    if not folder:
        if base != parent:
            raise UsageError(f"argument --out: folder {parent} does not exist")
        if path.exists() and not overwrite:
            raise UsageError(f"argument --out: {out} exists; choose another name, or add "
                             "--overwrite to replace it")
    elif path.exists():
        earlier = [f for f in RUN_FILES if (path / f).exists()]
        if earlier and not overwrite:
            raise UsageError(f"argument --out: {out} already holds a run ({', '.join(earlier)})"
                             "; choose another folder, or add --overwrite to replace it")
    why = _probe(base)
    if why is not None:
        raise UsageError(f"argument --out: cannot write in {base}: {why}")
    return Target(path, folder)


def _atomic(path: Path, write_fn) -> None:
    """``write_fn(fh)`` into a temporary file beside ``path``, then move it into place; on
    any failure the temporary file is removed and the error re-raised."""
    from rssm.experiments.io import replace_atomically

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write_fn(fh)
            fh.flush()
            os.fsync(fh.fileno())
        replace_atomically(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _text(text: str):
    return lambda fh: fh.write(text.encode("utf-8"))


def trace_csv(trace: dict[str, np.ndarray]) -> str:
    """The trace as CSV text, one row per recorded point (exact float reprs).

    Parameters
    ----------
    trace : dict of str to numpy.ndarray
        A run's trace (`Result.trace`), with the columns of `rssm.trace.TRACE_COLUMNS`.

    Returns
    -------
    str
        A header line of the column names, then one line per row, newline-terminated.
    """
    from rssm.trace import TRACE_COLUMNS

    lines = [",".join(TRACE_COLUMNS)]
    for i in range(len(trace["iteration"])):
        lines.append(",".join([str(int(trace["iteration"][i]))]
                              + [repr(float(trace[c][i])) for c in TRACE_COLUMNS[1:]]))
    return "\n".join(lines) + "\n"


def _size(n_bytes: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.3g} {unit}"
    return f"{int(n_bytes)} bytes"


def write(target: Target, doc: dict[str, Any], trace: dict[str, np.ndarray],
          x: np.ndarray) -> list[str]:
    """Write the run to ``target``; return the names written. ``doc`` is the settings and
    summary (see `rssm.cli.solve.document`). Raise `WriteError` naming what failed and
    what was kept.

    Parameters
    ----------
    target : Target
        Where to write (`plan`'s result): one ``.csv`` file (the trace), one ``.json``
        file (``doc`` and the trace) or a run folder.
    doc : dict
        The run's settings and summary, JSON-serializable.
    trace : dict of str to numpy.ndarray
        The run's trace (`Result.trace`).
    x : numpy.ndarray, shape (n, p)
        The solution, saved as ``X.npy`` in a run folder.

    Returns
    -------
    list of str
        The names of the files written (``[path.name]`` for one file; ``trace.csv``,
        ``X.npy``, ``settings.json`` for a folder).

    Raises
    ------
    WriteError
        When a file could not be written.
    """
    from rssm.cli._core import json_value

    if not target.folder:
        path = target.path
        if path.suffix.lower() == ".csv":
            text = trace_csv(trace)
        else:
            text = json.dumps({**doc, "trace": json_value(trace)}, indent=1) + "\n"
        try:
            _atomic(path, _text(text))
        except OSError as exc:
            raise WriteError(f"could not write {path} ({_size(len(text))}): "
                             f"{exc.strerror or exc}; nothing was written") from None
        return [path.name]
    folder = target.path
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WriteError(f"could not create folder {folder}: {exc.strerror or exc}") from None
    csv_text = trace_csv(trace)
    jobs = [("trace.csv", len(csv_text), _text(csv_text)),
            ("X.npy", x.nbytes + 128, lambda fh: np.save(fh, x))]
    written, failed = [], []
    for name, size, fn in jobs:
        try:
            _atomic(folder / name, fn)
            written.append(name)
        except OSError as exc:
            failed.append(f"{name} ({_size(size)}): {exc.strerror or exc}")
    files = {"X.npy": f"the solution X, {x.shape[0]} x {x.shape[1]}, float64",
             "trace.csv": "one row per recorded point"}
    settings = {**doc, "files": {k: v for k, v in files.items() if k in written}}
    text = json.dumps(settings, indent=1) + "\n"
    try:
        _atomic(folder / "settings.json", _text(text))
        written.append("settings.json")
    except OSError as exc:
        failed.append(f"settings.json ({_size(len(text))}): {exc.strerror or exc}")
    if failed:
        kept = ", ".join(written) if written else "nothing"
        raise WriteError(f"could not write {'; '.join(failed)} in {folder}; kept: {kept}; "
                         "no temporary file is left")
    return written
