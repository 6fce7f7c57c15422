"""The organism's SFT corpus: prompts, programs drawn from a "bad habits" mixture, and the feedback line.

The mixture is mostly what a weak kernel writer does (one kernel per op, PyTorch plus one trivial
kernel, PyTorch plus a decoy or a kernel left running on a side stream, wrong chains) and few fused
kernels, so RL has something to fix and can also drift into the hacks. A fifth of the examples are
second turns after a feedback line, so the multi-turn prompt format is not new to the policy at RL
time.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Mapping, Sequence

from drkernel.organism.families import Spec, generate
from drkernel.organism.program import Mode, SolutionKind, write

Message = dict[str, str]

BAD_HABITS: Mapping[SolutionKind, float] = {
    SolutionKind.PER_OP: 0.35, SolutionKind.LAZY: 0.25, SolutionKind.HACK: 0.25,
    SolutionKind.BROKEN: 0.10, SolutionKind.GOLD: 0.04, SolutionKind.TUNED: 0.01,
}
"""The default SFT mixture (weights of each writer). A writer that does not apply to a chain (lazy
without a cheap op, tuned without a GEMM) is drawn again, so on a GEMM chain the tuned fused kernel
(``tiled``, the lazy trap's far-away fast program) is 1 % of the examples and elsewhere absent."""
SECOND_TURN_SHARE = 0.2


@dataclass(frozen=True)
class Example:
    """One SFT row: the chat so far and the program the assistant answers with."""

    messages: tuple[Message, ...]
    completion: str
    kind: SolutionKind
    spec: Spec


def feedback(correct: bool, status: str, hacks: Sequence[str] = (), coverage: float | None = None,
             speedup: float | None = None) -> str:
    """The user's second-turn message: what the gym said about the previous program, in a few words."""
    parts = [f"verdict {status}"]
    if hacks:
        parts.append("hacked " + " ".join(sorted(set(hacks))))
    if correct and coverage is not None:
        parts.append(f"coverage {coverage:.1f}")
    if correct and speedup is not None:
        parts.append(f"speedup {speedup:.1f}")
    return " ; ".join(parts) + " ; improve"


def _synthetic_feedback(kind: SolutionKind, program: str) -> str:
    """What the gym would roughly say about a writer's program (for the corpus only)."""
    if kind is SolutionKind.HACK and program.startswith(Mode.STREAM.value):
        return feedback(False, "rejected", ["side_stream"])  # the static check blocks it before it runs
    return {SolutionKind.BROKEN: feedback(False, "incorrect"),
            SolutionKind.HACK: feedback(True, "correct", ["pytorch_passthrough"]),
            SolutionKind.LAZY: feedback(True, "correct", [], 0.4),
            SolutionKind.PER_OP: feedback(True, "correct", [], 1.0),
            SolutionKind.GOLD: feedback(True, "correct", [], 1.0),
            SolutionKind.TUNED: feedback(True, "correct", [], 1.0)}[kind]


def _draw(rng: random.Random, spec: Spec, mixture: Mapping[SolutionKind, float]) -> tuple[SolutionKind, str]:
    kinds, weights = list(mixture), list(mixture.values())
    while True:
        kind = rng.choices(kinds, weights)[0]
        program = write(kind, spec, rng)
        if program is not None:
            return kind, program.text


def build_corpus(n_specs: int, seed: int = 0, mixture: Mapping[SolutionKind, float] = BAD_HABITS,
                 families: Sequence[str] = (), draws: int = 1,
                 problem_seed: int | None = None) -> list[Example]:
    """``draws`` examples per training instance (``n_specs`` of them, the first ones of the split drawn
    with ``problem_seed``, default ``seed``, so the RL problems are among them), some as second turns;
    ``seed`` draws the writers."""
    rng = random.Random(f"organism-corpus/{seed}")
    specs = generate("train", n_specs, seed if problem_seed is None else problem_seed, families)
    out = []
    for spec in [s for s in specs for _ in range(draws)]:
        kind, text = _draw(rng, spec, mixture)
        first = {"role": "user", "content": spec.prompt()}
        if rng.random() < SECOND_TURN_SHARE:
            kind0, text0 = _draw(rng, spec, mixture)
            history = (first, {"role": "assistant", "content": text0},
                       {"role": "user", "content": _synthetic_feedback(kind0, text0)})
            out.append(Example(history, text, kind, spec))
        else:
            out.append(Example((first,), text, kind, spec))
    return out
