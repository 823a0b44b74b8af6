"""Interruption: a KeyboardInterrupt inside `rssm.minimize` returns a Result with stop
reason ``interrupted``, the last iterate and the trace so far (docs/guarantees.md)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import rssm
from rssm.problems import DPCP
from rssm.problems.dpcp import _DPCPOracle
from rssm.stepsizes import PaperSchedule
from rssm.stopping import StopReason


@pytest.fixture(scope="module")
def prob() -> DPCP:
    return DPCP.synthetic(n=15, d=3, n_inliers=60, n_outliers=40, seed=21)


class _InterruptAt(PaperSchedule):
    """The paper's DPCP schedule, raising KeyboardInterrupt when asked for gamma_k, k = at."""

    def __init__(self, at: int):
        super().__init__(0.9, 2.0, 0.991)
        self._at = at

    def __call__(self, k, ctx):
        if k == self._at:
            raise KeyboardInterrupt
        return super().__call__(k, ctx)


@pytest.mark.parametrize("method", ["rssm", "rsm"])
@pytest.mark.parametrize("k", [0, 1, 37])
def test_interrupt_in_the_step_size_returns_the_run_so_far(prob, method, k):
    """Interrupting before step k gives exactly the run stopped after k iterations."""
    ref = rssm.minimize(prob, method=method, n_blocks=4, stepsize=PaperSchedule.dpcp(),
                        max_iter=k, seed=8, record_every=5)
    res = rssm.minimize(prob, method=method, n_blocks=4, stepsize=_InterruptAt(k),
                        max_iter=1000, seed=8, record_every=5)
    assert res.stop_reason is StopReason.INTERRUPTED and res.success
    assert res.n_iter == k and res.message == f"interrupted by the user after {k} iterations"
    np.testing.assert_array_equal(res.x, ref.x)
    # the last row is recomputed after the interrupt from freshly rebuilt caches, which may
    # differ from the incremental ones in the last bit
    assert res.fun == pytest.approx(ref.fun, rel=1e-14)
    assert res.error == pytest.approx(ref.error, rel=1e-12, abs=1e-15)
    np.testing.assert_array_equal(res.trace["iteration"], ref.trace["iteration"])
    np.testing.assert_array_equal(res.trace["flops"], ref.trace["flops"])
    for col in ("cost", "error"):
        np.testing.assert_array_equal(res.trace[col][:-1], ref.trace[col][:-1])
    assert res.trace["iteration"][-1] == k
    assert res.feasibility <= 1e-12


def test_interrupt_in_the_callback(prob):
    calls = []

    def cb(progress):
        calls.append(progress.iteration)
        if progress.iteration == 30:
            raise KeyboardInterrupt

    res = rssm.minimize(prob, n_blocks=3, max_iter=500, seed=1, record_every=10, callback=cb)
    assert res.stop_reason is StopReason.INTERRUPTED and res.n_iter == 30
    assert calls == [0, 10, 20, 30]
    np.testing.assert_array_equal(res.trace["iteration"], [0, 10, 20, 30])
    assert res.fun == pytest.approx(prob.cost(res.x), rel=1e-13)


class _InterruptedOracle(_DPCPOracle):
    """DPCP oracle that raises KeyboardInterrupt in `update` (after the solver wrote the
    new columns into x, before the caches follow) on the ``at``-th call."""

    at = 10
    calls = 0

    def update(self, cols):
        type(self).calls += 1
        if type(self).calls == self.at:
            raise KeyboardInterrupt
        super().update(cols)


class _DPCPInterruptedMidStep(DPCP):
    def make_oracle(self, x, partition):
        return _InterruptedOracle(self, x, partition)


@pytest.mark.parametrize("method", ["rssm", "rsm"])
def test_interrupt_between_the_write_and_the_cache_update(prob, method):
    """The returned cost is f(x) of the returned x even when the interrupt leaves the
    caches one step behind x (they are recomputed)."""
    p2 = _DPCPInterruptedMidStep(prob.yt, prob.p, prob.subspace)
    _InterruptedOracle.calls = 0
    res = rssm.minimize(p2, method=method, n_blocks=4, max_iter=100, seed=2, record_every=1)
    assert res.stop_reason is StopReason.INTERRUPTED and res.n_iter == 9
    assert res.feasibility <= 1e-12
    assert res.fun == pytest.approx(prob.cost(res.x), rel=1e-13, abs=1e-15)
    # x already holds the 10th step: the last trace row is f(x) after it, not after 9 steps
    assert res.trace["cost"][-1] != res.trace["cost"][-2]


_CHILD = r"""
import json, sys
import rssm
prob = rssm.problems.DPCP.synthetic(n=40, d=5, n_inliers=400, n_outliers=300, seed=5)
announced = False
def cb(progress):
    global announced
    if progress.iteration >= 200 and not announced:
        print("READY", flush=True)
        announced = True
res = rssm.minimize(prob, method=sys.argv[1], n_blocks=5, max_iter=10**8, max_time=60.0,
                    seed=3, record_every=50, callback=cb)
print(json.dumps({"reason": str(res.stop_reason), "n_iter": res.n_iter, "fun": res.fun,
                  "cost": prob.cost(res.x), "feas": res.feasibility,
                  "last": int(res.trace["iteration"][-1]), "rows": len(res.trace["cost"])}))
"""


@pytest.mark.skipif(os.name != "posix", reason="SIGINT delivery to a child needs POSIX")
@pytest.mark.parametrize("method", ["rssm", "rsm"])
def test_sigint_to_a_running_process(method):
    """A real Ctrl-C (SIGINT) to a process inside minimize: it returns normally with the
    Result so far. Whatever instant the signal lands, the result must be consistent."""
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, method], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.strip() == "READY", proc.stderr.read()
        time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    data = json.loads(out.strip().splitlines()[-1])
    assert data["reason"] == "interrupted"
    assert data["n_iter"] >= 200 and data["last"] == data["n_iter"]
    assert data["rows"] >= 5
    assert data["feas"] <= 1e-12
    assert data["fun"] == pytest.approx(data["cost"], rel=1e-12)
