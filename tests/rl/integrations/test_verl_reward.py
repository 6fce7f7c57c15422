"""The verl reward path against a real KernelGym service (HTTP, SQLite job store, worker process),
both called directly and through verl's own NaiveRewardManager on a DataProto."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

from drkernel.agent.extract import extract_code
from drkernel.agent.prompts import PromptTemplates
from drkernel.agent.tiny import build_tokenizer
from drkernel.errors import ConfigError
from drkernel.gym.config import EvalConfig, EvalRequest
from drkernel.problems.problem import Problem
from drkernel.reward import turn_reward
from drkernel.rl.integrations.verl import algorithms as alg
from drkernel.rl.integrations.verl.dataset import AGENT_NAME, verl_row, write_verl_dataset
from drkernel.rl.integrations.verl.reward import URL_ENV, compute_score

SERVICE_TESTS = Path(__file__).resolve().parents[2] / "service"
sys.path.insert(0, str(SERVICE_TESTS))
from service_evaluators import DirectiveEvaluator  # noqa: E402  (the service tests' deterministic evaluator)

REFERENCE = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x * 2

def get_inputs():
    return [torch.randn(16)]

def get_init_inputs():
    return []
"""
ANSWER = "Here is my kernel.\n```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    pass\n```\n"
PROBLEM = Problem(name="double", level=1, code=REFERENCE, problem_id="double", source="test")



def _expected(answer: str) -> float:
    code = extract_code(answer).code
    return turn_reward(
        DirectiveEvaluator().evaluate(EvalRequest(problem=PROBLEM, solution=code, config=EvalConfig()))
    )


def test_compute_score_evaluates_on_the_service(service):
    row = verl_row(PROBLEM, 0, EvalConfig(), PromptTemplates.default())
    info = {**row["extra_info"], "gym_url": service.url}
    out = compute_score(row["data_source"], ANSWER, row["reward_model"]["ground_truth"], info)
    assert out["outcome"] == "correct" and out["correct"] == 1.0
    assert out["score"] == pytest.approx(_expected(ANSWER)) and out["score"] > 0.5
    # no code block -> no evaluation, reward 0 with the reason
    bad = compute_score("drkernel", "I cannot do this.", REFERENCE, info)
    assert (bad["score"], bad["outcome"]) == (0.0, "unparseable")
    # an answer the gym finds incorrect is not rewarded
    wrong = compute_score("drkernel", ANSWER.replace("pass", "pass\n# status: incorrect"), REFERENCE, info)
    assert wrong["score"] == 0.0 and (wrong["outcome"], wrong["correct"]) == ("incorrect", 0.0)


def test_agent_loop_record_is_read_back_not_reevaluated(monkeypatch):
    monkeypatch.delenv(URL_ENV, raising=False)
    info = {alg.TURN_REWARDS: [0.0, 1.0, 1.7], alg.TURN_CORRECT: [0.0, 1.0, 1.0]}
    out = compute_score("drkernel", ANSWER, REFERENCE, info)
    assert out == {"score": pytest.approx(2.7), "turns": 3.0, "correct": 1.0, "best_turn_reward": 1.7}
    with pytest.raises(ConfigError, match="DRKERNEL_GYM_URL"):
        compute_score("drkernel", ANSWER, REFERENCE, {})


def test_verls_naive_reward_manager_scores_a_dataproto(service, monkeypatch):
    monkeypatch.setenv(URL_ENV, service.url)
    tok = build_tokenizer()
    prompt = tok("Write a kernel.", add_special_tokens=False)["input_ids"]
    response = tok(ANSWER, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    pad = 4
    responses = torch.tensor([response + [tok.pad_token_id] * pad])
    attention = torch.tensor([[1] * (len(prompt) + len(response)) + [0] * pad])
    row = verl_row(PROBLEM, 0, EvalConfig(), PromptTemplates.default())
    data = DataProto.from_dict(
        tensors={"prompts": torch.tensor([prompt]), "responses": responses, "attention_mask": attention},
        non_tensors={
            "data_source": np.array([row["data_source"]]),
            "reward_model": np.array([row["reward_model"]], dtype=object),
            "extra_info": np.array([row["extra_info"]], dtype=object),
        },
    )
    manager = NaiveRewardManager(OmegaConf.create({}), tok, compute_score)
    result = manager.loop.run_until_complete(manager.run_single(data))
    assert result["reward_score"] == pytest.approx(_expected(ANSWER))
    assert result["reward_extra_info"]["outcome"] == "correct"


def test_dataset_rows_round_trip_through_parquet(tmp_path):
    import pyarrow.parquet as pq

    path = write_verl_dataset([PROBLEM, PROBLEM], tmp_path / "train.parquet")
    rows = pq.read_table(path).to_pylist()
    assert [r["extra_info"]["index"] for r in rows] == [0, 1]
    assert rows[0]["agent_name"] == AGENT_NAME and rows[0]["prompt"][-1]["role"] == "user"
    assert "x * 2" in rows[0]["prompt"][-1]["content"]
