"""Every python block of docs/interop.md and of README.md's "Use from Pymanopt and PyTorch"
section runs as is (in this process, each in a fresh namespace)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _blocks():
    out = []
    doc = (ROOT / "docs" / "interop.md").read_text()
    out += [("interop.md", i, b) for i, b in enumerate(re.findall(r"```python\n(.*?)```", doc,
                                                                  re.S))]
    readme = (ROOT / "README.md").read_text()
    sec = re.search(r"^## Use from Pymanopt and PyTorch\n(.*?)(?=^## |\Z)", readme, re.M | re.S)
    if sec:
        out += [("README.md", i, b)
                for i, b in enumerate(re.findall(r"```python\n(.*?)```", sec.group(1), re.S))]
    return out


@pytest.mark.parametrize(("doc", "index", "code"), _blocks(),
                         ids=lambda v: v if isinstance(v, (str, int)) and len(str(v)) < 20
                         else "")
def test_block_runs(doc, index, code):
    for mod in ("torch", "pymanopt"):
        if re.search(rf"^\s*(import|from) {mod}\b", code, re.M):
            pytest.importorskip(mod)
    try:
        import jax
        x64 = jax.config.jax_enable_x64
    except ImportError:
        jax = None
    try:
        exec(compile(code, f"<{doc} block {index}>", "exec"), {"__name__": "__doc_block__"})
    finally:
        if jax is not None:  # importing pymanopt turns jax's x64 flag on
            jax.config.update("jax_enable_x64", x64)
