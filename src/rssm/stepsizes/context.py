"""`StepContext`, what a rule may read at iteration k (defined in `rssm.stepcontext`, which
the solver loop builds; re-exported here as part of the step-size protocol)."""

from rssm.stepcontext import StepContext

__all__ = ["StepContext"]
