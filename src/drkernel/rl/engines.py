"""Rollout engines and how updated weights reach them after every update.

- ``hf`` with ``share_weights``: the agent's local HF policy generates with the trainer's own module;
  the update changes the weights in place, nothing to push.
- ``hf`` without sharing: a copy of the model (bf16 unless the trainer runs fp32), on ``rollout.device``
  (another GPU of the machine) or the model's device, generates; weights are pushed with
  ``load_state_dict`` (the copy casts them and moves them across devices).
- ``openai``: any OpenAI-compatible server returning token ids and log-probs (vLLM, SGLang, ours);
  weights are saved in Hugging Face format to ``<output_dir>/pushed_weights`` and the server is asked to
  reload them with ``POST {root}{reload_path} {"model_path": ...}`` (SGLang's ``/update_weights_from_disk``
  by default; point ``reload_path`` at the equivalent endpoint of another server).
- ``vllm``: vLLM's offline engine in this process; weights are loaded into the engine's model with
  ``LLM.apply_model(lambda m: m.load_weights(...))``.

With LoRA every engine but the shared module gets the merged full weights under the base model's
names (:func:`drkernel.rl.modeling.rollout_state_dict`): a server or vLLM loads them like any
checkpoint of the base model, and the rollout copy is a plain model (the adapters merged into a copy).
"""

from __future__ import annotations

import copy
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from drkernel.agent.policies.base import Policy
from drkernel.errors import ConfigError, InfrastructureError
from drkernel.rl.config import TrainConfig
from drkernel.rl.modeling import is_lora, rollout_state_dict

log = logging.getLogger(__name__)


@dataclass
class RolloutEngine:
    """A policy for rollouts and the call that brings it the trainer's current weights."""

    policy: Policy
    push: Callable[[], None]


def _server_root(url: str) -> str:
    root = url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def build_engine(config: TrainConfig, model: Any, tokenizer: Any) -> RolloutEngine:
    """The rollout engine of ``config.rollout`` around the trainer's ``model``."""
    backend = config.rollout.backend
    if backend == "hf":
        return _hf_engine(config, model, tokenizer)
    if backend == "openai":
        return _openai_engine(config, model, tokenizer)
    return _vllm_engine(config, model)


def _hf_engine(config: TrainConfig, model: Any, tokenizer: Any) -> RolloutEngine:
    """The trainer's own module (nothing to push), or a bf16 copy with the LoRA adapters merged."""
    from drkernel.agent.policies.hf_local import HFLocalPolicy

    rollout = config.rollout
    if rollout.share_weights:
        return RolloutEngine(HFLocalPolicy(model, tokenizer, batch_size=rollout.batch_size, name="trainer"),
                             push=lambda: None)
    import torch

    replica = copy.deepcopy(model)
    if is_lora(replica):
        replica = replica.merge_and_unload()  # into the copy: the trainer keeps its adapters
    if config.model.precision != "fp32":
        replica = replica.to(torch.bfloat16)
    replica.eval()
    policy = HFLocalPolicy(replica, tokenizer, device=rollout.device or None, batch_size=rollout.batch_size,
                           name="rollout-copy")
    return RolloutEngine(policy, push=lambda: policy.load_state_dict(rollout_state_dict(model)))


def _openai_engine(config: TrainConfig, model: Any, tokenizer: Any) -> RolloutEngine:
    """An OpenAI-compatible server; a push saves an HF folder and asks the server to reload it."""
    from drkernel.agent.policies.openai_compat import OpenAICompatPolicy

    rollout = config.rollout
    policy = OpenAICompatPolicy(base_url=rollout.url, concurrency=rollout.concurrency, token_ids=True)
    target = Path(config.run.output_dir) / "pushed_weights"

    def push_to_server() -> None:
        import httpx

        shutil.rmtree(target, ignore_errors=True)  # no stale shards or adapter files
        if is_lora(model):
            model.get_base_model().save_pretrained(target, state_dict=rollout_state_dict(model))
        else:
            model.save_pretrained(target)
        tokenizer.save_pretrained(target)
        url = _server_root(rollout.url) + rollout.reload_path
        response = httpx.post(url, json={"model_path": str(target.resolve())}, timeout=600.0)
        if response.status_code != 200:
            raise InfrastructureError(f"weight reload at {url} failed: {response.status_code} {response.text[:300]}")

    return RolloutEngine(policy, push=push_to_server)


def _vllm_engine(config: TrainConfig, model: Any) -> RolloutEngine:
    """A vLLM engine in this process; a push loads the trainer's weights into it."""
    from drkernel.agent.policies.vllm_engine import VLLMPolicy

    if config.model.source == "tiny":
        raise ConfigError("rollout.backend='vllm' needs model.source to be a model folder, not 'tiny'")
    policy = VLLMPolicy(config.model.source, batch_size=config.rollout.batch_size)
    if not hasattr(policy.llm, "apply_model"):
        raise ConfigError("this vLLM has no LLM.apply_model to load updated weights; use rollout.backend='openai'")

    def push_to_vllm() -> None:
        weights = list(rollout_state_dict(model).items())
        policy.llm.apply_model(lambda m: m.load_weights(weights))

    return RolloutEngine(policy, push=push_to_vllm)
