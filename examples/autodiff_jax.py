"""Autodiff with JAX: ``jax.grad`` of the cost is the subgradient (jitted, float64).

Orthogonal dictionary learning, f(X) = ||Y^T X||_1 over O(n) (Section 5.2). Needs the
extra: pip install "rssm[jax]".
"""

try:
    import jax.numpy as jnp
except ImportError:
    raise SystemExit('this example needs JAX: pip install "rssm[jax]"') from None
import numpy as np

import rssm
from rssm.stepsizes import Geometric

data = rssm.problems.ODL.synthetic(n=8, seed=0)
Y = data.y

prob = rssm.Problem.from_jax(lambda X: jnp.abs(Y.T @ X).sum(), shape=data.shape,
                             error=data.error)
x0 = rssm.stiefel.random_point(8, 8, np.random.default_rng(3))
res = rssm.minimize(prob, x0, method="rsm", stepsize=Geometric(1e-2, 0.97), max_iter=400)
print(res)
assert res.error < 1e-8, "the run should recover the dictionary"
