"""Plug-in points for reward-integrity checks, and the registry the evaluator runs.

Three kinds, run at three places of the trust boundary:

    StaticCheck     orchestrator, before any process starts: (source, problem) -> hacks.
                    A check with ``blocking = True`` that finds a hack gives ``Status.REJECTED``
                    without the code ever running.
    CandidateHook   inside the candidate child, around the solution: installs guards before the
                    import, observes trials, runs extra forwards (whose outputs the *judge* compares
                    through ``ctx.compare``), and returns a JSON-able report. Named by import path
                    (``"package.module:factory"``) because it is instantiated in the child.
                    Everything a hook reports is a claim made inside untrusted code.
    VerdictCheck    orchestrator, after the run: (request, candidate reports, judge report) -> hacks.
                    The judge report is trusted: per-trial comparisons, input mutation, the
                    comparisons of extra outputs requested by hooks, timings.

With an empty registry the pipeline is complete (correctness and timing); `default_checks` adds
the launch recorder (kernel launch counts) and the input-mutation verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

from drkernel.gym.result import Hack
from drkernel.problems.problem import Problem


@runtime_checkable
class StaticCheck(Protocol):
    name: str
    blocking: bool

    def check(self, source: str, problem: Problem) -> list[Hack]:
        """Hacks visible in the source alone."""
        ...


class HookContext(Protocol):
    """What a candidate hook sees (built by `drkernel.gym.candidate.main`)."""

    device: Any                    # torch.device
    cpu_mode: bool                 # running under the Triton interpreter
    solution_path: str             # the file the solution was imported from ("own" kernels live here)
    reference: Any                 # the reference module (Model, get_inputs, get_init_inputs)
    config: Mapping[str, Any]      # EvalConfig as a dict
    seeds: Sequence[int]           # input seed of each correctness trial

    def compare(self, outputs: Any, trial: int, tag: str) -> dict[str, Any]:
        """Have the judge compare ``outputs`` with the reference outputs of ``trial``; returns
        ``{"passed", "max_abs_err", "max_rel_err", "message"}``. The judge records the verdict
        under ``tag`` in its own report, where verdict checks read it."""
        ...


@runtime_checkable
class CandidateHook(Protocol):
    name: str

    def before_import(self, ctx: HookContext) -> None: ...

    def after_import(self, ctx: HookContext, module: Any) -> None: ...

    def after_trial(self, ctx: HookContext, trial: int, inputs: Sequence[Any], outputs: Any) -> None: ...

    def extra_runs(self, ctx: HookContext, model: Any, make_inputs: Callable[[int], list[Any]]) -> dict[str, Any]:
        """Run after all trials passed; ``make_inputs(trial)`` draws that trial's inputs afresh."""
        ...

    def report(self) -> dict[str, Any]: ...


class HookBase:
    """No-op defaults for `CandidateHook`; subclass and override what you need."""

    name = "hook"

    def before_import(self, ctx: HookContext) -> None:
        return None

    def after_import(self, ctx: HookContext, module: Any) -> None:
        return None

    def after_trial(self, ctx: HookContext, trial: int, inputs: Sequence[Any], outputs: Any) -> None:
        return None

    def extra_runs(self, ctx: HookContext, model: Any, make_inputs: Callable[[int], list[Any]]) -> dict[str, Any]:
        return {}

    def report(self) -> dict[str, Any]:
        return {}


@runtime_checkable
class VerdictCheck(Protocol):
    name: str

    def check(self, request: Any, candidate_report: Mapping[str, Any],
              judge_report: Mapping[str, Any]) -> list[Hack]:
        """``candidate_report``: hook name -> its report (claims). ``judge_report``: trusted facts."""
        ...


class InputMutationCheck:
    """Hack 6: forward left its inputs different from what the reference leaves them as."""

    name = "input_mutation"

    def check(self, request: Any, candidate_report: Mapping[str, Any],
              judge_report: Mapping[str, Any]) -> list[Hack]:
        changed = sorted({name for t in judge_report.get("trials", []) for name in t.get("inputs_changed", [])})
        if not changed:
            return []
        return [Hack(code=6, name="input_mutation", evidence=f"after forward, {', '.join(changed)} differed "
                     "from the reference's inputs after its forward",
                     message="ModelNew.forward must not modify its inputs; write results to new tensors.")]


@dataclass(frozen=True)
class CheckRegistry:
    """The checks an evaluator runs. ``candidate_hooks`` are ``"module:factory"`` import paths."""

    static: tuple[StaticCheck, ...] = ()
    candidate_hooks: tuple[str, ...] = ()
    verdict: tuple[VerdictCheck, ...] = ()

    def plus(self, other: "CheckRegistry") -> "CheckRegistry":
        return CheckRegistry(self.static + other.static, self.candidate_hooks + other.candidate_hooks,
                             self.verdict + other.verdict)


LAUNCH_RECORDER = "drkernel.gym.candidate.launches:LaunchRecorder"


def core_checks() -> CheckRegistry:
    """Launch recording and the judge's input-mutation check: the trust boundary's own checks."""
    return CheckRegistry(candidate_hooks=(LAUNCH_RECORDER,), verdict=(InputMutationCheck(),))


def default_checks() -> CheckRegistry:
    """The checks every evaluation runs unless the evaluator is given others: the core checks plus
    the reward-integrity checks (static analysis, the integrity hook, the lenient/strict verdict)."""
    from drkernel.gym.verdict.checks import integrity_checks  # verdict builds on this module

    return core_checks().plus(integrity_checks())


def load_hook(path: str) -> CandidateHook:
    """Instantiate a candidate hook from its ``"module:factory"`` path (inside the candidate)."""
    import importlib

    module_name, _, attr = path.partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    return factory()
