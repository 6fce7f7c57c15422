"""SFT examples from exported trajectories, with the loss on assistant turns only.

A trajectory's ``messages`` (system, user prompt, then assistant answers and user feedback in turn)
is rendered once with the chat template and tokenized once with character offsets. The assistant
spans come from rendering prefixes of the conversation: message k's answer is the text between
``render(messages[:k], add_generation_prompt=True)`` and ``render(messages[:k+1])``, which holds the
answer and the template's end-of-turn marker (so the model learns to stop). Every token whose first
character falls in such a span gets its id as label; all others get -100. A template that renders an
earlier turn differently once later turns follow (not "prefix-stable") cannot be masked this way and
is rejected with a `ConfigError` naming the message; pass a prefix-stable ``chat_template`` instead.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from drkernel.errors import ConfigError, ProblemSourceError

log = logging.getLogger(__name__)

IGNORE = -100
ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class Example:
    """One tokenized trajectory: ``input_ids`` and ``labels`` (``IGNORE`` outside assistant turns)."""

    input_ids: list[int]
    labels: list[int]

    @property
    def trained_tokens(self) -> int:
        return sum(label != IGNORE for label in self.labels)


def load_conversations(
    paths: Iterable[str | Path], min_reward: float | None = None
) -> list[list[dict[str, str]]]:
    """The ``messages`` of every trajectory row in ``paths`` (the bench export format), keeping rows
    whose best turn reward is at least ``min_reward`` when it is given."""
    from drkernel.bench.io import read_rows

    conversations = []
    for path in paths:
        if not Path(path).exists():
            raise ProblemSourceError(f"trajectory file {path} does not exist")
        for i, row in enumerate(read_rows(path)):
            if "messages" not in row:
                raise ProblemSourceError(f"{path} row {i}: no 'messages' column (not a trajectory export)")
            if min_reward is not None and max(row.get("rewards") or [float("-inf")]) < min_reward:
                continue
            conversations.append(_checked(row["messages"], f"{path} row {i}"))
    return conversations


def _checked(messages: Sequence[Any], where: str) -> list[dict[str, str]]:
    out = []
    for j, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
            raise ProblemSourceError(
                f"{where} message {j}: expected {{role in {ROLES}, content: str}}, got {m!r:.80}"
            )
        out.append({"role": m["role"], "content": m["content"]})
    if not any(m["role"] == "assistant" for m in out):
        raise ProblemSourceError(f"{where}: no assistant message to train on")
    return out


def _render(tokenizer: Any, messages: Sequence[dict[str, str]], generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(
        list(messages), tokenize=False, add_generation_prompt=generation_prompt
    )


def assistant_spans(tokenizer: Any, messages: Sequence[dict[str, str]]) -> tuple[str, list[tuple[int, int]]]:
    """The rendered conversation and the ``[start, end)`` character span of each assistant answer."""
    text = _render(tokenizer, messages, False)
    spans = []
    for k, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        before = _render(tokenizer, messages[:k], True)
        through = _render(tokenizer, messages[: k + 1], False)
        if not (text.startswith(through) and through.startswith(before)):
            raise ConfigError(
                f"the chat template is not prefix-stable at message {k} (an assistant turn renders "
                "differently once later turns follow), so assistant tokens cannot be masked; set "
                "`chat_template` to a prefix-stable template such as configs/sft/chatml.jinja"
            )
        spans.append((len(before), len(through)))
    return text, spans


def tokenize_conversation(tokenizer: Any, messages: Sequence[dict[str, str]]) -> Example:
    """Token ids of the rendered conversation and labels that are -100 outside assistant answers."""
    text, spans = assistant_spans(tokenizer, messages)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    labels, s = [IGNORE] * len(ids), 0
    for i, (start, _) in enumerate(offsets):
        while s < len(spans) and start >= spans[s][1]:
            s += 1
        if s < len(spans) and spans[s][0] <= start < spans[s][1]:
            labels[i] = ids[i]
    return Example(input_ids=list(ids), labels=labels)


def build_examples(
    tokenizer: Any, conversations: Iterable[Sequence[dict[str, str]]], max_length: int, overlong: str = "drop"
) -> list[Example]:
    """Tokenized examples; a trajectory over ``max_length`` tokens is dropped or truncated."""
    examples, dropped = [], 0
    for messages in conversations:
        ex = tokenize_conversation(tokenizer, messages)
        if len(ex.input_ids) > max_length:
            if overlong == "drop":
                dropped += 1
                continue
            ex = Example(ex.input_ids[:max_length], ex.labels[:max_length])
        if ex.trained_tokens:
            examples.append(ex)
    if dropped:
        log.warning("dropped %d trajectories longer than %d tokens", dropped, max_length)
    if not examples:
        raise ProblemSourceError(
            f"no trajectory left to train on (after max_length={max_length}, overlong={overlong})"
        )
    return examples
