"""The one configuration loader (`drkernel.config`) and every configuration it builds: types checked,
unknown keys named, choices from the enums, nested sections, round trips, and a docstring under every
field of every configuration (read from the source, so a field added without one fails here)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
import typing
from pathlib import Path

import pytest

from drkernel.agent.episode import EpisodeConfig
from drkernel.bench.run import BenchConfig
from drkernel.config import apply_overrides, from_mapping, load_yaml, merge, to_plain
from drkernel.errors import ConfigError
from drkernel.gym.config import EvalConfig
from drkernel.reward import RewardConfig, RewardShape
from drkernel.rl.config import RolloutBackend, TrainConfig, config_from_dict, load_config
from drkernel.rl.integrations.verl.algorithms import HookConfig
from drkernel.service.config import ServiceConfig
from drkernel.sft.config import SFTConfig

REPO = Path(__file__).resolve().parents[1]
ROOTS = (TrainConfig, BenchConfig, EvalConfig, SFTConfig, ServiceConfig, RewardConfig, EpisodeConfig, HookConfig)


def _dataclasses_under(root: type) -> set[type]:
    """``root`` and every dataclass reachable through its field types."""
    seen: set[type] = set()
    todo = [root]
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        for hint in typing.get_type_hints(cls).values():
            for t in (hint, *typing.get_args(hint)):
                if dataclasses.is_dataclass(t) and isinstance(t, type):
                    todo.append(t)
    return seen


def _undocumented(cls: type) -> list[str]:
    """Fields of ``cls`` whose annotated assignment is not followed by a string literal."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    documented = {
        stmt.target.id
        for stmt, nxt in zip(body, body[1:] + [None])
        if isinstance(stmt, ast.AnnAssign)
        and isinstance(stmt.target, ast.Name)
        and isinstance(nxt, ast.Expr)
        and isinstance(nxt.value, ast.Constant)
        and isinstance(nxt.value.value, str)
    }
    return [f.name for f in dataclasses.fields(cls) if f.name not in documented]


def test_every_field_of_every_config_has_a_docstring():
    classes = set().union(*(_dataclasses_under(root) for root in ROOTS))
    assert len(classes) >= 19  # the sections are found, not just the roots
    missing = {c.__qualname__: names for c in classes if (names := _undocumented(c))}
    assert missing == {}


def test_the_docstring_check_can_fail():
    @dataclasses.dataclass
    class Half:
        documented: int = 1
        """Yes."""
        bare: int = 2

    assert _undocumented(Half) == ["bare"]


def test_wrong_types_are_named_by_key_all_at_once():
    with pytest.raises(ConfigError) as e:
        config_from_dict(
            {
                "optim": {"lr": "fast", "epochs": 2.5},
                "run": {"resume": "yes"},
                "eval": {"trials": True},
                "model": {"lora": {"target_modules": "q_proj"}},
            }
        )
    text = str(e.value)
    for named in (
        "optim.lr: expected float, got 'fast'",
        "optim.epochs: expected int, got 2.5",
        "run.resume: expected bool, got 'yes'",  # a YAML "yes" in quotes is a string, not a bool
        "eval.trials: expected int, got True",  # a bool is not an int
        "model.lora.target_modules: expected a list",
    ):
        assert named in text


def test_choices_come_from_the_enums():
    with pytest.raises(ConfigError, match=r"rollout.backend='magic' \(one of \['hf', 'openai', 'vllm'\]\)"):
        config_from_dict({"rollout": {"backend": "magic"}})
    with pytest.raises(ConfigError, match=r"reward.shape='linear' \(one of \['profiling', 'tiered'\]\)"):
        config_from_dict({"reward": {"shape": "linear"}})
    config = config_from_dict({"rollout": {"backend": "vllm"}, "reward": {"shape": "tiered"}})
    assert config.rollout.backend is RolloutBackend.VLLM and config.reward.shape is RewardShape.TIERED
    assert config.rollout.backend == "vllm"  # str enums still compare with their values


def test_nested_eval_and_reward_sections_reach_the_gym_and_the_reward():
    config = config_from_dict(
        {"eval": {"tolerance": "kernelbench", "verdict_mode": "strict", "coverage_floor": 0.3, "trials": 2},
         "reward": {"coverage_weight": 0.0}}
    )
    assert (config.eval.tolerance, config.eval.verdict_mode, config.eval.coverage_floor) == ("kernelbench", "strict", 0.3)
    assert config.reward.coverage_weight == 0.0
    with pytest.raises(ConfigError, match=r"eval: invalid EvalConfig: verdict_mode='sloppy'"):
        config_from_dict({"eval": {"verdict_mode": "sloppy"}})
    with pytest.raises(ConfigError, match=r"unknown gym keys: \['trials'\]"):  # no second copy of eval's fields
        config_from_dict({"gym": {"trials": 5}})
    with pytest.raises(ConfigError, match=r"unknown algorithm keys: \['coverage_weight'\]"):
        config_from_dict({"algorithm": {"coverage_weight": 0.5}})
    with pytest.raises(ConfigError, match="eval: expected a mapping, got 5"):
        config_from_dict({"eval": 5})


@pytest.mark.parametrize(
    "config",
    [
        TrainConfig(),
        load_config(REPO / "configs/train/paper_qwen3_8b.yaml"),
        BenchConfig(),
        EvalConfig(strict_allowlist=("aten::add.Tensor",)),
        SFTConfig(model="tiny", data=["a.jsonl"], output_dir="o", report_to=["wandb"]),
        ServiceConfig(evaluator_kwargs={"pool_size": 2}),
        RewardConfig(shape=RewardShape.TIERED),
        HookConfig(prs=None, importance_level="turn"),
    ],
    ids=lambda c: type(c).__name__,
)
def test_plain_values_round_trip(config):
    import json

    plain = json.loads(json.dumps(to_plain(config)))  # JSON-ready: enums by value, tuples as lists
    assert from_mapping(type(config), plain) == config


def test_overrides_and_merge():
    data = apply_overrides({"optim": {"lr": 1.0}}, ["optim.lr=1e-5", "model.lora.enabled=true", "run.x=[1, 2]"])
    assert data == {"optim": {"lr": "1e-5"}, "model": {"lora": {"enabled": True}}, "run": {"x": [1, 2]}}
    assert config_from_dict(data | {"run": {}}).optim.lr == 1e-5  # YAML 1.1 reads "1e-5" as a string
    with pytest.raises(ConfigError, match="is not key=value"):
        apply_overrides({}, ["optim.lr"])
    with pytest.raises(ConfigError, match="'optim' is not a section"):
        apply_overrides({"optim": 3}, ["optim.lr=1"])
    assert merge({"eval": {"trials": 5, "device": "cpu"}, "a": 1}, {"eval": {"device": "cuda"}}) == {
        "eval": {"trials": 5, "device": "cuda"},
        "a": 1,
    }


def test_bad_files_are_config_errors(tmp_path):
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    (tmp_path / "bad.yaml").write_text("optim: {lr: [\n")
    (tmp_path / "object.yaml").write_text("run: !!python/object:os.system {}\n")
    for name, match in [("list.yaml", "expected a mapping"), ("bad.yaml", "not valid YAML"),
                        ("object.yaml", "not valid YAML"), ("none.yaml", "cannot read")]:
        with pytest.raises(ConfigError, match=match):
            load_yaml(TrainConfig, tmp_path / name)


def test_bench_config_reads_eval_and_reward(tmp_path):
    path = tmp_path / "b.yaml"
    path.write_text("samples: 2\neval: {device: cpu, timing: false, tolerance: kernelbench}\nreward: {shape: tiered}\n")
    config = BenchConfig.from_yaml(path, eval={"device": "cuda"})  # a CLI override merges into eval
    assert (config.eval.device, config.eval.timing, config.eval.tolerance) == ("cuda", False, "kernelbench")
    episode = config.episode_config()
    assert episode.eval_config is config.eval and episode.reward.shape is RewardShape.TIERED
    with pytest.raises(ConfigError, match=r"unknown bench config keys: \['device'\]"):  # moved into eval
        BenchConfig.from_dict({"device": "cpu"})


def test_service_and_eval_configs_check_types():
    with pytest.raises(ConfigError, match="slots_per_worker: expected int, got '2'"):
        ServiceConfig.from_dict({"slots_per_worker": "2"})
    with pytest.raises(ConfigError, match=r"unknown EvalConfig keys: \['trails'\]"):
        EvalConfig.from_dict({"trails": 3})
    assert EvalConfig.from_dict({"timeout_s": 60, "strict_allowlist": ["aten::add.Tensor"]}) == EvalConfig(
        timeout_s=60.0, strict_allowlist=("aten::add.Tensor",)
    )


def test_shipped_configs_load_through_the_one_loader():
    import yaml

    hook = HookConfig.from_dict(yaml.safe_load((REPO / "configs/verl/drkernel_hook.yaml").read_text()))
    assert hook == HookConfig()  # the shipped file spells out the paper's defaults
    for path in sorted((REPO / "configs/train").glob("*.yaml")):
        load_config(path)
    for path in sorted((REPO / "configs/bench").glob("*.yaml")):
        BenchConfig.from_yaml(path)
    paper = load_config(REPO / "configs/train/paper_qwen3_8b.yaml")
    assert paper.optim.mini_batches * paper.optim.epochs > 1  # the clip can act
    assert (paper.eval.trials, paper.eval.verdict_mode, paper.reward.coverage_weight) == (5, "lenient", 0.5)
