"""Data parallel on one machine: two gloo ranks on CPU run the smoke config (tiny model, the real gym in
interpreter mode) for one step and stay one model; on a fixed batch, two ranks make the step a single
process makes.

Each rank samples its own prompt (whole groups per rank), the gradients are summed across ranks
before the optimizer step, and rank 0 alone writes metrics, episodes and the checkpoint.
"""

import json
import os
from pathlib import Path

import pytest
import torch

from drkernel.errors import ConfigError
from drkernel.rl.checkpoint import latest_checkpoint
from drkernel.rl.config import load_config
from drkernel.rl.distributed import launch, share
from drkernel.rl.envs import StepRollout
from drkernel.rl.metrics_log import read_metrics
from drkernel.rl.rows import TurnRecord
from drkernel.rl.trainer import Trainer
from drkernel.tasks import build_env

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "train"


def _train_and_dump(config):
    """One rank: train, then save the weights before and after and the step metrics this rank saw."""
    rank = int(os.environ["RANK"])
    trainer = Trainer(config, build_env)
    initial = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    try:
        history = trainer.train()
    finally:
        trainer.close()
    final = trainer.model.state_dict()
    dump = {"initial": initial, "final": final, "history": history, "print": trainer.weights_fingerprint}
    torch.save(dump, Path(config.run.output_dir) / f"rank{rank}.pt")


class FixedEnv:
    """The same 4 prompts x 2 answers every step (no sampling), split among ranks like a real env."""

    def __init__(self, tokenizer, rank, world_size):
        self.tokenizer, self.shard = tokenizer, (rank, world_size)

    async def rollout(self, policy, step):
        encode = self.tokenizer.encode
        records = []
        for local, group in enumerate(share(range(4), *self.shard)):
            for sample in range(2):
                completion = encode(f"answer {group * 7 + sample * 3}") + [self.tokenizer.eos_token_id]
                records.append(
                    TurnRecord(
                        group=local,
                        traj=2 * local + sample,
                        turn=0,
                        prompt_ids=tuple(encode(f"question {group}")),
                        completion_ids=tuple(completion),
                        rollout_logprobs=(0.0,) * len(completion),
                        reward=float((group + sample * 2) % 3),
                    )
                )
        return StepRollout(records=records)

    def close(self):
        pass


def _fixed_config(out):
    return load_config(
        CONFIGS / "sanity_cpu.yaml",
        [
            f"run.output_dir={out}",
            "run.steps=1",
            "run.progress=false",
            "model.tiny_hidden=32",
            "rollout.prompts_per_step=4",
            "rollout.samples_per_prompt=2",
            "algorithm.mrs=false",  # the fixed answers' rollout log-probs are placeholders
            "optim.micro_batch_rows=1",
            # Adam's first step is lr * g / (|g| + eps). With eps = 1e-8 a gradient element near eps turns
            # a last-bit difference of the summation order (two ranks vs one) into a visible fraction of
            # lr; eps = 1e-3 keeps the step Lipschitz in g (<= lr / eps), so the weights compare the
            # gradients data parallel computes rather than Adam's amplification of rounding.
            "optim.eps=1e-3",
        ],
    )


def _train_fixed(config):
    rank, world_size = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    trainer = Trainer(config, build_env)
    trainer.env = FixedEnv(trainer.tokenizer, rank, world_size)
    try:
        history = trainer.train()
    finally:
        trainer.close()
    final = trainer.model.state_dict()
    torch.save({"final": final, "history": history}, Path(config.run.output_dir) / f"rank{rank}.pt")


def test_two_ranks_make_the_single_process_step(tmp_path):
    _train_fixed(_fixed_config(tmp_path / "single"))
    launch(_train_fixed, _fixed_config(tmp_path / "dp"), nproc=2)
    single = torch.load(tmp_path / "single" / "rank0.pt")
    ranks = [torch.load(tmp_path / "dp" / f"rank{r}.pt") for r in range(2)]
    one, two = single["history"][0], ranks[0]["history"][0]
    assert two["loss/rows"] == one["loss/rows"] == 8
    # Gradient scaling: the summed per-rank gradients have the full batch's norm (before clipping).
    assert two["loss/grad_norm"] == pytest.approx(one["loss/grad_norm"], rel=1e-5)
    assert two["loss/loss"] == pytest.approx(one["loss/loss"], rel=1e-5, abs=1e-7)
    assert two["reward/mean"] == pytest.approx(one["reward/mean"])
    for k, v in single["final"].items():
        assert torch.equal(ranks[0]["final"][k], ranks[1]["final"][k]), k
        # Not bit for bit: the summation order differs (see _fixed_config's eps).
        torch.testing.assert_close(ranks[0]["final"][k], v, rtol=1e-5, atol=1e-6)


def test_two_ranks_train_as_one_model(tmp_path):
    config = load_config(
        CONFIGS / "smoke_cpu.yaml",
        [
            f"run.output_dir={tmp_path}",
            "run.steps=1",
            "rollout.turns=1",  # gold vs broken first answers: rewards differ within each group
            "gym.pool_size=1",
            "gym.concurrency=1",
        ],
    )
    launch(_train_and_dump, config, nproc=2)

    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    for k, v in ranks[0]["final"].items():
        assert torch.equal(v, ranks[1]["final"][k]), f"{k} differs between the ranks"
        assert torch.equal(ranks[0]["initial"][k], ranks[1]["initial"][k]), k
    assert ranks[0]["print"] and ranks[0]["print"] == ranks[1]["print"]  # the last check's digest
    changed = [k for k, v in ranks[0]["final"].items() if not torch.equal(v, ranks[0]["initial"][k])]
    assert changed, "the update did not change any weight"

    (metrics,) = ranks[0]["history"]
    assert ranks[1]["history"][0]["loss/loss"] == metrics["loss/loss"]  # reduced: the same on every rank
    assert metrics["loss/rows"] == 2 * 2  # both ranks' rows: 2 prompts x 2 samples x 1 turn
    assert metrics["gym/evaluations"] == 4 and metrics["perf/evaluations"] == 4
    assert metrics["loss/rows_in_loss"] > 0 and metrics["loss/grad_norm"] > 0
    assert 0 < metrics["reward/correct_fraction"] < 1
    assert metrics["mismatch/rejected_fraction"] == 0

    lines = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in lines] == [1]  # rank 0 alone writes
    assert lines[0]["loss/rows"] == 4
    episodes = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    problems = [e["problem"]["name"] for e in episodes]
    assert len(episodes) == 4 and problems[0] == problems[1] and problems[2] == problems[3]
    assert problems[0] != problems[2]  # each rank rolled out its own prompt group
    ckpt = latest_checkpoint(tmp_path)
    assert ckpt is not None and ckpt.name == "step_000001"
    from safetensors.torch import load_file

    saved = load_file(str(ckpt / "model.safetensors"))
    for k, v in saved.items():
        assert torch.equal(v, ranks[0]["final"][k]), k


def test_prompts_must_divide_among_ranks(tmp_path):
    from typer.testing import CliRunner

    from drkernel.cli import app

    smoke = str(CONFIGS / "smoke_cpu.yaml")
    result = CliRunner().invoke(app, ["train", "--config", smoke, "--out", str(tmp_path), "--nproc", "3"])
    assert result.exit_code == 2, result.output
    assert "prompts_per_step=2" in result.output and "3 ranks" in result.output
    with pytest.raises(ConfigError, match="rollout.backend='vllm'"):
        launch(_train_and_dump, load_config(smoke, ["rollout.backend=vllm"]), nproc=2)
