"""Our own small OpenAI-compatible server for a local Hugging Face model (``drkernel agent serve-model``).

Endpoints: ``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions`` (``n`` choices,
``temperature``, ``top_p``, ``max_tokens``, ``seed``, ``logprobs``). Like vLLM it returns token ids
when asked (``"return_token_ids": true``): ``prompt_token_ids`` on the response and ``token_ids`` on
each choice; with ``logprobs`` each content entry carries the sampled token's log-prob. Concurrent
requests are batched by the policy.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel, ConfigDict, Field

from drkernel.agent.policies.base import SamplingParams
from drkernel.agent.policies.hf_local import HFLocalPolicy
from drkernel.errors import ConfigError


class ChatMessage(BaseModel):
    role: str
    content: str


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    n: int = Field(default=1, ge=1, le=64)
    seed: int | None = None
    logprobs: bool = False
    return_token_ids: bool = False


def _choice(index: int, completion: Any, tokenizer: Any, req: ChatRequest) -> dict[str, Any]:
    choice: dict[str, Any] = {
        "index": index,
        "finish_reason": completion.finish_reason,
        "message": {"role": "assistant", "content": completion.text},
        "logprobs": None,
    }
    if req.logprobs:
        pieces = tokenizer.convert_ids_to_tokens(completion.token_ids)
        choice["logprobs"] = {
            "content": [
                {"token": piece, "logprob": lp, "bytes": list(piece.encode()), "top_logprobs": []}
                for piece, lp in zip(pieces, completion.logprobs)
            ]
        }
    if req.return_token_ids:
        choice["token_ids"] = completion.token_ids
    return choice


def create_app(policy: HFLocalPolicy, model_name: str, max_tokens: int = 4096) -> FastAPI:
    """The FastAPI app serving ``policy`` under ``model_name``."""
    app = FastAPI(title="drkernel model server")

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model_name, "object": "model", "owned_by": "drkernel"}]}

    @app.post("/v1/chat/completions")
    async def chat(req: ChatRequest) -> dict[str, Any]:
        if req.model not in (None, model_name):
            raise HTTPException(404, f"model {req.model!r} is not served here (serving {model_name!r})")
        try:
            params = SamplingParams(
                temperature=req.temperature,
                top_p=req.top_p,
                seed=req.seed,
                max_tokens=req.max_completion_tokens or req.max_tokens or max_tokens,
            )
        except ConfigError as e:
            raise HTTPException(400, str(e)) from e
        messages = [m.model_dump() for m in req.messages]
        completions = await policy.generate([messages] * req.n, params)
        prompt_ids = completions[0].prompt_token_ids or []
        body: dict[str, Any] = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model_name,
            "choices": [_choice(i, c, policy.tokenizer, req) for i, c in enumerate(completions)],
            "usage": {
                "prompt_tokens": len(prompt_ids),
                "completion_tokens": sum(len(c.token_ids or []) for c in completions),
                "total_tokens": len(prompt_ids) + sum(len(c.token_ids or []) for c in completions),
            },
        }
        if req.return_token_ids:
            body["prompt_token_ids"] = prompt_ids
        return body

    return app


def serve(policy: HFLocalPolicy, model_name: str, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run the server until interrupted."""
    import uvicorn

    uvicorn.run(create_app(policy, model_name), host=host, port=port, log_level="info")
