"""vLLM's offline engine as a policy (needs ``pip install drkernel[vllm]`` and a GPU).

Batches are generated with ``LLM.chat`` in a worker thread; token ids, prompt token ids and the
sampled tokens' log-probs come from vLLM's outputs (`completion_of`).

Which log-probs: vLLM's V1 sampler returns ``raw_logprobs`` by default, log_softmax of the model's
logits *before* temperature, penalties and top-k / top-p (vLLM docs: ``vllm.v1.sample.sampler``,
"If logprobs_mode is raw_logprobs, compute logprobs as the final logprobs to return", step 1 of 8,
temperature is step 7b; engine argument ``--logprobs-mode``). The trainer's log-probs, and mismatch
rejection's ratio, are log_softmax(logits / temperature), so with the default every token at
temperature != 1 would look mismatched and MRS would reject every row. We start the engine with
``logprobs_mode="processed_logprobs"``: the log-probs of the distribution actually sampled from,
log_softmax(logits / temperature) when top_p = 1 and top_k is off (training's setting). A server
behind ``rollout.backend: openai`` needs the same flag (``vllm serve ... --logprobs-mode
processed_logprobs``); for another server, compare its log-probs with the trainer's (the
``mismatch/`` metrics of a step at temperature != 1 show it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from drkernel.agent.policies.base import Completion, Message, SamplingParams
from drkernel.agent.policies.batching import MicroBatcher
from drkernel.errors import ConfigError


LOGPROBS_MODE = "processed_logprobs"


def engine_kwargs(tp: int, gpu_memory_utilization: float, max_model_len: int | None) -> dict[str, Any]:
    """Keyword arguments of ``vllm.LLM``: log-probs of the sampled distribution (module docstring)."""
    kwargs: dict[str, Any] = {
        "tensor_parallel_size": tp,
        "gpu_memory_utilization": gpu_memory_utilization,
        "logprobs_mode": LOGPROBS_MODE,
    }
    if max_model_len:
        kwargs["max_model_len"] = max_model_len
    return kwargs


def completion_of(out: Any) -> Completion:
    """A vLLM ``RequestOutput`` as a `Completion`: the first sample's text, token ids, and at each
    position the log-prob of the token that was sampled there (vLLM gives a dict per position: the
    sampled token plus the top-``logprobs`` others, keyed by token id)."""
    o = out.outputs[0]
    logprobs = [position[t].logprob for t, position in zip(o.token_ids, o.logprobs)] if o.logprobs else None
    prompt = list(out.prompt_token_ids or [])
    return Completion(
        text=o.text,
        finish_reason=o.finish_reason or "stop",
        token_ids=list(o.token_ids),
        prompt_token_ids=prompt,
        logprobs=logprobs,
        usage={"prompt_tokens": len(prompt), "completion_tokens": len(o.token_ids)},
    )


class VLLMPolicy:
    def __init__(
        self,
        model: str,
        tp: int = 1,
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        batch_size: int = 256,
    ) -> None:
        try:
            from vllm import LLM
        except ImportError as e:
            raise ConfigError("policy 'vllm:' needs vLLM: pip install 'drkernel[vllm]'") from e
        kwargs = engine_kwargs(tp, gpu_memory_utilization, max_model_len)
        try:
            self.llm = LLM(model=model, **kwargs)
        except TypeError as e:  # a vLLM before 0.10 has no logprobs_mode
            raise ConfigError(f"this vLLM cannot return processed log-probs (needs vLLM >= 0.10): {e}") from e
        self.name = f"vllm:{model}"
        self._batcher = MicroBatcher(self._generate, batch_size)

    def _sampling(self, params: SamplingParams) -> Any:
        from vllm import SamplingParams as VSP

        return VSP(
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_tokens,
            seed=params.seed,
            stop=list(params.stop) or None,
            logprobs=0 if params.logprobs else None,
        )

    def _generate(self, batch: Sequence[Sequence[Message]], params: SamplingParams) -> list[Completion]:
        outs = self.llm.chat([list(m) for m in batch], self._sampling(params), use_tqdm=False)
        return [completion_of(out) for out in outs]

    async def generate(self, batch: Sequence[Sequence[Message]], params: SamplingParams) -> list[Completion]:
        return await self._batcher.submit(batch, params)

    async def aclose(self) -> None:
        await self._batcher.wait()
