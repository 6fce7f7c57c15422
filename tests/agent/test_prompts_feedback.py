"""Prompt templates (shipped and overridden) and the feedback text."""

import pytest

from drkernel.agent.feedback import result_feedback, truncate
from drkernel.agent.prompts import PromptTemplates
from drkernel.errors import ConfigError
from drkernel.gym import EvalResult, Hack, KernelStat, Status, TimingStats
from drkernel.problems import Problem

PROBLEM = Problem(name="19_ReLU", level=1, code="class Model: pass\n", dtype="float32")


def test_first_turn_has_task_reference_example_contract_and_format():
    msgs = PromptTemplates.default().first_messages(PROBLEM, tolerance="kernelbench")
    assert [m["role"] for m in msgs] == ["system", "user"]
    text = msgs[1]["content"]
    for needle in (
        "19_ReLU (level 1, dtype float32)",
        "class Model: pass",
        "@triton.jit",
        "class ModelNew(nn.Module)",
        "atol = 0.0001, rtol = 0.0001",
        "<answer>",
    ):
        assert needle in text


def test_templates_from_a_folder_override_and_bad_placeholders_are_named(tmp_path):
    (tmp_path / "system.txt").write_text("")
    (tmp_path / "first_turn.txt").write_text("Speed up $problem_name please.")
    msgs = PromptTemplates.from_dir(tmp_path).first_messages(PROBLEM)
    assert msgs == [{"role": "user", "content": "Speed up 19_ReLU please."}]
    (tmp_path / "first_turn.txt").write_text("Speed up $problem_nmae")
    with pytest.raises(ConfigError, match="first_turn.txt: bad placeholder 'problem_nmae'"):
        PromptTemplates.from_dir(tmp_path).first_messages(PROBLEM)


def t(ms):
    return TimingStats(median_ms=ms, iqr_ms=0, cv=0, mean_ms=ms, min_ms=ms, n=100)


def test_correct_feedback_gives_timings_coverage_and_kernels():
    r = EvalResult(
        status=Status.CORRECT,
        speedup=0.8,
        ref_timing=t(0.4),
        sol_timing=t(0.5),
        time_coverage=0.35,
        kernels=[KernelStat("relu_kernel", True, 1, 0.175), KernelStat("aten::mm", False, 1, 0.325)],
        warnings=["lazy optimization: the matmul stays in PyTorch"],
    ).finalize()
    text, instruction = result_feedback(r)
    assert "Speedup 0.80x: yours 500.0 us, PyTorch reference 400.0 us" in text
    assert "35% of the device time" in text
    assert text.index("aten::mm: NOT yours") < text.index("relu_kernel: yours")  # by device time
    assert "Note: lazy optimization" in text
    assert "Move the remaining expensive operations" in instruction


def test_error_feedback_keeps_the_tail_and_truncation_is_marked():
    error = "\n".join(f"line {i}" for i in range(200)) + "\nTypeError: bad operand"
    text, _ = result_feedback(EvalResult(status=Status.RUNTIME_ERROR, error=error).finalize())
    assert (
        "raised an error in forward" in text and "TypeError: bad operand" in text and "line 0\n" not in text
    )
    cut = truncate(text, 120)
    assert len(cut) == 120 and cut.endswith("[... feedback truncated ...]")


def test_hacked_feedback_asks_for_an_honest_rewrite():
    r = EvalResult(
        status=Status.REJECTED,
        hacks=[Hack(16, "torch_compile", "torch.compile called", "Write Triton yourself.")],
    ).finalize()
    text, instruction = result_feedback(r)
    assert "rejected before running" in text and "torch_compile: Write Triton yourself." in text
    assert "honestly" in instruction


def test_first_turn_states_the_solution_contract_from_its_one_definition():
    from drkernel.gym.verdict.static import ALLOWED_IMPORTS, CONTRACT

    text = PromptTemplates.default().first_messages(PROBLEM)[-1]["content"]
    assert all(rule.text in text for rule in CONTRACT)
    assert "triton.language" in text and "numpy" in text and ALLOWED_IMPORTS[0] == "torch"
