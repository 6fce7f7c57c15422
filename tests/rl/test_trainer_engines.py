"""Weight push: a separate rollout copy receives the trainer's weights after every update."""

from pathlib import Path

import torch

from drkernel.rl.config import load_config
from drkernel.rl.trainer import Trainer

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "train"


def test_rollout_copy_gets_updated_weights(tmp_path):
    config = load_config(
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
        ],
    )
    trainer = Trainer(config)
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
