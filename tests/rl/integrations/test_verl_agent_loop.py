"""The multi-turn agent loop inside verl's AgentLoopBase machinery (its Continuous Token builder and
chat template), with a scripted in-memory LLM server and a real KernelGym service."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, _agent_loop_registry
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.replica import TokenOutput

from drkernel.agent.prompts import PromptTemplates
from drkernel.agent.tiny import build_tokenizer
from drkernel.gym.config import EvalConfig
from drkernel.problems.problem import Problem
from drkernel.rl.integrations.verl import algorithms as alg
from drkernel.rl.integrations.verl.agent_loop import KernelAgentLoop
from drkernel.rl.integrations.verl.dataset import AGENT_NAME, verl_row
from drkernel.rl.integrations.verl.reward import URL_ENV

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "service"))

REFERENCE = (
    "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n\n"
    "def get_inputs():\n    return [torch.randn(16)]\n\ndef get_init_inputs():\n    return []\n"
)
ANSWERS = [
    "No code yet, let me think.",
    "```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    pass\n# status: incorrect\n```",
    "```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    pass\n```",
]


class ScriptedServer:
    """An in-memory LLM server: answers each request with the next scripted answer."""

    def __init__(self, tokenizer, answers):
        self.tokenizer, self.answers, self.prompts = tokenizer, list(answers), []

    async def generate(self, request_id, prompt_ids, sampling_params, **kwargs):
        self.prompts.append(list(prompt_ids))
        ids = self.tokenizer(self.answers.pop(0), add_special_tokens=False)["input_ids"] + [
            self.tokenizer.eos_token_id
        ]
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")



def _loop(tokenizer, server, turns=3, response_length=4096):
    config = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {
                    "prompt_length": 4096,
                    "response_length": response_length,
                    "multi_turn": {"max_assistant_turns": turns},
                }
            },
            "data": {},
        }
    )
    return KernelAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=server,
        tokenizer=tokenizer,
        processor=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
    )


def test_three_turns_generate_evaluate_feed_back(service, monkeypatch):
    monkeypatch.setenv(URL_ENV, service.url)
    assert _agent_loop_registry[AGENT_NAME]["_target_"].endswith("agent_loop.KernelAgentLoop")
    tok = build_tokenizer()
    problem = Problem(name="double", level=1, code=REFERENCE, problem_id="double", source="test")
    row = verl_row(problem, 0, EvalConfig(), PromptTemplates.default())
    server = ScriptedServer(tok, ANSWERS)
    loop = _loop(tok, server)
    out = loop.loop.run_until_complete(
        loop.run(
            {"temperature": 1.0},
            raw_prompt=row["prompt"],
            extra_info=row["extra_info"],
            reward_model=row["reward_model"],
        )
    )
    rewards = out.extra_fields[alg.TURN_REWARDS]
    assert rewards[:2] == [0.0, 0.0] and rewards[2] > 0.5  # unparseable, incorrect, correct
    assert out.extra_fields[alg.TURN_CORRECT] == [0.0, 0.0, 1.0]
    assert out.reward_score == pytest.approx(sum(rewards))
    # three answers separated by two feedback messages: three runs of 1s in the response mask
    mask = out.response_mask
    runs = sum(1 for i, m in enumerate(mask) if m == 1 and (i == 0 or mask[i - 1] == 0))
    assert runs == 3 and len(out.response_ids) == len(mask) == len(out.response_logprobs)
    answers = [tok.decode([t for t, m in zip(out.response_ids, mask) if m])]
    assert all(a.strip() in answers[0] for a in ANSWERS)
    feedback = tok.decode([t for t, m in zip(out.response_ids, mask) if not m])
    assert (
        feedback.count("<|im_start|>user") == 2 and feedback.count("Your previous answer was evaluated.") == 2
    )
    # every turn's prompt is the previous one plus the new answer and feedback (one continuous sequence)
    assert server.prompts[1][: len(server.prompts[0])] == server.prompts[0]
    assert out.prompt_ids == server.prompts[0]


def test_response_length_cuts_the_episode(service, monkeypatch):
    monkeypatch.setenv(URL_ENV, service.url)
    tok = build_tokenizer()
    problem = Problem(name="double", level=1, code=REFERENCE, problem_id="double", source="test")
    row = verl_row(problem, 0, EvalConfig(), PromptTemplates.default())
    loop = _loop(tok, ScriptedServer(tok, ANSWERS), response_length=40)
    out = loop.loop.run_until_complete(
        loop.run({}, raw_prompt=row["prompt"], extra_info=row["extra_info"], reward_model=row["reward_model"])
    )
    assert len(out.response_ids) <= 40 and len(out.extra_fields[alg.TURN_REWARDS]) == 1
