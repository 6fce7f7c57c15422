"""The `Policy` interface: chat message lists in, completions out.

Every policy (OpenAI-compatible endpoint, local Hugging Face model, vLLM's offline engine, scripted
replay) implements ``async generate(batch, params) -> list[Completion]``, one completion per message
list, in order. Token ids and rollout log-probs are filled when the backend offers them, so the
RL trainer can use any policy for rollouts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

Message = dict[str, str]
"""One chat message: ``{"role": "system" | "user" | "assistant", "content": str}``."""


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one completion. Defaults are the paper's evaluation setting."""

    temperature: float = 1.0
    """Softmax temperature; 0 means greedy."""
    top_p: float = 0.95
    """Nucleus sampling mass."""
    max_tokens: int = 8192
    """Completion length limit in tokens."""
    seed: int | None = None
    """Sampling seed where the backend honours one."""
    stop: tuple[str, ...] = ()
    """Stop strings."""
    logprobs: bool = True
    """Ask for the sampled tokens' log-probs (and token ids) where the backend offers them."""

    def __post_init__(self) -> None:
        from drkernel.errors import ConfigError

        bad = []
        if self.temperature < 0:
            bad.append(f"temperature={self.temperature} (>= 0)")
        if not 0.0 < self.top_p <= 1.0:
            bad.append(f"top_p={self.top_p} (in (0, 1])")
        if self.max_tokens < 1:
            bad.append(f"max_tokens={self.max_tokens} (>= 1)")
        if bad:
            raise ConfigError("invalid SamplingParams: " + "; ".join(bad))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stop"] = list(self.stop)
        return d


@dataclass
class Completion:
    """One sampled answer.

    ``prompt_token_ids`` and ``token_ids`` (the completion's tokens) are None when the backend does
    not return them; ``logprobs[i]`` is the rollout log-prob of ``token_ids[i]`` under the sampling
    distribution ``log_softmax(logits / temperature)``.
    """

    text: str
    finish_reason: str = "stop"  # "stop", "length" or "error"
    token_ids: list[int] | None = None
    prompt_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    usage: dict[str, int] = field(default_factory=dict)  # prompt_tokens, completion_tokens
    error: str | None = None  # set when the request failed after its retries

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Completion:
        return cls(
            **{
                k: d[k]
                for k in (
                    "text",
                    "finish_reason",
                    "token_ids",
                    "prompt_token_ids",
                    "logprobs",
                    "usage",
                    "error",
                )
                if k in d
            }
        )


@runtime_checkable
class Policy(Protocol):
    """Anything that turns chat message lists into completions."""

    name: str

    async def generate(self, batch: Sequence[Sequence[Message]], params: SamplingParams) -> list[Completion]:
        """One completion per message list, in order. A failed request is a `Completion` with
        ``finish_reason="error"``, never an exception, unless the backend itself is unusable."""
        ...

    async def aclose(self) -> None:
        """Release connections, engines and threads."""
        ...
