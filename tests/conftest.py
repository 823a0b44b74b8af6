"""Shared fixtures: small problem instances with fixed seeds (cheap enough for every test)."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest

import rssm

ROOT = Path(__file__).resolve().parents[1]


def import_pymanopt():
    """Import pymanopt (or skip), undoing the global jax_enable_x64 = True that importing it
    sets when jax is installed (other tests check that rssm leaves the flag alone; a test
    that imported pymanopt plainly made them depend on the order of the tests)."""
    try:
        import jax
    except ImportError:
        return pytest.importorskip("pymanopt")
    old = jax.config.jax_enable_x64
    try:
        return pytest.importorskip("pymanopt")
    finally:
        jax.config.update("jax_enable_x64", old)


@pytest.fixture
def pymanopt_module():
    """`import_pymanopt` as a fixture."""
    return import_pymanopt()


@pytest.fixture
def benchmark_module(monkeypatch):
    """``load(name)``: the module ``benchmarks.<name>`` of the repository (its root put on
    sys.path for the test), or the test skipped where benchmarks/ is not checked out."""
    def load(name: str):
        if not (ROOT / "benchmarks" / f"{name}.py").exists():
            pytest.skip("benchmarks/ is not part of this checkout")
        monkeypatch.syspath_prepend(str(ROOT))
        return importlib.import_module(f"benchmarks.{name}")
    return load


@pytest.fixture(scope="session")
def small_dpcp() -> rssm.problems.DPCP:
    """DPCP on St(20, 16): 4-dimensional subspace, 60 inliers, 40 outliers (seed 11)."""
    return rssm.problems.DPCP.synthetic(n=20, d=4, n_inliers=60, n_outliers=40, seed=11)


@pytest.fixture(scope="session")
def small_odl() -> rssm.problems.ODL:
    """ODL on St(8, 8) with m = round(10 * 8^1.5) = 226 samples, theta = 0.3 (seed 12)."""
    return rssm.problems.ODL.synthetic(n=8, theta=0.3, seed=12)


@pytest.fixture
def rng() -> np.random.Generator:
    """A fresh generator with a fixed seed for each test."""
    return np.random.default_rng(20260601)


@pytest.fixture(autouse=True)
def _sigint_handler_restored():
    """Some libraries used by the tests (Dask's LocalCluster among them) leave SIGINT
    ignored in this process; an ignored signal is inherited by child processes, so a later
    test's child would not see Ctrl-C. Restore Python's handler after every test."""
    import signal

    yield
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.default_int_handler)
