"""vLLM's offline engine as a policy (needs ``pip install drkernel[vllm]`` and a GPU).

Batches are generated with ``LLM.chat`` in a worker thread; token ids, prompt token ids and the
sampled tokens' log-probs come from vLLM's outputs (vLLM reports log-probs of the processed
distribution, ``log_softmax(logits / temperature)`` by default in recent versions).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from drkernel.agent.policies.base import Completion, Message, SamplingParams
from drkernel.agent.policies.batching import MicroBatcher
from drkernel.errors import ConfigError


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
        kwargs: dict[str, Any] = {
            "tensor_parallel_size": tp,
            "gpu_memory_utilization": gpu_memory_utilization,
        }
        if max_model_len:
            kwargs["max_model_len"] = max_model_len
        self.llm = LLM(model=model, **kwargs)
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
        completions = []
        for out in outs:
            o = out.outputs[0]
            logprobs = [lp[t].logprob for t, lp in zip(o.token_ids, o.logprobs)] if o.logprobs else None
            completions.append(
                Completion(
                    text=o.text,
                    finish_reason=o.finish_reason or "stop",
                    token_ids=list(o.token_ids),
                    prompt_token_ids=list(out.prompt_token_ids or []),
                    logprobs=logprobs,
                    usage={
                        "prompt_tokens": len(out.prompt_token_ids or []),
                        "completion_tokens": len(o.token_ids),
                    },
                )
            )
        return completions

    async def generate(self, batch: Sequence[Sequence[Message]], params: SamplingParams) -> list[Completion]:
        return await self._batcher.submit(batch, params)

    async def aclose(self) -> None:
        await self._batcher.wait()
