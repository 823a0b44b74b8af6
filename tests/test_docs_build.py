"""The API reference and the guides build with Sphinx without a single warning (the docs
extra; the same command as in README.md: sphinx-build -W --keep-going -b html docs ...)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(any(importlib.util.find_spec(m) is None
                        for m in ("sphinx", "numpydoc", "myst_parser")),
                    reason="needs the docs extra (pip install '.[docs]')")
def test_docs_build_strictly(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-N", "-q", "-b", "html",
         "-d", str(tmp_path / "doctrees"), str(ROOT / "docs"), str(tmp_path / "html")],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    html = (tmp_path / "html" / "api" / "rssm.solvers.html")
    assert html.exists() and "minimize" in html.read_text()
