"""Built-in problems.

`REGISTRY` maps the name used on the command line (``rssm solve PROBLEM``) to the
problem class; every registered class has a ``synthetic(..., seed=...)`` constructor
with ground truth, whose keyword arguments become the command-line options.
"""

from rssm.problems.dpcp import DPCP, subspace_distance
from rssm.problems.odl import ODL, dictionary_error

#: name -> problem class with a ``synthetic`` constructor.
REGISTRY = {"dpcp": DPCP, "odl": ODL}

__all__ = ["DPCP", "ODL", "REGISTRY", "subspace_distance", "dictionary_error"]
