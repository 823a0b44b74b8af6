"""rssm: the Randomized Submanifold Subgradient Method on the Stiefel manifold.

The method is that of A. Y.-M. Cheung, J. Wang, M.-C. Yue, A. M.-C. So, "Randomized
Submanifold Subgradient Method for Optimization over Stiefel Manifolds", arXiv:2409.01770
(Algorithm 1 there); the paper labels cited in the code (``alg-RSSM``, ``eq-Rsubdiff``,
...) are mapped to its numbering in docs/paper-map.md. To cite rssm: CITATION.cff.

Quick use::

    import rssm
    prob = rssm.problems.DPCP.synthetic(seed=0)
    res = rssm.minimize(prob)            # RSM, stepsize="auto", seed 0
    print(res.success, res.message)      # did the convergence test fire, and why it stopped
    res = rssm.minimize(prob, method="rssm", options={"n_blocks": 10}, max_iter=2000)

The guides and the API reference are in docs/ (docs/convergence.md says what a
`Result` reports).
"""

from rssm import blocks, data, diagnostics, problems, stepsizes, stiefel, stopping
from rssm.blocks import Partition
from rssm.problem import Oracle, Problem
from rssm.solvers import METHODS, Observer, Record, RSSMOptions, minimize
from rssm.stopping import Progress, StopReason
from rssm.trace import Result

__version__ = "0.1.0"

__all__ = [
    "minimize",
    "METHODS",
    "Problem",
    "Oracle",
    "Partition",
    "Result",
    "Record",
    "Observer",
    "RSSMOptions",
    "StopReason",
    "Progress",
    "problems",
    "stepsizes",
    "stiefel",
    "blocks",
    "diagnostics",
    "data",
    "stopping",
    "__version__",
]
