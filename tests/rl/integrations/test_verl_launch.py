"""The shipped launch script as verl would receive it: its real command line (the script is run with a
``python`` that records the ``verl.trainer.main_ppo`` call and runs everything else), composed with
Hydra against verl's own ``ppo_trainer`` schema. It must pick verl's v0 trainer, the only one that
goes through drkernel's driver hook (docs/VERL.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import verl
from hydra import compose, initialize_config_dir

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "configs" / "verl" / "run_qwen3_8b.sh"


def _launch_args(tmp_path: Path) -> list[str]:
    bin_dir, record = tmp_path / "bin", tmp_path / "main_ppo.args"
    bin_dir.mkdir()
    shim = bin_dir / "python"
    shim.write_text(
        "#!/bin/bash\n"
        'if [ "$1" = "-m" ] && [ "$2" = "verl.trainer.main_ppo" ]; then\n'
        f'  shift 2; printf "%s\\0" "$@" > {record}; exit 0\n'
        "fi\n"
        f'exec {sys.executable} "$@"\n'
    )
    shim.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "GYM_URL": "http://gym-node:8000",
        "DATA": str(tmp_path / "data"),
        "OUT": str(tmp_path / "out"),
        "TRAIN_PROBLEMS": "builtin:2",
        "VAL_PROBLEMS": "builtin:1",
    }
    subprocess.run(["bash", str(SCRIPT)], env=env, check=True, cwd=tmp_path, timeout=300)
    assert (tmp_path / "data" / "train.parquet").exists()
    return record.read_text().split("\0")[:-1]


def test_launch_script_runs_verls_v0_trainer_with_our_extensions(tmp_path):
    args = _launch_args(tmp_path)
    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=args)  # an unknown key fails here
    assert cfg.trainer.use_v1 is False
    assert cfg.algorithm.adv_estimator == "trloo"
    actor = cfg.actor_rollout_ref.actor
    assert actor.policy_loss.loss_mode == "drkernel_ppo" and actor.clip_ratio_c == 3.0
    # 16 prompts per step in mini-batches of 4: four optimizer steps per batch, so the clip acts
    assert cfg.data.train_batch_size // actor.ppo_mini_batch_size == 4
    rollout = cfg.actor_rollout_ref.rollout
    assert rollout.agent.default_agent_loop == "drkernel_kernel_agent" and rollout.calculate_log_probs
    assert rollout.logprobs_mode == "processed_logprobs"  # log_softmax(logits / T), what MRS compares
    env = cfg.ray_kwargs.ray_init.runtime_env.env_vars
    assert env.VERL_USE_EXTERNAL_MODULES == "drkernel.rl.integrations.verl.plugin"
    # verl's own rollout correction stays off (no second correction on top of MRS), and decoupled:
    # the trainer recomputes old_log_probs, which MRS compares with vLLM's
    correction = cfg.algorithm.rollout_correction
    assert (correction.rollout_is, correction.rollout_rs, correction.bypass_mode) == (None, None, False)


def test_the_gpu_tests_one_step_overrides_compose(tmp_path):
    # tests/rl/integrations/test_verl_trainer_gpu.py appends these to the script's command line
    from test_verl_trainer_gpu import ONE_STEP

    args = _launch_args(tmp_path) + ONE_STEP
    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=args)
    assert (cfg.trainer.use_v1, cfg.trainer.n_gpus_per_node, cfg.trainer.total_training_steps) == (False, 1, 1)
    assert cfg.data.train_batch_size // cfg.actor_rollout_ref.actor.ppo_mini_batch_size == 2
