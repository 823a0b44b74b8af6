"""Sparse PCA (ManPG's form) on a planted instance: -tr(X^T A^T A X) + mu ||X||_1.

PCA alone finds the span of the sparse loadings but not the loadings; the l1 term picks
the sparse basis. We report explained variance and sparsity next to the cost.
"""

import rssm
from rssm.problems import SparsePCA

prob = SparsePCA.synthetic(n=100, r=4, m=200, support=10, mu=0.2, seed=0)
x0 = prob.initial_point()  # PCA: top-r right singular vectors of A
# the problem's hand-set geometric rule: "auto" leaves the PCA start too slowly here
# (docs/stepsizes.md, "Where it is weak")
res = rssm.minimize(
    prob, x0, method="rssm", stepsize=prob.reference_stepsize(), max_iter=3000, seed=1,
    options={"n_blocks": 4}
)

for label, x in (("PCA start", x0), ("RSSM", res.x)):
    s = prob.summary(x)
    print(f"{label:10s} cost {s['cost']:10.5f}  explained variance {s['explained_variance']:.4f}"
          f"  sparsity {s['sparsity']:.3f}  error {s['error']:.1e}")
assert prob.summary(res.x)["sparsity"] == 0.9 and res.error < 1e-4
