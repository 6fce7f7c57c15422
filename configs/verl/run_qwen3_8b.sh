#!/usr/bin/env bash
# Dr. Kernel multi-turn RL on verl (docs/VERL.md): Qwen3-8B (or MODEL=...14B) after the SFT cold start,
# 16 prompts x 16 samples x 3 turns per step, lr 1e-6, TRLOO + MRS + PRS, on NNODES nodes of 8 GPUs.
# The KernelGym service runs on separate GPU nodes: `drkernel gym serve --host 0.0.0.0 --devices auto`.
#   GYM_URL=http://gym-node:8000 MODEL=runs/sft-qwen3-8b bash configs/verl/run_qwen3_8b.sh
# verl's v0 trainer (trainer.use_v1=false): its v1 trainer passes no per-turn rewards to the advantage
# step and skips drkernel's driver hook (MRS, PRS), and drkernel's trloo refuses to run there.
set -euo pipefail
MODEL=${MODEL:-runs/sft-qwen3-8b}
GYM_URL=${GYM_URL:?set GYM_URL to the KernelGym service, e.g. http://gym-node:8000}
NNODES=${NNODES:-1}
TP=${TP:-2}                 # vLLM tensor parallel size: 2 for 8B, 4 for 14B
DATA=${DATA:-runs/verl/data}
OUT=${OUT:-runs/verl/qwen3-8b}
HERE=$(cd "$(dirname "$0")" && pwd)

python - <<PY
from drkernel.problems import load_problems
from drkernel.rl.integrations.verl.dataset import write_verl_dataset
write_verl_dataset(load_problems("${TRAIN_PROBLEMS:-builtin}"), "${DATA}/train.parquet")
write_verl_dataset(load_problems("${VAL_PROBLEMS:-builtin}"), "${DATA}/val.parquet")
PY

export VERL_USE_EXTERNAL_MODULES=drkernel.rl.integrations.verl.plugin
export DRKERNEL_GYM_URL=$GYM_URL
export DRKERNEL_VERL_CONFIG=$HERE/drkernel_hook.yaml
ENV_VARS="+ray_kwargs.ray_init.runtime_env.env_vars"

python -m verl.trainer.main_ppo \
  data.train_files="$DATA/train.parquet" data.val_files="$DATA/val.parquet" \
  data.train_batch_size=16 data.max_prompt_length=6144 data.max_response_length=24576 \
  data.return_raw_chat=true data.filter_overlong_prompts=true \
  algorithm.adv_estimator=trloo algorithm.gamma=1.0 algorithm.use_kl_in_reward=false \
  actor_rollout_ref.model.path="$MODEL" actor_rollout_ref.model.enable_gradient_checkpointing=true \
  actor_rollout_ref.actor.optim.lr=1e-6 actor_rollout_ref.actor.grad_clip=1.0 \
  actor_rollout_ref.actor.ppo_mini_batch_size=4 actor_rollout_ref.actor.use_dynamic_bsz=true \
  actor_rollout_ref.actor.ppo_max_token_len_per_gpu=32768 \
  actor_rollout_ref.actor.policy_loss.loss_mode=drkernel_ppo \
  actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum \
  actor_rollout_ref.actor.clip_ratio_low=0.2 actor_rollout_ref.actor.clip_ratio_high=0.28 \
  actor_rollout_ref.actor.clip_ratio_c=3.0 \
  actor_rollout_ref.actor.use_kl_loss=false actor_rollout_ref.actor.entropy_coeff=0 \
  actor_rollout_ref.actor.fsdp_config.param_offload=false \
  actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.mode=async \
  actor_rollout_ref.rollout.n=16 actor_rollout_ref.rollout.temperature=1.0 \
  actor_rollout_ref.rollout.tensor_model_parallel_size="$TP" \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \
  actor_rollout_ref.rollout.calculate_log_probs=true \
  actor_rollout_ref.rollout.multi_turn.enable=true \
  actor_rollout_ref.rollout.multi_turn.max_assistant_turns=3 \
  actor_rollout_ref.rollout.agent.default_agent_loop=drkernel_kernel_agent \
  actor_rollout_ref.rollout.agent.num_workers=8 \
  reward.custom_reward_function.path="$(python -c 'import drkernel.rl.integrations.verl.reward as r; print(r.__file__)')" \
  reward.custom_reward_function.name=compute_score \
  "$ENV_VARS.VERL_USE_EXTERNAL_MODULES=$VERL_USE_EXTERNAL_MODULES" \
  "$ENV_VARS.DRKERNEL_GYM_URL=$DRKERNEL_GYM_URL" \
  "$ENV_VARS.DRKERNEL_VERL_CONFIG=$DRKERNEL_VERL_CONFIG" \
  trainer.use_v1=false \
  trainer.n_gpus_per_node=8 trainer.nnodes="$NNODES" trainer.total_epochs=1 \
  trainer.save_freq=20 trainer.test_freq=10 trainer.logger='[console,tensorboard]' \
  trainer.project_name=drkernel trainer.experiment_name="$(basename "$OUT")" \
  trainer.default_local_dir="$OUT" "$@"
