"""LoRA through peft: only the adapters train, the checkpoint holds the adapter, a resume loads it."""

from pathlib import Path

import torch

from drkernel.rl.checkpoint import latest_checkpoint
from drkernel.rl.config import load_config
from drkernel.rl.trainer import Trainer
from drkernel.tasks import build_env

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "train"
ARGS = [
    "run.progress=false",
    "model.tiny_hidden=32",
    "rollout.prompts_per_step=2",
    "rollout.samples_per_prompt=4",
    "rollout.max_tokens=4",
    "model.lora.enabled=true",
    "model.lora.r=4",
    "optim.lr=1e-2",
]


def test_lora_trains_adapters_only_and_resumes(tmp_path):
    config = load_config(CONFIGS / "sanity_cpu.yaml", [f"run.output_dir={tmp_path}", "run.steps=2", *ARGS])
    trainer = Trainer(config, build_env)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    try:
        history = trainer.train()
    finally:
        trainer.close()
    after = trainer.model.state_dict()
    changed = {k for k in after if not torch.equal(before[k], after[k])}
    assert changed and all("lora_" in k for k in changed), sorted(changed)[:5]
    assert all(m["mismatch/rejected_fraction"] == 0 for m in history)  # rollout sees the adapters too

    ckpt = latest_checkpoint(tmp_path)
    assert (ckpt / "adapter_config.json").exists() and (ckpt / "adapter_model.safetensors").exists()
    resumed = Trainer(
        load_config(CONFIGS / "sanity_cpu.yaml", [f"run.output_dir={tmp_path}", "run.steps=2", *ARGS]), build_env
    )
    try:
        assert resumed.step == 2
        for k, v in resumed.model.state_dict().items():
            assert torch.equal(v, after[k]), k
        assert any(p.requires_grad for n, p in resumed.model.named_parameters() if "lora_" in n)
    finally:
        resumed.close()
