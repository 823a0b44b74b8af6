"""Bring your own objective: from ``def cost(X)`` to a converged run, nothing else set.

The objective is robust (l1) orthogonal Procrustes, f(X) = ||A X - B||_1 over St(20, 5),
on made-up data B = A X* + gross errors in 10% of the entries, so we can see that the run
recovers X*. The five lines between the markers are the whole user code (README, section
"Bring your own objective"): the default call needs no step size, says whether it
converged, and returns the best iterate. ``partial`` makes RSSM iterations O(|C|)
(``method="rssm"``); the default method, RSM, uses the full subgradient.
"""

import numpy as np

import rssm

rng = np.random.default_rng(0)
A = rng.standard_normal((300, 20))
X_star = rssm.stiefel.random_point(20, 5, rng)
B = A @ X_star + 10 * rng.standard_normal((300, 5)) * (rng.random((300, 5)) < 0.1)

# --- five lines: cost, subgradient, its columns C, the problem, the run ---
def cost(X): return np.abs(A @ X - B).sum()                      # f(X) = ||A X - B||_1
def subgrad(X): return A.T @ np.sign(A @ X - B)                  # a Clarke subgradient
def partial(X, C): return A.T @ np.sign(A @ X[:, C] - B[:, C])   # its columns C, O(|C|)
prob = rssm.Problem.from_functions(cost, subgrad, partial, shape=(20, 5))
res = rssm.minimize(prob)                                        # converged: res.success
# ---

print(res)
print(f"||X - X*||_F = {np.linalg.norm(res.x - X_star):.2e}")
assert res.success and np.linalg.norm(res.x - X_star) < 1e-8, "the run should recover X*"
