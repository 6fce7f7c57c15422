"""The ``language`` of a request from the outside in: bench config, episodes, prompts, the scripted
CUDA golds, the service's request schema. Nothing compiles here."""

from __future__ import annotations

import pytest

from drkernel.agent.episode import EpisodeConfig
from drkernel.agent.policies.scripted import builtin_script
from drkernel.agent.policies.spec import make_policy
from drkernel.agent.prompts import PromptTemplates
from drkernel.bench.run import BenchConfig
from drkernel.errors import ConfigError
from drkernel.gym.cuda.contract import check_cuda
from drkernel.problems.builtin_cuda import cuda_solutions
from drkernel.problems.loaders import load_builtin


@pytest.fixture(scope="module")
def problems():
    return load_builtin()


def by_name(problems, name):
    return next(p for p in problems if p.name == name)


def test_the_cuda_prompt_has_the_cuda_contract_and_example(problems):
    gelu = by_name(problems, "gelu")
    system, user = PromptTemplates.default("cuda").first_messages(gelu)
    assert "CUDA C++" in system["content"]
    text = user["content"]
    assert "load_inline" in text and "__global__" in text and "cudaDeviceSetLimit" not in text
    assert "changes process-wide device state" in text  # the C++ rules, rendered from their one table
    assert "@triton.jit" not in text and "$" not in text
    example = text.split("## An example of the expected style")[1].split("```python")[2].split("```")[0]
    assert check_cuda(example).all_hacks == []  # the example obeys the contract it comes with
    triton = PromptTemplates.default().first_messages(gelu)[-1]["content"]
    assert "@triton.jit" in triton and "load_inline" not in triton.split("## The solution contract")[0]


def test_scripted_builtin_cuda_replays_the_cuda_golds(problems):
    gelu = by_name(problems, "gelu")
    (answer,) = builtin_script(gelu, ["gold"], "cuda")
    assert "load_inline" in answer and "<answer>" in answer
    policy = make_policy("scripted:builtin_cuda:gold", problems)
    assert policy.name == "scripted"
    assert sum(1 for p in problems if cuda_solutions(p)) >= 10


def test_the_language_flows_from_the_bench_config_into_episodes():
    cfg = BenchConfig(language="cuda")
    assert cfg.episode_config().language == "cuda"
    assert BenchConfig.from_dict({"language": "cuda"}).language == "cuda"
    with pytest.raises(ConfigError, match="language"):
        BenchConfig(language="hip")
    with pytest.raises(ConfigError, match="language"):
        EpisodeConfig(language="hip")


def test_the_service_schema_carries_the_language():
    from drkernel.service.config import ServiceConfig
    from drkernel.service.schemas import request_models

    model = request_models(ServiceConfig()).request
    assert model.model_validate({"problem_key": "builtin/L1/gelu", "solution": "x"}).language == "triton"
    assert model.model_validate({"problem_key": "builtin/L1/gelu", "solution": "x", "language": "cuda"}).language \
        == "cuda"
    with pytest.raises(ValueError):
        model.model_validate({"problem_key": "builtin/L1/gelu", "solution": "x", "language": "hip"})


def test_feedback_on_a_cuda_result_speaks_cuda():
    from drkernel.agent.feedback import result_feedback
    from drkernel.gym.cuda.wording import relabel
    from drkernel.gym.result import EvalResult, KernelStat, Status
    from drkernel.gym.verdict.hacks import LAZY_WARNING, make_hack

    def result(status, **kw):
        return relabel(EvalResult(status=status, **kw).finalize())

    texts = [result_feedback(result(Status.COMPILE_ERROR, error="cuda_sources(1): error: expected ';'")),
             result_feedback(result(Status.CORRECT, hacks=[make_hack(1, "relu_kernel never ran"),
                                                           make_hack(2, "ATen did it")])),
             result_feedback(result(Status.CORRECT, op_coverage=0.3, time_coverage=0.3,
                                    warnings=[LAZY_WARNING.format(share=0.3)],
                                    kernels=[KernelStat("void relu_kernel(float*)", True, 1, 0.1)]))]
    for feedback, instruction in texts:
        assert "Triton" not in feedback + instruction and "triton" not in feedback + instruction
    assert "CUDA kernels take 30%" in texts[2][0] and "your own CUDA kernels" in texts[1][1]
    triton = EvalResult(status=Status.COMPILE_ERROR).finalize()  # a Triton result keeps its words
    assert "Triton" in result_feedback(triton)[0]
