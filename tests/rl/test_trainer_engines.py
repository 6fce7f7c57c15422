"""Weight push: a separate rollout copy receives the trainer's weights after every update."""

from pathlib import Path

import torch

from drkernel.rl.config import load_config
from drkernel.rl.modeling import is_lora, rollout_state_dict
from drkernel.rl.trainer import Trainer
from drkernel.tasks import build_env

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "train"


def _rollout_copy_config(tmp_path, *overrides: str):
    """The sanity config, 2 small steps, rolling out from a separate copy of the model."""
    return load_config(
        CONFIGS / "sanity_cpu.yaml",
        [
            f"run.output_dir={tmp_path}",
            "run.steps=2",
            "run.progress=false",
            "rollout.share_weights=false",
            "model.tiny_hidden=32",
            "rollout.prompts_per_step=2",
            "rollout.samples_per_prompt=4",
            "rollout.max_tokens=4",
            *overrides,
        ],
    )


def test_rollout_copy_gets_updated_weights(tmp_path):
    config = _rollout_copy_config(tmp_path)
    trainer = Trainer(config, build_env)
    replica = trainer.engine.policy.model
    assert replica is not trainer.model
    initial = {k: v.clone() for k, v in replica.state_dict().items()}
    try:
        history = trainer.train()
    finally:
        trainer.close()
    trained, pushed = trainer.model.state_dict(), replica.state_dict()
    assert any(not torch.equal(initial[k], pushed[k]) for k in pushed), "the copy never changed"
    for k in trained:
        assert torch.equal(trained[k], pushed[k]), k
    # The copy sampled step 2 with the weights of update 1, so the trainer agrees with it exactly.
    assert history[1]["mismatch/rejected_fraction"] == 0
    assert history[1]["mismatch/max_abs_log_ratio"] < 1e-4


def test_lora_rollout_copy_gets_merged_weights(tmp_path):
    config = _rollout_copy_config(tmp_path, "model.lora.enabled=true", "model.lora.r=4", "optim.lr=1e-2")
    trainer = Trainer(config, build_env)
    replica = trainer.engine.policy.model
    assert not is_lora(replica) and all("lora_" not in k for k in replica.state_dict())
    initial = {k: v.clone() for k, v in replica.state_dict().items()}
    try:
        history = trainer.train()
    finally:
        trainer.close()
    merged, pushed = rollout_state_dict(trainer.model), replica.state_dict()
    assert any(not torch.equal(initial[k], pushed[k]) for k in pushed), "the copy never changed"
    assert set(merged) == set(pushed)
    for k in merged:
        assert torch.equal(merged[k], pushed[k]), k
    assert any("lora_" in k for k in trainer.model.state_dict())  # the trainer's adapters stay unmerged
    assert history[1]["mismatch/rejected_fraction"] == 0
    assert history[1]["mismatch/max_abs_log_ratio"] < 1e-4
