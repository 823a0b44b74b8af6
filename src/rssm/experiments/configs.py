"""The paper's experiments (Section ``sect-exp``) as data: problems, methods, step sizes,
budgets, and the step-size grid of the ``--tuned`` part.

Everything a run needs is in a `ProblemConfig` plus a seed, and every setting is a plain
value that goes into the JSON settings file, so a reader can rerun any single run with
`rssm.minimize`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from rssm.problem import Problem
from rssm.problems import REGISTRY
from rssm.stepsizes import StepSize, from_spec

__all__ = [
    "MethodSpec",
    "ProblemConfig",
    "PAPER_METHODS",
    "PROBLEMS",
    "THRESHOLDS",
    "TUNED_TARGET",
    "TUNING_SEED",
    "AUTO_STEPSIZE",
    "QUICK_DIVISOR",
    "make_configs",
    "make_stepsize",
    "stepsize_label",
]

#: Error levels of the report tables.
THRESHOLDS = (1e-2, 1e-4, 1e-6)
#: Error level of the ``--tuned`` part; its runs stop once they reach it.
TUNED_TARGET = 1e-8
#: ``--quick`` divides the iteration budgets by this.
QUICK_DIVISOR = 15
#: Seed of the data used to choose the tuned step sizes (not one of the reported seeds).
TUNING_SEED = 1000
#: The tuning-free rule run beside the grid's pick in the ``--tuned`` part.
AUTO_STEPSIZE = {"rule": "auto"}


@dataclass(frozen=True)
class MethodSpec:
    """RSM (``n_blocks`` 1) or RSSM with ``n_blocks`` = l blocks.

    Parameters
    ----------
    method : str
        ``"rsm"`` or ``"rssm"``.
    n_blocks : int, default=1
        Number of column blocks l (1 for RSM).
    """

    method: str
    n_blocks: int = 1

    @property
    def key(self) -> str:
        """Short name used in files: ``rsm``, ``rssm-l5``."""
        return "rsm" if self.method == "rsm" else f"rssm-l{self.n_blocks}"

    @property
    def label(self) -> str:
        """Name for legends and tables: ``RSM``, ``RSSM (l=5)``."""
        return "RSM" if self.method == "rsm" else f"RSSM (l={self.n_blocks})"

    @classmethod
    def from_key(cls, key: str) -> MethodSpec:
        """Inverse of `key`.

        Parameters
        ----------
        key : str
            ``"rsm"`` or ``"rssm-l<blocks>"``.

        Returns
        -------
        MethodSpec
            The method of that key.

        Raises
        ------
        ValueError
            When ``key`` has neither form.
        """
        if key == "rsm":
            return cls("rsm", 1)
        if key.startswith("rssm-l") and key[6:].isdigit():
            return cls("rssm", int(key[6:]))
        raise ValueError(f"method key must be 'rsm' or 'rssm-l<blocks>', got {key!r}")


#: RSM and RSSM with l = 3, 5, 10 blocks (Section ``sect-exp``).
PAPER_METHODS = (MethodSpec("rsm"), MethodSpec("rssm", 3), MethodSpec("rssm", 5),
                 MethodSpec("rssm", 10))


def make_stepsize(spec: dict) -> StepSize:
    """Build a step-size rule from its JSON form.

    Parameters
    ----------
    spec : dict
        ``{"rule": "paper", "delta": .., "a": .., "rho": ..}``,
        ``{"rule": "geometric", "mu0": .., "beta": ..}`` or ``{"rule": "auto"}``
        (`rssm.stepsizes.Auto`, run beside the grid's pick in the ``--tuned`` part):
        any spec of `rssm.stepsizes.from_spec`, the one parser.

    Returns
    -------
    StepSize
        The rule, as `rssm.stepsizes.from_spec` builds it.
    """
    return from_spec(spec)


def stepsize_label(spec: dict) -> str:
    """Short text for a step-size spec: ``paper``, ``auto`` or
    ``geometric(mu0=0.1, beta=0.9)``.

    Parameters
    ----------
    spec : dict
        A step-size spec in `make_stepsize` form, of the rule ``"paper"``, ``"auto"`` or
        ``"geometric"``.

    Returns
    -------
    str
        The rule's name, with ``mu0`` and ``beta`` for a geometric rule.
    """
    if spec["rule"] in ("paper", "auto"):
        return spec["rule"]
    return f"geometric(mu0={spec['mu0']:g}, beta={spec['beta']:g})"


@dataclass(frozen=True)
class ProblemConfig:
    """One experiment of Section ``sect-exp``.

    Parameters
    ----------
    name : str
        Key in `rssm.problems.REGISTRY`.
    title : str
        Human title for figures and the report.
    figure : str
        The paper's figure label this experiment reproduces.
    synthetic : dict
        Keyword arguments of ``REGISTRY[name].synthetic`` (besides ``seed``).
    error_label : str
        What the error axis shows.
    paper_stepsize : dict
        The paper's schedule, in `make_stepsize` form.
    rsm_iter : int
        Iteration budget of RSM. RSSM with l blocks updates about 2/l of the columns per
        iteration, so it gets ``ceil(rsm_iter * rssm_factor * l / 2)`` iterations (see
        `max_iter`).
    rssm_factor : float
        Extra factor on RSSM's budget (the curves should reach each method's plateau).
    record_every_points : int
        About this many trace points per run (record_every = max_iter // points).
    tuned_grid : tuple of dict, default=()
        Candidate step sizes of the ``--tuned`` part (the paper's schedule comes first).
    tuned_rsm_iter : int, default=0
        RSM's iteration budget in the ``--tuned`` part (RSSM scaled as above).
    """

    name: str
    title: str
    figure: str
    synthetic: dict
    error_label: str
    paper_stepsize: dict
    rsm_iter: int
    rssm_factor: float
    record_every_points: int
    tuned_grid: tuple = field(default_factory=tuple)
    tuned_rsm_iter: int = 0

    def max_iter(self, spec: MethodSpec, tuned: bool = False) -> int:
        """Iteration budget of ``spec`` (equal epochs for RSM and RSSM, times ``rssm_factor``).

        Parameters
        ----------
        spec : MethodSpec
            The method.
        tuned : bool, default=False
            Scale the ``--tuned`` part's budget ``tuned_rsm_iter`` instead of ``rsm_iter``.

        Returns
        -------
        int
            The RSM budget for RSM, ``ceil(budget * rssm_factor * l / 2)`` for RSSM with l
            blocks.
        """
        base = self.tuned_rsm_iter if tuned else self.rsm_iter
        if spec.method == "rsm":
            return base
        return int(math.ceil(base * self.rssm_factor * spec.n_blocks / 2.0))

    def record_every(self, spec: MethodSpec, tuned: bool = False) -> int:
        """Record every this many iterations.

        Parameters
        ----------
        spec : MethodSpec
            The method.
        tuned : bool, default=False
            For the ``--tuned`` part's budget (see `max_iter`).

        Returns
        -------
        int
            ``max_iter(spec, tuned) // record_every_points``, at least 1.
        """
        return max(1, self.max_iter(spec, tuned) // self.record_every_points)

    def build(self, seed: int) -> tuple[Problem, np.ndarray]:
        """The problem instance of ``seed`` and its start X^0 (the same for every method).

        The data come from ``synthetic(seed=seed)``; a random start (ODL) is drawn from
        ``numpy.random.default_rng([seed, 1])``, independent of the data stream.

        Parameters
        ----------
        seed : int
            Seed of the data and of the start.

        Returns
        -------
        problem : Problem
            The instance.
        x0 : numpy.ndarray of shape (n, p)
            Its starting point (``problem.initial_point``).
        """
        prob = REGISTRY[self.name].synthetic(**self.synthetic, seed=seed)
        x0 = prob.initial_point(np.random.default_rng([seed, 1]))
        return prob, x0

    def as_dict(self) -> dict:
        """Plain-data form for the JSON settings file."""
        d = asdict(self)
        d["tuned_grid"] = list(self.tuned_grid)
        return d


def _geometric_grid(mu0s, betas) -> tuple:
    return tuple({"rule": "geometric", "mu0": m, "beta": b} for m in mu0s for b in betas)


_DPCP_PAPER = {"rule": "paper", "delta": 0.9, "a": 2.0, "rho": 0.991}
_ODL_PAPER = {"rule": "paper", "delta": 1e-3, "a": 4.0, "rho": 0.995}

#: The figure formats `rssm reproduce` and `rssm plot` write (``--formats``).
FIGURE_FORMATS = ("png", "pdf", "svg")


def temp_prefix(stem: str) -> str:
    """The name a figure's temporary file starts with while it is drawn (removed by the
    next draw or run where a killed one left it).

    Parameters
    ----------
    stem : str
        The figure's file name without extension.

    Returns
    -------
    str
        ``".<stem>.rssm-tmp-"``.
    """
    return f".{stem}.rssm-tmp-"

def sizes_text(name: str, synthetic: dict) -> str:
    """The instance's sizes for a figure title, the derived ones included (a reader of
    the title "[n=100, d=10, ...]" had to work out p = 90; ODL's m = round(10 n^1.5) was
    not in its title at all): the ``synthetic`` keywords, then, for the paper's two
    problems, X's shape on St(n, p) and the sample count where ``synthetic`` leaves them
    to their defaults.

    Parameters
    ----------
    name : str
        The problem's name (``"dpcp"`` and ``"odl"`` get the derived sizes).
    synthetic : dict
        Keyword arguments of the problem's ``synthetic``.

    Returns
    -------
    str
        The sizes as text.
    """
    text = ", ".join(f"{k}={v}" for k, v in synthetic.items())
    try:
        n = int(synthetic["n"])
        if name == "dpcp":
            text += f"; X in St({n}, {n - int(synthetic['d'])})"
        elif name == "odl":
            m = synthetic.get("m")
            m = round(10 * n**1.5) if m is None else int(m)
            text += f", m={m}" if "m" not in synthetic else ""
            text += f"; X in St({n}, {n})"
    except (KeyError, TypeError, ValueError):
        pass                                  # a hand-made config: its keywords alone
    return text


#: Full-size settings: the paper's sizes and step sizes, our budgets.
PROBLEMS = {
    "dpcp": ProblemConfig(
        name="dpcp",
        title="Robust subspace recovery (DPCP)",
        figure="fig-rsr1",
        synthetic={"n": 100, "d": 10, "n_inliers": 1500, "n_outliers": 3500},
        error_label=r"dist$(X, S^\perp)$",
        paper_stepsize=_DPCP_PAPER,
        rsm_iter=1200,
        rssm_factor=1.0,
        record_every_points=150,
        tuned_grid=(_DPCP_PAPER,) + _geometric_grid((0.1, 0.3, 1.0, 3.0), (0.9, 0.95)),
        tuned_rsm_iter=500,
    ),
    "odl": ProblemConfig(
        name="odl",
        title="Orthogonal dictionary learning (ODL)",
        figure="fig-odl1",
        synthetic={"n": 60, "theta": 0.3},
        error_label=r"err$(X, X^\star)$",
        paper_stepsize=_ODL_PAPER,
        rsm_iter=3000,
        rssm_factor=1.0,
        record_every_points=150,
        tuned_grid=(_ODL_PAPER,) + _geometric_grid((1e-3, 3e-3, 1e-2, 3e-2), (0.9, 0.95)),
        tuned_rsm_iter=500,
    ),
}


def make_configs(quick: bool = False, scale: float | None = None) -> dict[str, ProblemConfig]:
    """The configurations of ``rssm reproduce`` (the paper's sizes, our budgets).

    Parameters
    ----------
    quick : bool
        Divide the iteration budgets by `QUICK_DIVISOR` and record 40 points per run.
    scale : float, optional
        Multiply the iteration budgets by ``scale`` instead (at least 4 iterations); for
        tests and quick looks. Problem sizes never change.

    Returns
    -------
    dict of str to ProblemConfig
        Problem name -> its configuration: `PROBLEMS` itself when neither ``quick`` nor
        ``scale`` is given, else new configurations with the budgets scaled and at most
        40 recorded points per run.
    """
    if scale is None and not quick:
        return dict(PROBLEMS)
    if scale is None:
        scale = 1.0 / QUICK_DIVISOR
    if not (isinstance(scale, (int, float)) and 0 < scale <= 1):
        raise ValueError(f"budget scale must be in (0, 1], got {scale!r}")
    out = {}
    for name, cfg in PROBLEMS.items():
        d = asdict(cfg)
        d["tuned_grid"] = tuple(cfg.tuned_grid)
        d["rsm_iter"] = max(4, int(round(cfg.rsm_iter * scale)))
        d["tuned_rsm_iter"] = max(4, int(round(cfg.tuned_rsm_iter * scale)))
        d["record_every_points"] = min(cfg.record_every_points, 40)
        out[name] = ProblemConfig(**d)
    return out
