"""Pull the solution source out of a model's answer.

Copes with thinking text (``<think>...</think>``, also unterminated), an explicit
``<answer>...</answer>`` block, several fenced code blocks (kernels in one, ``ModelNew`` in another),
an unterminated fence (a truncated answer) and code without any fence. An answer with no usable code
is an `Extraction` with a reason, which the episode records as an unparseable turn with zero reward.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from drkernel import pyast

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_ANSWER = re.compile(r"<answer>(.*?)(?:</answer>|\Z)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+-]*)[^\n]*\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)
_OPEN_FENCE = re.compile(r"^[ \t]*```[ \t]*(?:python|py)?[ \t]*\n", re.MULTILINE | re.IGNORECASE)
_MODELNEW = re.compile(r"^\s*class\s+ModelNew\b", re.MULTILINE)
_TRITON_JIT = re.compile(r"@triton\.(?:jit|autotune|heuristics)")
_CODE_START = re.compile(r"^(?:import |from \w|@|class |def |[A-Z_][A-Z0-9_]* *=)")
_NON_PYTHON = {"bash", "sh", "shell", "console", "text", "txt", "json", "yaml", "diff", "cpp", "c", "cuda"}

REASONS = {
    "empty": "the answer is empty",
    "no_code": "the answer contains no code",
    "no_modelnew": "no code block defines `class ModelNew`",
}


@dataclass(frozen=True)
class Extraction:
    """What was found. ``code`` is None exactly when ``reason`` is set."""

    code: str | None
    method: str  # "answer_block", "fenced", "fenced+kernels", "unterminated_fence", "unfenced", "none"
    reason: str | None = None  # key of REASONS when nothing usable was found

    @property
    def ok(self) -> bool:
        return self.code is not None

    @property
    def message(self) -> str:
        return REASONS[self.reason] if self.reason else ""


def strip_thinking(text: str) -> str:
    """Drop ``<think>`` blocks; an unterminated one hides everything after it, an orphan
    ``</think>`` everything before it."""
    text = _THINK.sub("", text)
    if "</think>" in text.lower():
        text = text[text.lower().rindex("</think>") + len("</think>") :]
    if "<think>" in text.lower():
        text = text[: text.lower().index("<think>")]
    return text


def _python_blocks(text: str) -> list[str]:
    return [body for lang, body in _FENCE.findall(text) if lang.lower() not in _NON_PYTHON]


def _longest_parseable(lines: list[str]) -> str | None:
    """The longest prefix of ``lines`` that parses and defines ModelNew."""
    for end in range(len(lines), 0, -1):
        src = "\n".join(lines[:end]).strip()
        if not _MODELNEW.search(src):
            return None
        try:
            pyast.parse(src)
        except SyntaxError:
            continue
        return src + "\n"
    return None


def _unfenced(text: str) -> str | None:
    lines = text.splitlines()
    for start, line in enumerate(lines):
        if _CODE_START.match(line):
            found = _longest_parseable(lines[start:])
            if found is not None:
                return found
    return None


def _from_blocks(blocks: list[str]) -> tuple[str, str] | None:
    with_model = [b for b in blocks if _MODELNEW.search(b)]
    if not with_model:
        return None
    main = with_model[-1]
    if _TRITON_JIT.search(main):
        return main, "fenced"
    kernels = [b for b in blocks if b is not main and _TRITON_JIT.search(b) and not _MODELNEW.search(b)]
    if not kernels:
        return main, "fenced"
    return "\n\n".join([*kernels, main]), "fenced+kernels"


def extract_code(text: str) -> Extraction:
    """The solution source in ``text`` (see the module docstring for the rules, in order)."""
    if not text or not text.strip():
        return Extraction(None, "none", "empty")
    body = strip_thinking(text)
    answers = _ANSWER.findall(body)
    if answers:
        inner = answers[-1]
        blocks = _python_blocks(inner)
        found = _from_blocks(blocks) if blocks else None
        if found:
            return Extraction(found[0].strip() + "\n", "answer_block")
        if _MODELNEW.search(inner):
            return Extraction(inner.strip() + "\n", "answer_block")
    found = _from_blocks(_python_blocks(body))
    if found:
        return Extraction(found[0].strip() + "\n", found[1])
    opens = list(_OPEN_FENCE.finditer(body))
    if opens and body.count("```") % 2 == 1:
        tail = body[opens[-1].end() :]
        if _MODELNEW.search(tail):
            return Extraction(tail.strip() + "\n", "unterminated_fence")
    code = _unfenced(body)
    if code:
        return Extraction(code, "unfenced")
    has_code = bool(_python_blocks(body)) or bool(_unfenced_any(body))
    return Extraction(None, "none", "no_modelnew" if has_code else "no_code")


def _unfenced_any(text: str) -> bool:
    return any(_CODE_START.match(line) for line in text.splitlines()) or "```" in text
