"""One candidate's run, seen from the orchestrator: hand it the job, relay its exported outputs to
the judge, grant the exclusive timing region, enforce the wall-clock and memory limits, and
collect what happened. Nothing the candidate sends is unpickled; headers are validated JSON.
"""

from __future__ import annotations

import math
import os
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

from drkernel.gym.ipc import ChannelClosed, ChannelTimeout, ProtocolViolation
from drkernel.gym.memory import RssWatch
from drkernel.gym.plausibility import suspicious, tree_bytes
from drkernel.gym.runtime import DeviceRuntime

KILL_GRACE_S = 2.0


@dataclass
class SessionOutcome:
    trials: list[dict[str, Any]] = field(default_factory=list)   # judge verdicts, in trial order
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)  # tag -> judge verdict
    error: dict[str, Any] | None = None         # the candidate's error report
    done: dict[str, Any] | None = None          # the candidate's final report
    hook_extra: dict[str, Any] = field(default_factory=dict)  # hook name -> extra_runs result (claims)
    sol_timing: dict[str, Any] | None = None    # claimed by the candidate
    sol_timing_sync: dict[str, Any] | None = None  # the re-measurement asked for by `plausibility`
    sol_wall_s: float | None = None             # measured here around the timed region
    out_bytes: int = 0                          # of the first trial's outputs, from their encoded tree
    timed_out: bool = False
    died: bool = False
    oom: bool = False
    violation: str | None = None
    ipc_fallback: str | None = None             # why outputs went as host bytes instead of CUDA IPC
    returncode: int | None = None
    log_tail: str = ""
    solution_path: str | None = None
    child_start_s: float | None = None
    child_wait_s: float = 0.0
    lock_wait_s: float = 0.0
    wall_s: float = 0.0
    exit_s: float = 0.0                         # the candidate's exit, after its last message
    release_s: float = 0.0                      # the judge freeing the job's tensors


class CandidateSession:
    def __init__(self, runtime: DeviceRuntime, job: dict[str, Any], job_id: str, profile: str,
                 weight_seed: int, timeout_s: float, rss_limit_bytes: int) -> None:
        self.rt = runtime
        self.job = job
        self.job_id = job_id
        self.profile = profile
        self.weight_seed = weight_seed
        self.timeout_s = timeout_s
        self.rss_limit = rss_limit_bytes
        self.out = SessionOutcome()
        self.hold: str | None = None

    def run(self) -> SessionOutcome:
        t = time.monotonic()
        assert self.rt.pool is not None
        child = self.rt.pool.take()
        self.out.child_wait_s = time.monotonic() - t
        self.out.child_start_s = child.start_s
        started = time.monotonic()
        # the solution file lives in the child's private dir (its own tmpfs under the sandbox)
        self.job = {**self.job, "workdir": os.path.join(child.private_dir, "solution")}
        self._acquire("shared")
        try:
            with RssWatch(child.pid, self.rss_limit) as watch:
                self._converse(child, started)
            self.out.oom = watch.fired
        finally:
            # The candidate's exit (its CUDA context torn down) and the judge freeing the job's tensors
            # still hold the device (shared, or exclusive when a timed region broke off), so neither
            # overlaps another candidate's timed region.
            self.out.wall_s = time.monotonic() - started
            t = time.monotonic()
            try:
                self._finish(child)
                self.out.exit_s = time.monotonic() - t
                self.rt.judge_call({"op": "release", "job": self.job_id})
            finally:
                self._release()
            self.out.release_s = time.monotonic() - t - self.out.exit_s
        return self.out

    def _converse(self, child: Any, started: float) -> None:
        deadline = started + self.timeout_s
        lock_t = started
        try:
            child.send(self.job)
            while True:
                msg = child.recv(deadline)
                h, op = msg.header, msg.op
                if op in ("outputs", "compare"):
                    tag = (str(h.get("tag", ""))[:200] or "extra") if op == "compare" else None
                    verdict = self._compare(h, msg.blob, tag=tag)
                    if verdict.get("retry_host"):  # the judge could not map the IPC handles
                        self.out.ipc_fallback = str(verdict.get("message", ""))
                        child.send({"op": "retry_host"})
                    elif tag is None:
                        if not self.out.trials:
                            self.out.out_bytes = _output_bytes(h.get("tree"))
                        self.out.trials.append(verdict)
                        child.send({"op": "verdict", "passed": bool(verdict["passed"])})
                    else:
                        self.out.extra[tag] = verdict
                        child.send(verdict)
                elif op == "lock":
                    wait = self._switch("exclusive")
                    deadline += wait
                    self.out.lock_wait_s += wait
                    lock_t = time.monotonic()
                    child.send({"op": "locked"})
                elif op in ("timing", "timing_sync", "unlock"):
                    if self.hold != "exclusive":
                        raise ProtocolViolation(f"{op} outside the timed region")
                    if op == "timing":
                        self.out.sol_wall_s = time.monotonic() - lock_t
                        self.out.sol_timing = _stats(h.get("stats"))
                        if self._suspicious():
                            child.send({"op": "remeasure"})
                            continue
                        child.send({"op": "continue"})
                    elif op == "timing_sync":
                        self.out.sol_timing_sync = _stats(h.get("stats"))
                    deadline += self._switch("shared")
                elif op == "extra":
                    self.out.hook_extra[str(h.get("hook", ""))[:100]] = h.get("result")
                elif op == "solution_path":
                    self.out.solution_path = str(h.get("path", ""))[:4096]
                elif op == "error":
                    self.out.error = {k: str(h.get(k, ""))[:20000] for k in ("stage", "type", "message", "traceback")}
                elif op == "done":
                    self.out.done = h
                    return
                else:
                    raise ProtocolViolation(f"unknown message {op!r}")
        except ChannelTimeout:
            self.out.timed_out = True
        except ChannelClosed:
            self.out.died = True
        except ProtocolViolation as e:
            self.out.violation = str(e)

    def _suspicious(self) -> bool:
        """Is the claimed solution time below a plausibility bound (`drkernel.gym.plausibility`)?"""
        if self.out.sol_timing is None:
            return False
        return suspicious(self.out.sol_timing["median_ms"], self.out.out_bytes, self.rt.device_name,
                          self.job.get("roofline_ms"))

    def _compare(self, h: dict[str, Any], blob: bytes, tag: str | None) -> dict[str, Any]:
        trial = h.get("trial")
        trials = self.job["trials"]
        if trial == "timing" and tag is not None:  # a sampled timed call: the timing inputs' seed
            spec = {"code": trials[0]["code"], "seed": self.job["timing_seed"]}
        elif not isinstance(trial, int) or not 0 <= trial < len(trials):
            raise ProtocolViolation(f"trial index {trial!r}")
        else:
            spec = trials[trial]
        verdict = self.rt.judge_call({"op": "compare", "job": self.job_id, "trial": trial, "code": spec["code"],
                                      "seed": spec["seed"], "weight_seed": self.weight_seed,
                                      "profile": self.profile, "tree": h.get("tree"), "tag": tag}, blob)
        verdict.pop("op", None)
        verdict["trial"] = trial
        return verdict

    def _acquire(self, mode: str) -> float:
        t = time.monotonic()
        (self.rt.rw.acquire_shared if mode == "shared" else self.rt.rw.acquire_exclusive)()
        self.hold = mode
        return time.monotonic() - t

    def _release(self) -> None:
        if self.hold == "shared":
            self.rt.rw.release_shared()
        elif self.hold == "exclusive":
            self.rt.rw.release_exclusive()
        self.hold = None

    def _switch(self, mode: str) -> float:
        self._release()
        return self._acquire(mode)

    def _finish(self, child: Any) -> None:
        """Let a finished candidate exit on its own for a moment, then kill its process group."""
        if self.out.done is not None or self.out.died:
            try:
                child.proc.wait(timeout=KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        child.kill()
        self.out.returncode = child.proc.returncode
        self.out.log_tail = child.log_tail()
        child.discard()


def _output_bytes(tree: Any) -> int:
    """Bytes of the outputs in a trial's (outputs, inputs) tree."""
    items = tree.get("items") if isinstance(tree, dict) else None
    return tree_bytes(items[0]) if isinstance(items, list) and items else 0


def _stats(d: Any) -> dict[str, Any] | None:
    """Claimed timing stats, checked to be finite non-negative numbers."""
    if not isinstance(d, dict):
        return None
    try:
        out = {k: float(d[k]) for k in ("median_ms", "iqr_ms", "cv", "mean_ms", "min_ms")}
        out["n"] = int(d["n"])
        for k in ("wall_ms_per_call", "rse", "head_start_ms", "host_ms", "uncovered"):
            out[k] = None if d.get(k) is None else float(d[k])
    except (KeyError, TypeError, ValueError):
        return None
    if not all(math.isfinite(v) and v >= 0 for k, v in out.items() if isinstance(v, float)):
        return None
    return out
