"""Built-in problems."""

from rssm.problems.dpcp import DPCP, subspace_distance
from rssm.problems.odl import ODL, dictionary_error

__all__ = ["DPCP", "ODL", "subspace_distance", "dictionary_error"]
