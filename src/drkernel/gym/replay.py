"""Replay: evaluate again what results name, and say whether the numbers agree.

A result is replayable with the request that made it: a JSON file ``{"request": EvalRequest,
"result": EvalResult}`` (`record_json`, or a list of such), or a benchmark's run folder (or its
``trajectories.jsonl``/``.parquet``), whose every evaluated turn holds its problem, code, config
and result. Each request is evaluated again with the config its result records, on the inputs its
result's revealed seeds name (fresh ones with ``same_inputs=False``), and compared (`agreement`):

    same class   `verdict_class` equal: the status, and for a correct solution valid or hacked
    speedup      when both runs timed it: their intervals overlap (each is an interval for the same
                 true speedup; a point outside the other's interval alone is what noise gives one
                 time in twenty at 95 %), or without intervals the replayed point equals the original
    provenance   every field that differs (`drkernel.gym.provenance.differences`): a replay on
                 another GPU, driver, library version or precision says which
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from drkernel.gym.config import EvalConfig, EvalRequest
from drkernel.gym.protocol import Evaluator
from drkernel.gym.provenance import differences
from drkernel.gym.result import EvalResult, Status
from drkernel.gym.seeds import SeedPlan


@dataclass(frozen=True)
class Record:
    """A request and the result it got."""

    request: EvalRequest
    result: EvalResult

    @property
    def key(self) -> str:
        return self.request.request_id or self.request.problem.key


def record_json(request: EvalRequest, result: EvalResult) -> dict[str, Any]:
    """The replayable form of one evaluation (what `load` reads back)."""
    return {"request": request.to_dict(), "result": result.to_dict()}


def load(path: str | Path) -> list[Record]:
    """The records in a replay file, a trajectory file or a run folder (module docstring)."""
    path = Path(path)
    if path.is_dir():
        found = [path / n for n in ("trajectories.jsonl", "trajectories.parquet") if (path / n).exists()]
        if not found:
            raise FileNotFoundError(f"{path}: no trajectories.jsonl or trajectories.parquet in the run folder")
        return _from_trajectories(found[0])
    if path.suffix in (".jsonl", ".parquet"):
        return _from_trajectories(path)
    data = json.loads(path.read_text())
    rows = data if isinstance(data, list) else [data]
    return [Record(EvalRequest.from_dict(r["request"]), EvalResult.from_dict(r["result"])) for r in rows]


def _from_trajectories(path: Path) -> list[Record]:
    from drkernel.bench.io import read_episodes  # the benchmark's reader; the gym itself does not need it

    records = []
    for episode in read_episodes(path):
        for turn in episode.turns:
            if turn.code is None or turn.result is None:
                continue
            config = EvalConfig.from_dict(turn.result.config) if turn.result.config else EvalConfig()
            request = EvalRequest(episode.problem, turn.code, config, f"{episode.id}/t{turn.index}")
            records.append(Record(request, turn.result))
    return records


def verdict_class(r: EvalResult) -> str:
    """``valid``/``hacked`` for a correct solution, else its status."""
    if r.status is Status.CORRECT:
        return "valid" if r.valid else "hacked"
    return r.status.value


@dataclass(frozen=True)
class Agreement:
    """How a replay compares with the original result."""

    key: str
    original: str                       # verdict classes
    replayed: str
    speedups: tuple[float | None, float | None] = (None, None)
    speedup_agrees: bool | None = None  # None: not timed on both runs
    provenance: tuple[str, ...] = field(default_factory=tuple)

    @property
    def same_class(self) -> bool:
        return self.original == self.replayed

    @property
    def agrees(self) -> bool:
        return self.same_class and self.speedup_agrees is not False

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "original": self.original, "replayed": self.replayed,
                "same_class": self.same_class, "speedups": list(self.speedups),
                "speedup_agrees": self.speedup_agrees, "provenance": list(self.provenance), "agrees": self.agrees}


def speedups_agree(a: EvalResult, b: EvalResult) -> bool | None:
    """Whether two runs' speedups agree (module docstring); None unless both measured one."""
    if a.speedup is None or b.speedup is None:
        return None
    if a.speedup_ci is None or b.speedup_ci is None:
        return a.speedup == b.speedup
    return a.speedup_ci[0] <= b.speedup_ci[1] and b.speedup_ci[0] <= a.speedup_ci[1]


def agreement(key: str, original: EvalResult, replayed: EvalResult) -> Agreement:
    return Agreement(key, verdict_class(original), verdict_class(replayed), (original.speedup, replayed.speedup),
                     speedups_agree(original, replayed), tuple(differences(original.provenance, replayed.provenance)))


def replayed_request(record: Record, same_inputs: bool = True) -> EvalRequest:
    """The record's request, on the inputs its result's revealed seeds name (``same_inputs``) or on
    fresh ones: the timed calls' secret distribution is one of several, and a speedup can move with it
    (measured on an H100: a cumsum kernel 2.20x on one draw, 1.67x on another), which is the inputs,
    not the measurement."""
    seeds = record.result.provenance.seeds if record.result.provenance is not None else None
    if not same_inputs or not seeds:
        return record.request
    return replace(record.request, seed_plan=SeedPlan.from_dict(dict(seeds)))


async def replay(records: Sequence[Record], evaluator: Evaluator, same_inputs: bool = True) -> list[Agreement]:
    """Evaluate every record's request again and compare, in record order."""
    results = await evaluator.evaluate_batch([replayed_request(r, same_inputs) for r in records])
    return [agreement(rec.key, rec.result, new) for rec, new in zip(records, results)]
