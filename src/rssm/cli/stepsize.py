"""``--stepsize`` and its parameters: the options, and the spec they stand for.

The command line builds a spec (``"auto"``, the problem's own rule, or a dict such as
``{"rule": "geometric", "mu0": 0.3, "beta": 0.9}``) and hands it to
`rssm.cli._core.stepsize_from_spec`; it constructs no rule itself.
"""

from __future__ import annotations

import argparse
from typing import Any

from rssm.cli._common import UsageError, nonneg_float, positive_float

__all__ = ["PARAMS", "add_options", "spec_from_args"]

#: rule -> its parameters, in the order of the rule's constructor.
PARAMS = {
    "paper": ("delta", "a", "rho"),
    "geometric": ("mu0", "beta"),
    "constant": ("c",),
    "invsqrt": ("c",),
}
_ALL = sorted({n for ps in PARAMS.values() for n in ps})


class _NotGiven(str):
    """``--stepsize``'s default: equal to "default", but told apart from the option given
    as ``--stepsize default`` (a refusal of --mu0 said "no --stepsize given" to a user
    who had given it)."""


_DEFAULT = _NotGiven("default")


def _given(args: argparse.Namespace) -> bool:
    return args.stepsize is not _DEFAULT


def add_options(p: argparse.ArgumentParser) -> None:
    """The step-size group of ``rssm solve PROBLEM``.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The parser of ``rssm solve PROBLEM``.
    """
    s = p.add_argument_group("step size")
    s.add_argument("--stepsize", choices=["auto", "default", *PARAMS], default=_DEFAULT,
                   help="default: what rssm.minimize uses with no step size, the problem's "
                        "own rule when it has one (sparse_pca, sparse_basis), else auto; "
                        "auto: the tuning-free rule rssm.stepsizes.Auto (docs/stepsizes.md); "
                        "paper: Delta_k/(sqrt(k+2) log(k+2)) with Delta_k = delta "
                        "binom(l,2)^(a rho^k - 1) for RSSM, delta for RSM; geometric: "
                        "mu0 beta^(k/epoch); constant: c; invsqrt: c/sqrt(k+1). Parameters "
                        "not given are the problem's own when its rule (or, for the "
                        "built-ins, its reference rule: the paper's schedule for dpcp and "
                        "odl) is of that kind (default: default)")
    s.add_argument("--delta", type=positive_float, default=None,
                   help="paper: Delta (default: the problem's, e.g. 0.9 for dpcp, 1e-3 for odl)")
    s.add_argument("--a", type=nonneg_float, default=None,
                   help="paper: exponent a >= 0 (default: the problem's)")
    s.add_argument("--rho", type=positive_float, default=None,
                   help="paper: decay rho in (0, 1] (default: the problem's)")
    s.add_argument("--mu0", type=positive_float, default=None,
                   help="geometric: initial step (default: the problem's, if geometric)")
    s.add_argument("--beta", type=positive_float, default=None,
                   help="geometric: decay per epoch, in (0, 1] (default: the problem's, if "
                        "geometric)")
    s.add_argument("--c", type=positive_float, default=None,
                   help="constant / invsqrt: c (default: the problem's, if of that kind)")


def _kind(rule) -> str | None:
    """The ``--stepsize`` name of a rule object of one of the four plain kinds, else None."""
    from rssm.stepsizes import Constant, Geometric, InverseSqrt, PaperSchedule

    kinds = {PaperSchedule: "paper", Geometric: "geometric", Constant: "constant",
             InverseSqrt: "invsqrt"}
    return kinds.get(type(rule))


def _unused(args: argparse.Namespace, rule: str, allowed: tuple[str, ...]) -> None:
    for name in _ALL:
        if getattr(args, name) is not None and name not in allowed:
            users = [r for r, ps in PARAMS.items() if name in ps]
            got = (f"got --stepsize {rule}" if args.stepsize != "default" else
                   f"{'--stepsize default' if _given(args) else 'no --stepsize given'}: "
                   f"this problem's default step size is {rule}; add --stepsize "
                   f"{users[0]}")
            raise UsageError(f"argument --{name}: only used with --stepsize "
                             f"{' or '.join(users)} ({got})")


def spec_from_args(args: argparse.Namespace, problem) -> Any:
    """The step-size spec of ``--stepsize`` and its parameters; parameters not given come
    from the problem's own rule (or its reference rule) when it is of the same kind.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line (``--stepsize`` and the parameters of `PARAMS`).
    problem : Problem
        The problem, whose `Problem.default_stepsize` (or `Problem.reference_stepsize`)
        fills the parameters not given.

    Returns
    -------
    str, dict or StepSize
        ``"auto"``; a dict ``{"rule": ..., **parameters}``; or, under ``--stepsize
        default`` with no option given, the problem's own rule when it is of none of the
        four plain kinds.

    Raises
    ------
    UsageError
        When a parameter does not belong to the rule, or one the rule needs is missing.
    """
    own = problem.default_stepsize()
    try:
        base = own if own is not None else problem.reference_stepsize()
    except ValueError:      # no reference rule for these data (l1 Procrustes with A = 0)
        base = None
    base_kind = _kind(base) if base is not None else None
    rule = args.stepsize
    if rule == "default":
        if own is None:
            rule = "auto"
        elif base_kind is None:
            for name in _ALL:
                if getattr(args, name) is not None:
                    raise UsageError(f"argument --{name}: the problem's own step size "
                                     f"{base!r} takes no --{name}")
            return base
        else:
            rule = base_kind
    if rule == "auto":
        _unused(args, "auto", ())
        return "auto"
    _unused(args, rule, PARAMS[rule])
    known = base.describe() if rule == base_kind else {}
    values = {n: getattr(args, n) if getattr(args, n) is not None else known.get(n)
              for n in PARAMS[rule]}
    # settings of the problem's own rule that have no option (e.g. Geometric's restart)
    values.update({n: v for n, v in known.items() if n != "rule" and n not in values})
    if rule == "paper":
        if values["delta"] is None:
            raise UsageError(f"argument --stepsize paper: {type(problem).__name__} has no paper "
                             "schedule of its own; give --delta (and --a, --rho)")
        if (values["a"] is None) != (values["rho"] is None):
            raise UsageError("argument --a: --a and --rho go together")
    missing = [f"--{n}" for n, v in values.items() if v is None and rule != "paper"]
    if missing:
        raise UsageError(f"argument --stepsize {rule}: needs {' and '.join(missing)}")
    return {"rule": rule, **values}
