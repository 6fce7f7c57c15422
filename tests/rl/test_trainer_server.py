"""Rollouts through our OpenAI-compatible server (over real HTTP) with weights pushed to it.

After every update the trainer saves its weights and POSTs the folder to the server's
``/update_weights_from_disk`` (SGLang's route), so the next step samples from the new policy and the
trainer's log-probs agree with the server's (MRS keeps everything). With LoRA the trainer pushes the
merged full weights under the base model's names.
"""

import socket
import threading
import time
from pathlib import Path

import pytest
import torch

from drkernel.rl.config import load_config
from drkernel.rl.modeling import rollout_state_dict
from drkernel.rl.trainer import Trainer
from drkernel.tasks import build_env

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "train"


def _serve(app):
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not server.started:
        assert time.time() < deadline, "server did not start"
        time.sleep(0.05)
    return server, thread, f"http://127.0.0.1:{port}"


@pytest.fixture
def tiny_server():
    """Our server for the tiny model the trainer starts from (same seed, same weights)."""
    from drkernel.agent.policies.hf_local import HFLocalPolicy
    from drkernel.agent.server import create_app
    from drkernel.agent.tiny import build_tiny

    model, tokenizer = build_tiny(seed=0, hidden=32)
    policy = HFLocalPolicy(model, tokenizer, batch_size=16, name="tiny")
    server, thread, url = _serve(create_app(policy, "tiny"))
    yield model, url
    server.should_exit = True
    thread.join(timeout=10)


def _train_through(url, tmp_path, *extra):
    config = load_config(
        CONFIGS / "sanity_cpu.yaml",
        [
            f"run.output_dir={tmp_path}",
            "run.steps=2",
            "run.progress=false",
            "model.tiny_hidden=32",
            "rollout.backend=openai",
            f"rollout.url={url}/v1",
            "rollout.prompts_per_step=2",
            "rollout.samples_per_prompt=4",
            "rollout.max_tokens=4",
            "task.sanity_target=abcdefghijklmnopqrstuvwxyz",  # random answers earn different rewards
            *extra,
        ],
    )
    trainer = Trainer(config, build_env)
    try:
        history = trainer.train()
    finally:
        trainer.close()
    return trainer, history


def _assert_server_agrees(history):
    for m in history:  # the server's log-probs match the trainer's: same weights, same definition
        assert m["mismatch/rejected_fraction"] == 0
        assert m["mismatch/max_abs_log_ratio"] < 1e-4
        assert m["loss/rows"] == 8 and m["loss/rows_in_loss"] == 8


def test_openai_server_rollouts_with_weight_reload(tiny_server, tmp_path):
    served, url = tiny_server
    initial = {k: v.clone() for k, v in served.state_dict().items()}
    trainer, history = _train_through(url, tmp_path)
    pushed = served.state_dict()
    assert any(not torch.equal(initial[k], v) for k, v in pushed.items()), "no update reached the server"
    for k, v in trainer.model.state_dict().items():
        assert torch.equal(v, pushed[k]), k
    _assert_server_agrees(history)


def test_lora_pushes_merged_weights_to_server(tiny_server, tmp_path):
    served, url = tiny_server
    initial = {k: v.clone() for k, v in served.state_dict().items()}
    lora = ["model.lora.enabled=true", "model.lora.r=4", "optim.lr=1e-2"]
    trainer, history = _train_through(url, tmp_path, *lora)
    merged, pushed = rollout_state_dict(trainer.model), served.state_dict()
    assert set(merged) == set(pushed)  # the base model's names, no adapter tensors
    changed = {k for k in pushed if not torch.equal(initial[k], pushed[k])}
    assert changed and all(k.split(".")[-2].endswith("_proj") for k in changed), sorted(changed)[:5]
    for k, v in merged.items():
        assert torch.equal(v, pushed[k]), k
    _assert_server_agrees(history)
    assert not (tmp_path / "pushed_weights" / "adapter_config.json").exists()


def test_reload_route_rejects_bad_folders_and_loads_good_ones(tmp_path):
    from fastapi.testclient import TestClient
    from safetensors.torch import save_file

    from drkernel.agent.policies.hf_local import HFLocalPolicy
    from drkernel.agent.server import create_app
    from drkernel.agent.tiny import build_tiny

    model, tokenizer = build_tiny(seed=0, hidden=32)
    other, _ = build_tiny(seed=1, hidden=32)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    client = TestClient(create_app(HFLocalPolicy(model, tokenizer, name="tiny"), "tiny"))

    def post(folder):
        return client.post("/update_weights_from_disk", json={"model_path": str(folder)})

    missing = post(tmp_path / "nowhere")
    assert missing.status_code == 400 and missing.json()["success"] is False
    assert "not a folder" in missing.json()["message"]
    (tmp_path / "empty").mkdir()
    assert post(tmp_path / "empty").status_code == 400

    wrong = {k: v.clone() for k, v in other.state_dict().items() if k != "lm_head.weight"}
    wrong["model.norm.weight"] = torch.ones(7)  # wrong shape
    wrong["model.extra.weight"] = torch.ones(2)  # not in the model
    del wrong["model.layers.0.mlp.up_proj.weight"]  # missing
    (tmp_path / "wrong").mkdir()
    save_file(wrong, str(tmp_path / "wrong" / "model.safetensors"))
    rejected = post(tmp_path / "wrong")
    assert rejected.status_code == 422 and rejected.json()["success"] is False
    for name in ("model.norm.weight", "model.extra.weight", "model.layers.0.mlp.up_proj.weight"):
        assert name in rejected.json()["message"]
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), f"{k} changed by a rejected reload"

    other.save_pretrained(tmp_path / "good")  # leaves the tied lm_head.weight out
    loaded = post(tmp_path / "good")
    assert loaded.status_code == 200 and loaded.json()["success"] is True, loaded.text
    for k, v in other.state_dict().items():
        assert torch.equal(model.state_dict()[k], v), k
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # still tied

    plain = TestClient(create_app(HFLocalPolicy(model, tokenizer, name="tiny"), "tiny", reload=False))
    assert plain.post("/update_weights_from_disk", json={"model_path": str(tmp_path)}).status_code == 404
