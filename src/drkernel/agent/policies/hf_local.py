"""A local Hugging Face causal LM as a policy: batched sampling, token ids and rollout log-probs.

Concurrent ``generate`` calls are gathered into batches of up to ``batch_size`` (episodes run
concurrently, each asking for one completion at a time), generated in a worker thread with left
padding by a KV-cached sampling loop (`sampling.decode`; stop strings are not applied, the chat
template's end token stops a row). The rollout log-prob of each sampled token is ``log_softmax(logits / temperature)`` at that
token (temperature 1 for greedy), computed from the raw logits, i.e. what the trainer recomputes;
top-p only restricts which tokens can be drawn. ``load_state_dict`` swaps in new weights between
updates (or pass the trainer's own module as ``model`` and share it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from drkernel.agent.policies.base import Completion, Message, SamplingParams
from drkernel.agent.policies.batching import MicroBatcher
from drkernel.agent.policies.sampling import decode

log = logging.getLogger(__name__)


class HFLocalPolicy:
    """Wraps a ``transformers`` causal LM and its tokenizer (which must have a chat template)."""

    def __init__(
        self, model: Any, tokenizer: Any, device: str | None = None, batch_size: int = 8, name: str = "hf"
    ) -> None:
        if getattr(tokenizer, "chat_template", None) is None:
            from drkernel.errors import ConfigError

            raise ConfigError(f"{name}: the tokenizer has no chat template")
        self.model, self.tokenizer, self.batch_size, self.name = model, tokenizer, batch_size, name
        if device is not None:
            self.model.to(device)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self._lock = threading.Lock()
        self._batcher = MicroBatcher(self.generate_sync, batch_size)

    @classmethod
    def from_pretrained(
        cls, path: str, device: str = "cpu", batch_size: int = 8, dtype: str = "float32"
    ) -> HFLocalPolicy:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype)).eval()
        return cls(model, tokenizer, device=device, batch_size=batch_size, name=f"hf:{path}")

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> None:
        """Replace the weights (e.g. after a trainer update); waits for a running batch to finish."""
        with self._lock:
            self.model.load_state_dict(state_dict, strict=strict)

    def encode(self, messages: Sequence[Message]) -> list[int]:
        """Token ids of the chat prompt, generation prompt included."""
        text = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def generate_sync(self, batch: Sequence[Sequence[Message]], params: SamplingParams) -> list[Completion]:
        """Generate one completion per message list in one padded batch (blocking)."""
        import torch

        prompts = [self.encode(m) for m in batch]
        width = max(len(p) for p in prompts)
        pad = self.tokenizer.pad_token_id
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=self.device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=self.device)
        generator = None
        if params.seed is not None:
            generator = torch.Generator(device=self.device).manual_seed(params.seed)
        with self._lock:
            new, logp = decode(
                self.model,
                ids,
                mask,
                params.max_tokens,
                params.temperature,
                params.top_p,
                self.tokenizer.eos_token_id,
                pad,
                generator,
            )  # (B, L), (B, L)
        return [self._completion(prompts[i], new[i].tolist(), logp[i].tolist()) for i in range(len(batch))]

    def _completion(self, prompt: list[int], tokens: list[int], logp: list[float]) -> Completion:
        eos, pad = self.tokenizer.eos_token_id, self.tokenizer.pad_token_id
        if eos in tokens:
            n, reason = tokens.index(eos) + 1, "stop"
        else:
            n = len(tokens)
            while n and tokens[n - 1] == pad and pad != eos:
                n -= 1
            reason = "length"
        tokens, logp = tokens[:n], logp[:n]
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        return Completion(
            text=text,
            finish_reason=reason,
            token_ids=tokens,
            prompt_token_ids=prompt,
            logprobs=logp,
            usage={"prompt_tokens": len(prompt), "completion_tokens": len(tokens)},
        )

    async def generate(self, batch: Sequence[Sequence[Message]], params: SamplingParams) -> list[Completion]:
        return await self._batcher.submit(batch, params)

    async def aclose(self) -> None:
        await self._batcher.wait()
