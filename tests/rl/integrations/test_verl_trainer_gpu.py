"""One step of verl's real v0 trainer (``verl.trainer.main_ppo``) through the shipped launch script:
FSDP actor, vLLM rollouts driving drkernel's agent loop, a real KernelGym service (the service tests'
deterministic evaluator), drkernel's ``trloo`` estimator behind the driver hook and the
``drkernel_ppo`` loss. Needs a CUDA GPU and vLLM in the verl venv: ``bash scripts/gpu_check.sh verl``.

verl cannot run this on CPU: its agent loops need an async rollout server (vLLM or SGLang, both
CUDA-only), and its workers place themselves on GPUs (``trainer.n_gpus_per_node``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "configs" / "verl" / "run_qwen3_8b.sh"
sys.path.insert(0, str(REPO / "tests" / "service"))

pytestmark = pytest.mark.gpu

ONE_STEP = [
    "trainer.n_gpus_per_node=1",
    "trainer.total_training_steps=1",
    "trainer.save_freq=-1",
    "trainer.test_freq=-1",
    "trainer.val_before_train=false",
    "trainer.logger=[console]",
    "data.train_batch_size=2",
    "data.max_prompt_length=6144",
    "data.max_response_length=1536",
    "actor_rollout_ref.rollout.n=2",
    "actor_rollout_ref.actor.ppo_mini_batch_size=1",  # 2 optimizer steps: the second one can clip
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=16384",
    "actor_rollout_ref.model.enable_gradient_checkpointing=false",
    "actor_rollout_ref.rollout.gpu_memory_utilization=0.3",
    "actor_rollout_ref.rollout.agent.num_workers=1",
    "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=2",
]



def test_one_step_of_verls_v0_trainer(tmp_path, service):
    import torch

    assert torch.cuda.is_available(), "needs a CUDA GPU"
    pytest.importorskip("vllm", reason="needs vLLM in the verl venv (see docs/VERL.md, Install)")
    from drkernel.agent.tiny import build_tiny

    model, tokenizer = build_tiny(hidden=256, heads=4)  # head size 64: vLLM's attention kernels
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    env = {
        **os.environ,
        "GYM_URL": service.url,
        "MODEL": str(tmp_path / "model"),
        "DATA": str(tmp_path / "data"),
        "OUT": str(tmp_path / "out"),
        "TRAIN_PROBLEMS": "builtin:4",
        "VAL_PROBLEMS": "builtin:1",
        "TP": "1",
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",  # `python` = this venv's
    }
    proc = subprocess.run(
        ["bash", str(SCRIPT), *ONE_STEP], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=1500
    )
    log = proc.stdout + proc.stderr
    (tmp_path / "verl.log").write_text(log)
    assert proc.returncode == 0, log[-6000:]
    assert "step:1" in log  # verl's console logger printed the first step's metrics
    assert "drkernel/mrs_rejected_turns" in log  # the driver hook ran on the trainer's batch
    assert "actor/pg_clipfrac" in log  # the drkernel_ppo loss ran in the FSDP actor
