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


@pytest.mark.parametrize("doc", ["README.md", "docs/cli.md"])
def test_stated_durations_come_from_one_source(doc):
    """Issue #12, item 19: the durations in README.md, docs/cli.md and `--help` disagreed
    ("~30 s", "about a minute", "~9 min", "~15 min"). They now quote rssm.cli.DURATIONS."""
    from rssm.cli import DURATIONS, build_parser

    text = _flat(ROOT / doc)
    for key, phrase in DURATIONS.items():
        assert phrase in text, f"{doc} does not state the {key} duration as {phrase!r}"
    stale = re.findall(r"~\s?\d+\s?(?:s|min)\b|about a minute|about \d+ seconds", text)
    assert not stale, f"{doc} states other durations: {stale}"
    helptext = " ".join(build_parser().format_help().split())
    sub = build_parser()._subparsers._group_actions[0].choices["reproduce"].format_help()
    assert DURATIONS["quick"] in helptext
    assert DURATIONS["quick"] in " ".join(sub.split()) and DURATIONS["full"] in " ".join(
        sub.split())
