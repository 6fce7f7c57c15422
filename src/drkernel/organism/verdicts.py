"""The organism's verdict cache: gym verdicts by request content and by the checks that judged them,
shared by the runs of a suite and, through a JSON-lines file, by runs in other processes (the claims
runner's parallel runs claim each new program so it is judged once for all of them)."""

from __future__ import annotations

import fcntl
import json
import logging
import time
from enum import Enum
from pathlib import Path
from typing import IO, Iterable, Sequence

from drkernel.gym.config import EvalConfig, EvalRequest
from drkernel.gym.protocol import Evaluator
from drkernel.gym.result import EvalResult
from drkernel.organism.turns import DeviceTurns
from drkernel.problems.problem import Problem

log = logging.getLogger(__name__)


class Checks(str, Enum):
    """Which of the gym's check registries judged a verdict (part of the cache key)."""

    FULL = "full"    # `drkernel.gym.checks.default_checks`: the trust boundary plus the integrity checks
    CORE = "core"    # `drkernel.gym.checks.core_checks`: launch recording and input mutation only


class EvalCache:
    """Gym verdicts by request content (problem, solution source, config: `EvalRequest.content_hash`)
    and by the checks that judged them (a full-checks key is the bare content hash, as before there
    were two; a core-checks key is prefixed ``core:``).

    Shared by the runs of a suite; with a ``path`` (JSON lines) it also carries over between processes,
    so the arms run as separate GPU sections still judge each program once and see one measurement.
    With ``turns`` (runs in parallel processes on one GPU, `drkernel.organism.turns`) a batch of new
    programs is judged under the run's shared turn (the gym's timed regions take the exclusive one
    themselves, through the evaluator's ``device_lock``), and each new program is first *claimed*: an
    exclusive ``flock`` on a file named by its key, taken without waiting. A run judges the programs it
    claimed, appends their verdicts (under a lock on the verdict file) and only then drops its claims;
    a program another run has claimed it waits for (its own turn given up meanwhile) and reads from
    the file. After taking a claim a run reads the file again, so a program is judged once for all
    runs and every run uses the first verdict written for it; a claim of a killed run lapses with it.
    """

    def __init__(self, path: Path | None = None, turns: DeviceTurns | None = None) -> None:
        self.results: dict[str, EvalResult] = {}
        self.evaluations = 0
        self.seconds = 0.0
        self.waited_s = 0.0
        """Seconds spent waiting for programs other runs were judging."""
        self.stage_seconds: dict[str, float] = {}
        """The gym's own stage seconds (`EvalResult.stage_seconds`) summed over this cache's evaluations."""
        self.path = path
        self.turns = turns
        self._offset = 0
        self._refresh()

    def _refresh(self) -> None:
        """Read the file's complete lines past what was read before (a torn last line waits); the first
        verdict of a key wins."""
        if self.path is None or not self.path.exists():
            return
        with self.path.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self._offset += end
        for line in data[:end].decode().splitlines():
            try:
                row = json.loads(line)
                self.results.setdefault(row["key"], EvalResult.from_dict(row["result"]))
            except (ValueError, KeyError, TypeError):
                log.warning("skipping an unreadable line of %s", self.path)  # a torn line of a killed run

    async def judge(self, evaluator: Evaluator, config: EvalConfig, jobs: Sequence[tuple[Problem, str]],
                    checks: Checks = Checks.FULL) -> list[EvalResult]:
        """The verdicts of ``jobs`` by ``evaluator``, which must run the registry ``checks`` names."""
        requests = [EvalRequest(p, src, config) for p, src in jobs]
        prefix = "" if checks is Checks.FULL else f"{checks.value}:"
        keys = [prefix + r.content_hash() for r in requests]
        if any(k not in self.results for k in keys):
            self._refresh()
            todo = {k: r for k, r in zip(keys, requests) if k not in self.results}
            if self.turns is None:
                await self._evaluate(evaluator, todo)
            else:
                await self._evaluate_claimed(evaluator, todo, self.turns)
        return [self.results[k] for k in keys]

    async def _evaluate_claimed(self, evaluator: Evaluator, todo: dict[str, EvalRequest],
                                turns: DeviceTurns) -> None:
        """Judge what this run can claim, then wait for the rest (see the class docstring); again for a
        program whose claimer died before writing its verdict."""
        while todo:
            claims = _Claims(self.path.with_name(self.path.name + ".claims") if self.path else None)
            try:
                theirs = claims.take(todo)
                self._refresh()  # a claim taken after its verdict was written: nothing to do
                with turns.shared():
                    await self._evaluate(evaluator, {k: r for k, r in todo.items()
                                                     if k not in theirs and k not in self.results})
            finally:
                claims.drop()
            if theirs:
                t0 = time.monotonic()
                with turns.released():
                    _Claims.wait(claims.folder, theirs)
                self.waited_s += time.monotonic() - t0
                self._refresh()
            todo = {k: r for k, r in todo.items() if k not in self.results}

    async def _evaluate(self, evaluator: Evaluator, todo: dict[str, EvalRequest]) -> None:
        if not todo:
            return
        t0 = time.monotonic()
        results = await evaluator.evaluate_batch(list(todo.values()))
        self.seconds += time.monotonic() - t0
        self.evaluations += len(todo)
        for result in results:
            for name, seconds in result.stage_seconds.items():
                self.stage_seconds[name] = self.stage_seconds.get(name, 0.0) + seconds
        mine = dict(zip(todo, results))
        if self.path is None:
            self.results.update(mine)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)  # lines of runs appending at once never interleave
            self._refresh()
            new = {k: r for k, r in mine.items() if k not in self.results}  # the first verdict wins
            f.write("".join(json.dumps({"key": k, "result": r.to_dict()}) + "\n" for k, r in new.items()))
            f.flush()
            self.results.update(new)
            self._offset = f.tell()  # nobody appended since _refresh: the lock is held


class _Claims:
    """Exclusive ``flock`` claims on programs being judged, one file per key in ``folder``."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self._held: dict[str, IO[str]] = {}

    def take(self, keys: Iterable[str]) -> set[str]:
        """Claim every key that nobody holds; returns the keys another run holds."""
        if self.folder is None:
            return set()
        self.folder.mkdir(parents=True, exist_ok=True)
        theirs = set()
        for key in keys:
            f = (self.folder / key).open("a")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.close()
                theirs.add(key)
                continue
            self._held[key] = f
        return theirs

    def drop(self) -> None:
        """Release the claims (after their verdicts are written); their files go too."""
        for key, f in self._held.items():
            (self.folder / key).unlink(missing_ok=True)  # type: ignore[operator]
            f.close()
        self._held.clear()

    @staticmethod
    def wait(folder: Path | None, keys: Iterable[str]) -> None:
        """Until no run holds a claim on ``keys`` (written, or its run died)."""
        for key in keys if folder is not None else ():
            try:
                f = (folder / key).open("r")
            except FileNotFoundError:
                continue  # already dropped
            with f:
                fcntl.flock(f, fcntl.LOCK_SH)
