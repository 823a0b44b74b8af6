"""Solvers: RSSM, RSM, the loop they share and `minimize`, the entry point that runs them."""

from rssm.solvers.api import METHODS, minimize
from rssm.solvers.base import Direction, Solver, SolverState
from rssm.solvers.certificate import Certificate, GoldsteinTest
from rssm.solvers.loop import MAX_STEP_FACTOR, max_step, run
from rssm.solvers.options import DEFAULT_METHOD, DEFAULT_TOL, RSMOptions, RSSMOptions
from rssm.solvers.record import Observer, Record
from rssm.solvers.rsm import RSMSolver
from rssm.solvers.rssm import RSSMSolver

__all__ = ["minimize", "METHODS", "Solver", "SolverState", "Direction", "RSSMSolver",
           "RSMSolver", "run", "MAX_STEP_FACTOR", "max_step", "Record", "Observer",
           "RSSMOptions", "RSMOptions", "Certificate", "GoldsteinTest", "DEFAULT_METHOD",
           "DEFAULT_TOL"]
