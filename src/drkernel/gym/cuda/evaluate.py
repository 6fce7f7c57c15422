"""The CUDA language in front of an evaluator (torch-free: it runs in the orchestrator).

`CudaEvaluator` implements the `Evaluator` protocol around another one. A request whose ``language``
is ``triton`` goes to the inner evaluator untouched. A ``cuda`` request is judged in stages:

1. the contract (`drkernel.gym.cuda.contract.check_cuda`, read in the inner gym's checker child within
   the request's ``timeout_s``): a syntax error, no ``ModelNew``, or a blocking hack (C++ rules,
   loader arguments, the Triton contract on the Python) ends it here;
2. the build (`drkernel.gym.cuda.build.Compiler`): every extension compiled in its own sandbox, in
   parallel, or found in the host's cache; a failure is ``compile_error`` with the compiler's lines;
3. on a CPU device nothing runs: ``unsupported_on_cpu`` once the sources compiled, never a pass.
   A header of a CUDA library this host's toolkit lacks is ``unsupported_on_cpu`` too (the host's gap).
4. on a GPU the inner evaluator (the in-process gym) runs it as it runs a Triton solution (candidate
   in its sandbox, judge, integrity runs, timing), handed the builds (`native_builds`: typed
   `drkernel.gym.messages.NativeBuild` entries, the libraries' bytes beside them). Its candidate
   imports them through its ``load_inline`` (`drkernel.gym.cuda.loader`; no compiler runs there),
   counts each call of an extension function as an own launch, and names own device kernels by
   their ``__global__`` functions (`drkernel.gym.cuda.attribution`). The result speaks CUDA
   (`drkernel.gym.cuda.wording`) and carries the front's static and compile stages.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from typing import Any, Sequence

from drkernel.devices import Device
from drkernel.errors import InfrastructureError
from drkernel.gym.config import EvalRequest
from drkernel.gym.cuda import toolchain
from drkernel.gym.cuda.build import BuildCancelled, BuildOutcome, CompileCache, Compiler, default_cache_dir
from drkernel.gym.cuda.contract import CudaModule, CudaReport
from drkernel.gym.cuda.wording import relabel
from drkernel.gym.messages import NativeBuild
from drkernel.gym.orchestrator.runtime import WaitCancelled
from drkernel.gym.orchestrator.sandbox import make_runner
from drkernel.gym.orchestrator.static_child import StaticFacts, StaticTimeout, read_source
from drkernel.gym.protocol import Evaluator
from drkernel.gym.result import EvalResult, Hack, Status
from drkernel.gym.verdict.hacks import dedupe
from drkernel.gym.verdict.static import StaticReport

CPU_NAME = "cpu (CUDA sources compiled, not run)"
CPU_NOTE = ("the CUDA sources compiled; a CUDA solution runs only on a GPU, so correctness, hacks found at "
            "run time and timing are not judged on CPU")


def _result(request: EvalRequest, status: Status, stages: dict[str, float], t0: float, *,
            hacks: Sequence[Hack] = (), error: str | None = None, note: str | None = None,
            compiled: bool | None = None, device: str = "cpu") -> EvalResult:
    """A result decided before anything ran (the contract, the build, CPU mode), in CUDA's words."""
    cfg = request.config
    result = EvalResult(status=status, compiled=compiled, problem_key=request.problem.key,
                        request_id=request.request_id,
                        hacks=dedupe(list(hacks)), error=error, timing_note=note,
                        verdict_mode=cfg.verdict_mode,
                        tolerance_profile=cfg.tolerance, config=cfg.to_dict(), stage_seconds=dict(stages),
                        device=device, device_name=CPU_NAME if device == "cpu" else "",
                        solution_hash=hashlib.sha256(request.solution.encode()).hexdigest(),
                        elapsed_s=time.monotonic() - t0)
    return relabel(result.finalize())


def static_status(report: CudaReport) -> tuple[Status, list[Hack]] | None:
    """The status that ends a CUDA evaluation before compiling, or None when it may compile."""
    python = report.python
    if python is not None and python.parse_error:
        return Status.SYNTAX_ERROR, []
    blocking = report.hacks + (python.hacks if python else [])
    if blocking:
        return Status.REJECTED, report.all_hacks
    if python is not None and not python.has_modelnew:
        return Status.NO_MODELNEW, []
    return None


def report_of(facts: StaticFacts) -> CudaReport:
    """The contract's report as the checker child read it (`StaticFacts`): its modules, and its hacks
    as blocking ones where one blocks (`static_status` reads nothing else)."""
    python = StaticReport(own_kernels=facts.own_kernels, torch_calls=facts.torch_calls,
                          has_modelnew=facts.has_modelnew, parse_error=facts.parse_error)
    return CudaReport(modules=list(facts.modules), hacks=list(facts.hacks) if facts.blocked else [], python=python)


def native_builds(modules: Sequence[CudaModule], outcomes: Sequence[BuildOutcome],
                  arch: str) -> list[tuple[NativeBuild, bytes]]:
    """What a candidate gets of a solution's builds: each module's `NativeBuild` and its library's bytes,
    read from the host's cache. A build without a library (a host whose torch cannot link CUDA) cannot
    run here: our host's failure, not the solution's."""
    native = []
    for module, outcome in zip(modules, outcomes):
        if not outcome.linked or outcome.library is None:
            raise InfrastructureError(f"{module.name}: built without linking (this host's torch has no CUDA "
                                      "libraries), so it cannot run on the GPU")
        with open(outcome.library, "rb") as f:
            data = f.read()
        native.append((NativeBuild(name=module.name, key=outcome.key, arch=arch, toolchain=toolchain.toolchain(),
                                   size=len(data), digest=hashlib.sha256(data).hexdigest(),
                                   functions=module.functions, kernels=module.kernels), data))
    return native


class CudaEvaluator:
    """``language``-aware front of an `Evaluator` (see the module docstring)."""

    def __init__(self, inner: Evaluator, compiler: Compiler, device: str = "cpu") -> None:
        self.inner, self.compiler, self.device = inner, compiler, device

    def evaluate(self, request: EvalRequest) -> EvalResult:
        if request.language != "cuda":
            return self.inner.evaluate(request)
        return self.evaluate_cuda(request)

    async def evaluate_batch(self, requests: Sequence[EvalRequest]) -> list[EvalResult]:
        return list(await asyncio.gather(*(asyncio.to_thread(self.evaluate, r) for r in requests)))

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> "CudaEvaluator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str):
        """Everything else (``device_info``, ``warm``...) is the inner evaluator's."""
        return getattr(self.inner, name)

    def _device(self, request: EvalRequest) -> str:
        name = self.device if request.config.device == "auto" else request.config.device
        return Device.parse(name, "device").guess()

    def evaluate_cuda(self, request: EvalRequest) -> EvalResult:
        t0 = time.monotonic()
        device = self._device(request)
        try:
            facts = self.read_source(request)
        except (StaticTimeout, WaitCancelled) as e:  # the contract's reading ran past timeout_s, or a cancel
            status = Status.TIMEOUT if isinstance(e, StaticTimeout) else Status.CRASHED
            return _result(request, status, {"static_checks": time.monotonic() - t0}, t0, error=str(e), device=device)
        report = report_of(facts)
        stages = {"static_checks": time.monotonic() - t0}
        early = static_status(report)
        if early is not None:
            status, hacks = early
            error = report.python.parse_error if report.python else None
            return _result(request, status, stages, t0, hacks=hacks, error=error, device=device)
        t = time.monotonic()
        owner = threading.get_ident()
        try:
            with self.compiler.owned(owner):
                outcomes = self.build_all(report, owner)
        except BuildCancelled as e:  # a cancelled job: its answer is not used, nothing was cached
            return _result(request, Status.CRASHED, stages, t0, error=str(e), device=device)
        stages["compile"] = time.monotonic() - t  # this evaluation's time: ~0 when every build was cached
        failed = next((o for o in outcomes if not o.ok), None)
        cpu = device == "cpu"
        if failed is not None:
            status = Status.UNSUPPORTED_ON_CPU if failed.host_gap and cpu else Status.COMPILE_ERROR
            if failed.host_ended:  # not the source's diagnostic: a result no cache keeps
                status = Status.TIMEOUT if "time limit" in (failed.error or "") else Status.CRASHED
            return _result(request, status, stages, t0, error=failed.error, device=device)
        if cpu:
            cached = all(o.cached for o in outcomes)
            note = CPU_NOTE + (" (every build came from the cache)" if cached else "")
            return _result(request, Status.UNSUPPORTED_ON_CPU, stages, t0, error=note, note=note, compiled=True)
        native = native_builds(report.modules, outcomes, self.compiler.arch)
        before = time.monotonic() - t0
        result = self.inner.evaluate(request, native=native, static=facts)  # type: ignore[call-arg]
        result.stage_seconds.update(stages)  # the inner one ran no static checks: the contract was ours
        result.elapsed_s = before + (result.elapsed_s or 0.0)
        return relabel(result)

    def read_source(self, request: EvalRequest) -> StaticFacts:
        """The contract read from the source: by the inner gym's checker child, bounded by the request's
        ``timeout_s`` and by a cancel (`InProcessEvaluator.read_source`), where the inner evaluator
        has one; else here (an inner evaluator of tests, which runs no request code)."""
        read = getattr(self.inner, "read_source", None)
        if read is not None:
            return read(request)
        return read_source((), request.solution, request.problem, "cuda", run_checks=False)

    def build_all(self, report: CudaReport, owner: int | None = None) -> list[BuildOutcome]:
        """Every module of the solution, compiled in parallel (each in its own compile child) within
        the evaluation's host-memory share (`Compiler.build_all`); ``owner``: the evaluation they are
        built for (`cancel_thread` stops them)."""
        return self.compiler.build_all(report.modules, owner)

    def limit_host_memory(self, per_evaluation_bytes: int) -> None:
        """Bound each evaluation's request code (the inner evaluator's `limit_host_memory`) and its
        builds (`Compiler.memory_share`) by ``per_evaluation_bytes``."""
        self.inner.limit_host_memory(per_evaluation_bytes)  # type: ignore[attr-defined]
        self.compiler.memory_share = max(1, int(per_evaluation_bytes))

    def cancel_thread(self, ident: int) -> bool:
        """Stop the evaluation on thread ``ident``: its builds when it is building, else the inner
        gym's candidate. False when neither runs there yet."""
        inner = getattr(self.inner, "cancel_thread", None)
        return self.compiler.cancel(ident) or bool(inner is not None and inner(ident))


def with_languages(inner: Evaluator, device: str = "auto", unsafe_no_sandbox: bool = False,
                   cache_dir: str | None = None) -> CudaEvaluator:
    """``inner`` (the Triton gym) behind the CUDA front: builds in the same sandbox as its children,
    cached in ``cache_dir`` (default ``~/.cache/drkernel/cuda``, the host's one cache)."""
    compiler = Compiler(make_runner(unsafe_no_sandbox), CompileCache(cache_dir or default_cache_dir()))
    return CudaEvaluator(inner, compiler, device)


def in_process_with_languages(device: str = "auto", unsafe_no_sandbox: bool = False,
                              cuda_cache_dir: str | None = None, **kwargs: Any) -> CudaEvaluator:
    """The in-process gym (``kwargs``: `InProcessEvaluator`'s) behind the CUDA front: the service's
    default evaluator factory (`drkernel.service.config.ServiceConfig.evaluator`)."""
    from drkernel.gym import InProcessEvaluator

    inner = InProcessEvaluator(device=device, unsafe_no_sandbox=unsafe_no_sandbox, **kwargs)
    return with_languages(inner, device, unsafe_no_sandbox, cuda_cache_dir)
