"""Sphinx configuration: the guides (Markdown, through MyST) and the API reference, generated
from the numpydoc docstrings. Build strictly (warnings are errors):

    sphinx-build -W --keep-going -b html docs docs/_build/html
"""

import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "src")))

project = "rssm"
author = "rssm developers"
copyright = "rssm developers"  # noqa: A001  (Sphinx's name)

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "myst_parser",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "reproduction/*.csv", "reproduction/*.json"]
autosummary_generate = True
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True}
autodoc_typehints = "none"           # the numpydoc sections carry the types
try:                                 # rssm.torch subclasses torch.optim.Optimizer; the
    import torch  # noqa: F401       # docs extra does not install torch (a large wheel)
except ImportError:
    autodoc_mock_imports = ["torch"]
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
myst_heading_anchors = 3
# The docstrings write set sizes and absolute values as plain text (|C|, |t|), which
# reStructuredText reads as substitutions: make each of them stand for itself.
_PLAIN = ["C", "C'", "t", "x_ik", "x_i^T x*_j", "x_i^T x*_pi(i)"]
rst_prolog = "\n".join(f".. |{s}| replace:: \\|{s}\\|" for s in _PLAIN) + "\n"
html_theme = "alabaster"
html_static_path: list[str] = []
