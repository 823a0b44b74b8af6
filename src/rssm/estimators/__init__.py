"""scikit-learn estimators built on rssm's problems and solvers (extra ``rssm[sklearn]``).

* `RobustSubspace`: robust subspace recovery by DPCP (Section 5.1), a transformer and an
  outlier detector;
* `OrthogonalDictionaryLearning`: orthogonal dictionary learning (Section 5.2);
* `OrthogonalSparsePCA`: sparse PCA with orthonormal loadings in ManPG's form.

They take X with one sample per row (in memory, memory-mapped or a Dask array), follow
scikit-learn's conventions (``fit``/``transform``, ``get_params``/``set_params``,
``n_features_in_``, ``NotFittedError``) and pass its estimator checks; the solver settings
(``method``, ``n_blocks``, ``stepsize``, ``max_iter``, ``tol``, ``random_state``) default
to rssm's. ``import rssm`` does not import scikit-learn; this module does. See
docs/estimators.md.
"""

try:
    import sklearn  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "rssm.estimators needs scikit-learn: pip install 'rssm[sklearn]'"
    ) from exc

from rssm.estimators._base import InvalidParameterError
from rssm.estimators._dictionary import OrthogonalDictionaryLearning
from rssm.estimators._sparse_pca import OrthogonalSparsePCA
from rssm.estimators._subspace import RobustSubspace, auto_dimension

__all__ = ["RobustSubspace", "OrthogonalDictionaryLearning", "OrthogonalSparsePCA",
           "auto_dimension", "InvalidParameterError"]
