"""Kernel launch recording, a `CandidateHook` that runs inside the candidate.

Wraps ``JITFunction.run`` (GPU) and ``InterpretedFunction.run`` (CPU interpreter): every Triton
launch passes through one of them, autotuned and heuristic kernels included. A kernel is the
solution's own iff its ``@triton.jit`` function's code object was compiled from the solution's
file. ``launches`` counts one forward (the last correctness trial's, so that autotuning and
first-call compilation in trial 0 do not inflate it); ``total_launches`` counts all trials.
``skipping_own()`` turns own launches into no-ops, so a hook can check whether the outputs are
still right without them (they would be if PyTorch did the work: a passthrough).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any, Iterator, Sequence

from drkernel.gym.checks import HookBase, HookContext


class LaunchRecorder(HookBase):
    name = "launches"

    def __init__(self) -> None:
        self.solution_path = ""
        self.total: Counter[tuple[str, bool]] = Counter()
        self.after: list[Counter[tuple[str, bool]]] = []  # totals after each trial
        self.skip_own = False

    def before_import(self, ctx: HookContext) -> None:
        self.solution_path = ctx.solution_path
        from triton.runtime.jit import JITFunction

        targets: list[type] = [JITFunction]
        if ctx.cpu_mode:
            from triton.runtime.interpreter import InterpretedFunction

            targets.append(InterpretedFunction)
        for cls in targets:
            self._wrap(cls)

    def _wrap(self, cls: type) -> None:
        original = cls.run
        recorder = self

        def run(fn_self: Any, *args: Any, **kwargs: Any) -> Any:
            key = recorder._key(fn_self)
            if not kwargs.get("warmup", False):
                recorder.total[key] += 1
                if key[1] and recorder.skip_own:
                    return None
            return original(fn_self, *args, **kwargs)

        cls.run = run

    def _key(self, jit_fn: Any) -> tuple[str, bool]:
        fn = getattr(jit_fn, "fn", None)
        code = getattr(fn, "__code__", None)
        own = code is not None and code.co_filename == self.solution_path
        return getattr(fn, "__qualname__", getattr(jit_fn, "__name__", "?")), own

    @contextlib.contextmanager
    def skipping_own(self) -> Iterator[None]:
        self.skip_own = True
        try:
            yield
        finally:
            self.skip_own = False

    def after_trial(self, ctx: HookContext, trial: int, inputs: Sequence[Any], outputs: Any) -> None:
        self.after.append(Counter(self.total))

    def per_forward(self) -> Counter[tuple[str, bool]]:
        if not self.after:
            return Counter()
        if len(self.after) == 1:
            return self.after[0]
        return self.after[-1] - self.after[-2]

    def report(self) -> dict[str, Any]:
        one = self.per_forward()
        names = sorted(set(self.total))
        return {"kernels": [{"name": n, "own": own, "launches": one.get((n, own), 0),
                             "total_launches": self.total.get((n, own), 0)} for n, own in names]}
