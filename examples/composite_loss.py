"""A composite data objective with an incremental oracle, from a loss alone.

f(X) = sum_j h(X^T a_j - b_j) with the entrywise Huber loss h: Procrustes-type fitting
that is quadratic for small residuals (dense noise) and linear for large ones (gross
errors). `CompositeProblem` caches Z = A X and updates only the columns RSSM moves, so an
iteration costs O(m n |C|) flops, like the built-in problems.
"""

import numpy as np

import rssm
from rssm.problems import CompositeProblem, EntrywiseLoss
from rssm.stepsizes import Geometric

rng = np.random.default_rng(0)
m, n, p = 400, 30, 12
A = rng.standard_normal((m, n))
X_star = rssm.stiefel.random_point(n, p, rng)
noise = 0.01 * rng.standard_normal((m, p))
gross = 10 * rng.standard_normal((m, p)) * (rng.random((m, p)) < 0.1)
B = A @ X_star + noise + gross

prob = CompositeProblem(A.T, p, EntrywiseLoss.huber(0.05), offset=B,
                        stepsize=Geometric(1.0 / np.linalg.norm(A, 2) ** 2, 0.97))
x0 = rssm.stiefel.polar(A.T @ B)  # least-squares start, pulled off by the gross errors
res = rssm.minimize(
    prob, x0, method="rssm", max_iter=2000, seed=1, options={"n_blocks": 4}
)
err0, err = np.linalg.norm(x0 - X_star), np.linalg.norm(res.x - X_star)
print(res)
print(f"||X - X*||_F: start {err0:.3f}, RSSM {err:.2e} (dense noise 0.01 per entry)")
assert err < 0.05, "Huber fitting should ignore the gross errors, up to the dense noise"
