"""Autodiff with PyTorch: write only the cost; autograd supplies the subgradient.

DPCP-type robust subspace recovery, f(X) = (1/m) sum_j ||X^T y_j|| over St(n, n - d),
on the paper's synthetic data (Section 5.1). Needs the extra: pip install "rssm[torch]".
"""

import warnings

try:
    import torch
except ImportError:
    raise SystemExit('this example needs PyTorch: pip install "rssm[torch]"') from None

import rssm
from rssm.problem import FullSubgradientWarning

data = rssm.problems.DPCP.synthetic(n=20, d=3, n_inliers=200, n_outliers=100, seed=0)
Y = torch.from_numpy(data.yt)  # shares memory with the NumPy array: no copy


def cost(X: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(Y.T @ X, dim=1).mean()


prob = rssm.Problem.from_torch(cost, shape=data.shape, error=data.error)
with warnings.catch_warnings():
    # Autograd gives a full subgradient; RSSM keeps |C| of its p columns (said once).
    warnings.simplefilter("ignore", FullSubgradientWarning)
    res = rssm.minimize(
        prob, data.initial_point(),
            method="rssm", stepsize=data.default_stepsize(), max_iter=600, seed=1,
        options={"n_blocks": 4}
    )
print(res)
assert res.error < 1e-3, "the run should recover the subspace"
