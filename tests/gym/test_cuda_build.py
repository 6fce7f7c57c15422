"""CUDA sources really compiled (nvcc and the host compiler, inside the sandbox), on CPU.

Each source compiles once per session: a torch extension compiles in about a minute of CPU time on
two cores (torch's headers), so the repeat evaluations come from the session's cache, which is also
what they check. Skipped where nvcc is missing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from drkernel.gym.config import EvalConfig, EvalRequest
from drkernel.gym.cuda.build import CompileCache, Compiler
from drkernel.gym.cuda.evaluate import CudaEvaluator
from drkernel.gym.cuda.toolchain import have_compilers
from drkernel.gym.orchestrator.sandbox import Spawn, make_runner
from drkernel.gym.result import Status
from drkernel.problems.problem import Problem

pytestmark = pytest.mark.skipif(not have_compilers(), reason="nvcc or c++ is not installed")

GOLD = Path(__file__).resolve().parents[2] / "src/drkernel/problems/builtin_cuda/level1/gelu/gold.py"
PROBLEM = Problem(name="gelu", level=1, code="import torch\n", source="builtin")


class CountingRunner:
    """The real sandbox runner, counting the children it starts (a compile is a child)."""

    def __init__(self) -> None:
        self.inner = make_runner()
        self.name, self.sandboxed = self.inner.name, self.inner.sandboxed
        self.started = 0

    def popen(self, spawn: Spawn) -> subprocess.Popen:
        self.started += 1
        return self.inner.popen(spawn)

    def private_dir(self) -> str:
        return self.inner.private_dir()

    def exit_status(self, returncode: int) -> int:
        return self.inner.exit_status(returncode)


class NoInner:
    """A CUDA request never reaches the inner evaluator on CPU."""

    def evaluate(self, request):
        raise AssertionError("a cuda request went to the Triton evaluator")

    async def evaluate_batch(self, requests):
        raise AssertionError

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def front(tmp_path_factory):
    runner = CountingRunner()
    compiler = Compiler(runner, CompileCache(tmp_path_factory.mktemp("cuda-cache")), link=False)
    return CudaEvaluator(NoInner(), compiler, device="cpu"), runner


def request(source: str) -> EvalRequest:
    return EvalRequest(problem=PROBLEM, solution=source, config=EvalConfig(device="cpu"), language="cuda")


def test_a_gold_compiles_then_is_unsupported_on_cpu_and_a_repeat_compiles_nothing(front):
    evaluator, runner = front
    first = evaluator.evaluate(request(GOLD.read_text()))
    assert first.status is Status.UNSUPPORTED_ON_CPU and not first.valid and first.compiled is True
    assert first.language == "cuda" and first.device == "cpu" and first.device_name.startswith("cpu")
    assert "compiled" in first.error and first.stage_seconds["compile"] > 1.0
    started = runner.started
    second = evaluator.evaluate(request(GOLD.read_text()))
    assert runner.started == started  # no compile child: the build came from the cache
    assert second.status is Status.UNSUPPORTED_ON_CPU and "from the cache" in second.error
    assert "compile" in second.stage_seconds  # the stage is reported for a cached build too


def test_a_compile_error_is_its_status_with_the_solutions_line(front):
    evaluator, runner = front
    broken = GOLD.read_text().replace("float v = x[i];", "float v = x[i] + undeclared_value;")
    result = evaluator.evaluate(request(broken))
    assert result.status is Status.COMPILE_ERROR and result.compiled is False
    first_line = result.error.splitlines()[0]
    assert first_line.startswith("cuda_sources(") and 'identifier "undeclared_value" is undefined' in first_line
    assert len(result.error.splitlines()) <= 6  # the error, its source line and caret, the count
    started = runner.started
    assert evaluator.evaluate(request(broken)).status is Status.COMPILE_ERROR and runner.started == started


def test_the_compile_stops_at_its_cpu_time_limit(tmp_path):
    """Two CPU seconds per process: the compilers die on torch's headers, the result says why."""
    from drkernel.gym.cuda.contract import check_cuda
    from drkernel.gym.orchestrator.sandbox import Limits

    compiler = Compiler(make_runner(), CompileCache(tmp_path), link=False, limits=Limits(cpu_s=2, nproc=256))
    (module,) = check_cuda(GOLD.read_text()).modules
    outcome = compiler.build(module)
    assert not outcome.ok and not outcome.cached
    assert "signal" in outcome.error or "Killed" in outcome.error or "died" in outcome.error, outcome.error
    # the host ended it, the source did not fail: nothing cached, so a build with room compiles it
    assert outcome.host_ended and compiler.cache.get(compiler.key(module)) is None


def test_a_compile_out_of_memory_is_not_the_sources_compile_error(tmp_path):
    """256 MiB of address space per compiler process: the build fails for the host's limit, so the
    evaluation ends as a crash (no cache keeps it), not as the solution's compile error."""
    from drkernel.gym.orchestrator.sandbox import Limits

    compiler = Compiler(make_runner(), CompileCache(tmp_path), link=False,
                        limits=Limits(cpu_s=120, nproc=256, as_bytes=256 << 20))
    result = CudaEvaluator(NoInner(), compiler, device="cpu").evaluate(request(GOLD.read_text()))
    assert result.status in (Status.CRASHED, Status.TIMEOUT), (result.status, result.error)
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".tmp")] == []  # no entry kept


def test_a_refused_source_starts_no_compile(front):
    evaluator, runner = front
    started = runner.started
    hacked = GOLD.read_text().replace("__global__ void gelu_kernel", "#include <dlfcn.h>\n__global__ void gelu_kernel")
    result = evaluator.evaluate(request(hacked))
    assert result.status is Status.REJECTED and [h.code for h in result.hacks] == [14]
    assert runner.started == started and "compile" not in result.stage_seconds


def test_an_episode_sends_cuda_requests_and_reads_the_cached_build(front):
    """The agent's side: a scripted CUDA gold goes out as a ``cuda`` request (the gold compiled above,
    so the build comes from the cache) and the turn's feedback says it was not run on CPU."""
    import asyncio

    from drkernel.agent.episode import EpisodeConfig, run_episodes
    from drkernel.agent.policies.spec import make_policy
    from drkernel.problems.loaders import load_builtin

    evaluator, runner = front
    gelu = [p for p in load_builtin() if p.name == "gelu"]
    policy = make_policy("scripted:builtin_cuda:gold", gelu)
    config = EpisodeConfig(turns=1, language="cuda", eval_config=EvalConfig(device="cpu"))
    started = runner.started
    (episode,) = asyncio.run(run_episodes(gelu, policy, evaluator, config))
    (turn,) = episode.turns
    assert turn.result.status is Status.UNSUPPORTED_ON_CPU and runner.started == started
    assert "load_inline" in policy.calls[0][-1]["content"]  # the policy was shown the CUDA prompt


def test_the_compile_cache_keeps_to_its_size_by_dropping_its_oldest_entries(tmp_path):
    """Every distinct source adds an entry; past the cache's bytes the oldest go, the newest stay."""
    import os

    from drkernel.gym.cuda.messages import CompileReply

    cache = CompileCache(tmp_path, max_bytes=3 * 1000)
    for i in range(6):
        cache.put(f"key{i}", "m", CompileReply(ok=True, seconds=1.0, linked=True, log=""), b"x" * 700, None, False)
        os.utime(tmp_path / f"key{i}", (1000 + i, 1000 + i))  # written one after the other
    kept = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".tmp-"))
    assert kept == ["key3", "key4", "key5"], kept  # about 930 bytes each: three fit in 3,000
    assert cache.get("key0") is None and cache.get("key5") is not None


def test_a_build_waiting_for_a_compile_slot_stops_when_its_evaluation_is_cancelled(tmp_path):
    """A job queued behind another's slow build is stopped alone (a cancel), not by killing the worker:
    its wait for the slot ends in BuildCancelled and it never compiles."""
    import threading

    from drkernel.gym.cuda.build import BuildCancelled
    from drkernel.gym.cuda.contract import check_cuda

    runner = CountingRunner()
    compiler = Compiler(runner, CompileCache(tmp_path), link=False, parallel=1)
    (module,) = check_cuda(GOLD.read_text()).modules
    outcome: list[BaseException | object] = []
    owner = 4242

    def waiting_build() -> None:
        with compiler.owned(owner):
            try:
                outcome.append(compiler.build(module, owner))
            except BuildCancelled as e:
                outcome.append(e)

    compiler._slots.acquire()  # another evaluation's build holds the only slot
    try:
        t = threading.Thread(target=waiting_build)
        t.start()
        while not compiler.cancel(owner):  # until the build is inside `owned`
            pass
        t.join(timeout=60)
    finally:
        compiler._slots.release()
    assert not t.is_alive() and isinstance(outcome[0], BuildCancelled), outcome
    assert runner.started == 0


@pytest.mark.parametrize("log, host", [
    ("Killed", True),                                                    # nvcc's whole output when cicc is SIGKILLed
    ("nvcc error   : 'cicc' died due to signal 9 (Kill signal)", True),
    ("c++: fatal error: Killed signal terminated program cc1plus", True),
    ("cc1plus: out of memory allocating 65536 bytes", True),
    ('kernel.cu(3): error: identifier "killed" is undefined', False),    # the source's own diagnostic
    ("kernel.cu(9): error: expected a \";\"", False),
])
def test_which_build_failures_the_host_ended(log, host):
    from drkernel.gym.cuda.build import HOST_ENDED

    assert bool(HOST_ENDED.search(log)) is host
