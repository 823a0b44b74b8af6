"""Run every file in examples/ (each checks its own result with an assert), and the
"Bring your own objective" code of README.md when the README has that section."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
OPTIONAL = ("torch", "jax", "pymanopt")


def _needs(path: Path) -> list[str]:
    src = path.read_text()
    return [m for m in OPTIONAL if re.search(rf"^\s*(import|from) {m}\b", src, re.MULTILINE)]


def _run(args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "error::rssm.problem.FullSubgradientWarning",
           "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def test_there_are_examples():
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path):
    for mod in _needs(path):
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"{path.name} needs {mod} (pip install 'rssm[{mod}]')")
    proc = _run([str(path)])
    assert proc.returncode == 0, f"{path.name} failed:\n{proc.stdout}\n{proc.stderr}"
    assert proc.stdout.strip(), f"{path.name} printed nothing"


def test_readme_bring_your_own_objective_block():
    readme = ROOT / "README.md"
    text = readme.read_text() if readme.exists() else ""
    sec = re.search(r"^## Bring your own objective\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if sec is None:
        pytest.skip("README.md has no 'Bring your own objective' section yet")
    blocks = re.findall(r"```python\n(.*?)```", sec.group(1), re.S)
    assert blocks, "the section should contain a python code block"
    proc = _run(["-c", blocks[0]])
    assert proc.returncode == 0, proc.stderr
    # The README's five lines are those of examples/custom_objective.py (which asserts that
    # the run recovers X*), comments aside.
    example = (ROOT / "examples" / "custom_objective.py").read_text()
    five = re.search(r"^# --- five lines.*?\n(.*?)^# ---", example, re.M | re.S).group(1)
    code = {line.split("#")[0].strip() for line in blocks[0].splitlines()}
    for line in five.strip().splitlines():
        assert line.split("#")[0].strip() in code, f"README lacks: {line}"
