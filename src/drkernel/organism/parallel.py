"""Decide the registered claims in one call: fresh seeds, every (arm, seed) run in its own process, a
pool of them sharing one GPU, then the report (``python -m drkernel.organism claims``).

Seeds are drawn from the operating system's entropy (`random.SystemRandom`, i.e. ``os.urandom``) the
first time a runs folder is used and written to its ``seeds.json`` with the date; a later call on the
same folder (a call killed at its time limit, run again) reads them back and skips the runs already
finished, so no seed is ever chosen by hand or redrawn after a result was seen.

A run is finished when its ``organism_run.json`` records all its steps (`finished`): that file is all
a later call needs, so a runs folder carried to a fresh machine without the SFT cache and the
checkpoints resumes. A run the RL budget guard cut short, or one killed before it wrote its record,
is set aside under ``cut/`` (kept, not reported: its trainer files would be appended to) and run
again; the SFT is redone only for seeds that still have runs to do (`plan`).

Phases: the SFT of every seed (one process per seed, ``parallel`` at once), then every (arm, seed) run
(``parallel`` at once). The runs share the GPU through `drkernel.organism.turns` (sampling and training
together, the gym's evaluations one run at a time) and one verdict file, so a program is judged once
for all of them. Each process gets ``cpus // parallel`` intra-op threads; its output goes to
``logs/<job>.log``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

SEEDS_FILE = "seeds.json"
SEED_RANGE = 2**31


@dataclass(frozen=True)
class Job:
    """One child process: its name, its command line, and the file that exists once it is done."""

    label: str
    argv: tuple[str, ...]
    done: Path | None = None
    seed: int | None = None
    gpu: int | None = None
    """The GPU it runs on (``CUDA_VISIBLE_DEVICES``) when the call spreads over several; None: all."""


@dataclass(frozen=True)
class JobResult:
    label: str
    returncode: int
    seconds: float
    skipped: bool = False
    """Done by an earlier call (its ``done`` file exists)."""
    postponed: bool = False
    """Not started: it would likely have run past the deadline (a later call runs it)."""

    def text(self) -> str:
        if self.skipped:
            return "ok (done before)"
        if self.postponed:
            return "postponed (the deadline was near: call again)"
        return f"{'FAILED rc ' + str(self.returncode) if self.returncode else 'ok'} {self.seconds:.0f} s"


class Deadline:
    """Whether a job may still start: only if the longest job so far (or ``estimate_s`` before any
    finished) would end before ``at`` (a `time.monotonic` value), so a call's time limit never kills a
    run half-way and the runs that do finish all ran their full course."""

    def __init__(self, at: float | None, estimate_s: float) -> None:
        self.at, self.estimate_s = at, estimate_s
        self.longest: float | None = None
        self._lock = threading.Lock()

    def allows(self) -> bool:
        with self._lock:
            expected = self.estimate_s if self.longest is None else self.longest
            return self.at is None or time.monotonic() + expected <= self.at

    def record(self, seconds: float) -> None:
        with self._lock:
            self.longest = seconds if self.longest is None else max(self.longest, seconds)


def draw_seeds(n: int, rng: random.Random | None = None) -> list[int]:
    """``n`` distinct seeds from ``rng`` (default: the OS's entropy, `random.SystemRandom`)."""
    rng = rng or random.SystemRandom()
    seeds: list[int] = []
    while len(seeds) < n:
        s = rng.randrange(SEED_RANGE)
        if s not in seeds:
            seeds.append(s)
    return seeds


def seeds_for(out: Path, n: int) -> list[int]:
    """The seeds recorded in ``out/seeds.json``, or ``n`` fresh ones, recorded there first. A recorded
    list shorter than ``n`` is extended with fresh seeds (the old ones kept, in order)."""
    path = out / SEEDS_FILE
    record = json.loads(path.read_text()) if path.exists() else {"seeds": [], "draws": []}
    seeds = [int(s) for s in record["seeds"]]
    if len(seeds) < n:
        fresh = [s for s in draw_seeds(n + len(seeds)) if s not in seeds][: n - len(seeds)]
        seeds += fresh
        record = {"seeds": seeds, "source": "random.SystemRandom (os.urandom)",
                  "draws": record.get("draws", []) + [{"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                                                        "seeds": fresh}]}
        out.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(record, indent=1))
        os.replace(tmp, path)
    return seeds[:n]


def _record(path: Path) -> dict | None:
    """The JSON object at ``path`` (None: absent, torn by a killed writer, or not an object)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def finished(done: Path) -> bool:
    """Whether a job's ``done`` file records it finished: readable, and not a run the RL budget guard
    cut short (`run.run_arm`'s ``stopped_early``)."""
    record = _record(done)
    return record is not None and not record.get("stopped_early", False)


def _run_folder(job: Job) -> Path | None:
    """An arm job's own folder (``runs/<label>``: the run's trainer files and its suite bundle)."""
    return job.done.parent.parent if job.done is not None and job.done.name == "organism_run.json" else None


def set_aside(job: Job, folder: Path) -> Path:
    """Move an unfinished run's folder (``runs/<label>``) to ``folder/<label>-<n>`` (its files kept, out
    of the report's reach) so that its re-run starts clean; returns where it went."""
    source = _run_folder(job)
    assert source is not None
    folder.mkdir(parents=True, exist_ok=True)
    n = 1 + sum(1 for _ in folder.glob(f"{job.label}-*"))
    target = folder / f"{job.label}-{n}"
    os.replace(source, target)
    return target


def run_pool(jobs: Sequence[Job], parallel: int, logs: Path, threads: int,
             deadline: Deadline | None = None) -> list[JobResult]:
    """Run ``jobs``, at most ``parallel`` at once (a job whose ``done`` file exists is skipped; one the
    ``deadline`` does not allow to start is postponed)."""
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))

    def one(job: Job) -> JobResult:
        if job.done is not None and finished(job.done):
            return JobResult(job.label, 0, 0.0, skipped=True)
        if deadline is not None and not deadline.allows():
            return JobResult(job.label, 0, 0.0, postponed=True)
        t0 = time.monotonic()
        job_env = env if job.gpu is None else dict(env, CUDA_VISIBLE_DEVICES=str(job.gpu))
        with (logs / f"{job.label}.log").open("w") as log:
            rc = subprocess.run(job.argv, stdout=log, stderr=subprocess.STDOUT, env=job_env, check=False).returncode
        if deadline is not None:
            deadline.record(time.monotonic() - t0)
        return JobResult(job.label, rc, time.monotonic() - t0)

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        return list(pool.map(one, jobs))


def run_per_gpu(jobs: Sequence[Job], parallel: int, logs: Path, threads: int,
                deadline: Deadline | None = None) -> list[JobResult]:
    """`run_pool` once per GPU the jobs name, side by side, each with its share of ``parallel`` (at
    least one), so no GPU gets more runs at once than another; results in the order of ``jobs``."""
    groups: dict[int | None, list[Job]] = {}
    for j in jobs:
        groups.setdefault(j.gpu, []).append(j)
    if len(groups) <= 1:
        return run_pool(jobs, parallel, logs, threads, deadline)
    share = max(1, parallel // len(groups))
    with ThreadPoolExecutor(max_workers=len(groups)) as pool:
        done = dict(zip(groups, pool.map(lambda g: run_pool(groups[g], share, logs, threads, deadline), groups)))
    by_label = {r.label: r for results in done.values() for r in results}
    return [by_label[j.label] for j in jobs]


def place(work: dict[int, int], gpus: int, kept: dict[int, int] | None = None) -> dict[int, int]:
    """Each seed's GPU, all arms of a seed on one (they share its SFT policy and verdicts). A seed of
    ``kept`` (an earlier call's placement) stays where it was, so its cached SFT is found again; the
    others go, most runs left first, each to the GPU with the fewest runs so far (ties: the lower)."""
    load = [0] * max(1, gpus)
    where = {s: g for s, g in (kept or {}).items() if s in work and 0 <= g < len(load)}
    for s, g in where.items():
        load[g] += work[s]
    for seed in sorted((s for s in work if s not in where), key=lambda s: -work[s]):
        g = min(range(len(load)), key=lambda i: (load[i], i))
        where[seed] = g
        load[g] += work[seed]
    return where


def placement(out: Path, todo: Sequence[Job], gpus: int) -> dict[int, int] | None:
    """`place` the seeds of ``todo`` on ``gpus`` GPUs (None for one), recorded in
    ``out/cache/placement-<gpus>.json`` so that the next call (the runs after an SFT-only call, or the
    postponed runs) puts each seed where its SFT policy is."""
    if gpus <= 1:
        return None
    path = out / "cache" / f"placement-{gpus}.json"
    kept = {int(k): int(v) for k, v in json.loads(path.read_text()).items()} if path.exists() else {}
    work: dict[int, int] = {}
    for j in todo:
        if j.seed is not None:
            work[j.seed] = work.get(j.seed, 0) + 1
    where = place(work, gpus, kept)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({str(k): v for k, v in sorted((kept | where).items())}, indent=1))
    os.replace(tmp, path)
    return where


def cache_of(out: Path, gpu: int | None) -> Path:
    """The cache folder of the runs on ``gpu``: SFT policies, the verdict file, reference timings and
    the turns' lock files. One GPU: ``out/cache``; several: ``out/cache/gpu<i>`` each, so a GPU's runs
    take turns only with each other and its speedups divide by its own reference timings."""
    return out / "cache" if gpu is None else out / "cache" / f"gpu{gpu}"


def _cli(*args: str) -> tuple[str, ...]:
    return (sys.executable, "-m", "drkernel.organism", *args)


def sft_jobs(seeds: Sequence[int], scale: str, device: str, out: Path,
             where: dict[int, int] | None = None) -> list[Job]:
    """One SFT per seed, on its GPU of ``where`` (none: one GPU); done once its policy's info file
    exists (`run.prepare_policy` caches it)."""
    from drkernel.organism.arms import scale as scale_of
    from drkernel.organism.run import sft_folder

    jobs = []
    for s in seeds:
        gpu = None if where is None else where[s]
        cache = cache_of(out, gpu)
        jobs.append(Job(f"sft-s{s}", _cli("sft", "--seed", str(s), "--scale", scale, "--device", device,
                                         "--out", str(cache)), sft_folder(scale_of(scale), s, cache) / "organism_sft.json",
                        s, gpu))
    return jobs


def arm_jobs(arms: Sequence[str], seeds: Sequence[int], scale: str, device: str, out: Path,
             budget_s: float | None, gym_concurrency: int = 2, where: dict[int, int] | None = None) -> list[Job]:
    """One job per (arm, seed), seeds outermost (the first runs to finish span the arms), on the seed's
    GPU of ``where`` (none: one GPU for all); each gym judges ``gym_concurrency`` programs at once (a
    process's share of the cores)."""
    jobs = []
    for s in seeds:
        gpu = None if where is None else where.get(s, 0)
        cache = cache_of(out, gpu)
        for a in arms:
            folder = out / "runs" / f"{a}-s{s}"
            argv = ["run", "--arm", a, "--seed", str(s), "--scale", scale, "--device", device,
                    "--out", str(folder), "--cache", str(cache),
                    "--turns", str(cache / "device.lock"), "--gym-concurrency", str(gym_concurrency)]
            if budget_s is not None:
                argv += ["--budget-s", str(budget_s)]
            jobs.append(Job(f"{a}-s{s}", _cli(*argv), folder / f"{a}-s{s}" / "organism_run.json", s, gpu))
    return jobs


@dataclass(frozen=True)
class Plan:
    """What a claims call does with a runs folder, from the run records in it alone."""

    kept: tuple[Job, ...]
    """Finished runs (all steps recorded): not run again, their values reported."""
    cut: tuple[Job, ...]
    """Runs begun but not finished (cut short by the RL budget guard, or killed): set aside under
    ``cut/`` and run again."""
    todo: tuple[Job, ...]
    """Runs to start (never finished, cut ones included), in order."""
    sft_seeds: tuple[int, ...]
    """Seeds with runs to do: only their SFT is needed (a carried folder has no SFT cache)."""

    def lines(self) -> list[str]:
        def labels(jobs: Sequence[Job]) -> str:
            return " ".join(j.label for j in jobs) or "none"

        seeds = ",".join(map(str, self.sft_seeds)) or "none"
        return [f"SUMMARY organism plan: {len(self.kept)} runs finished (kept): {labels(self.kept)}",
                f"SUMMARY organism plan: {len(self.cut)} cut short or killed (set aside, run again): {labels(self.cut)}",
                f"SUMMARY organism plan: {len(self.todo)} runs to do: {labels(self.todo)}",
                f"SUMMARY organism plan: SFT for {len(self.sft_seeds)} seeds: {seeds}"]


def plan(jobs: Sequence[Job]) -> Plan:
    """The `Plan` of ``arm_jobs`` on a runs folder as it is now."""
    todo = tuple(j for j in jobs if j.done is None or not finished(j.done))
    seeds = tuple(dict.fromkeys(j.seed for j in todo if j.seed is not None))
    return Plan(kept=tuple(j for j in jobs if j not in todo),
                cut=tuple(j for j in todo if (f := _run_folder(j)) is not None and f.exists()),
                todo=todo, sft_seeds=seeds)


STAGE_NAMES = (("gym_start", "gym start"), ("setup", "setup"), ("heldout_before", "held-out before"),
               ("sampling", "sampling"),
               ("evaluations", "evaluations"), ("wait_others", "waiting for other runs' verdicts"),
               ("training", "training"), ("heldout_after", "held-out after"), ("close", "close"),
               ("turns/exclusive_wait_s", "timed-region turns waited"),
               ("turns/exclusive_hold_s", "held"), ("turns/shared_wait_s", "shared turns waited"))


def stage_lines(run_files: Sequence[Path]) -> list[str]:
    """A SUMMARY line per finished run: where its wall time went (`run.stage_breakdown`)."""
    lines = []
    for path in run_files:
        if not path.exists():
            continue
        run = json.loads(path.read_text())
        st = run.get("stages", {})
        parts = ", ".join(f"{label} {st[key]:.1f}" for key, label in STAGE_NAMES if key in st)
        gym = ", ".join(f"{k[4:]} {v:.1f}" for k, v in st.items() if k.startswith("gym/"))
        lines.append(f"SUMMARY organism stages {run['arm']}-s{run['seed']} (s): wall {st.get('wall', 0):.1f} "
                     f"({run['steps_done']} steps, {st.get('evaluations_n', 0):.0f} programs judged): "
                     f"sft {st.get('sft', 0):.1f} (its own phase), {parts}; gym stages summed: {gym}; "
                     f"{int(st.get('turns/exclusive_turns', 0))} timed-region turns")
    return lines


def claims(arms: Sequence[str], n_seeds: int, scale: str, device: str, out: Path, parallel: int,
           budget_s: float | None = None, cpus: int | None = None, sft_only: bool = False,
           report: Path | None = None, deadline_s: float | None = None, run_estimate_s: float = 0.0,
           plan_only: bool = False, gpus: int = 1) -> list[str]:
    """SFT and run ``arms`` x ``n_seeds`` fresh seeds in a pool, write the report (to ``report``,
    default ``out/report``); SUMMARY lines. Only what the folder's run records leave to do is done
    (`plan`); ``plan_only``: say what that is and stop. ``sft_only``: stop after the SFTs (a call of
    its own). ``deadline_s``: start no run that would likely end more than this many seconds after
    the call began (`Deadline`, first guess ``run_estimate_s``); the postponed ones run on the next call.
    ``gpus`` > 1: each seed's SFT and runs on one of that many GPUs (`placement`), a pool per GPU with
    ``parallel // gpus`` at once and a cache of its own (`cache_of`)."""
    from drkernel.organism.report import write_report

    seeds = seeds_for(out, n_seeds)
    threads = max(1, (cpus or os.cpu_count() or 1) // max(1, parallel))
    todo = plan(arm_jobs(arms, seeds, scale, device, out, budget_s, max(2, threads)))
    where = placement(out, todo.todo, gpus) if not plan_only else None
    if where is not None:  # the same jobs, each on its seed's GPU with that GPU's cache
        placed = {j.label: j for j in arm_jobs(arms, list(where), scale, device, out, budget_s,
                                               max(2, threads), where)}
        todo = dataclasses.replace(todo, todo=tuple(placed[j.label] for j in todo.todo))
    lines = [f"SUMMARY organism seeds (drawn at run time, {out / SEEDS_FILE}): {','.join(map(str, seeds))}",
             *todo.lines()]
    if where is not None:
        lines.append("SUMMARY organism placement: " + ", ".join(f"s{s} on GPU {g}" for s, g in where.items()))
    if plan_only:
        return lines
    t0 = time.monotonic()
    sft = run_per_gpu(sft_jobs(todo.sft_seeds, scale, device, out, where), parallel, out / "logs", threads)
    t_sft = time.monotonic() - t0
    jobs = [] if sft_only else list(todo.todo)
    if not sft_only:
        lines += [f"SUMMARY organism job {j.label}: begun before, not finished: set aside to "
                  f"{set_aside(j, out / 'cut')}"
                  for j in todo.cut]
    deadline = Deadline(t0 + deadline_s, run_estimate_s) if deadline_s else None
    runs = run_per_gpu(jobs, parallel, out / "logs", threads, deadline)
    t_runs = time.monotonic() - t0 - t_sft
    lines.append(f"SUMMARY organism claims: {len(sft)} SFTs in {t_sft:.0f} s, {len(runs)} runs in {t_runs:.0f} s "
                 f"wall ({parallel} at once, {threads} threads each; {len(todo.kept)} finished before)")
    lines += [f"SUMMARY organism job {r.label}: {r.text()}" for r in sft + runs]
    ran = [j.done for j, r in zip(jobs, runs) if j.done is not None and not (r.skipped or r.postponed)]
    lines += stage_lines(ran)
    postponed = sum(r.postponed for r in runs)
    if postponed:
        lines.append(f"SUMMARY organism claims: {postponed} runs postponed: call again with the same --out")
    if not sft_only and any((out / "runs").glob("*/*/organism_run.json")):
        lines += write_report([out / "runs"], report or out / "report")
    return lines
