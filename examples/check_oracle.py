"""check_subgradient: which of my oracles is wrong?

A hand-derived partial subgradient with a classic slip (the columns of B not restricted
to C) is caught, while the full subgradient passes.
"""

import numpy as np

import rssm
from rssm.diagnostics import check_subgradient

rng = np.random.default_rng(0)
A, B = rng.standard_normal((100, 12)), rng.standard_normal((100, 4))


def cost(X):
    return np.abs(A @ X - B).sum()


def subgrad(X):
    return A.T @ np.sign(A @ X - B)


def partial_wrong(X, C):
    k = X[:, C].shape[1]
    return A.T @ np.sign(A @ X[:, C] - B[:, :k])  # slip: B's first |C| columns, not B[:, C]


def partial_right(X, C):
    return A.T @ np.sign(A @ X[:, C] - B[:, C])


bad = check_subgradient(rssm.Problem.from_functions(cost, subgrad, partial_wrong, shape=(12, 4)),
                        rng=0)
good = check_subgradient(rssm.Problem.from_functions(cost, subgrad, partial_right, shape=(12, 4)),
                         rng=0)
print(bad, good, sep="\n\n")
assert not bad.ok and good.ok
assert {f.name for f in bad.failures} >= {"partial_subgradient vs columns of subgradient"}
