"""Trajectories on disk: chat-format JSONL (appendable, so a benchmark can resume) and parquet.

One row per episode: ``messages`` (the whole dialogue in chat format, directly usable as SFT data),
``id``, ``problem_key``, ``level``, ``sample``, ``rewards`` and ``outcomes`` per turn, and ``episode``
(the full record: every turn's prompt context, response, code, `EvalResult`, reward and, when kept,
token ids and rollout log-probs).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from drkernel.agent.episode import Episode
from drkernel.errors import ProblemSourceError

log = logging.getLogger(__name__)


def episode_row(episode: Episode, tokens: bool = False) -> dict[str, Any]:
    return {
        "id": episode.id,
        "problem_key": episode.problem.key,
        "level": episode.problem.level,
        "sample": episode.sample,
        "messages": episode.conversation(),
        "rewards": [t.reward for t in episode.turns],
        "outcomes": [t.outcome for t in episode.turns],
        "episode": episode.to_dict(tokens),
    }


def _drop_torn_tail(path: Path) -> None:
    """Cut a last line left without its newline by an interrupted write, so appends start clean."""
    if not path.exists() or path.stat().st_size == 0:
        return
    data = path.read_bytes()
    if data.endswith(b"\n"):
        return
    keep = data.rfind(b"\n") + 1
    log.warning(
        "%s: dropping a torn last line (%d bytes) left by an interrupted write", path, len(data) - keep
    )
    with path.open("r+b") as f:
        f.truncate(keep)


class JsonlWriter:
    """Appends one episode per line and flushes, so a crash loses at most the line being written."""

    def __init__(self, path: str | Path, tokens: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tokens = tokens
        _drop_torn_tail(self.path)
        self._f = self.path.open("a")

    def write(self, episode: Episode) -> None:
        self._f.write(json.dumps(episode_row(episode, self.tokens)) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


def _jsonl_rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            if i == len(lines):
                log.warning("%s: ignoring a torn last line (an interrupted write)", path)
                continue
            raise ProblemSourceError(f"{path}:{i}: not JSON ({e.msg})") from e
    return rows


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a trajectory file (``.jsonl`` or ``.parquet``)."""
    path = Path(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return [{**r, "episode": json.loads(r["episode"])} for r in pq.read_table(path).to_pylist()]
    return _jsonl_rows(path)


def read_episodes(path: str | Path) -> list[Episode]:
    """Episodes of a trajectory file; a later row for the same id replaces an earlier one."""
    by_id = {r["id"]: Episode.from_dict(r["episode"]) for r in read_rows(path)}
    return list(by_id.values())


def finished_ids(path: str | Path) -> set[str]:
    path = Path(path)
    return {r["id"] for r in _jsonl_rows(path)} if path.exists() else set()


def write_parquet(episodes: Iterable[Episode], path: str | Path, tokens: bool = False) -> Path:
    """Write episodes as parquet: ``messages`` as a list of {role, content} structs, the full episode
    record as a JSON string column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = []
    for ep in episodes:
        row = episode_row(ep, tokens)
        row["messages"] = [{"role": m["role"], "content": m["content"]} for m in row["messages"]]
        row["episode"] = json.dumps(row["episode"])
        rows.append(row)
    schema = pa.schema(
        [
            ("id", pa.string()),
            ("problem_key", pa.string()),
            ("level", pa.int64()),
            ("sample", pa.int64()),
            ("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
            ("rewards", pa.list_(pa.float64())),
            ("outcomes", pa.list_(pa.string())),
            ("episode", pa.string()),
        ]
    )
    path = Path(path)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path
