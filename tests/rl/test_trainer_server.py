"""Rollouts through an OpenAI-compatible server (ours, over real HTTP) with weights pushed to it.

The server gets a reload route like SGLang's ``/update_weights_from_disk``; after every update the
trainer saves its weights and asks the server to load them, so the next step samples from the new
policy and the trainer's log-probs agree with the server's (MRS keeps everything).
"""

import socket
import threading
import time
from pathlib import Path

import torch

from drkernel.rl.config import load_config
from drkernel.rl.trainer import Trainer

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


def test_openai_server_rollouts_with_weight_reload(tmp_path):
    from safetensors.torch import load_file

    from drkernel.agent.policies.hf_local import HFLocalPolicy
    from drkernel.agent.server import create_app
    from drkernel.agent.tiny import build_tiny

    model, tokenizer = build_tiny(seed=0, hidden=32)  # the same weights the trainer starts from
    policy = HFLocalPolicy(model, tokenizer, batch_size=16, name="tiny")
    app = create_app(policy, "tiny")
    reloads = []

    @app.post("/update_weights_from_disk")
    def reload(body: dict) -> dict:
        state = load_file(str(Path(body["model_path"]) / "model.safetensors"))
        policy.load_state_dict(state, strict=False)  # tied embeddings: lm_head is not in the file
        reloads.append(body["model_path"])
        return {"success": True}

    server, thread, url = _serve(app)
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
        ],
    )
    trainer = Trainer(config)
    try:
        history = trainer.train()
    finally:
        trainer.close()
        server.should_exit = True
        thread.join(timeout=10)

    assert len(reloads) == 2  # one push after each update
    for k, v in trainer.model.state_dict().items():
        assert torch.equal(v, model.state_dict()[k]), k
    for m in history:  # the server's log-probs match the trainer's: same weights, same definition
        assert m["mismatch/rejected_fraction"] == 0
        assert m["mismatch/max_abs_log_ratio"] < 1e-4
        assert m["loss/rows"] == 8
