"""The scorecard: an attack corpus and an honest corpus through the real evaluator, scored.

A corpus is a folder laid out as ``tests/adversarial`` is: ``problems/<name>.py`` (KernelBench-style
references), ``hacked/*.py`` and ``honest/*.py`` (solutions). Each solution names its problem in a
header line (``# problem: softmax``); an attack names the hack codes that count as catching it
(``# expect: 7|14``, ``0`` meaning that a failed correctness trial catches it) and its family is the
first code. An optional ``# tolerance:`` names the tolerance profile.

    recall(family)      = caught attacks of the family / attacks of the family
    false_positive_rate = honest solutions not accepted / honest solutions

An attack is *caught* when neither verdict (lenient, strict) accepts it; an honest solution is
*accepted* when it is correct and valid in every verdict, with no hack. Run with
``drkernel gym scorecard [CORPUS] --device cpu|cuda``; it prints the table as markdown and writes
JSON with ``--json``.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import platform
import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from drkernel.gym.verdict.hacks import CATALOGUE

NOT_CORRECT = 0
"""In ``# expect:``: a failed correctness trial catches the attack."""


@dataclass(frozen=True)
class Entry:
    """One solution of a corpus."""

    path: Path
    kind: str                 # "hacked" or "honest"
    problem: str
    expect: tuple[int, ...]   # acceptable hack codes (attacks); () for honest solutions
    tolerance: str

    @property
    def family(self) -> int:
        return self.expect[0] if self.expect else -1


@dataclass(frozen=True)
class Outcome:
    """What the evaluator said about one entry."""

    id: str
    kind: str
    family: int
    passed: bool              # attack: caught; honest: accepted
    status: str
    hacks: tuple[int, ...]


@dataclass
class Scorecard:
    device: str
    date: str
    outcomes: list[Outcome] = field(default_factory=list)

    def recall(self) -> dict[int, tuple[int, int]]:
        """family -> (caught, attacks)."""
        out: dict[int, list[int]] = defaultdict(lambda: [0, 0])
        for o in self.outcomes:
            if o.kind == "hacked":
                out[o.family][0] += o.passed
                out[o.family][1] += 1
        return {k: (v[0], v[1]) for k, v in sorted(out.items())}

    def false_positives(self) -> tuple[int, int]:
        honest = [o for o in self.outcomes if o.kind == "honest"]
        return sum(not o.passed for o in honest), len(honest)

    def to_json(self) -> str:
        fp, honest = self.false_positives()
        return json.dumps({"device": self.device, "date": self.date,
                           "recall": {str(k): {"caught": c, "attacks": n} for k, (c, n) in self.recall().items()},
                           "false_positives": fp, "honest": honest,
                           "outcomes": [asdict(o) for o in self.outcomes]}, indent=1)

    def markdown(self) -> str:
        rows = ["| family | hack | caught | recall |", "|---:|---|---:|---:|"]
        caught_all = attacks_all = 0
        for family, (caught, attacks) in self.recall().items():
            name = CATALOGUE[family].name if family in CATALOGUE else "not correct"
            rows.append(f"| {family} | {name} | {caught}/{attacks} | {caught / attacks:.0%} |")
            caught_all, attacks_all = caught_all + caught, attacks_all + attacks
        if attacks_all:
            rows.append(f"| all | | {caught_all}/{attacks_all} | {caught_all / attacks_all:.1%} |")
        fp, honest = self.false_positives()
        rate = f"{fp / honest:.1%}" if honest else "n/a"
        missed = [o.id for o in self.outcomes if not o.passed]
        return "\n".join([f"Scorecard on {self.device}, {self.date}", "", *rows, "",
                          f"Honest solutions not accepted: {fp}/{honest} (false-positive rate {rate})",
                          *([f"Not passed: {', '.join(missed)}"] if missed else [])])


def _header(text: str, key: str) -> str | None:
    m = re.search(rf"^# {key}: ([\w|]+)$", text, re.M)
    return m.group(1) if m else None


def load(root: Path, kinds: Sequence[str] = ("hacked", "honest"), match: str = "") -> list[Entry]:
    """The entries of a corpus folder (see the module docstring); ``match``: a substring of the id."""
    out = []
    for kind in kinds:
        for path in sorted((root / kind).glob("*.py")):
            text = path.read_text()
            expect = _header(text, "expect")
            entry = Entry(path, kind, _header(text, "problem") or "",
                          tuple(int(c) for c in expect.split("|")) if expect else (),
                          _header(text, "tolerance") or "kernelgym")
            if match in f"{kind}/{path.stem}":
                out.append(entry)
    return out


def _judged(entry: Entry, result) -> Outcome:  # noqa: ANN001 - an EvalResult
    codes = tuple(sorted({h.code for h in result.hacks if not h.strict_only}))
    if entry.kind == "hacked":
        passed = not result.valid and not result.valid_lenient
    else:
        passed = bool(result.valid and result.valid_lenient and result.valid_strict and not result.hacks)
    return Outcome(f"{entry.kind}/{entry.path.stem}", entry.kind, entry.family, passed, result.status.value, codes)


def run(root: Path, device: str = "cpu", trials: int = 3, concurrency: int = 2, match: str = "",
        progress: Callable[[Outcome, int, int], None] | None = None) -> Scorecard:
    """Evaluate every entry of the corpus at ``root`` on ``device`` and score the verdicts;
    ``progress(outcome, done, total)`` is called as each entry's verdict arrives (a corpus takes
    minutes: a run cut short still shows what it judged)."""
    from drkernel.gym import EvalConfig, EvalRequest
    from drkernel.gym.checks import default_checks
    from drkernel.gym.orchestrator.evaluator import InProcessEvaluator
    from drkernel.problems.problem import Problem

    entries = load(root, match=match)
    requests = [EvalRequest(Problem(name=e.problem, level=1, code=(root / "problems" / f"{e.problem}.py").read_text(),
                                    source="file"), e.path.read_text(),
                            EvalConfig(device=device, trials=trials, tolerance=e.tolerance),
                            request_id=f"{e.kind}/{e.path.stem}") for e in entries]
    with InProcessEvaluator(device=device, concurrency=concurrency, pool_size=concurrency,
                            checks=default_checks()) as ev:
        results = asyncio.run(_judge_all(ev, entries, requests, progress))
    card = Scorecard(device=_device_name(device, results), date=datetime.date.today().isoformat())
    card.outcomes = [_judged(e, r) for e, r in zip(entries, results)]
    return card


async def _judge_all(ev: Any, entries: list[Entry], requests: list[Any],
                     progress: Callable[[Outcome, int, int], None] | None) -> list[Any]:
    """Every request evaluated (the evaluator bounds how many at once), in entry order; ``progress``
    told of each as it finishes."""
    async def one(i: int) -> tuple[int, Any]:
        return i, await asyncio.to_thread(ev.evaluate, requests[i])

    results: list[Any] = [None] * len(requests)
    for done, task in enumerate(asyncio.as_completed([one(i) for i in range(len(requests))]), start=1):
        i, result = await task
        results[i] = result
        if progress is not None:
            progress(_judged(entries[i], result), done, len(requests))
    return results


def _device_name(device: str, results: list) -> str:
    """The judge's name for the device (this process stays torch-free: torch imported here, after
    the evaluator's children, has crashed on a GPU host)."""
    if device.startswith("cuda"):
        return next((r.device_name for r in results if getattr(r, "device_name", None)), device)
    return f"CPU ({platform.processor() or platform.machine()}, Triton interpreter)"
