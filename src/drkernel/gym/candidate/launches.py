"""The one Triton launch wrapper of the candidate, and launch recording (a `CandidateHook`).

A CUDA solution's launches are the calls of its extension's functions (`LaunchWatch.native`, wired by
`drkernel.gym.cuda.loader`); they are own by construction (the host built them from its sources).

`LaunchWatch` wraps ``JITFunction.run`` (GPU) and ``InterpretedFunction.run`` (CPU interpreter)
exactly once per process: every Triton launch passes through one of them, autotuned and heuristic
kernels included. It holds the one definition of a solution's *own* kernel (`LaunchWatch.is_own`):
a ``@triton.jit`` function whose code object was compiled from the solution's file (real paths
compared). Both the launch recorder below and the integrity hook read this one watch, so they
cannot disagree on what is own.

Inside a launch the op recorder keeps recording (`drkernel.gym.harness.recorder.launch_scope` only marks
the launch): PyTorch compute run from Python during a launch -- a grid callable, a pre-run hook, an
autotune or heuristics hook, a plain Python function called from a jit body under the interpreter
-- counts as the solution's PyTorch compute. Only the launcher's own argument handling is exempt,
and that is allocation and copies (`ALWAYS_ALLOWED`), which cost nothing either way.

``skip_own`` turns own launches into no-ops (before the grid or any hook runs), so a hook can check
whether the outputs are still right without them (they would be if PyTorch did the work).
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from typing import Any, Callable, Iterator, Sequence

from drkernel.gym.checks import HookBase, HookContext
from drkernel.gym.harness.recorder import launch_scope


class LaunchWatch:
    """Counts, classifies and (on request) skips every Triton launch of the candidate process."""

    def __init__(self, solution_path: str) -> None:
        self.solution_path = os.path.realpath(solution_path)
        self.total: Counter[tuple[str, bool]] = Counter()
        self.own_launches = 0
        self.own_names: set[str] = set()
        self.skip_own = False
        self.scoped = True  # mark launches for the recorders (off while timed: no extra cost)
        self._own_of: dict[int, bool] = {}  # id(code) -> own; a launch must stay cheap (timed on GPU)

    def is_own(self, jit_fn: Any) -> bool:
        """The solution's own kernel: its Python function was compiled from the solution's file."""
        code = getattr(getattr(jit_fn, "fn", None), "__code__", None)
        own = self._own_of.get(id(code))
        if own is None:
            filename = getattr(code, "co_filename", None)
            own = self._own_of[id(code)] = (filename is not None
                                            and os.path.realpath(filename) == self.solution_path)
        return own

    def own_by_name(self) -> Counter[str]:
        """Own launches so far per kernel name (a qualified name's last part, the compiled kernel's
        name): each is one kernel execution the profiler may see, so a profile can tell an own kernel
        from a foreign one of the same name (`profiling.device_kernels`)."""
        counts: Counter[str] = Counter()
        for (qualname, own), n in self.total.items():
            if own:
                counts[qualname.rsplit(".", 1)[-1]] += n
        return counts

    def launch(self, original: Callable[..., Any], fn_self: Any, args: tuple, kwargs: dict) -> Any:
        if not kwargs.get("warmup", False):
            own = self.is_own(fn_self)
            fn = getattr(fn_self, "fn", None)
            self.total[(getattr(fn, "__qualname__", getattr(fn_self, "__name__", "?")), own)] += 1
            if own:
                self.own_launches += 1
                self.own_names.add(getattr(fn, "__name__", "?"))
                if self.skip_own:
                    return None
        if self.scoped:
            with launch_scope():
                return original(fn_self, *args, **kwargs)
        return original(fn_self, *args, **kwargs)

    def native(self, name: str, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """A call of a function a CUDA solution's extension exports (``name``: ``<extension>.<function>``,
        the launcher of its ``__global__`` kernels; wired by `drkernel.gym.cuda.loader`): an own launch.
        Not a launch scope: what the C++ asks of ATen is PyTorch compute, and its fresh allocations are
        poisoned like any other. Skipped, the call runs on copies of its tensor arguments and its tensor
        results come back poisoned: the outputs are what they would be had its kernels not run."""
        self.total[(name, True)] += 1
        self.own_launches += 1
        self.own_names.add(name)
        if self.skip_own:
            return _without_effect(fn, args, kwargs)
        return fn(*args, **kwargs)

    @contextlib.contextmanager
    def skipping_own(self) -> Iterator[None]:
        self.skip_own = True
        try:
            yield
        finally:
            self.skip_own = False


def _without_effect(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """``fn`` on copies of its tensor arguments, its tensor results replaced by poisoned ones. The
    copies and the poison are the harness's, made with the dispatch modes off: no op recorder counts
    them as the call's (the copies' bytes would outweigh an elementwise reference's)."""
    import torch
    from torch.utils._python_dispatch import _disable_current_modes
    from torch.utils._pytree import tree_map

    from drkernel.gym.candidate.integrity import _poison

    def copy(v: Any) -> Any:
        return v.clone() if isinstance(v, torch.Tensor) else v

    def poisoned(v: Any) -> Any:
        if not isinstance(v, torch.Tensor):
            return v
        out = torch.empty_like(v)
        _poison(out)
        return out

    with _disable_current_modes():
        args, kwargs = tree_map(copy, args), tree_map(copy, kwargs)
    out = fn(*args, **kwargs)
    with _disable_current_modes():
        return tree_map(poisoned, out)


_WATCH: LaunchWatch | None = None


def launch_watch(solution_path: str, cpu_mode: bool) -> LaunchWatch:
    """The process's one `LaunchWatch`, installing the wrappers on first use."""
    global _WATCH
    if _WATCH is not None:
        return _WATCH
    from triton.runtime.jit import JITFunction

    watch = _WATCH = LaunchWatch(solution_path)
    targets: list[type] = [JITFunction]
    if cpu_mode:
        from triton.runtime.interpreter import InterpretedFunction

        targets.append(InterpretedFunction)
    for cls in targets:
        cls.run = _launching(watch, cls.run)
    from triton.runtime.autotuner import Autotuner

    Autotuner._bench = _benchmarking(Autotuner._bench)
    return watch


def _benchmarking(original: Callable[..., Any]) -> Callable[..., Any]:
    """``Autotuner._bench`` inside `recorder.autotuning`: Triton's own restore and reset copies around
    each benchmarked run are its bookkeeping, not the solution's compute (`recorder.triton_bookkeeping`)."""
    from drkernel.gym.harness.recorder import autotuning

    def _bench(self: Any, *args: Any, **kwargs: Any) -> Any:
        with autotuning():
            return original(self, *args, **kwargs)

    return _bench


def _launching(watch: LaunchWatch, original: Callable[..., Any]) -> Callable[..., Any]:
    """``run`` through the watch. The original is this closure's, not a keyword default: a caller's
    ``run(..., **{"__original": f})`` replaced a default and ran ``f`` as an own launch."""
    def run(fn_self: Any, *args: Any, **kwargs: Any) -> Any:
        return watch.launch(original, fn_self, args, kwargs)

    return run


class LaunchRecorder(HookBase):
    """Per-kernel launch counts: ``launches`` for one forward (the last correctness trial's, so that
    autotuning and first-call compilation in trial 0 do not inflate it), ``total_launches`` for all."""

    name = "launches"

    def __init__(self) -> None:
        self.watch: LaunchWatch | None = None
        self.after: list[Counter[tuple[str, bool]]] = []  # totals after each trial

    def before_import(self, ctx: HookContext) -> None:
        self.watch = launch_watch(ctx.solution_path, ctx.cpu_mode)

    @property
    def total(self) -> Counter[tuple[str, bool]]:
        return self.watch.total if self.watch is not None else Counter()

    @contextlib.contextmanager
    def skipping_own(self) -> Iterator[None]:
        assert self.watch is not None
        with self.watch.skipping_own():
            yield

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
