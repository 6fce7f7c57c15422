"""Any OpenAI-compatible chat endpoint (vLLM, SGLang, hosted APIs) as a policy.

Requests run concurrently up to ``concurrency``; connection errors, timeouts, 429 and 5xx answers
are retried with exponential backoff and jitter (``retries`` times); any other error, or running
out of retries, gives a `Completion` with ``finish_reason="error"``. Log-probs are asked for when
``SamplingParams.logprobs`` is set; with ``token_ids=True`` the request also asks for token ids
(``return_token_ids``, as vLLM and our own server answer; hosted APIs reject it). Token ids are also
recovered from vLLM's ``token_id:N`` log-prob entries.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from collections.abc import Sequence
from typing import Any

from drkernel.agent.policies.base import Completion, Message, SamplingParams

log = logging.getLogger(__name__)
RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class OpenAICompatPolicy:
    """Chat completions over HTTP (``httpx``)."""

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        concurrency: int = 16,
        retries: int = 5,
        timeout: float = 600.0,
        token_ids: bool = False,
        api_key_env: str = "OPENAI_API_KEY",
        backoff_s: float = 1.0,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        import httpx

        self.base_url = base_url.rstrip("/")
        if not self.base_url.endswith("/v1"):
            self.base_url += "/v1"
        self.model, self.retries, self.token_ids, self.backoff_s = model, retries, token_ids, backoff_s
        self.extra_body = dict(extra_body or {})
        key = os.environ.get(api_key_env)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=timeout)
        self._gate = asyncio.Semaphore(concurrency)
        self.name = f"openai:{model or base_url}"

    async def _model(self) -> str:
        if self.model is None:
            resp = await self._client.get("/models")
            resp.raise_for_status()
            self.model = resp.json()["data"][0]["id"]
        return self.model

    def _body(self, model: str, messages: Sequence[Message], params: SamplingParams) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "messages": list(messages),
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
            **self.extra_body,
        }
        if params.seed is not None:
            body["seed"] = params.seed
        if params.stop:
            body["stop"] = list(params.stop)
        if params.logprobs:
            body["logprobs"] = True
        if self.token_ids:
            body["return_token_ids"] = True
        return body

    @staticmethod
    def parse(data: dict[str, Any]) -> Completion:
        """A `Completion` from a chat-completion response body (its first choice)."""
        choice = data["choices"][0]
        entries = (choice.get("logprobs") or {}).get("content") or []
        logprobs = [float(e["logprob"]) for e in entries] or None
        token_ids = choice.get("token_ids")
        if token_ids is None and entries and all(str(e["token"]).startswith("token_id:") for e in entries):
            token_ids = [int(str(e["token"]).split(":", 1)[1]) for e in entries]
        usage = {
            k: int(v)
            for k, v in (data.get("usage") or {}).items()
            if k in ("prompt_tokens", "completion_tokens")
        }
        return Completion(
            text=choice["message"].get("content") or "",
            finish_reason=choice.get("finish_reason") or "stop",
            token_ids=token_ids,
            prompt_token_ids=data.get("prompt_token_ids") or choice.get("prompt_token_ids"),
            logprobs=logprobs,
            usage=usage,
        )

    async def _one(self, messages: Sequence[Message], params: SamplingParams) -> Completion:
        import httpx

        error = ""
        for attempt in range(self.retries + 1):
            if attempt:
                delay = self.backoff_s * 2 ** (attempt - 1) * (0.5 + random.random())
                log.warning(
                    "chat request failed (%s); retry %d/%d in %.1fs", error, attempt, self.retries, delay
                )
                await asyncio.sleep(delay)
            try:
                async with self._gate:
                    resp = await self._client.post(
                        "/chat/completions", json=self._body(await self._model(), messages, params)
                    )
            except httpx.HTTPError as e:  # connection, timeout, or the model listing failed
                error = f"{type(e).__name__}: {e}"
                continue
            if resp.status_code == 200:
                return self.parse(resp.json())
            error = f"HTTP {resp.status_code}: {resp.text[:500]}"
            if resp.status_code not in RETRY_STATUS:
                break
        return Completion(text="", finish_reason="error", error=error)

    async def generate(self, batch: Sequence[Sequence[Message]], params: SamplingParams) -> list[Completion]:
        return list(await asyncio.gather(*(self._one(m, params) for m in batch)))

    async def aclose(self) -> None:
        await self._client.aclose()
