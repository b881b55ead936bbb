"""The learner: branching dueling distributional Q-network, budgeted loss components, optimisation, replay.

The agent's exploration is :mod:`foxhunt.learner.exploration`, imported from there: its counter hash is a numba
device function, and ``import foxhunt.learner`` (which the pytest plugin does) must not load numba.
"""

from foxhunt.learner.auxiliary import AuxiliaryLayout, auxiliary_layout, future_return_table
from foxhunt.learner.budgets import GradientBudget, budgeted_sum, resolve_budgets, split_flat
from foxhunt.learner.combiners import BUDGETED_SUM, CombinedGradient, budget_clip, combine, select_combiner
from foxhunt.learner.config import LearnerConfig, ReplayConfig, learner_config_of
from foxhunt.learner.encoders import MLP_ENCODER, IdentityEncoder, select_encoder, window_input
from foxhunt.learner.distributional import project_distribution, project_sorted, quantile_huber, support_atoms
from foxhunt.learner.inputs import LossInputs
from foxhunt.learner.learner import Learner
from foxhunt.learner.network import BatchedLinear, BranchingNetwork, NetworkOutput
from foxhunt.learner.popart import PopArt, RobustPopArt, popart_of
from foxhunt.learner.replay import Batch, Replay
from foxhunt.learner.slots import LearnerReads
from foxhunt.learner.spectral import SpectralNorm
from foxhunt.learner.targets import Targets

__all__ = [
    "AuxiliaryLayout",
    "Batch",
    "BUDGETED_SUM",
    "BatchedLinear",
    "BranchingNetwork",
    "CombinedGradient",
    "GradientBudget",
    "IdentityEncoder",
    "Learner",
    "LearnerConfig",
    "LearnerReads",
    "LossInputs",
    "MLP_ENCODER",
    "NetworkOutput",
    "PopArt",
    "Replay",
    "ReplayConfig",
    "RobustPopArt",
    "SpectralNorm",
    "auxiliary_layout",
    "budget_clip",
    "budgeted_sum",
    "combine",
    "Targets",
    "future_return_table",
    "learner_config_of",
    "popart_of",
    "project_distribution",
    "project_sorted",
    "quantile_huber",
    "resolve_budgets",
    "select_combiner",
    "select_encoder",
    "split_flat",
    "support_atoms",
    "window_input",
]
