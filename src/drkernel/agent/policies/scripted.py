"""A policy that replays given responses (tests, demos, reproducing a run).

Scripts are keyed by a marker, a string looked for in the conversation's first user message (the
problem's reference source works well: the first-turn prompt contains it verbatim). Each key holds
one or more *variants*, each a list of responses by turn. A new conversation (no assistant message
yet) takes the variants round-robin; a later turn finds the variant whose response matches the last
assistant message and replies with that variant's next response (the last one repeats). This works
with any history mode and with test-time scaling windows.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from drkernel.agent.policies.base import Completion, Message, SamplingParams
from drkernel.errors import ConfigError
from drkernel.problems.problem import Problem


class ScriptedPolicy:
    """Replays scripts; ``calls`` records every message list it was given."""

    name = "scripted"

    def __init__(self, scripts: Mapping[str, Sequence[Sequence[str]]], default: Sequence[str] = ()) -> None:
        for marker, variants in scripts.items():
            if not variants or any(not v for v in variants):
                raise ConfigError(f"scripted policy: script {marker[:40]!r} has an empty variant")
        self._scripts = {m: [list(v) for v in vs] for m, vs in scripts.items()}
        self._default = list(default)
        self._counters = {m: itertools.count() for m in self._scripts}
        self.calls: list[list[Message]] = []

    @classmethod
    def for_problems(
        cls, scripts: Sequence[tuple[Problem, Sequence[Sequence[str]]]], default: Sequence[str] = ()
    ) -> ScriptedPolicy:
        """Scripts as (problem, variants) pairs, matched through the reference source in the prompt."""
        return cls({p.code.strip(): v for p, v in scripts}, default)

    @classmethod
    def from_jsonl(cls, path: str | Path, problems: Sequence[Problem]) -> ScriptedPolicy:
        """Lines ``{"problem": <key, name or id>, "responses": [...]}`` (or ``"variants": [[...], ...]``)."""
        from drkernel.problems.loaders import find_problem

        scripts: dict[str, tuple[Problem, list[list[str]]]] = {}
        for i, line in enumerate(Path(path).read_text().splitlines(), 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if "problem" not in row or not ("responses" in row or "variants" in row):
                raise ConfigError(f"{path}:{i}: need 'problem' and 'responses' (or 'variants')")
            variants = row.get("variants") or [row["responses"]]
            problem = find_problem(problems, str(row["problem"]))
            scripts.setdefault(problem.key, (problem, []))[1].extend(variants)
        return cls.for_problems(list(scripts.values()))

    def _reply(self, messages: Sequence[Message]) -> str:
        first_user = next((m["content"] for m in messages if m["role"] == "user"), "")
        matches = [m for m in self._scripts if m in first_user]
        if not matches:
            if not self._default:
                raise ConfigError(
                    "scripted policy: no script matches this conversation and there is no default"
                )
            variants, marker = [self._default], None
        else:
            marker = max(matches, key=len)
            variants = self._scripts[marker]
        assistant = [m["content"] for m in messages if m["role"] == "assistant"]
        if not assistant:
            k = next(self._counters[marker]) if marker is not None else 0
            return variants[k % len(variants)][0]
        last = assistant[-1].strip()
        for variant in variants:
            stripped = [r.strip() for r in variant]
            if last in stripped:
                return variant[min(stripped.index(last) + 1, len(variant) - 1)]
        return variants[0][-1]

    async def generate(self, batch: Sequence[Sequence[Message]], params: SamplingParams) -> list[Completion]:
        out = []
        for messages in batch:
            self.calls.append([dict(m) for m in messages])
            out.append(Completion(text=self._reply(messages), finish_reason="stop"))
        return out

    async def aclose(self) -> None:
        return None


def builtin_script(problem: Problem, order: Sequence[str] = ("broken", "lazy", "gold"),
                   language: str = "triton") -> list[str]:
    """Responses replaying a built-in problem's solution files in label order (e.g. broken -> lazy
    -> gold), each wrapped in the answer format; labels the problem lacks are skipped. ``language``
    ``cuda``: its CUDA solutions (`drkernel.problems.builtin_cuda`)."""
    from drkernel.problems.builtin_cuda import cuda_solution, cuda_solutions
    from drkernel.problems.loaders import builtin_solution

    cuda = language == "cuda"
    sols = cuda_solutions(problem) if cuda else problem.metadata.get("solutions", {})
    read = cuda_solution if cuda else builtin_solution
    out = []
    for label in order:
        files = sorted(f for f, lab in sols.items() if lab == label)
        if files:
            out.append(f"<answer>\n```python\n{read(problem, files[0]).strip()}\n```\n</answer>")
    if not out:
        raise ConfigError(f"{problem.key} has no solution files labelled {list(order)}")
    return out
