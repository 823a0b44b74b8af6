"""`rssm.stepsizes.from_spec`: the one parser of step-size specs (numbers, callables,
names, dicts, "name:key=value" strings), its one-line errors, and the round trip of
`StepSize.describe` through it."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rssm
from rssm import stepsizes as st
from rssm.stepsizes import (
    AdaptiveGeometric,
    Auto,
    Backtracking,
    Constant,
    Geometric,
    InverseSqrt,
    PaperSchedule,
    Polyak,
    PolyakBest,
    PolyakLevel,
    StepContext,
    StepSize,
    from_spec,
)

#: one instance of every built-in rule, with non-default parameters where it has any
EXAMPLES = [
    Auto(),
    Auto(t0=0.5, grow=1.3, shrink=0.4, c=1e-3, patience=5),
    PaperSchedule.dpcp(),
    PaperSchedule(0.5),
    Geometric(0.1, 0.9),
    Constant(0.02),
    InverseSqrt(0.3),
    Polyak(1.5, scale=0.9, estimate="pair"),
    PolyakLevel(t0=0.2, grow=1.4, patience=3.0),
    PolyakBest(t0=0.3),
    AdaptiveGeometric(t0=0.4, shrink=0.6, window=2.0, grow=1.1),
    Backtracking(t0=0.5, c=1e-3, grow=3.0, max_trials=7),
]


@pytest.mark.parametrize("rule", EXAMPLES, ids=lambda r: repr(r))
def test_describe_round_trips_through_from_spec(rule):
    again = from_spec(rule.describe())
    assert type(again) is type(rule)
    assert again.describe() == rule.describe()
    # the string form of the same spec
    d = rule.describe()
    text = d["rule"] + ":" + ",".join(f"{k}={v}" for k, v in d.items() if k != "rule")
    assert from_spec(text.rstrip(":")).describe() == d


def test_numbers_callables_and_rules():
    rule = Geometric(0.1, 0.5)
    assert from_spec(rule) is rule
    for value in (0.25, 2, np.float32(0.5), np.int64(3)):
        c = from_spec(value)
        assert isinstance(c, Constant) and c.c == float(value)
    wrapped = from_spec(lambda k, ctx: 1.0 / (k + ctx.n_blocks))
    assert isinstance(wrapped, StepSize)
    assert wrapped(3, StepContext("rssm", 5)) == 0.125
    assert isinstance(from_spec("auto"), Auto) and from_spec("auto") is not from_spec("auto")


@pytest.mark.parametrize("spec,want", [
    ("geometric:mu0=0.1,beta=0.9", {"rule": "Geometric", "mu0": 0.1, "beta": 0.9}),
    (" Geometric : mu0 = 0.1 , beta = 0.9 ", {"rule": "Geometric", "mu0": 0.1, "beta": 0.9}),
    ({"rule": "geometric", "mu0": 0.1, "beta": 0.9},
     {"rule": "Geometric", "mu0": 0.1, "beta": 0.9}),
    ("paper:delta=0.9,a=2,rho=0.991", PaperSchedule.dpcp().describe()),
    ({"rule": "PaperSchedule", "delta": 1e-3, "a": 4.0, "rho": 0.995},
     PaperSchedule.odl().describe()),
    ("inverse_sqrt:c=0.5", {"rule": "InverseSqrt", "c": 0.5}),
    ("invsqrt:c=0.5", {"rule": "InverseSqrt", "c": 0.5}),
    ("constant:c=1e-3", {"rule": "Constant", "c": 1e-3}),
    ("polyak:f_star=-2,estimate=pair", {"rule": "Polyak", "f_star": -2.0, "scale": 1.0,
                                        "estimate": "pair"}),
    ("AUTO", Auto().describe()),
    ("polyak_best", PolyakBest().describe()),
])
def test_names_dicts_and_strings(spec, want):
    assert from_spec(spec).describe() == want


def test_base_fills_what_the_spec_leaves_out():
    base = PaperSchedule.odl()
    assert from_spec("paper", base=base).describe() == base.describe()
    assert from_spec("paper:delta=0.5", base=base).describe() == {
        "rule": "PaperSchedule", "delta": 0.5, "a": 4.0, "rho": 0.995}
    # a base of another kind is ignored
    with pytest.raises(ValueError, match="'paper' needs delta"):
        from_spec("paper", base=Geometric(0.1, 0.9))


@pytest.mark.parametrize("spec,exc,pattern", [
    ("fast", ValueError,
     r"unknown step-size rule 'fast'; allowed: auto, paper, geometric, constant, "
     r"inverse_sqrt, polyak"),
    ({"rule": "nope"}, ValueError, "unknown step-size rule 'nope'; allowed: auto"),
    ("geometric:mu=0.1,beta=0.9", ValueError,
     r"'geometric' takes mu0, beta, restart; got unknown parameter\(s\) 'mu'"),
    ("geometric:mu0=0.1", ValueError, r"'geometric' needs beta \(parameters: mu0, beta, restart\)"),
    ("geometric:mu0=0.1;beta=0.9", ValueError, "parameters must be written name=value"),
    ("geometric:mu0", ValueError, "parameters must be written name=value"),
    ("geometric:mu0=-1,beta=0.9", ValueError, "'geometric': mu0 must be > 0"),
    ("geometric:mu0=abc,beta=0.9", TypeError, "'geometric': mu0 must be a real number"),
    # a bad value is named before a missing parameter (it said "needs beta")
    ("geometric:mu0=abc", TypeError, r"'geometric': mu0 must be a real number, got 'abc'"),
    ("paper:delta=q", TypeError, r"'paper': delta must be a real number, got 'q'"),
    ({"mu0": 0.1}, ValueError, r"needs a 'rule' key \(one of auto, paper"),
    ({"rule": 3}, TypeError, "'rule' must be a name"),
    (0.0, ValueError, "constant step size must be a finite number > 0"),
    (-1, ValueError, "constant step size must be a finite number > 0"),
    (math.nan, ValueError, "constant step size must be a finite number > 0"),
    (True, TypeError, "must not be a bool"),
    (None, TypeError, "stepsize must be a StepSize, a number > 0"),
    ([0.1], TypeError, "got list"),
    (lambda k: 0.1, TypeError, r"must be called as stepsize\(k, ctx\)"),
    ("geometric:mu0=0.1,mu0=0.2,beta=0.9", ValueError, "parameter 'mu0' is given twice"),
    ("constant:c=0.1,c=5", ValueError, "parameter 'c' is given twice"),
])
def test_bad_specs_raise_one_line_errors(spec, exc, pattern):
    with pytest.raises(exc, match=pattern) as info:
        from_spec(spec)
    assert "\n" not in str(info.value)


def test_every_rule_name_is_listed_and_buildable():
    """RULES covers every public StepSize class of the package (a new rule must be added
    there to be reachable from the CLI and the experiments)."""
    public = {getattr(st, n) for n in st.__all__}
    classes = {c for c in public if isinstance(c, type) and issubclass(c, StepSize)
               and c is not StepSize}
    assert classes == set(st.spec.RULES.values())


def test_a_rule_class_instead_of_a_rule_is_named():
    """stepsize=Geometric (the class) said "G() does not accept two positional arguments"."""
    from rssm.stepsizes import Auto, Geometric, from_spec

    for cls in (Auto, Geometric):
        with pytest.raises(TypeError, match=f"stepsize must be a rule, not its class: pass "
                                            rf"{cls.__name__}\(\.\.\.\)"):
            from_spec(cls)


def test_a_named_rule_in_minimize_takes_the_problems_parameters_as_the_cli_does():
    """``stepsize="paper"`` raised "needs delta" in Python while ``rssm solve --stepsize
    paper`` ran the problem's paper schedule; both now fill what the spec leaves out from
    the problem's reference rule."""
    prob = rssm.problems.DPCP.synthetic(n=10, d=2, n_inliers=30, n_outliers=30, seed=0)
    ref = prob.reference_stepsize().describe()
    a = rssm.minimize(prob, stepsize="paper", max_iter=40, seed=1)
    b = rssm.minimize(prob, stepsize=prob.reference_stepsize(), max_iter=40, seed=1)
    assert a.stepsize == ref and np.array_equal(a.x, b.x)
    c = rssm.minimize(prob, stepsize={"rule": "paper", "delta": 0.5}, max_iter=5)
    assert c.stepsize == {**ref, "delta": 0.5}
    with pytest.raises(ValueError, match=r"stepsize: step-size rule 'paper' needs delta"):
        rssm.minimize(rssm.problems.SparsePCA.synthetic(seed=0), stepsize="paper")


@pytest.mark.parametrize("spec", [np.float32(0.01), np.int64(1), "geometric:mu0=0.1,beta=0.9",
                                  {"rule": "constant", "c": 0.1}])
def test_a_custom_problem_takes_the_specs_minimize_takes(spec):
    """``Problem.from_functions(stepsize=...)`` went through a narrower parser than
    ``rssm.minimize(stepsize=...)``: NumPy scalars and spec strings were refused there."""
    prob = rssm.Problem.from_functions(lambda x: float(np.abs(x).sum()), np.sign,
                                       shape=(4, 2), stepsize=spec)
    assert prob.default_stepsize().describe() == from_spec(spec).describe()


@pytest.mark.parametrize("spec,exc,pattern", [
    (-1, ValueError, r"^stepsize: a constant step size must be a finite number > 0"),
    (float("nan"), ValueError, r"^stepsize: a constant step size must be"),
    ("geometrc", ValueError, r"^stepsize: unknown step-size rule 'geometrc'"),
    (None, TypeError, r"^stepsize must be a StepSize"),
])
def test_a_custom_problems_bad_stepsize_is_named(spec, exc, pattern):
    """``from_functions(stepsize=-1)`` said "c must be > 0", an argument the user never
    passed; the message now names ``stepsize`` as ``rssm.minimize`` does."""
    if spec is None:                     # None means "no rule of its own": use a list
        spec = [0.1]
        pattern = r"^stepsize must be .*got list"
    with pytest.raises(exc, match=pattern):
        rssm.Problem.from_functions(lambda x: float(np.abs(x).sum()), np.sign, shape=(4, 2),
                                    stepsize=spec)


def test_a_function_step_size_is_recorded_as_one():
    """`Result.stepsize` of stepsize=f wrote f's name as the rule: a user's
    `def geometric(k, ctx)` read as the built-in Geometric without its parameters, and a
    functools.partial lost its arguments (an audit)."""
    import functools

    def geometric(k, ctx):
        return 0.01 * 0.9**k

    def scaled(k, ctx, c):
        return c / (k + 1)

    prob = rssm.problems.DPCP.synthetic(n=10, d=2, n_inliers=30, n_outliers=30, seed=0)
    rec = rssm.minimize(prob, stepsize=geometric, max_iter=3, seed=0).stepsize
    assert rec["rule"] == "callable" and rec["function"].endswith("geometric")
    rec = rssm.minimize(prob, stepsize=functools.partial(scaled, c=0.02), max_iter=3).stepsize
    assert rec["function"].endswith("scaled") and rec["keywords"] == "{'c': 0.02}"
    with pytest.raises(ValueError, match="cannot rebuild it; pass the function itself"):
        from_spec(rec)


def test_integer_settings_of_the_rules_take_numpys_integers():
    """An audit of the API reference: `Auto(patience=np.int64(8))` and
    `Backtracking(max_trials=np.int64(30))` were refused ("must be an int >= 1"), where
    every other integer setting of rssm takes NumPy's integers (values read from an
    array or a grid)."""
    import numpy as np

    from rssm.stepsizes import Auto, Backtracking

    assert Auto(patience=np.int64(8)).patience == 8
    assert Backtracking(max_trials=np.int32(30)).max_trials == 30
    for bad in (0, 2.5, True):
        with pytest.raises((TypeError, ValueError), match="patience"):
            Auto(patience=bad)
