"""`rssm.torch.RSSM` and `rssm.torch.RSM`: the paper's update in torch ops, feasibility in
float64 and float32, reproducibility, step-size rules and schedulers, errors."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import rssm.torch as rt  # noqa: E402
from rssm import stiefel  # noqa: E402
from rssm.stepsizes import (  # noqa: E402
    Auto,
    BlockRule,
    Geometric,
    InverseSqrt,
    PaperSchedule,
    Polyak,
    StepContext,
)

ROOT = Path(__file__).resolve().parents[1]


def _param(n, p, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.nn.init.orthogonal_(torch.empty(n, p, dtype=torch.float64), generator=g)
    return torch.nn.Parameter(w.to(dtype))


def _l1_grad(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Gradient of ||A W||_1 (a Clarke subgradient), without autograd (fast loops)."""
    return a.T @ torch.sign(a @ w.detach())


def _cols(bounds, pair):
    (a0, a1), (b0, b1) = bounds[pair[0]], bounds[pair[1]]
    return np.r_[a0:a1, b0:b1]


def test_one_step_is_the_papers_submanifold_step():
    """Same new columns as rssm.stiefel.submanifold_step (Lemma lem-projsubmfdblk) on the
    drawn pair, to rounding; the other columns bit for bit unchanged."""
    w = _param(30, 12)
    opt = rt.RSSM([w], lr=0.05, n_blocks=4, seed=3)
    a = torch.randn(40, 30, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    for _ in range(5):
        x_before = w.detach().numpy().copy()
        w.grad = _l1_grad(a, w)
        g = w.grad.numpy().copy()
        opt.step()
        st = opt.state[w]
        cols = _cols(st["bounds"], st["last_pair"])
        want = stiefel.submanifold_step(x_before, cols, g[:, cols], 0.05)
        x_after = w.detach().numpy()
        np.testing.assert_allclose(x_after[:, cols], want, atol=1e-13)
        others = np.setdiff1d(np.arange(12), cols)
        assert np.array_equal(x_after[:, others], x_before[:, others])
    assert st["step"] == 5 and st["bounds"] == [(0, 3), (3, 6), (6, 9), (9, 12)]


def test_rsm_step_is_the_full_riemannian_step():
    w = _param(20, 6)
    opt = rt.RSM([w], lr=0.1)
    a = torch.randn(25, 20, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    x = w.detach().numpy().copy()
    w.grad = _l1_grad(a, w)
    want = stiefel.full_step(x, w.grad.numpy(), 0.1)
    opt.step()
    np.testing.assert_allclose(w.detach().numpy(), want, atol=1e-13)


def test_float64_stays_feasible_and_decreases_an_l1_loss_with_autograd():
    w = _param(16, 8)
    a = torch.randn(60, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    opt = rt.RSSM([w], lr=InverseSqrt(0.05), n_blocks=4, seed=0)
    first = float((a @ w.detach()).abs().sum())
    worst = 0.0
    for _ in range(400):
        opt.zero_grad()
        loss = (a @ w).abs().sum()
        loss.backward()
        opt.step()
        worst = max(worst, rt.feasibility(w))
    assert worst <= 1e-12
    assert float((a @ w.detach()).abs().sum()) < 0.9 * first


@pytest.mark.parametrize(("dtype", "steps", "tol"), [(torch.float64, 1000, 1e-12),
                                                     (torch.float32, 10_000, 1e-5)])
def test_feasibility_over_many_steps(dtype, steps, tol):
    """||W^T W - I||_max stays <= 1e-12 (float64) and <= 1e-5 (float32, 1e4 steps)."""
    w = _param(8, 6, dtype)
    gen = torch.Generator().manual_seed(5)
    grads = [torch.randn(8, 6, dtype=dtype, generator=gen) for _ in range(97)]
    opt = rt.RSSM([w], lr=0.05, n_blocks=3, seed=1)
    worst = 0.0
    for k in range(steps):
        w.grad = grads[k % 97]  # random directions: the iterate keeps moving
        opt.step()
        if k % 100 == 99:
            worst = max(worst, rt.feasibility(w))
    assert w.dtype == dtype
    assert worst <= tol, worst


def test_reproducible_from_seed_generator_and_global_seed():
    a = torch.randn(30, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(6))

    def run(**kw):
        w = _param(10, 6)
        opt = rt.RSSM([w], lr=0.02, n_blocks=3, **kw)
        pairs = []
        for _ in range(30):
            w.grad = _l1_grad(a, w)
            opt.step()
            pairs.append(opt.state[w]["last_pair"])
        return w.detach().clone(), pairs

    x1, p1 = run(seed=7)
    x2, p2 = run(generator=torch.Generator().manual_seed(7))
    assert torch.equal(x1, x2) and p1 == p2
    _, p3 = run(seed=8)
    assert p3 != p1
    torch.manual_seed(123)
    x4, p4 = run()
    torch.manual_seed(123)
    x5, p5 = run()
    assert torch.equal(x4, x5) and p4 == p5
    assert set(p1) == {(0, 1), (0, 2), (1, 2)}


def test_rule_sees_cost_and_subgradient_norm_and_schedulers_scale_it():
    """A rule gets (k, TorchStepContext) with the closure's loss and ||P(G_C)||; the step is
    group['lr'] * rule(k, ctx), and an LR scheduler rescales group['lr']."""
    a = torch.randn(30, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(8))
    seen = []

    def rule(k, ctx):
        seen.append((k, ctx))
        return 0.1 / (k + 1)

    w = _param(12, 6)
    opt = rt.RSSM([w], lr=rule, n_blocks=3, seed=0)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    assert opt.param_groups[0]["lr"] == 1.0
    for k in range(3):
        x = w.detach().numpy().copy()

        def closure():
            opt.zero_grad()
            loss = (a @ w).abs().sum()
            loss.backward()
            return loss

        loss = opt.step(closure)
        g = w.grad.numpy()
        st = opt.state[w]
        cols = _cols(st["bounds"], st["last_pair"])
        ctx = seen[-1][1]
        assert seen[-1][0] == k and ctx.method == "rssm" and ctx.n_blocks == 3
        assert ctx.epoch == 1.5
        assert ctx.cost == pytest.approx(float(loss), rel=1e-15)
        pg = stiefel.block_tangent_projection(x, cols, g[:, cols])
        assert ctx.subgradient_norm == pytest.approx(np.linalg.norm(pg), rel=1e-12)
        gamma = 0.5**k * 0.1 / (k + 1)
        want = stiefel.submanifold_step(x, cols, g[:, cols], gamma)
        np.testing.assert_allclose(w.detach().numpy()[:, cols], want, atol=1e-13)
        sched.step()
    assert opt.param_groups[0]["lr"] == 0.125


def test_rssm_stepsizes_rules_plug_in():
    """PaperSchedule reads ctx.method / n_blocks like in rssm.minimize."""
    rule = PaperSchedule(0.9, 2.0, 0.991)
    w = _param(12, 6)
    opt = rt.RSSM([w], lr=rule, n_blocks=3, seed=0)
    seen = []
    opt._rule = lambda k, ctx: seen.append(rule(k, ctx)) or seen[-1]
    a = torch.randn(30, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    for _ in range(3):
        w.grad = _l1_grad(a, w)
        opt.step()
    assert seen == [rule(k, StepContext("rssm", 3)) for k in range(3)]


def test_float_lr_with_scheduler_and_groups():
    w1, w2 = _param(10, 4), _param(9, 6, seed=1)
    opt = rt.RSSM([{"params": [w1]}, {"params": [w2], "n_blocks": 3, "lr": 0.01}], lr=0.1,
                  n_blocks=2, seed=0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.1)
    for w in (w1, w2):
        w.grad = torch.ones_like(w)
    opt.step()
    sched.step()
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([0.01, 0.001])
    assert len(opt.state[w1]["bounds"]) == 2 and len(opt.state[w2]["bounds"]) == 3
    assert max(rt.feasibility(w1), rt.feasibility(w2)) <= 1e-13
    # n_blocks defaults to min(5, p); a parameter without a gradient is skipped
    w3, w4 = _param(8, 7), _param(8, 3)
    opt = rt.RSSM([w3, w4], lr=0.1)
    w3.grad = torch.ones_like(w3)
    before = w4.detach().clone()
    opt.step()
    assert len(opt.state[w3]["bounds"]) == 5 and w4 not in opt.state
    assert torch.equal(w4.detach(), before)


def test_non_finite_gradient_leaves_the_parameter_unchanged():
    w = _param(10, 4)
    opt = rt.RSSM([w], lr=0.1, n_blocks=2, seed=0)
    before = w.detach().clone()
    w.grad = torch.full_like(w, math.nan)
    with pytest.raises(FloatingPointError, match="non-finite"):
        opt.step()
    assert torch.equal(w.detach(), before)
    ropt = rt.RSM([w], lr=0.1)
    with pytest.raises(FloatingPointError, match="non-finite"):
        ropt.step()
    assert torch.equal(w.detach(), before)


@pytest.mark.parametrize(("make", "exc", "match"), [
    (lambda: rt.RSSM([torch.nn.Parameter(torch.zeros(2, 4, 3))], lr=0.1), ValueError,
     r"shape \(2, 4, 3\).*2-D"),
    (lambda: rt.RSSM([torch.nn.Parameter(torch.eye(4)[:3])], lr=0.1), ValueError, "n < p"),
    (lambda: rt.RSSM([torch.nn.Parameter(2 * torch.eye(4))], lr=0.1), ValueError,
     "orthonormal columns.*orthogonal_"),
    (lambda: rt.RSSM([torch.nn.Parameter(torch.eye(4, dtype=torch.float16))], lr=0.1),
     TypeError, "float32 and float64"),
    (lambda: rt.RSSM([torch.nn.Parameter(torch.eye(4)[:, :1])], lr=0.1), ValueError,
     "p >= 2.*RSM"),
    (lambda: rt.RSSM([torch.nn.Parameter(torch.eye(4))], lr=0.1, n_blocks=5), ValueError,
     "n_blocks must satisfy 2 <= n_blocks <= p = 4"),
    (lambda: rt.RSSM([torch.nn.Parameter(torch.eye(4))], lr=-1.0), ValueError, "lr must be"),
    (lambda: rt.RSSM([torch.nn.Parameter(torch.eye(4))], lr="big"), TypeError, "lr must be"),
    (lambda: rt.RSSM([torch.nn.Parameter(torch.eye(4))], lr=0.1, seed=1,
                     generator=torch.Generator()), ValueError, "generator or seed"),
])
def test_errors(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


def test_example_at_a_tiny_size():
    """examples/torch_orthogonal_layer.py end to end (RSSM against Geoopt when installed)."""
    spec = importlib.util.spec_from_file_location(
        "torch_orthogonal_layer", ROOT / "examples" / "torch_orthogonal_layer.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = mod.main(["--n", "12", "--p", "6", "--m", "200", "--steps", "40", "--chunk", "10",
                    "--blocks", "3", "--float64"])
    rs = out["rssm.torch.RSSM (l=3)"]
    assert rs["feasibility"] <= 1e-12 and rs["ms_per_step"] > 0
    assert rs["history"][-1][0] == 40 and rs["loss"] < rs["history"][0][2]
    if importlib.util.find_spec("geoopt") is not None:
        assert "geoopt RiemannianSGD" in out


def test_state_dict_round_trip():
    """Saving and loading the optimizer state (torch.save / weights_only torch.load) keeps
    the step counters, blocks and pending pair draws; steps go on feasibly."""
    import io

    w = _param(10, 6)
    opt = rt.RSSM([w], lr=0.1, n_blocks=3, seed=0)
    gen = torch.Generator().manual_seed(3)
    for _ in range(5):
        w.grad = torch.randn(10, 6, dtype=torch.float64, generator=gen)
        opt.step()
    buf = io.BytesIO()
    torch.save(opt.state_dict(), buf)
    buf.seek(0)
    opt2 = rt.RSSM([w], lr=0.1, n_blocks=3, seed=0)
    opt2.load_state_dict(torch.load(buf))
    st, st2 = opt.state[w], opt2.state[w]
    assert st2["step"] == 5 and st2["bounds"] == st["bounds"] and st2["pairs"] == st["pairs"]
    x = w.detach().clone()
    w.grad = torch.randn(10, 6, dtype=torch.float64, generator=gen)
    opt.step()
    x_a = w.detach().clone()
    w.data.copy_(x)
    opt2.step()
    assert torch.equal(w.detach(), x_a) and rt.feasibility(w) <= 1e-13


@pytest.mark.parametrize("rule", [Auto(), BlockRule(), Polyak(0.0)])
def test_rules_that_need_the_minimize_loop_are_refused_by_name(rule):
    w = torch.nn.Parameter(torch.from_numpy(
        stiefel.random_point(8, 4, np.random.default_rng(0))))
    with pytest.raises(TypeError, match=f"lr={type(rule).__name__}.*only rssm.minimize"):
        rt.RSSM([w], lr=rule, n_blocks=2, seed=0)


def test_a_geometric_rule_that_restarts_is_refused_by_name():
    # its restart reads the minimize loop's freeze test (StepContext.escapes): it was
    # accepted and failed at the first step with an AttributeError
    w = torch.nn.Parameter(torch.from_numpy(
        stiefel.random_point(8, 4, np.random.default_rng(0))))
    for cls, kw in ((rt.RSSM, {"n_blocks": 2, "seed": 0}), (rt.RSM, {})):
        with pytest.raises(TypeError, match=r"restart=True .* rssm.minimize's loop"):
            cls([w], lr=Geometric(0.1, 0.9, restart=True), **kw)
        opt = cls([w], lr=Geometric(0.1, 0.9), **kw)       # the plain schedule works
        w.grad = torch.ones_like(w)
        opt.step()
        assert rt.feasibility(w) <= 1e-13


def test_add_param_group_checks_like_the_constructor():
    """Issue 19, defect 10: add_param_group checked nothing (a non-orthonormal W was
    silently replaced at step(), n < p accepted, n_blocks=99 an IndexError at step()).
    A refused group is not added."""
    w = _param(10, 4)
    opt = rt.RSSM([w], lr=0.1, n_blocks=2, seed=0)
    bad = torch.nn.Parameter(2 * torch.eye(6, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="orthonormal columns"):
        opt.add_param_group({"params": [bad]})
    with pytest.raises(ValueError, match="n < p"):
        opt.add_param_group({"params": [torch.nn.Parameter(torch.eye(4).double()[:3])]})
    with pytest.raises(ValueError, match="n_blocks must satisfy 2 <= n_blocks <= p = 4"):
        opt.add_param_group({"params": [_param(8, 4, seed=1)], "n_blocks": 99})
    with pytest.raises(ValueError, match=r"param_groups\[1\]\['lr'\] must be"):
        opt.add_param_group({"params": [_param(8, 4, seed=1)], "lr": -1.0})
    assert len(opt.param_groups) == 1
    w2 = _param(8, 4, seed=1)
    opt.add_param_group({"params": [w2], "n_blocks": 4, "lr": np.float32(0.05)})
    w.grad, w2.grad = torch.ones_like(w), torch.ones_like(w2)
    opt.step()
    assert len(opt.state[w2]["bounds"]) == 4 and rt.feasibility(w2) <= 1e-13


def test_numpy_scalars_as_lr_and_as_a_rules_value():
    """Issue 19, defect 10: lr=np.float32(0.01) was refused, and a rule returning
    np.float32(0.01) was told it "must be a finite number > 0"."""
    a = torch.randn(20, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    finals = []
    for lr in (0.25, np.float32(0.25), lambda k, ctx: np.float32(0.25)):
        w = _param(8, 4)
        opt = rt.RSSM([w], lr=lr, n_blocks=2, seed=0)
        for _ in range(3):
            w.grad = _l1_grad(a, w)
            opt.step()
        finals.append(w.detach().clone())
    assert torch.equal(finals[0], finals[1]) and torch.equal(finals[0], finals[2])
    with pytest.raises(ValueError, match="must be a finite number > 0"):
        w = _param(8, 4)
        opt = rt.RSSM([w], lr=lambda k, ctx: np.float32(-1), n_blocks=2, seed=0)
        w.grad = _l1_grad(a, w)
        opt.step()


def test_the_optimizers_call_the_solvers_kernels(monkeypatch):
    """Issue 19: one copy of the geometry. The torch steps go through rssm.stiefel's
    kernels (the ones RSSMSolver and RSMSolver call) with torch's operations."""
    from rssm import stiefel as st

    calls = []
    for name in ("block_descent_direction", "block_candidate", "descent_direction",
                 "full_candidate", "_polar_gram"):
        real = getattr(st, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            calls.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(st, name, spy)
    w = _param(10, 4)
    w.grad = torch.ones_like(w)
    rt.RSSM([w], lr=0.1, n_blocks=2, seed=0).step()
    rt.RSM([w], lr=0.1).step()
    assert calls[:2] == ["block_descent_direction", "block_candidate"]
    assert "descent_direction" in calls and "full_candidate" in calls
    assert not hasattr(rt, "_polar") and not hasattr(rt, "_block_step")


def test_numpy_integers_as_seed_and_blocks_and_an_lr_edited_after_construction():
    """np.int64 seeds and block counts are ints (before: "seed must be an int >= 0, got
    np.int64(1)"); an lr set to a negative number in param_groups after construction is
    refused at the next step (before: the step moved uphill); 0, where an annealing
    scheduler ends, leaves the parameter where it is."""
    a = torch.randn(20, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    runs = []
    for seed, nb in ((1, 2), (np.int64(1), np.int64(2))):
        w = _param(8, 4)
        opt = rt.RSSM([w], lr=0.1, n_blocks=nb, seed=seed)
        w.grad = _l1_grad(a, w)
        opt.step()
        runs.append(w.detach().clone())
    assert torch.equal(runs[0], runs[1])
    opt.param_groups[0]["lr"] = 0.0
    before = w.detach().clone()
    w.grad = _l1_grad(a, w)
    opt.step()
    assert torch.equal(w.detach(), before)
    opt.param_groups[0]["lr"] = -0.1
    with pytest.raises(ValueError, match=r"param_groups\[0\]\['lr'\] must be a finite number "
                                         r">= 0, got -0.1"):
        opt.step()
    assert torch.equal(w.detach(), before)


def _ortho(n=16, p=8, dtype=torch.float64):
    return torch.nn.Parameter(torch.nn.init.orthogonal_(torch.empty(n, p, dtype=dtype)))


@pytest.mark.parametrize("make", [lambda w: rt.RSSM([w], lr=0.01, n_blocks=4, seed=0),
                                  lambda w: rt.RSM([w], lr=0.01)],
                         ids=["rssm", "rsm"])
def test_copies_step_and_a_resumed_run_is_the_run_never_stopped(make):
    """deepcopy, pickle and torch.save of the optimizer kept only torch's fields, so the
    copy could not step ("no attribute '_pairs'"); and state_dict held no generator state,
    so a run resumed with load_state_dict drew other block pairs once the 256 saved draws
    ran out (max|W - W2| = 0.18 after 200 more steps)."""
    import copy
    import io
    import pickle

    torch.manual_seed(0)
    w = _ortho()
    opt = make(w)
    grads = [torch.randn(16, 8, dtype=torch.float64,
                         generator=torch.Generator().manual_seed(i)) for i in range(700)]
    for g in grads[:100]:
        w.grad = g.clone()
        opt.step()
    buf = io.BytesIO()
    torch.save(opt.state_dict(), buf)
    saved_w = w.detach().clone()
    copies = [copy.deepcopy(opt), pickle.loads(pickle.dumps(opt))]
    for c in copies:
        p = c.param_groups[0]["params"][0]
        p.grad = grads[100].clone()
        c.step()
    w2 = torch.nn.Parameter(saved_w.clone())
    opt2 = make(w2)
    buf.seek(0)
    opt2.load_state_dict(torch.load(buf, weights_only=True))
    for g in grads[100:]:
        w.grad, w2.grad = g.clone(), g.clone()
        opt.step()
        opt2.step()
    assert torch.equal(w, w2)
    assert torch.equal(copies[0].param_groups[0]["params"][0],
                       copies[1].param_groups[0]["params"][0])


def test_argument_edges_a_user_meets():
    """A NumPy int as a group's n_blocks, a rule returning a scalar tensor and a NumPy
    float atol are taken; a seed beyond 2**63, a parameter turned float16 after
    construction and a float32-made start converted to float64 get rssm's own words."""
    w = _ortho()
    rt.RSSM([{"params": [w], "n_blocks": np.int64(4)}], seed=0)
    opt = rt.RSSM([w], lr=lambda k, ctx: torch.tensor(0.1), seed=0)
    w.grad = torch.ones_like(w)
    opt.step()
    rt.RSSM([w], seed=0, atol=np.float32(1e-6))
    with pytest.raises(ValueError, match=r"atol must be a number > 0"):
        rt.RSSM([w], seed=0, atol=True)
    with pytest.raises(ValueError, match=r"seed must be an int in \[0, 2\*\*63\)"):
        rt.RSSM([w], seed=2**70)
    lin = torch.nn.Linear(8, 16)
    torch.nn.init.orthogonal_(lin.weight)
    with pytest.raises(ValueError, match=r"orthonormal at float32's precision.*atol=1e-4"):
        rt.RSSM([torch.nn.Parameter(lin.weight.detach().double())])
    v = _ortho(dtype=torch.float32)
    opt = rt.RSSM([v], seed=0)
    v.data = v.data.half()
    v.grad = torch.ones_like(v)
    with pytest.raises(TypeError, match=r"now has dtype torch.float16"):
        opt.step()


def test_building_the_optimizer_draws_nothing_from_torchs_global_generator():
    """Without seed or generator the pair stream follows torch.manual_seed but is no
    longer drawn from the global generator, whose later draws (dropout, shuffling) are
    those any other optimizer leaves."""
    w = _ortho()
    torch.manual_seed(3)
    ref = torch.rand(4)
    torch.manual_seed(3)
    opt = rt.RSSM([w], n_blocks=4)
    assert torch.equal(torch.rand(4), ref)
    runs = []
    for _ in range(2):
        torch.manual_seed(3)
        v = torch.nn.Parameter(w.detach().clone())
        o = rt.RSSM([v], lr=0.01, n_blocks=4)
        for i in range(300):
            v.grad = torch.full_like(v, float(i % 7) - 3.0)
            o.step()
        runs.append(v.detach().clone())
    assert torch.equal(runs[0], runs[1]) and opt.generator is not None


@pytest.mark.parametrize("cls", ["RSSM", "RSM"])
def test_a_refused_step_changes_no_parameter(cls):
    """One parameter with a NaN gradient among several: the step raised only after the
    parameters before it had moved (and counted a step), so a caller that skips the bad
    batch went on with a model half stepped."""
    torch.manual_seed(0)
    ws = [torch.nn.Parameter(torch.nn.init.orthogonal_(torch.empty(8, 4, dtype=torch.float64)))
          for _ in range(3)]
    kw = {"n_blocks": 2, "seed": 0} if cls == "RSSM" else {}
    opt = getattr(rt, cls)(ws, lr=0.1, **kw)
    before = [w.detach().clone() for w in ws]
    for i, w in enumerate(ws):
        w.grad = (torch.full((8, 4), math.nan, dtype=torch.float64) if i == 1
                  else torch.randn(8, 4, dtype=torch.float64))
    with pytest.raises(FloatingPointError, match="no parameter was changed"):
        opt.step()
    for w, b in zip(ws, before, strict=True):
        assert torch.equal(w.detach(), b)
        assert opt.state[w].get("step") is None
    ws[1].grad = torch.randn(8, 4, dtype=torch.float64)     # the next batch is fine
    opt.step()
    assert all(opt.state[w]["step"] == 1 and rt.feasibility(w) <= 1e-13 for w in ws)
    assert not any(torch.equal(w.detach(), b) for w, b in zip(ws, before, strict=True))


def test_changing_n_blocks_after_a_step_takes_effect_and_a_foreign_state_is_named():
    """A group's n_blocks edited after the first step was ignored (the blocks kept in the
    state won); a state dict of a parameter with other columns loaded and failed at the
    next step with torch's "INDICES element is out of DATA bounds"."""
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.nn.init.orthogonal_(torch.empty(10, 6, dtype=torch.float64)))
    opt = rt.RSSM([w], lr=0.1, n_blocks=3, seed=0)
    w.grad = torch.randn(10, 6, dtype=torch.float64)
    opt.step()
    assert opt.state[w]["bounds"] == [(0, 2), (2, 4), (4, 6)]
    opt.param_groups[0]["n_blocks"] = 2
    opt.step()
    assert opt.state[w]["bounds"] == [(0, 3), (3, 6)]
    assert opt.state[w]["last_pair"] == (0, 1) and rt.feasibility(w) <= 1e-13
    v = torch.nn.Parameter(torch.nn.init.orthogonal_(torch.empty(10, 4, dtype=torch.float64)))
    other = rt.RSSM([v], lr=0.1, n_blocks=2, seed=0)
    other.load_state_dict(opt.state_dict())
    v.grad = torch.randn(10, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match="holds blocks of 6 columns but the parameter has p = 4"):
        other.step()


def test_a_generator_state_of_another_device_is_refused_before_anything_is_loaded():
    """A state dict saved with a CUDA generator, loaded into an optimizer built with seed=
    (a CPU generator): torch's "Expected a CPUGeneratorImplState of size 5056" came after
    the rest of the dict had been loaded. (On a machine with CUDA the optimizer's own
    generator is replaced by one on that device; the GPU check runs that.)"""
    w = torch.nn.Parameter(torch.nn.init.orthogonal_(torch.empty(8, 4, dtype=torch.float64)))
    opt = rt.RSSM([w], lr=0.1, n_blocks=2, seed=0)
    w.grad = torch.randn(8, 4, dtype=torch.float64)
    opt.step()
    saved = opt.state_dict()
    assert saved["generator_device"] == "cpu"
    foreign = {**saved, "generator_state": torch.zeros(16, dtype=torch.uint8)}
    fresh = rt.RSSM([w], lr=0.5, n_blocks=2, seed=1)
    for device, where in ((None, "a generator of another device"),
                          ("nosuch:0", "a nosuch:0 generator")):
        d = dict(foreign)
        if device is None:
            d.pop("generator_device")
        else:
            d["generator_device"] = device
        with pytest.raises(ValueError, match=f"saved from {where}.*nothing was loaded"):
            fresh.load_state_dict(d)
        assert fresh.param_groups[0]["lr"] == 0.5 and not fresh.state
    fresh.load_state_dict(saved)                        # the same device: resumes
    assert fresh.param_groups[0]["lr"] == 0.1 and fresh.state[w]["step"] == 1
    assert torch.equal(fresh.generator.get_state(), opt.generator.get_state())


def test_a_ctrl_c_while_a_step_writes_leaves_the_step_whole(monkeypatch):
    """A real SIGINT while a step wrote its parameters moved one of two, or left a moved
    parameter's count behind (an audit, 2 of 400 trials); it is held until every parameter
    and count is written, then raised."""
    import os
    import signal

    torch.manual_seed(0)
    ws = [torch.nn.Parameter(torch.nn.init.orthogonal_(torch.empty(8, 4, dtype=torch.float64)))
          for _ in range(2)]
    opt = rt.RSM(ws, lr=0.1)
    before = [w.detach().clone() for w in ws]
    real = type(opt)._commit
    sent = []

    def commit(self, w, new, sel):
        if not sent:
            sent.append(1)
            os.kill(os.getpid(), signal.SIGINT)      # lands between the two writes
        real(self, w, new, sel)

    monkeypatch.setattr(type(opt), "_commit", commit)
    for w in ws:
        w.grad = torch.randn(8, 4, dtype=torch.float64)
    with pytest.raises(KeyboardInterrupt):
        opt.step()
    assert all(not torch.equal(w.detach(), b) for w, b in zip(ws, before, strict=True))
    assert [opt.state[w]["step"] for w in ws] == [1, 1]


def test_a_scheduler_annealing_to_zero_through_a_rounding_below_it_steps_on():
    """A user's audit: LinearLR(end_factor=0.0) from lr 0.05 over 5 steps (its default
    start_factor 1/3) lands on
    lr = -7.4e-19, and step() refused it as a negative lr (torch's SGD steps on). A
    rounding below 0 of at most 1e-12 of the scheduler's initial lr is a zero step; a
    negative lr set by hand is still refused."""
    w = _param(20, 5)
    opt = rt.RSSM([w], lr=0.05, seed=0)
    sched = torch.optim.lr_scheduler.LinearLR(opt, end_factor=0.0, total_iters=5)
    for _ in range(7):
        w.grad = torch.ones_like(w)
        before = w.detach().clone()
        opt.step()
        sched.step()
    assert opt.param_groups[0]["lr"] <= 0.0
    assert torch.equal(w.detach(), before)          # the last steps at lr ~ 0: no move
    opt.param_groups[0]["lr"] = -1e-3
    w.grad = torch.ones_like(w)
    with pytest.raises(ValueError, match=r"'lr'\] must be a finite number >= 0"):
        opt.step()
    opt.param_groups[0]["initial_lr"] = math.inf      # (a review: inf let it through)
    with pytest.raises(ValueError, match=r"'lr'\] must be a finite number >= 0"):
        opt.step()
    opt.param_groups[0]["initial_lr"] = torch.tensor(0.05)
    opt.param_groups[0]["lr"] = -1e-19
    opt.step()                                        # a tensor initial_lr is read too
    assert torch.equal(w.detach(), before)


def test_a_float32_parameter_stays_feasible_under_long_steps():
    # the c x c eigendecomposition of long steps runs in float64 (the module's docs); in
    # float32 the parameter drifted 6 times further from St(n, p) (a mutation audit)
    from rssm._torch_ops import feasibility

    torch.manual_seed(0)
    y = torch.randn(30, 400)
    w = torch.nn.Parameter(torch.nn.init.orthogonal_(torch.empty(30, 12)))
    opt = rt.RSSM([w], lr=3.0, n_blocks=3, seed=0)
    for _ in range(50):
        opt.zero_grad()
        loss = (y.T @ w).abs().sum() / 400
        loss.backward()
        opt.step()
    assert w.dtype == torch.float32 and feasibility(w) < 4e-7


@pytest.mark.parametrize("make", [lambda w: rt.RSM([w], lr=1e-2),
                                  lambda w: rt.RSSM([w], lr=1e-2, n_blocks=2, seed=0)],
                         ids=["RSM", "RSSM"])
def test_a_closure_may_return_per_sample_losses_unless_a_rule_reads_them(make):
    """A user's audit: a closure that calls backward() on the mean and returns the
    per-sample losses (fine for torch.optim.SGD) raised "only one element tensors can be
    converted to Python scalars"; only a step-size rule reads the loss."""
    a = torch.randn(40, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(3))

    def closure_of(opt, w):
        def closure():
            opt.zero_grad()
            per_sample = (a @ w).abs().sum(dim=1)
            per_sample.mean().backward()
            return per_sample
        return closure

    w = _param(10, 4)
    opt = make(w)
    before = w.detach().clone()
    out = opt.step(closure_of(opt, w))
    assert tuple(out.shape) == (40,)
    assert not torch.equal(w.detach(), before)
    w = _param(10, 4)
    opt = rt.RSM([w], lr=lambda k, ctx: 1e-2)
    with pytest.raises(ValueError, match=r"closure returned a loss of shape \(40,\); the "
                                         r"step-size rule .* one number"):
        opt.step(closure_of(opt, w))
