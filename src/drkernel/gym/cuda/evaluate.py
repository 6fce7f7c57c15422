"""The CUDA language in front of an evaluator (torch-free: it runs in the orchestrator).

`CudaEvaluator` implements the `Evaluator` protocol around another one. A request whose ``language``
is ``triton`` goes to the inner evaluator untouched. A ``cuda`` request is judged in stages:

1. the contract (`drkernel.gym.cuda.contract.check_cuda`): a syntax error, no ``ModelNew``, or a
   blocking hack (C++ rules, loader arguments, the Triton contract on the Python) ends it here;
2. the build (`drkernel.gym.cuda.build.Compiler`): every extension compiled in its own sandbox, in
   parallel, or found in the host's cache; a failure is ``compile_error`` with the compiler's lines;
3. on a CPU device nothing runs: ``unsupported_on_cpu`` once the sources compiled, never a pass.
   A header of a CUDA library this host's toolkit lacks is ``unsupported_on_cpu`` too (the host's gap).

Running a compiled solution on the device is not wired into the candidate yet: the pieces exist
(`drkernel.gym.cuda.loader` imports the host's build instead of compiling, `drkernel.gym.cuda.
attribution` names own kernels in the profiler's records), but the candidate does not install them,
the Triton contract's run-time guards do not know ``load_inline``, and the launch counters see Triton
launches only. A ``cuda`` request for a GPU device raises `InfrastructureError`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import time
from typing import Any, Sequence

from drkernel.devices import Device
from drkernel.errors import InfrastructureError
from drkernel.gym.config import EvalRequest
from drkernel.gym.cuda.build import BuildOutcome, CompileCache, Compiler, default_cache_dir
from drkernel.gym.cuda.contract import CudaReport, check_cuda
from drkernel.gym.orchestrator.sandbox import make_runner
from drkernel.gym.protocol import Evaluator
from drkernel.gym.result import EvalResult, Hack, Status
from drkernel.gym.verdict.hacks import dedupe

CPU_NOTE = ("the CUDA sources compiled; a CUDA solution runs only on a GPU, so correctness, hacks found at "
            "run time and timing are not judged on CPU")


def _result(request: EvalRequest, status: Status, stages: dict[str, float], t0: float, *,
            hacks: Sequence[Hack] = (), error: str | None = None, note: str | None = None,
            compiled: bool | None = None) -> EvalResult:
    cfg = request.config
    result = EvalResult(status=status, compiled=compiled, problem_key=request.problem.key,
                        request_id=request.request_id,
                        hacks=dedupe(list(hacks)), error=error, timing_note=note,
                        verdict_mode=cfg.verdict_mode,
                        tolerance_profile=cfg.tolerance, config=cfg.to_dict(), stage_seconds=dict(stages),
                        device="cpu", device_name="cpu (CUDA sources compiled, not run)",
                        solution_hash=hashlib.sha256(request.solution.encode()).hexdigest(),
                        elapsed_s=time.monotonic() - t0)
    return result.finalize()


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
        """Everything else (``device_info``, ``cancel_thread``, ``warm``...) is the inner evaluator's."""
        return getattr(self.inner, name)

    def _device(self, request: EvalRequest) -> str:
        name = self.device if request.config.device == "auto" else request.config.device
        return Device.parse(name, "device").guess()

    def evaluate_cuda(self, request: EvalRequest) -> EvalResult:
        t0 = time.monotonic()
        report = check_cuda(request.solution)
        stages = {"static_checks": time.monotonic() - t0}
        early = static_status(report)
        if early is not None:
            status, hacks = early
            error = report.python.parse_error if report.python else None
            return _result(request, status, stages, t0, hacks=hacks, error=error)
        t = time.monotonic()
        outcomes = self.build_all(report)
        stages["compile"] = time.monotonic() - t  # this evaluation's time: ~0 when every build was cached
        failed = next((o for o in outcomes if not o.ok), None)
        cpu = self._device(request) == "cpu"
        if failed is not None:
            status = Status.UNSUPPORTED_ON_CPU if failed.host_gap and cpu else Status.COMPILE_ERROR
            return _result(request, status, stages, t0, error=failed.error)
        if cpu:
            cached = all(o.cached for o in outcomes)
            note = CPU_NOTE + (" (every build came from the cache)" if cached else "")
            return _result(request, Status.UNSUPPORTED_ON_CPU, stages, t0, error=note, note=note, compiled=True)
        raise InfrastructureError("running CUDA solutions on a GPU is not wired into the candidate yet "
                                  "(the host builds them; see drkernel.gym.cuda.evaluate)")

    def build_all(self, report: CudaReport) -> list[BuildOutcome]:
        """Every module of the solution, compiled in parallel (each in its own compile child)."""
        if len(report.modules) == 1:
            return [self.compiler.build(report.modules[0])]
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(report.modules)) as pool:
            return list(pool.map(self.compiler.build, report.modules))


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
