"""KernelGym: evaluate one Triton solution against one PyTorch reference problem.

Imports only the standard library, torch, triton and numpy (plus drkernel.problems.problem and
drkernel.problems.scaling, both standard-library modules), so a gym worker runs on a GPU machine
that has nothing else installed.
"""

from drkernel.gym.config import EvalConfig, EvalRequest, tolerance_for
from drkernel.gym.protocol import Evaluator
from drkernel.gym.result import SCHEMA_VERSION, EvalResult, Hack, KernelStat, Status, TimingStats, TrialResult

__all__ = [
    "SCHEMA_VERSION",
    "EvalConfig",
    "EvalRequest",
    "EvalResult",
    "Evaluator",
    "Hack",
    "KernelStat",
    "Status",
    "TimingStats",
    "TrialResult",
    "tolerance_for",
]
