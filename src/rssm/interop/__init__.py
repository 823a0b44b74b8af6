"""Bridges to other libraries. Each submodule imports its library only when imported:

* `rssm.interop.pymanopt`: run RSSM and RSM on a ``pymanopt.Problem`` with optimizers
  that follow Pymanopt's interface (``RSSM(...).run(problem)`` returns Pymanopt's
  ``OptimizerResult``).

The PyTorch optimizers live in `rssm.torch`.
"""

__all__: list[str] = []
