"""Hostile bodies against a real server (loopback, one CPU worker): every container of a body is
refused by its length before its items are validated, so a body of many bad items costs one error,
not one per item (that error list was what froze the event loop and grew the server by gigabytes);
a body past ``max_body_bytes`` is a 413 before it is parsed; a reference is at most
``max_problem_bytes``, and one admission cannot read is refused in a child process, not the server."""

from __future__ import annotations

import httpx
import pytest
from service_server import SMALL_REFERENCE, ServerProcess

from drkernel.service.body_reader import MAX_BODY_TOKENS
from drkernel.service.schemas import MAX_NODES, MAX_OVERRIDES

GOLD = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x * 2\n"
ITEMS = 200_000
"""Items of a hostile container (about 3 MB of JSON): far past every bound, far under the body limit."""


@pytest.fixture(scope="module")
def gym(tmp_path_factory):
    srv = ServerProcess(tmp_path_factory.mktemp("gym-bodies") / "jobs.sqlite", "--devices", "cpu:1",
                        "--max-body-bytes", str(8 << 20)).start(timeout_s=300)
    yield srv
    srv.stop()


def _post(gym, raw: bytes) -> httpx.Response:
    with httpx.Client(base_url=gym.url, headers={"Authorization": f"Bearer {gym.token}",
                                                 "Content-Type": "application/json"}, timeout=120) as c:
        return c.post("/v1/jobs", content=raw)


def _problem_with(field: str, items: str) -> bytes:
    return ('{"problem":{"name":"p","level":1,"code":"x","' + field + '":{' + items + '}},"solution":"x"}').encode()


def test_a_dict_of_many_bad_items_is_one_error(gym):
    """200k cpu_overrides whose keys fail the pattern and values the type: before, two errors each
    (400k built, 50 shown); now one, from the length (MAX_OVERRIDES), naming the field."""
    r = _post(gym, _problem_with("cpu_overrides", ",".join(f'"{i}":"x"' for i in range(ITEMS))))
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert len(detail) == 1 and detail[0]["loc"][-1] == "cpu_overrides"
    assert f"at most {MAX_OVERRIDES} items" in detail[0]["msg"]


def test_metadata_of_many_long_keys_is_one_error(gym):
    """200k metadata keys of 200 characters (each past the 128 a key may have): one error, from the
    size (MAX_NODES values), before any key is checked."""
    pad = "k" * 200
    r = _post(gym, _problem_with("metadata", ",".join(f'"{pad}{i}":1' for i in range(ITEMS // 10))))
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert len(detail) == 1 and detail[0]["loc"][-1] == "metadata"
    assert str(MAX_NODES) in detail[0]["msg"]


def test_many_unknown_top_level_keys_are_one_error(gym):
    """200k unknown keys of the request object (extra="forbid" would make one error each): one error,
    since an object with more keys than its model has fields must hold an unknown one."""
    raw = ('{"problem_key":"builtin/L1/gelu","solution":"x",' + ",".join(f'"x{i}":0' for i in range(ITEMS))
           + "}").encode()
    r = _post(gym, raw)
    assert r.status_code == 422, r.text
    assert len(r.json()["detail"]) == 1


def test_an_unknown_key_is_echoed_bounded(gym):
    """One unknown key of 100k characters: its 422 names it, cut to 128 characters."""
    r = _post(gym, ('{"problem_key":"builtin/L1/gelu","solution":"x","' + "k" * 100_000 + '":0}').encode())
    assert r.status_code == 422, r.text
    assert max(len(str(p)) for e in r.json()["detail"] for p in e["loc"]) <= 128


def test_a_body_past_the_limit_is_413_before_it_is_parsed(gym):
    r = _post(gym, b'{"solution":"' + b"x" * (9 << 20) + b'"}')
    assert r.status_code == 413, r.text


def test_a_reference_past_max_problem_bytes_is_refused_by_its_length(gym):
    """A 1-MiB reference (the parse that held the GIL for seconds) is refused by the schema's bound
    (64 KiB by default), before admission reads any of it."""
    code = SMALL_REFERENCE + "x = 1\n" * ((1 << 20) // 6)
    with httpx.Client(base_url=gym.url, headers={"Authorization": f"Bearer {gym.token}"}, timeout=120) as c:
        r = c.post("/v1/jobs", json={"problem": {"name": "huge", "level": 1, "code": code, "source": "test"},
                                     "solution": GOLD, "config": {"device": "cpu"}})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"][-1] == "code"


def test_a_large_reference_the_parser_refuses_is_the_clients_422_twice(gym):
    """A 50-kB reference of 50,000 unary minus (the parser's MemoryError), read in admission's child
    process: a 422 naming the code, and the same again from what admission remembers."""
    code = "x = " + "-" * 50_000 + "1\n" + SMALL_REFERENCE
    body = {"problem": {"name": "minus", "level": 1, "code": code, "source": "test"}, "solution": GOLD,
            "config": {"device": "cpu"}}
    with httpx.Client(base_url=gym.url, headers={"Authorization": f"Bearer {gym.token}"}, timeout=120) as c:
        for _ in range(2):
            r = c.post("/v1/jobs", json=body)
            assert r.status_code == 422, r.text
            assert r.json()["error"] == "invalid_problem"
        assert c.get("/v1/queue").json()["counts"]["queued"] == 0


def test_a_body_of_more_json_tokens_than_the_server_parses_is_413_before_it_is_parsed(gym):
    """1.2 M small numbers (2.4 MB, under the byte limit): parsing it would hold the GIL every client
    shares for about 0.15 s per million; its tokens are counted in a reading child and it is refused."""
    raw = b'{"problem_key":"builtin/L1/gelu","solution":"x","metadata":[' + b"0," * 1_200_000 + b'0]}'
    r = _post(gym, raw)
    assert r.status_code == 413, r.text
    assert r.json()["error"] == "request_too_large" and str(MAX_BODY_TOKENS) in r.json()["detail"]
    assert httpx.get(f"{gym.url}/v1/health", timeout=30).status_code == 200


def test_separators_inside_strings_do_not_refuse_a_body(gym):
    """600k commas inside one string: the bound read from the bytes passes the limit, the exact count in
    the child does not, so the body is parsed and judged by its schema as any other (the solution is
    past max_solution_bytes: a 422 naming it, not a 413)."""
    r = _post(gym, b'{"problem_key":"builtin/L1/gelu","solution":"' + b"," * 600_000 + b'"}')
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"][-1] == "solution"


@pytest.fixture(scope="module")
def budgeted(tmp_path_factory):
    """A server whose clients' parse budget refills at 1,000 tokens a second: the burst (two bodies'
    worth) is what a test can spend."""
    srv = ServerProcess(tmp_path_factory.mktemp("gym-budget") / "jobs.sqlite", "--devices", "cpu:1",
                        "--max-body-bytes", str(8 << 20), "--parse-rate-per-client", "1000").start(timeout_s=300)
    yield srv
    srv.stop()


def test_a_client_s_bodies_are_charged_their_tokens_and_refused_past_its_parse_budget(budgeted):
    """Bodies of 0.9 M tokens each (under the per-body limit: parsed without a child): two fit the
    burst, the third is a 429 with Retry-After before it is parsed (hostile round 10: 16 connections of
    one client's 1-MiB bodies stalled every other client for seconds)."""
    raw = b'{"problem_key":"builtin/L1/gelu","solution":"x","metadata":[' + b"0," * 450_000 + b'0]}'
    codes = [_post(budgeted, raw) for _ in range(3)]
    assert [r.status_code for r in codes] == [422, 422, 429], [r.text[:200] for r in codes]
    assert "Retry-After" in codes[2].headers and "parse_rate_per_client" in codes[2].json()["detail"]
