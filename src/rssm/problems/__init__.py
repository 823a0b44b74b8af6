"""Built-in problems.

`REGISTRY` maps the name used on the command line (``rssm solve PROBLEM``) to the
problem class; every registered class has a ``synthetic(..., seed=...)`` constructor
with ground truth, whose keyword arguments become the command-line options.

`CompositeProblem` builds a problem of the family f(X) = sum_j h(X^T y_j - b_j)
(+ mu ||X||_1) from a loss (`EntrywiseLoss`, `NormLoss`), with an incremental oracle.
"""

from rssm.problems.composite import (
    CompositeProblem,
    EntrywiseLoss,
    NormLoss,
    signed_permutation_distance,
)
from rssm.problems.dpcp import DPCP, subspace_distance
from rssm.problems.odl import ODL, dictionary_error
from rssm.problems.procrustes import L1Procrustes
from rssm.problems.sparse_basis import PlantedSparseBasis
from rssm.problems.sparse_pca import SparsePCA

#: name -> problem class with a ``synthetic`` constructor.
REGISTRY = {
    "dpcp": DPCP,
    "odl": ODL,
    "sparse_pca": SparsePCA,
    "l1_procrustes": L1Procrustes,
    "sparse_basis": PlantedSparseBasis,
}

__all__ = [
    "DPCP",
    "ODL",
    "SparsePCA",
    "L1Procrustes",
    "PlantedSparseBasis",
    "CompositeProblem",
    "EntrywiseLoss",
    "NormLoss",
    "REGISTRY",
    "subspace_distance",
    "dictionary_error",
    "signed_permutation_distance",
]
