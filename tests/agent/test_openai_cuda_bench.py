"""A CUDA bench run through the OpenAI-compatible policy: our real model server (the tiny model), the
real bench loop and the gym behind its CUDA front, on CPU."""

import asyncio
import json

from drkernel.agent.policies.spec import make_policy
from drkernel.bench.run import BenchConfig, run_bench
from drkernel.problems.loaders import load_problems
from drkernel.tasks.gym import make_evaluator


def test_a_cuda_bench_run_sends_the_cuda_contract_through_the_openai_policy(model_server, tmp_path):
    problems = [p for p in load_problems("builtin") if p.name == "gelu"]
    config = BenchConfig.from_dict({"problems": "builtin", "policy": f"openai:{model_server},token_ids=true",
                                    "language": "cuda", "samples": 1, "turns": 1, "eval": {"device": "cpu"},
                                    "max_tokens": 16})
    policy = make_policy(config.policy, problems)
    with make_evaluator("local", device="cpu", concurrency=1, pool_size=1) as evaluator:
        asyncio.run(run_bench(config, problems, policy, evaluator, tmp_path))
    (line,) = (tmp_path / "trajectories.jsonl").read_text().splitlines()
    episode = json.loads(line)
    text = json.dumps(episode)
    assert "load_inline" in text and "__global__" in text  # the CUDA contract reached the model
    assert "@triton.jit" not in text.split("load_inline")[0][-2000:]  # not the Triton contract before it
    assert episode.get("language", "cuda") == "cuda"
