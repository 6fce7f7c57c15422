"""SFT cold start: assistant-only masking through the chat template, and a few real training steps of
the tiny local model on exported trajectories (written by the bench's own exporters)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from drkernel.agent.episode import Episode, Turn
from drkernel.agent.prompts import PromptTemplates
from drkernel.agent.tiny import build_tokenizer
from drkernel.bench.io import JsonlWriter, write_parquet
from drkernel.errors import ConfigError, ProblemSourceError
from drkernel.problems.problem import Problem
from drkernel.sft import IGNORE, SFTConfig, build_examples, load_conversations, tokenize_conversation

RELU = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(64)]

def get_init_inputs():
    return []
"""
ANSWERS = [
    "I will write it.\n```python\nimport triton\nimport triton.language as tl\n"
    "@triton.jit\ndef k(x): pass\n```",
    "Fixed the launch.\n```python\nclass ModelNew(torch.nn.Module):\n    pass\n```",
    "Faster now.\n```python\nBLOCK = 1024\n```",
]


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


def _episode(sample: int, turns: int = 3) -> Episode:
    problem = Problem(name="relu", level=1, code=RELU, problem_id="relu", source="file")
    templates = PromptTemplates.default()
    ep = Episode(
        problem=problem, sample=sample, prompt=templates.first_messages(problem), stop_reason="max_turns"
    )
    for i in range(turns):
        ep.turns.append(
            Turn(
                index=i,
                context=list(range(i)),
                messages=[],
                response=ANSWERS[i],
                reward=0.5 * i,
                feedback=templates.feedback_message(f"Turn {i}: output mismatch.", "Fix it.")["content"],
            )
        )
    return ep


def _trained_text(tokenizer, ex) -> str:
    return tokenizer.decode([t for t, label in zip(ex.input_ids, ex.labels) if label != IGNORE])


def test_only_assistant_tokens_carry_labels(tokenizer):
    messages = _episode(0).conversation()
    ex = tokenize_conversation(tokenizer, messages)
    assert len(ex.labels) == len(ex.input_ids)
    assert all(label in (IGNORE, tok) for tok, label in zip(ex.input_ids, ex.labels))
    # exactly the three answers, each followed by the template's end-of-turn marker "<|im_end|>\n"
    assert _trained_text(tokenizer, ex) == "".join(a + "<|im_end|>\n" for a in ANSWERS)
    # the untrained tokens hold the system prompt, the problem and all feedback, nothing of the answers
    untrained = tokenizer.decode([t for t, label in zip(ex.input_ids, ex.labels) if label == IGNORE])
    assert "Turn 0: output mismatch." in untrained and "Turn 1: output mismatch." in untrained
    assert "torch.relu(x)" in untrained
    assert not any(a in untrained for a in ANSWERS)
    # the masked tokens are a prefix-consistent slice: decoding whole equals the rendered text
    assert tokenizer.decode(ex.input_ids) == tokenizer.apply_chat_template(messages, tokenize=False)


def test_template_that_is_not_prefix_stable_is_rejected(tokenizer):
    # a Qwen3-like template: the "<think>" block appears only on the last assistant turn
    unstable = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['role'] == 'assistant' and loop.last %}"
        "<think></think>{% endif %}{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    tok = build_tokenizer()
    tok.chat_template = unstable
    messages = _episode(0).conversation()
    with pytest.raises(ConfigError, match="not prefix-stable at message 2"):
        tokenize_conversation(tok, messages)
    tok.chat_template = Path("configs/sft/chatml.jinja").read_text()
    assert _trained_text(tok, tokenize_conversation(tok, messages)).startswith(ANSWERS[0] + "<|im_end|>")


def test_load_conversations_reads_jsonl_and_parquet_and_filters(tmp_path):
    writer = JsonlWriter(tmp_path / "t.jsonl")
    for s in range(3):
        writer.write(_episode(s, turns=s + 1))  # best rewards 0.0, 0.5, 1.0
    writer.close()
    write_parquet([_episode(s, turns=s + 1) for s in range(3)], tmp_path / "t.parquet")
    for name in ("t.jsonl", "t.parquet"):
        convs = load_conversations([tmp_path / name])
        assert [sum(m["role"] == "assistant" for m in c) for c in convs] == [1, 2, 3]
        assert len(load_conversations([tmp_path / name], min_reward=0.5)) == 2
    (tmp_path / "bad.jsonl").write_text(
        json.dumps({"id": "x", "messages": [{"role": "tool", "content": "?"}]}) + "\n"
    )
    with pytest.raises(ProblemSourceError, match="message 0"):
        load_conversations([tmp_path / "bad.jsonl"])
    with pytest.raises(ProblemSourceError, match="does not exist"):
        load_conversations([tmp_path / "missing.jsonl"])


def test_overlong_trajectories_are_dropped_or_truncated(tokenizer):
    conv = _episode(0).conversation()
    n = len(tokenize_conversation(tokenizer, conv).input_ids)
    short = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]
    assert len(build_examples(tokenizer, [conv, short], max_length=n - 1)) == 1
    truncated = build_examples(tokenizer, [conv], max_length=n - 1, overlong="truncate")
    assert len(truncated[0].input_ids) == n - 1
    with pytest.raises(ProblemSourceError, match="no trajectory left"):
        build_examples(tokenizer, [conv], max_length=10)


def test_config_errors_name_the_bad_values(tmp_path):
    with pytest.raises(ConfigError, match="unknown SFTConfig keys: \\['lr'\\]"):
        SFTConfig.from_dict({"model": "tiny", "data": "x", "output_dir": "o", "lr": 1})
    with pytest.raises(ConfigError, match="overlong='cut'.*lr_scheduler='step'"):
        SFTConfig(model="tiny", data=["x"], output_dir="o", overlong="cut", lr_scheduler="step")
    for name in ("paper_qwen3_8b.yaml", "tiny_cpu.yaml"):
        cfg = SFTConfig.from_yaml(Path("configs/sft") / name, data="t.jsonl", output_dir=str(tmp_path))
        assert (cfg.data, cfg.output_dir) == (["t.jsonl"], str(tmp_path))
    with pytest.raises(ConfigError, match="learning_rate: expected float, got 'fast'"):
        SFTConfig.from_dict({"model": "tiny", "data": "x", "output_dir": "o", "learning_rate": "fast"})
    with pytest.raises(ConfigError, match="missing required keys \\['data'\\]"):
        SFTConfig.from_dict({"model": "tiny", "output_dir": "o"})
    # the tiny config trains on what the README's Quick start `bench run` line writes
    assert SFTConfig.from_yaml("configs/sft/tiny_cpu.yaml").data == ["runs/b1/trajectories.jsonl"]
    paper = SFTConfig.from_yaml("configs/sft/paper_qwen3_8b.yaml", data="t.jsonl")
    assert (paper.learning_rate, paper.epochs) == (2e-5, 4.0)


def test_cli_trains_tiny_model_loss_falls_and_saves_hf(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from typer.testing import CliRunner

    from drkernel.cli import app

    writer = JsonlWriter(tmp_path / "traj.jsonl")
    for s in range(4):
        writer.write(_episode(s))
    writer.close()
    out = tmp_path / "out"
    run = CliRunner().invoke(
        app,
        [
            "sft",
            "--config",
            "configs/sft/tiny_cpu.yaml",
            "--data",
            str(tmp_path / "traj.jsonl"),
            "--out",
            str(out),
        ],
    )
    assert run.exit_code == 0, run.output
    result = json.loads((out / "drkernel_sft.json").read_text())["result"]
    assert result["examples"] == 4 and result["steps"] == 8
    assert 0 < result["trained_tokens"] < result["total_tokens"]
    losses = result["losses"]
    assert all(math.isfinite(x) for x in losses)
    # random init starts near ln(vocab) = ln(512) = 6.2; 8 steps on 4 trajectories must pull it down steadily
    assert losses[0] > 5.5 and losses[-1] < 0.8 * losses[0], losses
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.config.num_hidden_layers == 2
    assert AutoTokenizer.from_pretrained(out).chat_template == build_tokenizer().chat_template


def test_cli_reports_bad_input_with_exit_code_2(tmp_path):
    from typer.testing import CliRunner

    from drkernel.cli import app

    run = CliRunner().invoke(
        app, ["sft", "--model", "tiny", "--data", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "o")]
    )
    assert run.exit_code == 2 and "does not exist" in " ".join(run.output.split())
