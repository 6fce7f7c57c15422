"""Prompts as editable templates (``string.Template``, ``$name`` placeholders).

The package ships ``templates/{system,first_turn,feedback_turn,triton_example}.txt``; point
``PromptTemplates.from_dir`` at a folder with any of these files to override them (missing files
fall back to the shipped ones). Placeholders:

    first_turn.txt     $problem_name $problem_level $problem_dtype $reference $tolerance $triton_example
                       ($example: the same text) $solution_contract (the gym's contract, rendered from
                       its one definition in `drkernel.gym.verdict.static.CONTRACT`, or for CUDA in
                       `drkernel.gym.cuda.contract`)
    feedback_turn.txt  $feedback $instruction

Language ``cuda`` ships its own ``templates/cuda/{system,first_turn,example}.txt`` (the example fills
the ``triton_example`` field); its feedback turn is the shared one.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template

from drkernel.agent.policies.base import Message
from drkernel.errors import ConfigError
from drkernel.gym.config import tolerance_for
from drkernel.gym.cuda.contract import contract_text as cuda_contract_text
from drkernel.gym.verdict.static import contract_text
from drkernel.problems.problem import Problem

TEMPLATE_FILES = ("system", "first_turn", "feedback_turn", "triton_example")
CUDA_FILES = {"system": "cuda/system", "first_turn": "cuda/first_turn", "triton_example": "cuda/example"}
"""Language ``cuda``: the shipped files that replace the Triton ones (by template field)."""


def _shipped(name: str, language: str = "triton") -> str:
    path = CUDA_FILES.get(name, name) if language == "cuda" else name
    return (resources.files("drkernel.agent") / "templates" / f"{path}.txt").read_text()


def _render(template: str, name: str, **values: str) -> str:
    try:
        return Template(template).substitute(**values)
    except (KeyError, ValueError) as e:
        raise ConfigError(f"prompt template {name}.txt: bad placeholder {e} (known: {sorted(values)})") from e


@dataclass(frozen=True)
class PromptTemplates:
    """The four template texts; ``system`` may be empty (no system message)."""

    system: str
    first_turn: str
    feedback_turn: str
    triton_example: str
    language: str = "triton"
    """Which contract ``$solution_contract`` renders: ``triton`` or ``cuda``."""

    @classmethod
    def default(cls, language: str = "triton") -> PromptTemplates:
        return cls(**{name: _shipped(name, language) for name in TEMPLATE_FILES}, language=language)

    @classmethod
    def from_dir(cls, path: str | Path, language: str = "triton") -> PromptTemplates:
        path = Path(path)
        if not path.is_dir():
            raise ConfigError(f"prompt template folder {path} does not exist")
        texts = {
            name: (path / f"{name}.txt").read_text() if (path / f"{name}.txt").exists()
            else _shipped(name, language)
            for name in TEMPLATE_FILES
        }
        return cls(**texts, language=language)

    def first_messages(self, problem: Problem, tolerance: str = "kernelgym") -> list[Message]:
        """System message (when the template is not empty) and the first user turn."""
        atol, rtol = tolerance_for(tolerance, problem.dtype)
        user = _render(
            self.first_turn,
            "first_turn",
            problem_name=problem.name,
            problem_level=str(problem.level),
            problem_dtype=problem.dtype,
            reference=problem.code.strip(),
            tolerance=f"atol = {atol:g}, rtol = {rtol:g}",
            triton_example=self.triton_example.strip(),
            example=self.triton_example.strip(),
            solution_contract=cuda_contract_text() if self.language == "cuda" else contract_text(),
        )
        messages: list[Message] = []
        if self.system.strip():
            messages.append({"role": "system", "content": self.system.strip()})
        messages.append({"role": "user", "content": user.strip()})
        return messages

    def feedback_message(self, feedback: str, instruction: str) -> Message:
        text = _render(
            self.feedback_turn, "feedback_turn", feedback=feedback.strip(), instruction=instruction
        )
        return {"role": "user", "content": text.strip()}
