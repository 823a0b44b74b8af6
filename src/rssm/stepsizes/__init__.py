"""Step-size rules as small callables ``rule(k, context) -> gamma_k``.

``context`` is a `StepContext` telling the rule which method runs and with how many
blocks, so one rule object serves RSM and RSSM (the paper scales Delta_k with binom(l, 2)
for RSSM only). `from_spec` builds a rule from a number, a name, a dict or a string.

Modules: `rssm.stepsizes.context` (`StepContext`), `.base` (`StepSize`, `StepStall`),
`.schedules` (plain schedules), `.polyak` and `.adaptive` (rules that read f),
`.auto` (the default rule), `.blockrule` (its RSSM part), `.spec` (`from_spec`, `as_stepsize`).
"""

from __future__ import annotations

from rssm.stepsizes._common import max_gamma, max_step_length
from rssm.stepsizes.adaptive import AdaptiveGeometric, Backtracking
from rssm.stepsizes.auto import Auto, make_auto
from rssm.stepsizes.base import StepSize, StepStall
from rssm.stepsizes.blockrule import BlockRule
from rssm.stepsizes.context import StepContext
from rssm.stepsizes.polyak import Polyak, PolyakBest, PolyakLevel
from rssm.stepsizes.schedules import Constant, Geometric, InverseSqrt, PaperSchedule
from rssm.stepsizes.spec import as_stepsize, from_spec

__all__ = [
    "StepContext",
    "StepSize",
    "StepStall",
    "PaperSchedule",
    "Geometric",
    "Constant",
    "InverseSqrt",
    "Polyak",
    "PolyakLevel",
    "PolyakBest",
    "AdaptiveGeometric",
    "Backtracking",
    "Auto",
    "BlockRule",
    "make_auto",
    "as_stepsize",
    "from_spec",
    "max_step_length",
    "max_gamma",
]
