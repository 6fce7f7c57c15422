"""Hostile requests against a real server: text a sandboxed process sends is made valid UTF-8 where it enters our messages
(`drkernel.gym.ipc.valid_text`, applied by `Channel.recv`): a lone surrogate in a solution's or a
custom reference's error (a ``\\ud800`` escape, which JSON carries) never reaches the job store or an
HTTP answer as a str that cannot be encoded. A real server on loopback, one CPU worker."""

from __future__ import annotations

import json

import httpx
import pytest
from service_server import SMALL_REFERENCE, ServerProcess

from drkernel.gym.config import EvalRequest
from drkernel.gym.ipc import valid_text
from drkernel.service.client import ServiceClient

GOLD = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x * 2\n"
LONE = GOLD.replace("return x * 2", "raise RuntimeError('boom \\ud800 x')")


def test_valid_text_escapes_lone_surrogates_keeps_pairs_and_other_values():
    # '\ud800' alone -> the six characters '\ud800'; a pair (an emoji) decodes whole; keys too.
    tree = json.loads('{"m": "a\\ud800", "\\udcff": [1, 2.5, null, {"e": "\\ud83d\\ude00"}]}')
    out = valid_text(tree)
    assert out == {"m": "a\\ud800", "\\udcff": [1, 2.5, None, {"e": "\U0001F600"}]}
    json.dumps(out, ensure_ascii=False).encode("utf-8")  # would raise on a surrogate


@pytest.fixture(scope="module")
def gym(tmp_path_factory):
    srv = ServerProcess(tmp_path_factory.mktemp("gym-text") / "jobs.sqlite", "--devices", "cpu:1",
                        "--slots", "2").start(timeout_s=300)
    yield srv
    srv.stop()


def _job(solution: str, code: str = SMALL_REFERENCE, name: str = "double") -> dict:
    problem = {"name": name, "level": 1, "code": code, "source": "test"}
    return {"problem": problem, "solution": solution, "config": {"device": "cpu", "trials": 1}}


def test_a_solution_error_with_a_lone_surrogate_reads_back_alone_and_in_a_batch(gym):
    with httpx.Client(base_url=gym.url, headers={"Authorization": f"Bearer {gym.token}"}, timeout=300) as c:
        bad = c.post("/v1/jobs", json=_job(LONE)).json()["id"]
        one = c.get(f"/v1/jobs/{bad}/wait?timeout=240")
        assert one.status_code == 200, one.text
        assert one.json()["result"]["status"] == "runtime_error"
        assert "boom \\ud800 x" in one.json()["result"]["error"]
        assert c.get(f"/v1/jobs/{bad}").status_code == 200
    # The trainer's call: the batch holding it (a cache hit now) answers every request.
    with ServiceClient(gym.url, token=gym.token) as client:
        results = client.evaluate_many([EvalRequest.from_dict(_job(s)) for s in (LONE, GOLD)], timeout_s=240)
    assert [r.status.value for r in results] == ["runtime_error", "correct"]


def test_a_reference_error_with_a_lone_surrogate_is_the_references_failure(gym):
    code = SMALL_REFERENCE.replace("def forward(self, x):", "def forward(self, x):\n        raise RuntimeError('ref \\udcff')")
    with httpx.Client(base_url=gym.url, headers={"Authorization": f"Bearer {gym.token}"}, timeout=300) as c:
        job = c.post("/v1/jobs", json=_job(GOLD, code=code, name="surref")).json()["id"]
        out = c.get(f"/v1/jobs/{job}/wait?timeout=240").json()
    assert (out["status"], out["error_class"], out["attempts"]) == ("failed", "reference_error", 1), out
    assert "\\udcff" in out["error"], out["error"]


def test_constants_past_admissions_work_bound_are_a_classified_422(gym):
    """The admission bound over HTTP (`drkernel.service.admission.MAX_FOLD_WORK`): 4,097 lines of
    starred copies of a 64-tuple, 37 kB (read in admission's child process), are refused as the
    problem's fault before anything is stored."""
    from drkernel.service.admission import MAX_FOLD_WORK

    consts = "A0 = (1, 1, 1, 1, 1, 1, 1, 1)\nA1 = (" + "*A0," * 8 + ")\n" + "B = (*A1,)\n" * (MAX_FOLD_WORK // 64 + 1)
    with httpx.Client(base_url=gym.url, headers={"Authorization": f"Bearer {gym.token}"}, timeout=60) as c:
        r = c.post("/v1/jobs", json=_job(GOLD, code=consts + SMALL_REFERENCE, name="folds"))
    assert r.status_code == 422, r.text
    assert "module constants" in r.text


def test_a_full_size_loaded_problem_unscaled_on_a_cpu_worker_is_a_classified_422(gym):
    """``cpu_scale: false`` on builtin/L1/matmul_fp16 (2**25 input elements) would hold the CPU's
    shared judge, which no timeout or cancel reaches: refused at admission, naming the field."""
    body = {"problem_key": "builtin/L1/matmul_fp16", "solution": GOLD,
            "config": {"device": "cpu", "cpu_scale": False, "timeout_s": 20}}
    with httpx.Client(base_url=gym.url, headers={"Authorization": f"Bearer {gym.token}"}, timeout=60) as c:
        r = c.post("/v1/jobs", json=body)
        assert r.status_code == 422, r.text
        assert "too_large_for_cpu" in r.text and "cpu_scale" in r.text
        body["config"]["cpu_scale"] = True  # at its CPU size it is admitted
        assert c.post("/v1/jobs", json=body).status_code == 202


def test_a_solution_returning_many_python_numbers_is_its_own_error(gym):
    """A forward returning 100,000 Python floats: refused where the candidate encodes it (at most
    `ipc.MAX_TREE_NODES` nodes): an output the judge cannot read is incorrect, as any unsupported
    output is; nothing of it reaches the judge."""
    flood = GOLD.replace("return x * 2", "return [0.5] * 100000")
    with httpx.Client(base_url=gym.url, headers={"Authorization": f"Bearer {gym.token}"}, timeout=300) as c:
        job = c.post("/v1/jobs", json=_job(flood)).json()["id"]
        out = c.get(f"/v1/jobs/{job}/wait?timeout=240").json()
    assert (out["status"], out["attempts"]) == ("done", 1), out
    assert out["result"]["status"] == "incorrect" and "Python numbers" in out["result"]["error"], out["result"]


def test_a_solution_nested_past_the_parser_is_a_result_not_our_failure(gym):
    """50,000 unary minus make the checker child's parser raise MemoryError: the solution's result
    (done, one attempt, no infrastructure error), never a retried, canaried failure of ours."""
    minus = "x = " + "-" * 50_000 + "1\n" + GOLD
    with httpx.Client(base_url=gym.url, headers={"Authorization": f"Bearer {gym.token}"}, timeout=300) as c:
        job = c.post("/v1/jobs", json=_job(minus, name="minus")).json()["id"]
        out = c.get(f"/v1/jobs/{job}/wait?timeout=240").json()
    assert (out["status"], out["attempts"], out["error_class"]) == ("done", 1, None), out
    assert out["result"]["status"] not in ("correct", "incorrect"), out["result"]
