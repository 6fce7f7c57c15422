"""The smoke config end to end: tiny model, built-in problems, the real gym in interpreter mode.

A random-init tiny model never writes a code block, so the rewarded path would stay unexercised. The
test therefore replays the built-in gold / lazy / broken solutions as the tiny model's answers
(teacher forcing: tokens from the tiny tokenizer, rollout log-probs from the tiny model itself), so
that the gym really evaluates, rewards differ within a group, and the update has signal.
"""

from pathlib import Path

import pytest
import torch

from drkernel.agent.policies.base import Completion
from drkernel.agent.policies.scripted import ScriptedPolicy, builtin_script
from drkernel.rl.checkpoint import latest_checkpoint
from drkernel.rl.config import load_config
from drkernel.rl.logprobs import completion_logprobs
from drkernel.rl.metrics_log import read_metrics
from drkernel.rl.rows import TurnRecord, collate
from drkernel.rl.trainer import Trainer

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "train"


class TeacherForcedPolicy:
    """Scripted answers as if the model had sampled them: token ids and the model's own log-probs."""

    name = "teacher-forced"

    def __init__(self, script: ScriptedPolicy, model, tokenizer) -> None:
        self.script, self.model, self.tokenizer = script, model, tokenizer

    async def generate(self, batch, params):
        out = []
        for messages, c in zip(batch, await self.script.generate(batch, params)):
            text = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
            prompt = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            tokens = self.tokenizer(c.text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
            record = TurnRecord(group=0, traj=0, turn=0, prompt_ids=tuple(prompt), completion_ids=tuple(tokens),
                                rollout_logprobs=(0.0,) * len(tokens), reward=0.0)
            rows = collate([record], self.tokenizer.pad_token_id)
            with torch.no_grad():
                logp = completion_logprobs(self.model, rows, params.temperature)[0, -len(tokens):]
            out.append(Completion(text=c.text, token_ids=tokens, prompt_token_ids=prompt, logprobs=logp.tolist()))
        return out

    async def aclose(self) -> None:
        return None


class ReplayEnv:
    """The trainer's kernel environment, answering with the teacher-forced scripts."""

    def __init__(self, inner, model, tokenizer) -> None:
        self.inner, self.model, self.tokenizer = inner, model, tokenizer
        # Two variants per problem so that the two samples of a prompt differ: gold first, broken first.
        script = ScriptedPolicy.for_problems([(p, [builtin_script(p, ["gold", "lazy"]), builtin_script(p, ["broken", "gold"])])
                                              for p in inner.problems])
        self.policy = TeacherForcedPolicy(script, model, tokenizer)

    async def rollout(self, policy, step):
        return await self.inner.rollout(self.policy, step)

    def close(self) -> None:
        self.inner.close()


def test_smoke_config_two_steps_real_gym(tmp_path):
    config = load_config(CONFIGS / "smoke_cpu.yaml", [f"run.output_dir={tmp_path}"])
    trainer = Trainer(config)
    trainer.env = ReplayEnv(trainer.env, trainer.model, trainer.tokenizer)
    before = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    try:
        history = trainer.train()
    finally:
        trainer.close()

    assert [trainer.step, len(history)] == [2, 2]
    for m in history:
        assert m["loss/rows"] == 2 * 2 * 2  # prompts x samples x turns
        assert m["gym/evaluations"] == 8
        assert m["reward/mean"] > 0  # gold answers pass the interpreter gym
        assert m["reward/max"] <= 0.5 + 0.5 * 1.0  # no timing on CPU: at most 0.5 + w_cov * op coverage
        assert m["reward/correct_fraction"] > 0 and m["reward/correct_fraction"] < 1
        assert m["mismatch/rejected_fraction"] == 0  # same weights in "rollout" and trainer
        assert m["loss/rows_in_loss"] > 0 and m["loss/skipped"] == 0
        assert torch.isfinite(torch.tensor(m["loss/loss"])) and m["loss/grad_norm"] > 0
        assert "reward/fast@0" in m and "reward/fast@1.2" not in m  # Fast@p>0 not measured on CPU
    changed = [k for k, v in trainer.model.state_dict().items() if not torch.equal(v, before[k])]
    assert changed, "the update did not change any weight"

    lines = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in lines] == [1, 2]
    assert all(k.split("/")[0] in ("reward", "loss", "mismatch", "gym", "perf") for k in lines[0] if "/" in k)
    assert (tmp_path / "episodes.jsonl").read_text().count("\n") == 8

    ckpt = latest_checkpoint(tmp_path)
    assert ckpt is not None and ckpt.name == "step_000002"
    from transformers import AutoModelForCausalLM, AutoTokenizer

    loaded = AutoModelForCausalLM.from_pretrained(ckpt).eval()
    tokenizer = AutoTokenizer.from_pretrained(ckpt)
    ids = torch.tensor([tokenizer("import triton", add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, trainer.model(ids).logits)


@pytest.mark.parametrize("bad, named", [("optim.lrr=1", "lrr"), ("optim.lr=fast", "optim.lr"),
                                        ("rollout.backend=magic", "magic"), ("nosection.x=1", "nosection"),
                                        ("task.kind=sanity", "rollout.turns")])
def test_bad_config_is_rejected(bad, named):
    from drkernel.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        load_config(CONFIGS / "smoke_cpu.yaml", [bad])
    assert named in str(e.value)


def test_shipped_configs_load():
    paper = load_config(CONFIGS / "paper_qwen3_8b.yaml")
    assert (paper.rollout.prompts_per_step, paper.rollout.samples_per_prompt, paper.rollout.turns) == (16, 16, 3)
    assert (paper.optim.lr, paper.optim.grad_clip, paper.algorithm.dual_clip) == (1e-6, 1.0, 3.0)
    assert (paper.algorithm.mrs_low, paper.algorithm.mrs_high, paper.algorithm.token_veto) == (0.999, 1.001, 1e-4)
    assert load_config(CONFIGS / "sanity_cpu.yaml").task.kind == "sanity"
