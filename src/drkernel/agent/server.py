"""Our own small OpenAI-compatible server for a local Hugging Face model (``drkernel agent serve-model``).

Endpoints: ``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions`` (``n`` choices,
``temperature``, ``top_p``, ``max_tokens``, ``seed``, ``logprobs``). Like vLLM it returns token ids
when asked (``"return_token_ids": true``): ``prompt_token_ids`` on the response and ``token_ids`` on
each choice; with ``logprobs`` each content entry carries the sampled token's log-prob. Concurrent
requests are batched by the policy.

``POST /update_weights_from_disk`` (SGLang's route and shape) replaces the served weights in place,
so an RL trainer can push each update (``rollout.backend: openai``, drkernel.rl.engines)::

    request   {"model_path": "/abs/folder"}     a Hugging Face folder with *.safetensors of the
                                                same architecture (save_pretrained's output)
    response  {"success": true, "message": "loaded 291 tensors from /abs/folder"}

Failures answer ``{"success": false, "message": ...}`` with 400 (no such folder, no safetensors
file, unreadable file) or 422 (the weights do not fit the served model: unknown, missing or
mis-shaped tensors; nothing is loaded then). Tied tensors (e.g. ``lm_head.weight`` tied to the
input embeddings) may be absent from the folder, as ``save_pretrained`` leaves them out. A reload
waits for the requests in flight and holds new ones back until it is done, so every response comes
from one set of weights. Only safetensors are read (no pickle); the route reads any folder the server
process can, so serve on a trusted interface (the default host is 127.0.0.1) or pass
``reload=False`` (``--no-reload``) to leave it out.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse
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


class UpdateWeightsRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model_path: str = Field(min_length=1)


class WeightLoadError(Exception):
    """A reload request that cannot be served; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _tied_groups(model: Any) -> dict[str, set[str]]:
    """For every state-dict key, the keys that share its storage (itself included)."""
    by_storage: dict[tuple[int, tuple[int, ...]], set[str]] = {}
    state = model.state_dict(keep_vars=True)
    for name, tensor in state.items():
        by_storage.setdefault((tensor.data_ptr(), tuple(tensor.shape)), set()).add(name)
    return {name: group for group in by_storage.values() for name in group}


def read_weights(model: Any, folder: str | Path) -> dict[str, Any]:
    """The tensors of ``folder``'s ``*.safetensors`` files, checked against ``model``'s state dict:
    every file key known with the same shape, every model key present (or tied to a present one).
    Raises :class:`WeightLoadError` otherwise."""
    from safetensors.torch import load_file

    path = Path(folder)
    if not path.is_dir():
        raise WeightLoadError(400, f"model_path {str(path)!r} is not a folder on the server")
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise WeightLoadError(400, f"model_path {str(path)!r} holds no *.safetensors file")
    weights: dict[str, Any] = {}
    for file in files:
        try:
            weights.update(load_file(str(file)))
        except Exception as e:  # safetensors raises its own error types for damaged files
            raise WeightLoadError(400, f"cannot read {file}: {e}") from e
    expected = model.state_dict()
    unknown = sorted(set(weights) - set(expected))
    shapes = [
        f"{k}: {tuple(v.shape)} != {tuple(expected[k].shape)}"
        for k, v in weights.items()
        if k in expected and v.shape != expected[k].shape
    ]
    tied = _tied_groups(model)
    missing = sorted(k for k in expected if not tied[k] & weights.keys())
    found = {"unknown tensors": unknown, "missing tensors": missing, "shape mismatch": shapes}
    problems = [f"{label} ({len(keys)}): {keys[:5]}" for label, keys in found.items() if keys]
    if problems:
        raise WeightLoadError(422, f"weights in {path} do not fit the served model: " + "; ".join(problems))
    return weights


class _WeightGate:
    """Requests share the weights; a reload waits for the requests in flight and holds new ones back."""

    def __init__(self) -> None:
        self._cond = asyncio.Condition()
        self._readers = 0
        self._writing = False

    @asynccontextmanager
    async def read(self) -> AsyncIterator[None]:
        async with self._cond:
            await self._cond.wait_for(lambda: not self._writing)
            self._readers += 1
        try:
            yield
        finally:
            async with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @asynccontextmanager
    async def write(self) -> AsyncIterator[None]:
        async with self._cond:
            await self._cond.wait_for(lambda: not self._writing)
            self._writing = True
            await self._cond.wait_for(lambda: self._readers == 0)
        try:
            yield
        finally:
            async with self._cond:
                self._writing = False
                self._cond.notify_all()


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


def create_app(
    policy: HFLocalPolicy, model_name: str, max_tokens: int = 4096, reload: bool = True
) -> FastAPI:
    """The FastAPI app serving ``policy`` under ``model_name``; ``reload`` adds the weight-reload route."""
    app = FastAPI(title="drkernel model server")
    gate = _WeightGate()

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
        async with gate.read():
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

    if reload:

        @app.post("/update_weights_from_disk")
        async def update_weights_from_disk(req: UpdateWeightsRequest) -> JSONResponse:
            async with gate.write():
                try:
                    weights = await asyncio.to_thread(read_weights, policy.model, req.model_path)
                except WeightLoadError as e:
                    return JSONResponse({"success": False, "message": str(e)}, status_code=e.status)
                await asyncio.to_thread(policy.load_state_dict, weights, False)
            message = f"loaded {len(weights)} tensors from {req.model_path}"
            return JSONResponse({"success": True, "message": message})

    return app


def serve(
    policy: HFLocalPolicy, model_name: str, host: str = "127.0.0.1", port: int = 8000, reload: bool = True
) -> None:
    """Run the server until interrupted."""
    import uvicorn

    uvicorn.run(create_app(policy, model_name, reload=reload), host=host, port=port, log_level="info")
