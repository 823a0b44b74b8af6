"""Every ```python block of README.md and docs/*.md runs as written (issue #12, item 18).

Each block must be self-contained (its imports and data included) and fast. A block that
imports an optional package that is not installed (torch, jax, ...) is skipped, naming the
package. Blocks run in a fresh interpreter, in a temporary folder, with the Agg backend.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OPTIONAL = ("torch", "jax", "dask", "distributed", "h5py", "zarr", "pymanopt", "geoopt",
            "tqdm", "sklearn", "skimage", "pandas")
_FENCE = re.compile(r"^([ \t]*)```python[ \t]*\n(.*?)^\1```[ \t]*$", re.M | re.S)


def python_blocks() -> list[tuple[str, str]]:
    """(id, code) of every ```python block, indented blocks (in list items) dedented."""
    out = []
    for path in DOCS:
        text = path.read_text()
        for m in _FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            out.append((f"{path.relative_to(ROOT)}:{line}", textwrap.dedent(m.group(2))))
    return out


BLOCKS = python_blocks()


def _missing(code: str) -> list[str]:
    mods = {m for m in OPTIONAL
            if re.search(rf"^\s*(import|from)\s+{m}\b|^\s*import\s+.*\b{m}\b", code, re.M)}
    return sorted(m for m in mods if importlib.util.find_spec(m) is None)


def test_the_docs_have_python_blocks():
    names = {b[0].split(":")[0] for b in BLOCKS}
    assert "README.md" in names and "docs/custom.md" in names
    assert len(BLOCKS) >= 6


@pytest.mark.parametrize("code", [b[1] for b in BLOCKS], ids=[b[0] for b in BLOCKS])
def test_python_block_runs(code, tmp_path):
    missing = _missing(code)
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (an optional extra), not installed")
    env = {**os.environ, "MPLBACKEND": "Agg",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"block failed:\n{code}\n--- stderr ---\n{proc.stderr}"


def _flat(path: Path) -> str:
    return " ".join(path.read_text().split())


def stated_durations() -> dict[str, str]:
    """The "quoted as" column of docs/cli.md's table "How long it takes": the one source of
    every duration the docs state (measured figures live in the docs, not in code)."""
    text = (ROOT / "docs/cli.md").read_text()
    section = text.split("## How long it takes", 1)[1]
    rows = [r.split("|")[1:-1] for r in section.splitlines() if r.startswith("| `")]
    return {cells[0].strip(): " ".join(cells[1].split()) for cells in rows}


def test_the_durations_table_is_there():
    durations = stated_durations()
    assert len(durations) == 3
    assert all(phrase.endswith("on 2 cores") for phrase in durations.values())


@pytest.mark.parametrize("doc", ["README.md", "docs/cli.md"])
def test_stated_durations_come_from_one_source(doc):
    """Issue #12, item 19: the durations in README.md, docs/cli.md and `--help` disagreed
    ("~30 s", "about a minute", "~9 min", "~15 min"). Issue 20, item 5: measured figures
    live in the docs, not in code (rssm.cli.DURATIONS is gone). The docs quote the phrases
    of docs/cli.md's table and no others; `--help` quotes none and points to docs/cli.md."""
    from rssm.cli import build_parser

    text = _flat(ROOT / doc)
    for key, phrase in stated_durations().items():
        assert phrase in text, f"{doc} does not state the duration of {key} as {phrase!r}"
    stale = re.findall(r"~\s?\d+\s?(?:s|min)\b|about a minute|about \d+ seconds", text)
    assert not stale, f"{doc} states other durations: {stale}"
    quoted = set(re.findall(r"(?:about \d+|\d+ to \d+) minutes on \d+ cores", text))
    assert quoted <= set(stated_durations().values()), quoted
    helptext = " ".join(build_parser().format_help().split())
    sub = build_parser()._subparsers._group_actions[0].choices["reproduce"].format_help()
    sub = " ".join(sub.split())
    assert "docs/cli.md" in helptext and "docs/cli.md" in sub
    assert not re.search(r"\d+ (?:minutes|seconds|min|s) on", helptext + sub)


def test_documented_parameters_match_the_signatures():
    """Every public callable (each module's ``__all__``) documents the parameters of its
    signature, in order, and no others (numpydoc's Parameters section). Pass-throughs are
    named: ``minimize``'s deprecated ``*args``/``**legacy`` (its Notes), and ``**kwargs``
    where a signature passes documented options on (Pymanopt's RSSM named them all since
    2026-11-27)."""
    import importlib
    import inspect
    import pkgutil
    import warnings

    pytest.importorskip("numpydoc")
    from numpydoc.docscrape import NumpyDocString

    import rssm

    passthrough = {"args", "legacy", "kwargs"}
    names = ["rssm"] + sorted(m.name for m in pkgutil.walk_packages(rssm.__path__, "rssm.")
                              if not m.name.endswith("__main__"))
    bad, seen = [], set()

    def check(label, doc, fn, drop_self):
        if not doc:
            return
        try:
            sig = [p.name for p in inspect.signature(fn).parameters.values()]
        except (TypeError, ValueError):
            return
        if drop_self and sig and sig[0] in ("self", "cls"):
            sig = sig[1:]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parsed = NumpyDocString(doc)
        doc_names = [n.strip().lstrip("*") for p in parsed["Parameters"]
                     for n in p.name.split(",") if n.strip()]
        if not doc_names:
            return
        sig = [n for n in sig if not (n in passthrough and n not in doc_names)]
        documented = [n for n in doc_names if n in sig or n not in passthrough]
        if "kwargs" in inspect.signature(fn).parameters:
            documented = [n for n in documented if n in sig]
        if documented != sig:
            bad.append(f"{label}: documented {documented}, signature {sig}")

    for name in names:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        for sym in getattr(mod, "__all__", []):
            obj = getattr(mod, sym, None)
            if obj is None or inspect.ismodule(obj) or id(obj) in seen:
                continue
            seen.add(id(obj))
            label = f"{getattr(obj, '__module__', name)}.{sym}"
            if inspect.isclass(obj):
                if "__init__" in obj.__dict__ or hasattr(obj, "__dataclass_fields__"):
                    check(label, inspect.getdoc(obj), obj, False)
                for attr, val in obj.__dict__.items():
                    fn = val.__func__ if isinstance(val, (staticmethod, classmethod)) else val
                    if not attr.startswith("_") and inspect.isfunction(fn):
                        check(f"{label}.{attr}", inspect.getdoc(fn), fn,
                              not isinstance(val, staticmethod))
            elif callable(obj):
                check(label, inspect.getdoc(obj), obj, False)
    assert not bad, "\n".join(bad)
