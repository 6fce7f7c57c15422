"""Provenance: what a result's numbers depend on, read where it can be (torch-free).

The orchestrator fills `drkernel.gym.result.Provenance` for every result: the judge's device,
versions and backend flags, the request's hashes and the revealed seed plan, and on a GPU the
driver and the clocks before the solution ran and after the last timing, from ``nvidia-smi`` when
it answers (a field it cannot read stays None). `differences` names the fields two results
disagree on, for `drkernel.gym.replay`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import subprocess
from collections.abc import Mapping
from typing import Any

import drkernel
from drkernel.gym.precision import BASELINE
from drkernel.gym.result import Provenance

log = logging.getLogger(__name__)

SMI_TIMEOUT_S = 5.0
CLOCK_QUERIES = (
    ("clocks.sm", "clocks.mem", "clocks_event_reasons.applications_clocks_setting", "driver_version"),
    ("clocks.sm", "clocks.mem", "clocks_throttle_reasons.applications_clocks_setting", "driver_version"),
)
"""The clocks now, whether the application-clocks setting (``nvidia-smi -ac``/``-lgc``) holds them,
and the driver; the second spelling is the one drivers before 535 know."""
IGNORED = frozenset({"clocks_start", "clocks_end", "seeds", "solution_flags"})
"""Fields that differ between honest re-runs (clocks drift, seeds are fresh per evaluation, a failed
candidate reports no flags): `differences` leaves them out."""


def config_hash(config: Mapping[str, Any]) -> str:
    """sha256 of a config dict's sorted JSON."""
    return hashlib.sha256(json.dumps(dict(config), sort_keys=True, default=str).encode()).hexdigest()


def physical_index(device: str) -> int | None:
    """The ``nvidia-smi`` index of ``cuda:N`` (through ``CUDA_VISIBLE_DEVICES`` when it lists indices)."""
    if not device.startswith("cuda"):
        return None
    index = int(device.partition(":")[2] or 0)
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if visible:
        if index >= len(visible) or not visible[index].isdigit():
            return None
        return int(visible[index])
    return index


def read_clocks(device: str) -> dict[str, Any] | None:
    """``{"sm_mhz", "mem_mhz", "locked", "driver"}`` of ``device`` from nvidia-smi; None when it is
    absent, fails, or ``device`` is not a GPU. A value nvidia-smi does not support is None."""
    index = physical_index(device)
    smi = shutil.which("nvidia-smi")
    if index is None or smi is None:
        return None
    for query in CLOCK_QUERIES:
        try:
            out = subprocess.run([smi, f"--id={index}", f"--query-gpu={','.join(query)}",
                                  "--format=csv,noheader,nounits"], capture_output=True, text=True,
                                 timeout=SMI_TIMEOUT_S, check=True).stdout
        except (OSError, subprocess.SubprocessError) as e:
            log.debug("nvidia-smi could not read %s's clocks: %s", device, e)
            continue
        return parse_clocks(out)
    return None


def parse_clocks(line: str) -> dict[str, Any] | None:
    """One CSV line of a `CLOCK_QUERIES` answer, e.g. ``1980, 2619, Not Active, 550.54.15``."""
    parts = [p.strip() for p in line.strip().splitlines()[0].split(",")] if line.strip() else []
    if len(parts) != 4:
        return None

    def number(text: str) -> float | None:
        try:
            return float(text)
        except ValueError:
            return None

    locked = {"active": True, "not active": False}.get(parts[2].lower())
    return {"sm_mhz": number(parts[0]), "mem_mhz": number(parts[1]), "locked": locked,
            "driver": parts[3] if parts[3] and "not supported" not in parts[3].lower() else None}


def build(*, device_name: str, versions: Mapping[str, str], reference_mode: str,
          reference_flags: Mapping[str, Any], solution_flags: Mapping[str, Any] | None, tolerance_profile: str,
          config: Mapping[str, Any], problem_hash: str, solution_hash: str, seeds: Mapping[str, Any] | None,
          clocks_start: Mapping[str, Any] | None, clocks_end: Mapping[str, Any] | None) -> Provenance:
    """One result's `Provenance` from what the orchestrator holds (clocks: `read_clocks` answers;
    seeds as JSON has them, so a result read back equals the one returned)."""
    clocks = [c for c in (clocks_start, clocks_end) if c]
    locked = [c["locked"] for c in clocks if c.get("locked") is not None]
    return Provenance(
        gpu_model=device_name, driver_version=next((c["driver"] for c in clocks if c.get("driver")), None),
        cuda_version=versions.get("cuda"), clocks_start=_mhz(clocks_start), clocks_end=_mhz(clocks_end),
        clocks_locked=all(locked) if locked else None, torch_version=versions.get("torch", ""),
        triton_version=versions.get("triton", ""), drkernel_version=drkernel.__version__,
        reference_mode=reference_mode, precision=BASELINE, reference_flags=dict(reference_flags),
        solution_flags=None if solution_flags is None else dict(solution_flags),
        tolerance_profile=tolerance_profile, config_hash=config_hash(config), problem_hash=problem_hash,
        solution_hash=solution_hash, seeds=None if seeds is None else json.loads(json.dumps(dict(seeds))))


def _mhz(clocks: Mapping[str, Any] | None) -> dict[str, float] | None:
    if not clocks:
        return None
    return {k: float(clocks[k]) for k in ("sm_mhz", "mem_mhz") if clocks.get(k) is not None}


def differences(a: Provenance | None, b: Provenance | None) -> list[str]:
    """``field: a -> b`` for each provenance field the two disagree on (backend flags one by one),
    leaving out `IGNORED`; a missing provenance (a v1 result) is one difference."""
    if a is None or b is None:
        return [] if a is b else ["provenance: missing on one side"]
    out = []
    for f in dataclasses.fields(Provenance):
        if f.name in IGNORED:
            continue
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, dict) and isinstance(y, dict):
            out += [f"{f.name}.{k}: {x.get(k)!r} -> {y.get(k)!r}" for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k)]
        elif x != y:
            out.append(f"{f.name}: {x!r} -> {y!r}")
    return out
