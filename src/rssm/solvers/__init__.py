"""Solvers: RSSM, RSM and `minimize`, the entry point that runs them."""

from rssm.solvers.api import METHODS, minimize
from rssm.solvers.base import Solver, run
from rssm.solvers.rsm import RSMSolver
from rssm.solvers.rssm import RSSMSolver

__all__ = ["minimize", "METHODS", "Solver", "RSSMSolver", "RSMSolver", "run"]
