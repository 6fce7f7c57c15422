"""KernelGym: evaluate one Triton solution against one PyTorch reference problem.

Imports only the standard library, torch, triton and numpy (plus drkernel.problems.problem and
drkernel.problems.scaling, both standard-library modules), so a gym worker runs on a GPU machine
that has nothing else installed.
"""

from drkernel.gym.checks import (
    CandidateHook,
    CheckRegistry,
    HookBase,
    StaticCheck,
    VerdictCheck,
    core_checks,
    default_checks,
)
from drkernel.gym.config import EvalConfig, EvalRequest, tolerance_for
from drkernel.gym.orchestrator.evaluator import InProcessEvaluator
from drkernel.gym.protocol import Evaluator
from drkernel.gym.result import SCHEMA_VERSION, EvalResult, Hack, KernelStat, Status, TimingStats, TrialResult

__all__ = [
    "SCHEMA_VERSION",
    "CandidateHook",
    "CheckRegistry",
    "EvalConfig",
    "EvalRequest",
    "EvalResult",
    "Evaluator",
    "Hack",
    "HookBase",
    "InProcessEvaluator",
    "KernelStat",
    "StaticCheck",
    "Status",
    "TimingStats",
    "TrialResult",
    "VerdictCheck",
    "core_checks",
    "default_checks",
    "tolerance_for",
]
