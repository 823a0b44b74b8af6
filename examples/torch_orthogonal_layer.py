"""An orthogonal layer trained with a nonsmooth loss: rssm.torch.RSSM against Geoopt.

The model is a linear autoencoder with tied orthogonal weights, x -> W W^T x with
W in St(n, p), trained on minibatches with the l1 reconstruction loss

    loss(W) = mean_i || x_i - W W^T x_i ||_1

(robust PCA: the data are points of a p-dimensional subspace plus 30% outliers, and the
l1 loss recovers the subspace where least squares is pulled off by the outliers).

Two copies of the model start from the same W and see the same minibatches:

* ``rssm.torch.RSSM(lr=..., n_blocks=l)``: each step moves a random pair of column blocks
  by the submanifold step (O(n p c) geometry, c = 2p/l columns);
* ``geoopt.optim.RiemannianSGD`` on ``geoopt.EuclideanStiefel`` (the same embedded
  metric, tangent projection and QR retraction: O(n p^2) per step).

Both use the same learning rate and the same PyTorch scheduler (ExponentialLR). Training
steps are timed in interleaved chunks in one process (forward, backward and step; the
full-data loss at checkpoints is off the clock). Prints time per step, the loss at
checkpoints against training time, and the loss decrease per second.

Needs torch (pip install "rssm[torch]") and geoopt (pip install geoopt).

    python examples/torch_orthogonal_layer.py                   # small, a few seconds
    python examples/torch_orthogonal_layer.py --n 512 --p 256 --steps 600 --threads 1
"""

from __future__ import annotations

import argparse
import time

try:
    import torch
except ImportError:
    raise SystemExit('this example needs PyTorch: pip install "rssm[torch]"') from None

import rssm.torch

try:
    import geoopt
except ImportError:  # the comparison needs geoopt; RSSM alone still runs
    geoopt = None


def make_data(n: int, p: int, m: int, gen: torch.Generator, dtype) -> tuple:
    """m points: 70% in a random p-dimensional subspace S, 30% Gaussian outliers."""
    s, _ = torch.linalg.qr(torch.randn(n, p, generator=gen, dtype=torch.float64))
    m_in = int(0.7 * m)
    inliers = torch.randn(m_in, p, generator=gen, dtype=torch.float64) @ s.T
    outliers = torch.randn(m - m_in, n, generator=gen, dtype=torch.float64)
    x = torch.cat([inliers, outliers])
    x = x[torch.randperm(m, generator=gen)]
    return x.to(dtype), s


def loss_fn(w: torch.Tensor, xb: torch.Tensor) -> torch.Tensor:
    """mean_i ||x_i - W W^T x_i||_1 (rows x_i of xb)."""
    return (xb - (xb @ w) @ w.T).abs().sum(dim=1).mean()


def subspace_error(w: torch.Tensor, s: torch.Tensor) -> float:
    """||(I - S S^T) W||_F: 0 when span W = span S."""
    w = w.detach().to(torch.float64)
    return float(torch.linalg.matrix_norm(w - s @ (s.T @ w)))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=48)
    ap.add_argument("--p", type=int, default=24)
    ap.add_argument("--m", type=int, default=1000, help="data points")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--blocks", type=int, default=8, help="RSSM's n_blocks")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--chunk", type=int, default=25, help="steps per interleaved chunk")
    ap.add_argument("--lr", type=float, default=0.02)
    ap.add_argument("--decay", type=float, default=0.995, help="ExponentialLR gamma per step")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    ap.add_argument("--float64", action="store_true", help="float64 instead of float32")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = torch.float64 if args.float64 else torch.float32
    gen = torch.Generator().manual_seed(args.seed)
    x, s = make_data(args.n, args.p, args.m, gen, dtype)
    w0 = torch.nn.init.orthogonal_(torch.empty(args.n, args.p, dtype=torch.float64),
                                   generator=gen).to(dtype)

    models: dict[str, tuple] = {}
    w = torch.nn.Parameter(w0.clone())
    opt = rssm.torch.RSSM([w], lr=args.lr, n_blocks=args.blocks, seed=args.seed)
    models[f"rssm.torch.RSSM (l={args.blocks})"] = (w, opt)
    if geoopt is not None:
        wg = geoopt.ManifoldParameter(w0.clone(), manifold=geoopt.EuclideanStiefel())
        models["geoopt RiemannianSGD"] = (wg, geoopt.optim.RiemannianSGD([wg], lr=args.lr))
    scheds = {k: torch.optim.lr_scheduler.ExponentialLR(o, gamma=args.decay)
              for k, (_, o) in models.items()}

    batches = torch.randint(0, args.m, (args.steps, args.batch), generator=gen)
    clock = dict.fromkeys(models, 0.0)
    with torch.no_grad():
        first = float(loss_fn(w0, x))
    history: dict[str, list] = {k: [(0, 0.0, first)] for k in models}
    done = 0
    while done < args.steps:
        todo = min(args.chunk, args.steps - done)
        for name, (wk, ok) in models.items():   # interleaved: same chunk for each model
            t0 = time.perf_counter()
            for i in range(done, done + todo):
                ok.zero_grad()
                loss_fn(wk, x[batches[i]]).backward()
                ok.step()
                scheds[name].step()
            clock[name] += time.perf_counter() - t0
        done += todo
        with torch.no_grad():
            for name, (wk, _) in models.items():
                history[name].append((done, clock[name], float(loss_fn(wk, x))))

    print(f"St({args.n}, {args.p}), {args.m} points (30% outliers), batch {args.batch}, "
          f"{args.steps} steps, lr {args.lr} x {args.decay}^k, {dtype}, "
          f"{torch.get_num_threads()} torch threads")
    print(f"{'optimizer':<28} {'ms/step':>8} {'loss0':>9} {'loss':>9} {'loss drop/s':>12} "
          f"{'subspace err':>12} {'||W^T W - I||':>13}")
    out = {}
    for name, (wk, _) in models.items():
        last = history[name][-1]
        per_step = clock[name] / args.steps
        drop = (first - last[2]) / clock[name]
        err, feas = subspace_error(wk, s), rssm.torch.feasibility(wk)
        out[name] = {"ms_per_step": 1e3 * per_step, "loss": last[2], "drop_per_s": drop,
                     "error": err, "feasibility": feas, "history": history[name]}
        print(f"{name:<28} {1e3 * per_step:>8.3f} {first:>9.4f} {last[2]:>9.4f} "
              f"{drop:>12.4g} {err:>12.3e} {feas:>13.2e}")
    print("loss at checkpoints (training seconds: loss):")
    for name in models:
        pts = history[name][:: max(1, len(history[name]) // 6)] + history[name][-1:]
        print(f"  {name:<28} " + "  ".join(f"{t:.3f}s: {v:.4f}" for _, t, v in pts))

    rs = out[next(iter(models))]
    assert rs["feasibility"] <= (1e-12 if args.float64 else 1e-5), rs["feasibility"]
    assert rs["loss"] < first, "RSSM should decrease the loss"
    return out


if __name__ == "__main__":
    main()
