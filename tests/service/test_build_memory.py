"""A CUDA solution's builds are counted in the host-memory share a worker gives each evaluation: the
share that bounds its candidate bounds its compilers too (`Compiler.memory_share`, measured over each
compile child's whole process tree), so a worker's slots cannot over-commit the host with builds."""

from __future__ import annotations

from pathlib import Path

import pytest

from drkernel.gym.config import EvalConfig, EvalRequest
from drkernel.gym.cuda.build import BUILD_BYTES, COMPILER_BYTES, CompileCache, Compiler, build_plan
from drkernel.gym.cuda.evaluate import CudaEvaluator, with_languages
from drkernel.gym.cuda.toolchain import have_compilers
from drkernel.gym.orchestrator.sandbox import make_runner
from drkernel.gym.result import Status
from drkernel.problems.problem import Problem
from drkernel.service.config import ServiceConfig
from drkernel.service.workers import start_evaluator, worker_host_memory

GOLD = Path(__file__).resolve().parents[2] / "src/drkernel/problems/builtin_cuda/level1/gelu/gold.py"
GIB = 1 << 30


class BoundedInner:
    """The inner (Triton) evaluator's memory bound, as the service sets it; no CUDA request reaches it."""

    def __init__(self) -> None:
        self.share: int | None = None

    def limit_host_memory(self, per_evaluation_bytes: int) -> None:
        self.share = per_evaluation_bytes

    def evaluate(self, request):
        raise AssertionError("a cuda request went to the Triton evaluator")


def front(device: str = "cpu", cuda_cache_dir: str | None = None) -> CudaEvaluator:
    """A worker's evaluator factory (`ServiceConfig.evaluator`): the CUDA front over `BoundedInner`."""
    return with_languages(BoundedInner(), device, cache_dir=cuda_cache_dir)


def test_an_evaluations_builds_are_planned_within_its_share():
    assert BUILD_BYTES == 2 * COMPILER_BYTES == 3.5 * GIB
    assert build_plan(3, None) == (3, None, False)  # no share: every module at once, per-process limits alone
    assert build_plan(3, 8 * GIB) == (2, 4 * GIB, False)  # two builds of 3.5 GiB fit 8 GiB: 4 GiB each
    assert build_plan(3, 2 * GIB) == (1, 2 * GIB, True)  # not one side by side: one at a time, compilers in turn
    assert build_plan(2, 16 * GIB) == (2, 8 * GIB, False)  # never more at once than modules


def _default_cpu_worker(cache_dir: str):
    """A worker as a default server starts it on a CPU-only host (`ServiceConfig`'s defaults)."""
    config = ServiceConfig()
    memory = worker_host_memory("cpu", config.host_memory_bytes, config.device_memory_bytes)
    return start_evaluator("test_build_memory:front", "cpu", {"cuda_cache_dir": cache_dir},
                           slots=config.slots_per_worker, host_memory_bytes=memory)


def test_a_default_cpu_worker_plans_a_build_its_slots_share_holds(tmp_path):
    """A default CPU worker gives each slot 2 GiB: a build's two compilers side by side (3.1 GB measured)
    were stopped there, so every CUDA solution's build failed (``crashed``, naming the share). Its
    compilers now run one after the other, each planned at `COMPILER_BYTES` (1.50 GiB measured),
    still watched against the slot's share."""
    evaluator, info = _default_cpu_worker(str(tmp_path))
    share = evaluator.compiler.memory_share
    assert share == info["slot_memory_bytes"] == 2 * GIB
    assert build_plan(1, share) == (1, share, True) and COMPILER_BYTES <= share < BUILD_BYTES


@pytest.mark.slow  # two compilers parsing torch's headers one after the other: about 3 minutes on 2 cores
@pytest.mark.skipif(not have_compilers(), reason="nvcc or c++ is not installed")
def test_a_default_cpu_worker_builds_a_cuda_solution(tmp_path):
    evaluator, _ = _default_cpu_worker(str(tmp_path))
    problem = Problem(name="gelu", level=1, code="import torch\n", source="builtin")
    result = evaluator.evaluate(EvalRequest(problem=problem, solution=GOLD.read_text(),
                                            config=EvalConfig(device="cpu"), language="cuda"))
    assert result.status is Status.UNSUPPORTED_ON_CPU and result.compiled is True, (result.status, result.error)


def test_a_worker_gives_its_slots_share_to_the_compilers_as_to_the_candidates(tmp_path):
    evaluator, info = start_evaluator("test_build_memory:front", "cpu", {"cuda_cache_dir": str(tmp_path)},
                                      slots=2, host_memory_bytes=6 * GIB)
    assert info["slot_memory_bytes"] == 3 * GIB
    assert evaluator.inner.share == 3 * GIB and evaluator.compiler.memory_share == 3 * GIB


@pytest.mark.skipif(not have_compilers(), reason="nvcc or c++ is not installed")
def test_a_build_past_its_evaluations_share_is_stopped_and_not_cached(tmp_path):
    """256 MiB for the build: nvcc's front end passes it parsing torch's headers (its own address
    space limit, 8 GiB, would not stop it). The evaluation ends as a crash, not the source's compile
    error, and no cache keeps the outcome."""
    compiler = Compiler(make_runner(), CompileCache(tmp_path), link=False)
    evaluator = CudaEvaluator(BoundedInner(), compiler, device="cpu")
    evaluator.limit_host_memory(256 << 20)
    problem = Problem(name="gelu", level=1, code="import torch\n", source="builtin")
    result = evaluator.evaluate(EvalRequest(problem=problem, solution=GOLD.read_text(),
                                            config=EvalConfig(device="cpu"), language="cuda"))
    assert result.status is Status.CRASHED, (result.status, result.error)
    assert "256 MiB" in result.error and "share of the host's memory" in result.error, result.error
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".tmp")] == []  # no entry kept
