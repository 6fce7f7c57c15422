"""The smoke config end to end: tiny model, built-in problems, the real gym in interpreter mode.

A random-init tiny model never writes a code block, so the smoke config replays the built-in gold /
lazy / broken solutions as the tiny model's answers (`task.replay_builtin`, `drkernel.rl.replay`:
tokens from the tiny tokenizer, rollout log-probs from the tiny model itself), so that the gym really
evaluates, rewards differ within a group, and the update has signal.

The replayed rollout log-probs come from the trainer's own log-prob function, so MRS keeping every
row here would prove nothing; MRS is tested on sampled rollouts with a perturbation it must catch
(tests/rl/test_trainer_clipping.py).
"""

from pathlib import Path

import json

import pytest
import torch

from drkernel.rl.checkpoint import latest_checkpoint
from drkernel.rl.config import load_config
from drkernel.rl.metrics_log import read_metrics
from drkernel.rl.replay import ReplayEnv
from drkernel.rl.trainer import Trainer
from drkernel.tasks import build_env

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "train"


def test_smoke_config_two_steps_real_gym(tmp_path):
    config = load_config(CONFIGS / "smoke_cpu.yaml", [f"run.output_dir={tmp_path}"])
    trainer = Trainer(config, build_env)
    assert isinstance(trainer.env, ReplayEnv)
    before = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    trained_on: list[list[float]] = []  # the rewards of the rows each step's advantages used
    score = trainer.score

    def recording_score(batch):
        scored = score(batch)
        trained_on.append(scored.rows.reward.tolist())
        return scored

    trainer.score = recording_score
    try:
        history = trainer.train()
    finally:
        trainer.close()

    assert [trainer.step, len(history)] == [2, 2]
    for m in history:
        assert m["loss/rows"] == 2 * 2 * 2  # prompts x samples x turns
        assert m["gym/evaluations"] == 8
        assert m["reward/mean"] > 0  # gold answers pass the interpreter gym
        assert m["reward/max"] <= 0.5 + 0.5 * 1.0  # no timing on CPU: at most 0.5 + w_cov * op coverage
        assert m["reward/correct_fraction"] > 0 and m["reward/correct_fraction"] < 1
        assert m["loss/rows_in_loss"] > 0 and m["loss/skipped"] == 0
        assert torch.isfinite(torch.tensor(m["loss/loss"])) and m["loss/grad_norm"] > 0
        assert "reward/fast@0" in m and "reward/fast@1.2" not in m  # Fast@p>0 not measured on CPU
    changed = [k for k, v in trainer.model.state_dict().items() if not torch.equal(v, before[k])]
    assert changed, "the update did not change any weight"

    lines = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in lines] == [1, 2]
    assert all(k.split("/")[0] in ("reward", "loss", "mismatch", "gym", "perf") for k in lines[0] if "/" in k)
    assert (tmp_path / "episodes.jsonl").read_text().count("\n") == 8
    # the reward logged per turn is the number trained on (one reward: drkernel.reward)
    logged: dict[int, list[float]] = {}
    for line in (tmp_path / "episodes.jsonl").read_text().splitlines():
        episode = json.loads(line)
        logged.setdefault(episode["step"], []).extend(t["reward"] for t in episode["turns"])
    assert [logged[1], logged[2]] == trained_on
    assert any(0.5 < r < 1.0 for step in trained_on for r in step)  # CPU: op coverage paid, as logged

    ckpt = latest_checkpoint(tmp_path)
    assert ckpt is not None and ckpt.name == "step_000002"
    from transformers import AutoModelForCausalLM, AutoTokenizer

    loaded = AutoModelForCausalLM.from_pretrained(ckpt).eval()
    tokenizer = AutoTokenizer.from_pretrained(ckpt)
    ids = torch.tensor([tokenizer("import triton", add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, trainer.model(ids).logits)


@pytest.mark.parametrize(
    "bad, named",
    [
        ("optim.lrr=1", "lrr"),
        ("optim.lr=fast", "optim.lr"),
        ("rollout.backend=magic", "magic"),
        ("nosection.x=1", "nosection"),
        ("task.kind=sanity", "rollout.turns"),
    ],
)
def test_bad_config_is_rejected(bad, named):
    from drkernel.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        load_config(CONFIGS / "smoke_cpu.yaml", [bad])
    assert named in str(e.value)


def test_shipped_configs_load():
    paper = load_config(CONFIGS / "paper_qwen3_8b.yaml")
    assert (paper.rollout.prompts_per_step, paper.rollout.samples_per_prompt, paper.rollout.turns) == (
        16,
        16,
        3,
    )
    assert (paper.optim.lr, paper.optim.grad_clip, paper.algorithm.dual_clip) == (1e-6, 1.0, 3.0)
    assert (paper.algorithm.mrs_low, paper.algorithm.mrs_high, paper.algorithm.token_veto) == (
        0.999,
        1.001,
        1e-4,
    )
    assert load_config(CONFIGS / "sanity_cpu.yaml").task.kind == "sanity"
