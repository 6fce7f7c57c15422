"""Feedback for the next turn: concise, actionable text built from an `EvalResult`.

Not a JSON dump: the status in words, the tail of an error, the first failing trial with its
errors, the speedup with both timings, coverage with the kernel breakdown, and each hack explained.
The whole text is cut to ``max_chars`` (errors first, since a traceback's tail is what matters).
"""

from __future__ import annotations

from drkernel.agent.extract import Extraction
from drkernel.gym.result import EvalResult, Status

_STATUS_TEXT = {
    Status.CORRECT: "compiled and produced correct outputs",
    Status.INCORRECT: "ran but produced wrong outputs",
    Status.SYNTAX_ERROR: "is not valid Python",
    Status.NO_MODELNEW: "does not define `class ModelNew`",
    Status.SIGNATURE_MISMATCH: "has a `ModelNew` whose __init__ or forward signature differs from `Model`'s",
    Status.IMPORT_ERROR: "failed while being imported",
    Status.COMPILE_ERROR: "failed to compile a Triton kernel",
    Status.RUNTIME_ERROR: "raised an error in forward",
    Status.TIMEOUT: "exceeded the time limit",
    Status.CRASHED: "crashed the process (for example an illegal memory access)",
    Status.OUT_OF_MEMORY: "ran out of memory",
    Status.UNSUPPORTED_ON_CPU: "used a feature the CPU test environment does not support",
    Status.REJECTED: "was rejected before running because it breaks the contract",
}
MAX_KERNELS = 6
LANGUAGE_NAMES = {"triton": "Triton", "cuda": "CUDA"}
"""How feedback names a result's ``language`` (`EvalResult.language`)."""


def _language(result: EvalResult) -> str:
    return LANGUAGE_NAMES.get(result.language, result.language)


def tail(text: str, max_chars: int, max_lines: int = 30) -> str:
    """The last ``max_lines`` lines of ``text``, at most ``max_chars`` characters."""
    lines = text.strip().splitlines()[-max_lines:]
    out = "\n".join(lines)
    return out if len(out) <= max_chars else "..." + out[-(max_chars - 3) :]


def _fmt_ms(ms: float) -> str:
    return f"{ms * 1000:.1f} us" if ms < 1 else f"{ms:.3f} ms"


def _trial_text(result: EvalResult) -> str | None:
    failed = [t for t in result.trials if not t.passed]
    if not failed:
        return None
    t = failed[0]
    errs = []
    if t.max_abs_err is not None:
        errs.append(f"max abs error {t.max_abs_err:.3g}")
    if t.max_rel_err is not None:
        errs.append(f"max rel error {t.max_rel_err:.3g}")
    tol = f" (tolerance atol={result.atol:g}, rtol={result.rtol:g})" if result.atol is not None else ""
    where = f"trial {t.trial + 1} of {len(result.trials)}" + (
        " at the second input size" if t.size != "primary" else ""
    )
    detail = ", ".join(errs) + tol if errs else ""
    msg = f": {t.message}" if t.message else ""
    return f"Correctness failed at {where}{msg}" + (f"; {detail}" if detail else "") + "."


def _timing_text(result: EvalResult) -> str:
    if result.speedup is None or result.ref_timing is None or result.sol_timing is None:
        note = f" ({result.timing_note})" if result.timing_note else ""
        return f"Speed was not measured{note}."
    verdict = "faster than" if result.speedup >= 1 else "slower than"
    return (
        f"Speedup {result.speedup:.2f}x: yours {_fmt_ms(result.sol_timing.median_ms)}, "
        f"PyTorch reference {_fmt_ms(result.ref_timing.median_ms)} (median), so it is {verdict} the reference."
    )


def _coverage_text(result: EvalResult) -> list[str]:
    lines = []
    if result.time_coverage is not None:
        lines.append(
            f"Your own {_language(result)} kernels take {result.time_coverage:.0%} of the device time of forward."
        )
    elif result.op_coverage is not None:
        lines.append(f"Your own {_language(result)} kernels do {result.op_coverage:.0%} of the reference's "
                     "computation.")
    if result.kernels:
        ranked = sorted(result.kernels, key=lambda k: -(k.device_time_ms or 0.0))[:MAX_KERNELS]
        lines.append("Kernels launched by forward:")
        for k in ranked:
            who = "yours" if k.own else "NOT yours (PyTorch/library)"
            t = f", {_fmt_ms(k.device_time_ms)}" if k.device_time_ms is not None else ""
            lines.append(f"  - {k.name}: {who}, {k.launches} launch(es){t}")
    return lines


def result_feedback(result: EvalResult, max_error_chars: int = 1500) -> tuple[str, str]:
    """(feedback, instruction) for one evaluated turn."""
    status = _STATUS_TEXT.get(result.status, result.status.value).replace("Triton", _language(result))
    lines = [f"Your solution {status}."]
    if result.hacks:
        lines.append("It was flagged for breaking the contract (this scores zero):")
        lines += [
            f"  - {h.name}: {h.message}" + (f" (observed: {h.evidence})" if h.evidence else "")
            for h in result.hacks
        ]
    trial = _trial_text(result)
    if trial and result.status is Status.INCORRECT:
        lines.append(trial)
    if result.error and result.status is not Status.CORRECT:
        lines.append("Error (last lines):\n" + tail(result.error, max_error_chars))
    if result.status is Status.CORRECT:
        lines.append(_timing_text(result))
        lines += _coverage_text(result)
    lines += [f"Note: {w}" for w in result.warnings]
    return "\n".join(lines), _instruction(result)


def _instruction(result: EvalResult) -> str:
    if result.hacked:
        return f"Rewrite it so that your own {_language(result)} kernels do the computation, honestly."
    if result.status is not Status.CORRECT:
        return "Fix the problem above."
    if result.warnings or (result.time_coverage is not None and result.time_coverage < 0.5):
        return f"Move the remaining expensive operations into your own {_language(result)} kernels."
    if result.speedup is not None and result.speedup < 1:
        return "It is correct but slower than PyTorch: make it faster (fuse operations, tune block sizes)."
    return "It is correct: make it faster if you can, keeping it correct."


def extraction_feedback(extraction: Extraction) -> tuple[str, str]:
    """(feedback, instruction) for an answer with no usable code."""
    return (
        f"Your answer could not be used: {extraction.message}.",
        "Answer with the complete solution, defining `class ModelNew`.",
    )


def truncate(text: str, max_chars: int) -> str:
    """Cut ``text`` to ``max_chars``, marking the cut."""
    if len(text) <= max_chars:
        return text
    marker = "\n[... feedback truncated ...]"
    return text[: max(0, max_chars - len(marker))] + marker
