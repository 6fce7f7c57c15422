"""The local HF policy, our OpenAI-compatible server and the OpenAI-compatible policy, all on the
tiny locally built model."""

import asyncio

import httpx
import pytest
import torch

from drkernel.agent import SamplingParams
from drkernel.agent.policies.hf_local import HFLocalPolicy
from drkernel.agent.policies.openai_compat import OpenAICompatPolicy
from drkernel.agent.policies.spec import make_policy
from drkernel.errors import ConfigError

CONVS = [[{"role": "user", "content": "Write a Triton kernel for relu." * k}] for k in (1, 3, 2)]


def recompute_logprobs(model, prompt, tokens, temperature):
    """log_softmax(logits / T) at the sampled tokens, from one unpadded forward pass."""
    ids = torch.tensor([prompt + tokens])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float()  # (L, V): position i predicts token i
    return torch.log_softmax(logits / temperature, -1).gather(-1, torch.tensor(tokens)[:, None]).squeeze(-1)


def test_hf_policy_batches_and_logprobs_match_a_forward_pass(tiny):
    model, tok = tiny
    policy = HFLocalPolicy(model, tok, batch_size=8)
    params = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=12, seed=3)

    async def go():
        return await asyncio.gather(*(policy.generate([c], params) for c in CONVS))

    outs = [c for (c,) in asyncio.run(go())]
    assert policy._batcher.batches == [3]  # three concurrent episodes, one padded batch
    for conv, c in zip(CONVS, outs):
        assert c.prompt_token_ids == policy.encode(conv)
        assert len(c.token_ids) == len(c.logprobs) <= 12 and c.finish_reason in ("stop", "length")
        expect = recompute_logprobs(model, c.prompt_token_ids, c.token_ids, 0.7)
        assert torch.allclose(torch.tensor(c.logprobs), expect, atol=1e-4), (c.logprobs, expect)


def test_hf_policy_takes_new_weights(tiny):
    from drkernel.agent.tiny import build_tiny

    model, tok = tiny
    other, _ = build_tiny(seed=1)
    policy = HFLocalPolicy(model, tok)
    greedy = SamplingParams(temperature=0, max_tokens=6)
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    before = asyncio.run(policy.generate(CONVS[:1], greedy))[0]
    try:
        policy.load_state_dict(other.state_dict())
        after = asyncio.run(policy.generate(CONVS[:1], greedy))[0]
    finally:
        policy.load_state_dict(saved)
    expect = recompute_logprobs(other, after.prompt_token_ids, after.token_ids, 1.0)
    assert torch.allclose(torch.tensor(after.logprobs), expect, atol=1e-4)
    assert before.logprobs != after.logprobs


def test_server_speaks_openai_chat_with_token_ids_and_logprobs(model_server, tiny):
    model, _ = tiny
    body = {
        "model": "tiny",
        "messages": CONVS[0],
        "max_tokens": 8,
        "temperature": 1.0,
        "top_p": 1.0,
        "n": 2,
        "logprobs": True,
        "return_token_ids": True,
        "seed": 5,
    }
    r = httpx.post(f"{model_server}/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    data = r.json()
    assert data["object"] == "chat.completion" and len(data["choices"]) == 2
    choice = data["choices"][0]
    lps = [e["logprob"] for e in choice["logprobs"]["content"]]
    assert 0 < len(lps) == len(choice["token_ids"])
    assert data["usage"]["completion_tokens"] == sum(len(c["token_ids"]) for c in data["choices"])
    expect = recompute_logprobs(model, data["prompt_token_ids"], choice["token_ids"], 1.0)
    assert torch.allclose(torch.tensor(lps), expect, atol=1e-4)
    assert httpx.get(f"{model_server}/v1/models").json()["data"][0]["id"] == "tiny"
    bad = httpx.post(f"{model_server}/v1/chat/completions", json={**body, "top_p": 0.0}, timeout=60)
    assert bad.status_code == 400 and "top_p" in bad.text
    assert (
        httpx.post(f"{model_server}/v1/chat/completions", json={**body, "model": "gpt-9"}).status_code == 404
    )


def test_openai_policy_against_our_server(model_server, tiny):
    model, _ = tiny
    policy = make_policy(f"openai:{model_server},concurrency=2,token_ids=true")
    assert isinstance(policy, OpenAICompatPolicy)
    params = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=8, seed=1)

    async def go():
        try:
            return await policy.generate(CONVS, params)
        finally:
            await policy.aclose()

    outs = asyncio.run(go())
    assert policy.model == "tiny"  # discovered through /v1/models
    for c in outs:
        assert c.finish_reason in ("stop", "length") and c.token_ids and c.prompt_token_ids
        expect = recompute_logprobs(model, c.prompt_token_ids, c.token_ids, 1.0)
        assert torch.allclose(torch.tensor(c.logprobs), expect, atol=1e-4)


def test_openai_policy_retries_then_reports_an_error_completion():
    calls = []

    def handler(request):
        calls.append(request)
        if len(calls) < 3:
            return httpx.Response(503, text="overloaded")
        if len(calls) == 3:
            return httpx.Response(
                200,
                json={
                    "choices": [
                        {
                            "message": {"content": "hi"},
                            "finish_reason": "stop",
                            "logprobs": {"content": [{"token": "token_id:7", "logprob": -0.5}]},
                        }
                    ]
                },
            )
        return httpx.Response(400, text="bad request: unknown field")

    policy = OpenAICompatPolicy("http://test", model="m", retries=4, backoff_s=0.001)
    policy._client = httpx.AsyncClient(base_url="http://test/v1", transport=httpx.MockTransport(handler))
    ok = asyncio.run(policy.generate(CONVS[:1], SamplingParams()))[0]
    assert len(calls) == 3 and ok.text == "hi" and ok.token_ids == [7] and ok.logprobs == [-0.5]
    bad = asyncio.run(policy.generate(CONVS[:1], SamplingParams()))[0]
    assert len(calls) == 4  # 400 is not retried
    assert bad.finish_reason == "error" and "HTTP 400" in bad.error


def test_policy_specs_are_checked():
    with pytest.raises(ConfigError, match="unknown kind"):
        make_policy("gpt:foo")
    with pytest.raises(ConfigError, match="unknown options"):
        make_policy("openai:http://x,temperature=3")
    with pytest.raises(ConfigError, match="needs vLLM"):
        make_policy("vllm:some/model")


def test_saved_tiny_model_loads_through_the_hf_spec(tmp_path, tiny):
    from typer.testing import CliRunner

    from drkernel.cli import app

    model, tok = tiny
    result = CliRunner().invoke(app, ["agent", "build-tiny", str(tmp_path / "tiny")])
    assert result.exit_code == 0, result.output
    loaded = make_policy(f"hf:{tmp_path / 'tiny'},batch_size=2")
    assert isinstance(loaded, HFLocalPolicy) and loaded.name.startswith("hf:")
    greedy = SamplingParams(temperature=0, max_tokens=5)
    a = asyncio.run(loaded.generate(CONVS[:1], greedy))[0]
    b = asyncio.run(HFLocalPolicy(model, tok).generate(CONVS[:1], greedy))[0]
    assert a.prompt_token_ids == b.prompt_token_ids and a.token_ids == b.token_ids
