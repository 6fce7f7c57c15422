"""Service scaling over the GPUs of one host: the real service, k devices, an RL-like load over HTTP.

For each k of ``--gpus`` this starts ``python -m drkernel gym serve --devices cuda:0,..,cuda:{k-1}``
(``cpu:k`` with ``--device-kind cpu``) as a subprocess and drives it with `ServiceClient`, using the
mixed workload of ``benchmarks/sustained_load.py`` (the built-in suite's solutions, three KernelBench
problems with our Triton solutions, wrong and non-compiling variants: about ``--fail-fraction``
fail). The server loads both problem sets (``--problems builtin,<rows>.jsonl``) and requests name
problems by key. Every request's solution gets a unique trailing comment: an RL batch's solutions
are distinct, while identical requests would be coalesced (one runs at a time per request hash) and
answered from the cache, which ``--no-cache`` also turns off.

A producer keeps ``2 x slots x k`` requests outstanding (one thread each: submit, then long-poll its
job) for ``--warmup-s`` + ``--duration-s``, then waits for the rest. Reported per run:

* evaluations/s over the measured window (jobs finished in ``[warmup, warmup + duration]``, so the
  start-up transient and the drain stay out), and over the whole run;
* per-status counts (job status / result status), p50/p95 latency from submission to result;
* jobs submitted vs terminal (lost = submitted - terminal; must be 0);
* evaluations per worker and device (the job record names the worker that ran it);
* scaling efficiency = rate(k) / (k x rate(1)); target >= 0.9 on GPUs;
* per stage of the results' ``stage_seconds`` (``child_start``, ``child_wait``, ``compile``,
  ``correctness``, ``timing``, ``exclusive``, ...): count, median, p95 and mean over the results that
  finished in the measured window, so a stage that grows with k shows where the time goes;
* the host's load every second (``/proc/loadavg``, and user / system / iowait / idle fractions of all
  CPUs from ``/proc/stat``) and, where ``nvidia-smi`` exists, each used GPU's utilisation: the window's
  mean and p95 per figure, and each GPU's busy fraction (mean utilisation / 100).

``--shared-net-ab`` runs every k twice in the same call, without and with ``DRKERNEL_FORK_SHARED_NET=1``
(the zygote's forks share its network namespace: ``drkernel.gym.candidate.zygote``) in the server's
environment (runs ``local-k{k}`` and ``local-k{k}-sharednet``): the rate with over the rate without.
``--kill-one-worker`` adds a run at the largest k in which one worker process gets SIGKILL at mid-run
(its pid from ``/v1/workers``): completions per device before/after, the victim's in-flight jobs
(re-queued by the scheduler, finished with attempts 2), none lost, when the worker was back.
``--ray`` adds a run at the largest k with the workers as Ray actors on a local Ray head started
here (``python -m ray.scripts.scripts start --head --block``, core ``ray`` only; stopped at the end):
the same figures and the ratio to local workers (target within 10 %). ``--no-scaling`` skips the
per-k runs, so the parts fit separate 10-minute calls; each call merges its runs into the JSON.

    PYTHONPATH=/tmp/site:src python3 benchmarks/service_scaling.py --gpus 1,2,4 --out out/service_scaling
    PYTHONPATH=/tmp/site:src python3 benchmarks/service_scaling.py --gpus 4 --no-scaling \
        --kill-one-worker --ray
    PYTHONPATH=src python3 benchmarks/service_scaling.py --device-kind cpu --gpus 1,2 --duration-s 20 --quick

Writes ``service_scaling.json`` and ``service_scaling.png`` (evaluations/s vs devices with the ideal
line; completions over time per device in the kill run) into ``--out``; ``--replot`` redraws from
the JSON. PASS/FAIL lines (INFO for rates on CPU); exit status 1 if any FAIL.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "service"))  # ServerProcess

from service_server import ServerProcess, free_port
from sustained_load import ROWS, Item, add_workload_args, draw, pct, pyplot, workload

from drkernel.errors import ServiceError
from drkernel.gym import EvalConfig, EvalRequest
from drkernel.gym.candidate.zygote import SHARED_NET_ENV, SHARED_NET_MIN_ABI, landlock_abi
from drkernel.service.client import ServiceClient

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
GPU_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
"""Kept in the environment of everything started here (NVLink multicast stays off)."""
os.environ.update(GPU_ENV)
TERMINAL = ("done", "failed", "cancelled")


@dataclass(frozen=True)
class Row:
    """One request: what it was, how it ended, where it ran, when (seconds since the run's start)."""

    id: str
    problem: str
    label: str
    job_status: str  # done / failed / cancelled, or "lost" when the client never saw it end
    status: str | None  # the EvalResult's status (done jobs)
    error_class: str | None
    attempts: int
    worker: str | None
    submitted_s: float
    done_s: float
    latency_s: float
    stages: dict[str, float] = field(default_factory=dict)  # the result's stage_seconds (done jobs)


@dataclass
class KillReport:
    """The ``--kill-one-worker`` run: which worker died when, and what became of its jobs."""

    victim: str
    pid: int
    at_s: float
    in_flight: list[str]
    restarts_before: int
    in_flight_final: dict[str, str] = field(default_factory=dict)  # id -> job status / attempts / worker
    in_flight_finished: bool = False
    back_s: float | None = None  # when the victim was ready again (restarted and canaried)
    rate_before: dict[str, float] = field(default_factory=dict)  # worker -> evaluations/s
    rate_after: dict[str, float] = field(default_factory=dict)
    others_kept_completing: bool = False  # every other worker finished jobs after the kill


@dataclass
class RunSummary:
    """One service run (``name``: local-k{k}, local-k{k}-kill or ray-k{k})."""

    name: str
    backend: str
    devices: int
    device_kind: str
    slots: int
    warmup_s: float
    duration_s: float
    startup_s: float
    wall_s: float
    submitted: int
    terminal: int
    lost: int
    evals_per_s: float | None
    evals_per_s_overall: float | None
    statuses: dict[str, int]
    latency_p50_s: float | None
    latency_p95_s: float | None
    per_worker: dict[str, int]
    worker_devices: dict[str, str]
    samples: list[dict[str, Any]]  # /v1/workers every second: t, and per worker state/completed/restarts
    stages: dict[str, dict[str, float]] = field(default_factory=dict)  # stage -> n/median/p95/mean, window
    host: dict[str, Any] = field(default_factory=dict)  # window load: see `load_stats`
    host_samples: list[dict[str, Any]] = field(default_factory=list)  # `HostLoad` every second
    kill: KillReport | None = None
    rows: list[Row] = field(default_factory=list)


def child_env(shared_net: bool = False) -> dict[str, str]:
    """The environment of the server and the Ray head: ours, the GPU settings, ``src`` on the path, and
    Ray's token authentication off unless set (the head and its drivers would need a shared token);
    ``shared_net``: the zygotes' forks share their network namespace (else that setting is off)."""
    paths = [str(SRC), os.environ.get("PYTHONPATH", "")]
    env = {"RAY_AUTH_MODE": "disabled", **os.environ, **GPU_ENV, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    env.pop(SHARED_NET_ENV, None)
    return env | ({SHARED_NET_ENV: "1"} if shared_net else {})


def stop_group(proc: subprocess.Popen, grace_s: float = 20.0) -> None:
    """SIGTERM the process, then SIGKILL its whole session (it was started in a session of its own)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


class RayHead:
    """A local Ray head (core ``ray`` only) in the foreground of its own session: ``--block`` keeps
    ``ray start`` alive, so ending its session ends the cluster and nothing else on the machine."""

    def __init__(self, tmp: Path, log: Path, gpus: int, cpus: int):
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.log = log
        self.cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block",
                    "--port", str(self.port), "--num-gpus", str(gpus), "--num-cpus", str(cpus),
                    "--include-dashboard=false", "--disable-usage-stats", "--temp-dir", str(tmp / "ray")]
        self.env = child_env()
        if gpus:
            self.env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(gpus))
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 120.0) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ray head exited {self.proc.returncode}: {self.log.read_text()[-3000:]}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    time.sleep(2.0)  # the GCS listens before the raylet has registered
                    return
            time.sleep(0.5)
        raise RuntimeError(f"ray head not up in {timeout_s} s: {self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc is not None:
            stop_group(self.proc, grace_s=15.0)


# -- host load and stage figures --------------------------------------------------------------------


def cpu_times() -> tuple[float, ...]:
    """All CPUs' jiffies from ``/proc/stat``: (user + nice, system + irq + softirq, iowait, idle, total)."""
    with open("/proc/stat") as f:
        v = [float(x) for x in f.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
    return v[0] + v[1], v[2] + v[5] + v[6], v[4], v[3], sum(v)


def cpu_split(before: tuple[float, ...], after: tuple[float, ...]) -> dict[str, float]:
    """The CPU time between two `cpu_times` as fractions: user, system, iowait, idle."""
    total = after[4] - before[4]
    if total <= 0:
        return {}
    return {k: (a - b) / total for k, a, b in zip(("user", "system", "iowait", "idle"), after, before)}


class HostLoad:
    """The host's load every ``period_s`` in a background thread, each sample ``{t, load1, running,
    cpu: {user, system, iowait, idle}, gpu: {index: utilisation %}}`` (``t``: seconds since ``t0`` on
    the monotonic clock; ``gpu`` empty without ``nvidia-smi``). GPU utilisation comes from one
    ``nvidia-smi -l 1`` reader (the latest line per GPU), so a slow ``nvidia-smi`` delays no sample."""

    def __init__(self, gpus: int, t0: float, period_s: float = 1.0):
        self.gpus, self.t0, self.period_s = gpus, t0, period_s
        self.samples: list[dict[str, Any]] = []
        self.gpu_now: dict[str, float] = {}
        self.stopped = threading.Event()
        self.smi: subprocess.Popen | None = None
        if gpus and shutil.which("nvidia-smi"):
            self.smi = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits", "-l", "1"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            threading.Thread(target=self._read_smi, daemon=True).start()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _read_smi(self) -> None:
        for line in self.smi.stdout:
            index, _, util = line.partition(",")
            try:
                if int(index) < self.gpus:
                    self.gpu_now[index.strip()] = float(util)
            except ValueError:
                pass

    def _sample(self) -> None:
        before = cpu_times()
        while not self.stopped.wait(self.period_s):
            after = cpu_times()
            with open("/proc/loadavg") as f:
                fields = f.read().split()
            self.samples.append({"t": time.monotonic() - self.t0, "load1": float(fields[0]),
                                 "running": int(fields[3].split("/")[0]), "cpu": cpu_split(before, after),
                                 "gpu": dict(self.gpu_now)})
            before = after

    def stop(self) -> list[dict[str, Any]]:
        self.stopped.set()
        self.thread.join()
        if self.smi is not None:
            self.smi.terminate()
            self.smi.wait()
        return self.samples


def spread(xs: list[float]) -> dict[str, float] | None:
    """n, median, p95 and mean of ``xs`` (None when empty)."""
    if not xs:
        return None
    return {"n": len(xs), "median": statistics.median(xs), "p95": pct(xs, 0.95), "mean": statistics.mean(xs)}


def stage_stats(rows: list[Row], lo: float, hi: float) -> dict[str, dict[str, float]]:
    """Per stage of the done jobs' ``stage_seconds`` finished in ``[lo, hi]``: n, median, p95, mean
    (a stage counts only the results that recorded it), largest median first."""
    per: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        if r.job_status == "done" and lo <= r.done_s <= hi:
            for stage, seconds in r.stages.items():
                per[stage].append(seconds)
    stats = {stage: spread(xs) for stage, xs in per.items()}
    return dict(sorted(stats.items(), key=lambda kv: -kv[1]["median"]))


def load_stats(samples: list[dict[str, Any]], lo: float, hi: float) -> dict[str, Any]:
    """The window's host load from `HostLoad` samples taken in ``[lo, hi]``: spread of the 1-minute load
    average, runnable tasks, each CPU fraction, each GPU's utilisation %, and each GPU's busy fraction
    (its mean utilisation / 100)."""
    window = [s for s in samples if lo <= s["t"] <= hi]
    out: dict[str, Any] = {"samples": len(window), "cpus": os.cpu_count(),
                           "load1": spread([s["load1"] for s in window]),
                           "running": spread([float(s["running"]) for s in window])}
    for key in ("user", "system", "iowait", "idle"):
        out[f"cpu_{key}"] = spread([s["cpu"][key] for s in window if key in s["cpu"]])
    gpus = sorted({g for s in window for g in s["gpu"]}, key=int)
    out["gpu_util"] = {g: spread([s["gpu"][g] for s in window if g in s["gpu"]]) for g in gpus}
    out["gpu_busy"] = {g: u["mean"] / 100 for g, u in out["gpu_util"].items()}
    return out


# -- the load ---------------------------------------------------------------------------------------


@dataclass
class Load:
    """What one run sends, and the ids the service accepted (appended by the request threads)."""

    ok: list[Item]
    failing: list[Item]
    config: EvalConfig
    name: str
    give_up_s: float
    submitted: list[str] = field(default_factory=list)


def one(client: ServiceClient, load: Load, item: Item, n: int, t0: float) -> Row:
    """Submit one request, then long-poll its job until it is terminal (or ``give_up_s`` passed)."""
    solution = f"{item.source}\n# {load.name} request {n}\n"  # distinct, as an RL batch's solutions are
    request = EvalRequest(problem=item.problem, solution=solution, config=load.config,
                          request_id=f"{load.name}-{n}")
    submitted = time.monotonic()
    job_id = client.submit(request)
    load.submitted.append(job_id)
    info = None
    while time.monotonic() - submitted < load.give_up_s:
        try:
            info = client.wait(job_id, 30.0)
        except ServiceError:
            break
        if info.terminal:
            break
    done = time.monotonic()
    if info is None or not info.terminal:
        return Row(job_id, item.problem.name, item.label, "lost", None, None, 0, None,
                   submitted - t0, done - t0, done - submitted)
    result = info.result
    return Row(job_id, item.problem.name, item.label, info.status,
               result.status.value if result is not None else None, info.error_class,
               info.attempts, info.worker, submitted - t0, done - t0, done - submitted,
               dict(result.stage_seconds) if result is not None else {})


def sample_workers(client: ServiceClient, t: float) -> dict[str, Any] | None:
    """``/v1/workers`` at ``t``: per worker its device, state, pid, completed, restarts, in flight."""
    try:
        workers = client.workers()
    except ServiceError:
        return None
    keys = ("device", "state", "pid", "completed", "restarts", "in_flight")
    return {"t": t, "workers": {w["name"]: {k: w.get(k) for k in keys} for w in workers}}


def kill_one(client: ServiceClient, load: Load, rows: list[Row], sample: dict,
             now: float) -> KillReport | None:
    """SIGKILL the busiest ready worker's process; its running jobs (from the job records) noted first."""
    ready = [(n, w) for n, w in sample["workers"].items() if w["state"] == "ready" and w["pid"]]
    if not ready:
        return None
    name, w = max(ready, key=lambda nw: (nw[1]["in_flight"] or 0, nw[0]))
    finished = {r.id for r in rows}
    open_ids = [i for i in list(load.submitted) if i not in finished]
    infos = client.wait_many(open_ids, 0.0) if open_ids else {}
    in_flight = [i for i, info in infos.items() if info.status == "running" and info.worker == name]
    os.kill(int(w["pid"]), signal.SIGKILL)
    print(f"  killed worker {name} (pid {w['pid']}) at {now:.1f} s with {len(in_flight)} job(s) in flight",
          flush=True)
    return KillReport(victim=name, pid=int(w["pid"]), at_s=now, in_flight=in_flight,
                      restarts_before=int(w["restarts"] or 0))


def progress(name: str, rows: list[Row], load: Load, now: float, sample: dict | None) -> None:
    done = Counter(r.worker for r in rows if r.job_status == "done")
    per = " ".join(f"{n}={done.get(n, 0)}" for n in sorted((sample or {}).get("workers", done)))
    print(f"  [{name}] {now:5.0f} s: {len(rows)} finished / {len(load.submitted)} submitted, "
          f"{len(rows) / max(now, 1e-9):.2f}/s; per worker {per}", flush=True)


def drive(client: ServiceClient, args, load: Load, k: int, kill: bool):
    """Keep ``2 x slots x k`` requests outstanding for warmup + duration, then wait for the rest.
    Returns (rows, worker samples, kill report, wall seconds, host load samples)."""
    rng = random.Random(args.seed)
    target, stop_submit = 2 * args.slots * k, args.warmup_s + args.duration_s
    rows: list[Row] = []
    samples: list[dict] = []
    report: KillReport | None = None
    next_sample, next_progress, n = 0.0, args.progress_s, 0
    t0 = time.monotonic()
    host = HostLoad(k if args.device_kind == "cuda" else 0, t0)
    with ThreadPoolExecutor(max_workers=target) as pool:
        pending: set[Future] = set()
        while (now := time.monotonic() - t0) < stop_submit or pending:
            while now < stop_submit and len(pending) < target:
                item = draw(load.ok, load.failing, args.fail_fraction, rng)
                pending.add(pool.submit(one, client, load, item, n, t0))
                n += 1
            finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            rows += [f.result() for f in finished]
            now = time.monotonic() - t0
            if now >= next_sample and (s := sample_workers(client, now)) is not None:
                samples.append(s)
                next_sample = now + 1.0
                if kill and report is None and now >= args.warmup_s + args.duration_s / 2:
                    report = kill_one(client, load, rows, s, now)
            if now >= next_progress:
                progress(load.name, rows, load, now, samples[-1] if samples else None)
                next_progress += args.progress_s
    return rows, samples, report, time.monotonic() - t0, host.stop()


def settle_kill(report: KillReport, rows: list[Row], samples: list[dict], end_submit: float,
                warmup_s: float) -> None:
    """Fill in what became of the victim's jobs, when it was back, and the others' rates around it."""
    by_id = {r.id: r for r in rows}
    report.in_flight_final = {
        i: (f"{by_id[i].job_status}/{by_id[i].status or by_id[i].error_class} attempts {by_id[i].attempts} "
            f"on {by_id[i].worker}" if i in by_id else "never seen")
        for i in report.in_flight}
    report.in_flight_finished = all(i in by_id and by_id[i].job_status == "done" for i in report.in_flight)
    for s in samples:
        w = s["workers"].get(report.victim, {})
        restarted = (w.get("restarts") or 0) > report.restarts_before
        if s["t"] > report.at_s and w.get("state") == "ready" and restarted:
            report.back_s = s["t"]
            break
    span = max(1e-9, min(report.at_s - warmup_s, end_submit - report.at_s))
    for key, lo, hi in (("rate_before", report.at_s - span, report.at_s),
                        ("rate_after", report.at_s, report.at_s + span)):
        counts = Counter(r.worker for r in rows if r.job_status == "done" and lo <= r.done_s < hi)
        setattr(report, key, {w: counts.get(w, 0) / span for w in samples[0]["workers"]} if samples else {})
    after = Counter(r.worker for r in rows if r.job_status == "done" and r.done_s > report.at_s)
    others = [w for w in report.rate_before if w != report.victim]
    report.others_kept_completing = bool(others) and all(after.get(w, 0) > 0 for w in others)


# -- runs -------------------------------------------------------------------------------------------


def summarize(name: str, backend: str, k: int, args, startup_s: float, rows: list[Row], samples: list[dict],
              report: KillReport | None, wall: float, submitted: int, host: list[dict]) -> RunSummary:
    lo, hi = args.warmup_s, args.warmup_s + args.duration_s
    in_window = sum(1 for r in rows if r.job_status in TERMINAL and lo <= r.done_s <= hi)
    terminal = sum(1 for r in rows if r.job_status in TERMINAL)
    lat = [r.latency_s for r in rows if r.job_status in TERMINAL]
    devices = {n: w["device"] for n, w in samples[0]["workers"].items()} if samples else {}
    per_worker = Counter(r.worker for r in rows if r.job_status == "done")
    return RunSummary(
        name=name, backend=backend, devices=k, device_kind=args.device_kind, slots=args.slots,
        warmup_s=args.warmup_s, duration_s=args.duration_s, startup_s=startup_s, wall_s=wall,
        submitted=submitted, terminal=terminal, lost=submitted - terminal,
        evals_per_s=in_window / args.duration_s, evals_per_s_overall=terminal / wall if wall else None,
        statuses=dict(Counter(f"{r.job_status}/{r.status or r.error_class}" for r in rows)),
        latency_p50_s=pct(lat, 0.5), latency_p95_s=pct(lat, 0.95),
        per_worker={w: per_worker.get(w, 0) for w in devices} | dict(per_worker),
        worker_devices=devices, samples=samples, stages=stage_stats(rows, lo, hi),
        host=load_stats(host, lo, hi), host_samples=host, kill=report, rows=rows)


def serve_args(args, backend: str, k: int, ray_address: str | None) -> tuple[str, list[str]]:
    """The ``--devices`` spec and the extra serve options of a run."""
    extra = ["--unsafe-no-sandbox"] if args.unsafe_no_sandbox else []
    if backend == "ray":
        extra += ["--ray-address", ray_address]
        if args.device_kind == "cpu":
            extra += ["--ray-cpu-workers", str(k)]
    devices = f"cpu:{k}" if args.device_kind == "cpu" else ",".join(f"cuda:{i}" for i in range(k))
    return devices, extra


def server(tmp: Path, log: Path, devices: str, slots: int, extra: list[str],
           shared_net: bool = False) -> ServerProcess:
    """The real ``drkernel gym serve`` with ``slots`` per worker, problems by key, no result cache and no
    rate limit (the load is one client's)."""
    kwargs = json.dumps({"concurrency": slots, "pool_size": slots})
    return ServerProcess(tmp / "kernelgym.sqlite", "--devices", devices, "--slots", str(slots),
                         "--evaluator-kwargs", kwargs, "--problems", f"builtin,{ROWS}", "--no-cache",
                         "--rate-per-client", "10000", "--rate-burst", "10000", *extra,
                         log=log, custom=False, env=child_env(shared_net))


def run_service(args, name: str, backend: str, k: int, kill: bool, shared_net: bool = False) -> RunSummary:
    """One run: (a Ray head,) the server, the load, then everything stopped."""
    print(f"=== {name}: {k} {args.device_kind} worker(s), {backend}, {args.slots} slots each", flush=True)
    out = Path(args.out)
    ok, failing = workload(args.fail_fraction, args.seed, args.levels)
    config = EvalConfig(device="auto", trials=args.trials, warmup_calls=args.warmup, timed_calls=args.timed)
    load = Load(ok, failing, config, name, give_up_s=args.give_up_s)
    with tempfile.TemporaryDirectory(prefix="kgscale-") as tmp_dir:
        tmp = Path(tmp_dir)
        head = None
        if backend == "ray":
            gpus = 0 if args.device_kind == "cpu" else k
            head = RayHead(tmp, out / f"ray-{name}.log", gpus=gpus, cpus=k + 2)
            head.start()
        devices, extra = serve_args(args, backend, k, head.address if head else None)
        service = server(tmp, out / f"server-{name}.log", devices, args.slots, extra, shared_net)
        try:
            t0 = time.monotonic()
            service.start(args.start_timeout_s, workers=k)
            startup = time.monotonic() - t0
            print(f"  {k} worker(s) ready in {startup:.1f} s", flush=True)
            with ServiceClient(service.url, service.token, timeout_s=120.0) as client:
                rows, samples, report, wall, host = drive(client, args, load, k, kill)
        finally:
            service.stop()
            if head is not None:
                head.stop()
    if report is not None:
        settle_kill(report, rows, samples, args.warmup_s + args.duration_s, args.warmup_s)
    s = summarize(name, backend, k, args, startup, rows, samples, report, wall, len(load.submitted), host)
    print(f"  {name}: {s.evals_per_s:.2f} evaluations/s (window), {s.terminal}/{s.submitted} terminal, "
          f"lost {s.lost}, p50 {s.latency_p50_s or 0:.1f} s, p95 {s.latency_p95_s or 0:.1f} s, "
          f"per worker {s.per_worker}", flush=True)
    print_figures(s)
    return s


def print_figures(s: RunSummary) -> None:
    """The run's stage spreads and host load, one line each."""
    for stage, st in s.stages.items():
        print(f"  {s.name} stage {stage:<24} n {st['n']:4d}  median {st['median']:8.3f} s  "
              f"p95 {st['p95']:8.3f} s", flush=True)
    h = s.host
    figures = {k: h[k]["mean"] for k in ("load1", "running", "cpu_user", "cpu_system", "cpu_idle") if h.get(k)}
    busy = {g: round(b, 2) for g, b in h.get("gpu_busy", {}).items()}
    print(f"  {s.name} host ({h.get('cpus')} CPUs, {h.get('samples')} samples): "
          f"{ {k: round(v, 2) for k, v in figures.items()} }, GPU busy {busy or 'n/a'}", flush=True)


# -- verdicts, plot, main ---------------------------------------------------------------------------


def derived(runs: dict[str, dict]) -> dict[str, Any]:
    """Scaling efficiency per k (against local-k1) and Ray's rate over local workers' at equal k."""
    base = runs.get("local-k1", {}).get("evals_per_s")
    plain = [r for r in runs.values() if r["backend"] == "local" and r["kill"] is None and not r.get("shared_net")]
    scaling = {str(r["devices"]): r["evals_per_s"] / (r["devices"] * base) for r in plain if base}
    shared = {str(r["devices"]): r["evals_per_s"] / runs[f"local-k{r['devices']}"]["evals_per_s"]
              for r in runs.values() if r.get("shared_net") and runs.get(f"local-k{r['devices']}", {}).get(
                  "evals_per_s")}
    ray = {str(r["devices"]): r["evals_per_s"] / runs[f"local-k{r['devices']}"]["evals_per_s"]
           for r in runs.values() if r["backend"] == "ray" and runs.get(f"local-k{r['devices']}", {}).get(
               "evals_per_s")}
    return {"scaling_efficiency": scaling, "ray_over_local": ray, "shared_net_over_own": shared}


def verdicts(result: dict) -> list[tuple[str, str]]:
    """(PASS | FAIL | INFO, text) lines; rates are judged on GPUs only."""
    runs, gpu = result["runs"], result["device_kind"] == "cuda"
    rate_level = (lambda ok: "PASS" if ok else "FAIL") if gpu else (lambda ok: "INFO")
    out = []
    for r in runs.values():
        lines = [("PASS" if r["lost"] == 0 else "FAIL",
                  f"{r['name']}: none lost ({r['terminal']}/{r['submitted']} terminal)")]
        idle = [w for w, n in r["per_worker"].items() if not n]
        lines.append(("PASS" if not idle else "FAIL",
                      f"{r['name']}: every worker ran jobs {r['per_worker']}"))
        out += lines
    for k, eff in sorted(result["scaling_efficiency"].items(), key=lambda kv: int(kv[0])):
        if k != "1":
            out.append((rate_level(eff >= 0.9), f"scaling {k} devices: efficiency {eff:.2f} (target >= 0.9)"))
    for r in (r for r in runs.values() if r["kill"]):
        kill = r["kill"]
        out.append(("PASS" if r["lost"] == 0 else "FAIL", f"{r['name']}: kill run none lost"))
        out.append(("PASS" if kill["in_flight_finished"] else "FAIL",
                    (f"{r['name']}: the killed worker's {len(kill['in_flight'])} in-flight job(s) re-queued "
                    f"and finished {list(kill['in_flight_final'].values())}")))
        out.append(("PASS" if kill["others_kept_completing"] else "FAIL",
                    (f"{r['name']}: the other workers kept completing (evaluations/s before "
                    f"{_rates(kill['rate_before'])}, after {_rates(kill['rate_after'])})")))
        back = f"back after {kill['back_s'] - kill['at_s']:.1f} s" if kill["back_s"] else "not back"
        out.append(("INFO", f"{r['name']}: worker {kill['victim']} killed at {kill['at_s']:.1f} s, {back}"))
    for k, ratio in result.get("shared_net_over_own", {}).items():
        abi = result.get("landlock_abi", 0)
        took = "" if abi >= SHARED_NET_MIN_ABI else f" (NOT SHARED: Landlock ABI {abi} < {SHARED_NET_MIN_ABI})"
        out.append(("INFO", (f"shared network namespace {k} devices: {ratio:.2f} x the rate with one per fork "
                             f"(same call; adopt only if it wins on the GPUs){took}")))
    for k, ratio in result["ray_over_local"].items():
        out.append((rate_level(ratio >= 0.9), (f"Ray {k} devices: {ratio:.2f} x local workers' rate "
                                              f"(target within 10 %)")))
    return out + stage_lines(runs)


def stage_lines(runs: dict[str, dict]) -> list[tuple[str, str]]:
    """INFO lines across the per-k runs: each stage's median / p95 and the host's load per device count,
    so a stage or a load that grows with k stands out."""
    local = sorted((r for r in runs.values() if r["backend"] == "local" and not r["kill"]),
                   key=lambda r: (r["devices"], bool(r.get("shared_net"))))
    label = {r["name"]: f"k{r['devices']}" + ("-sharednet" if r.get("shared_net") else "") for r in local}
    stages = list(dict.fromkeys(st for r in local for st in r.get("stages", {})))
    out = []
    for stage in stages:
        cells = [f"{label[r['name']]} {st['median']:.3f}/{st['p95']:.3f}" for r in local
                 if (st := r.get("stages", {}).get(stage))]
        out.append(("INFO", f"stage {stage} median/p95 s: " + ", ".join(cells)))
    for r in local:
        h = r.get("host") or {}
        mean = {k: round(h[k]["mean"], 2) for k in ("load1", "cpu_system", "cpu_idle") if h.get(k)}
        busy = {g: round(b, 2) for g, b in h.get("gpu_busy", {}).items()}
        out.append(("INFO", f"host {label[r['name']]}: {mean}, GPU busy {busy or 'n/a'}"))
    return out


def _rates(rates: dict[str, float]) -> str:
    return "{" + ", ".join(f"{w}: {v:.2f}" for w, v in rates.items()) + "}"


def plot(result: dict, path: Path) -> None:
    plt = pyplot()
    if plt is None:
        return
    runs = result["runs"].values()
    local = sorted((r for r in runs if r["backend"] == "local" and not r["kill"] and not r.get("shared_net")),
                   key=lambda r: r["devices"])
    kill = next((r for r in runs if r["kill"]), None)
    fig, axes = plt.subplots(1, 2 if kill else 1, figsize=(13 if kill else 6.5, 4.5), squeeze=False)
    a = axes[0][0]
    a.plot([r["devices"] for r in local], [r["evals_per_s"] for r in local], "o-", label="local workers")
    base = next((r["evals_per_s"] for r in local if r["devices"] == 1), None)
    if base:
        ks = [r["devices"] for r in local]
        a.plot(ks, [k * base for k in ks], "k--", alpha=0.5, label="ideal (k x rate(1))")
    for r in (r for r in runs if r["backend"] == "ray"):
        a.plot([r["devices"]], [r["evals_per_s"]], "s", color="tab:red", label=f"Ray actors ({r['devices']})")
    a.set(xlabel=f"{result['device_kind']} devices", ylabel="evaluations/s", title="service throughput")
    a.set_ylim(bottom=0)
    a.grid(alpha=0.3)
    a.legend()
    if kill:
        b = axes[0][1]
        per: dict[str, list[float]] = defaultdict(list)
        for row in kill["rows"]:
            if row["job_status"] == "done":
                per[row["worker"]].append(row["done_s"])
        for w, ts in sorted(per.items()):
            b.plot(sorted(ts), range(1, len(ts) + 1), label=w)
        b.axvline(kill["kill"]["at_s"], color="tab:red", linestyle="--",
                  label=f"kill -9 {kill['kill']['victim']}")
        if kill["kill"]["back_s"]:
            b.axvline(kill["kill"]["back_s"], color="tab:green", linestyle=":", label="worker back")
        b.set(xlabel="seconds since start", ylabel="evaluations finished",
              title=f"{kill['name']}: per worker")
        b.grid(alpha=0.3)
        b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device-kind", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--gpus", default="1,2,4",
                    help="comma list of device counts (cpu:k with --device-kind cpu)")
    ap.add_argument("--slots", type=int, default=None, help="jobs in flight per device (default 4, CPU 1)")
    ap.add_argument("--duration-s", type=float, default=120.0, help="measured window of each run")
    ap.add_argument("--warmup-s", type=float, default=None,
                    help="load before the measured window (default 20, CPU 0): references timed, pools warm")
    ap.add_argument("--kill-one-worker", action="store_true",
                    help="add a run at the largest k with a kill -9")
    ap.add_argument("--ray", action="store_true", help="add a run at the largest k with Ray actors")
    ap.add_argument("--no-scaling", action="store_true",
                    help="skip the per-k runs (kill / Ray parts alone)")
    ap.add_argument("--shared-net-ab", action="store_true",
                    help="each k again with the zygotes' forks in a shared network namespace, same call")
    add_workload_args(ap)
    ap.add_argument("--start-timeout-s", type=float, default=600.0)
    ap.add_argument("--give-up-s", type=float, default=900.0,
                    help="a job not terminal by then counts as lost")
    ap.add_argument("--progress-s", type=float, default=10.0)
    ap.add_argument("--unsafe-no-sandbox", action="store_true",
                    help="hosts without a working bubblewrap")
    ap.add_argument("--fresh", action="store_true", help="do not merge with the runs of an earlier JSON")
    ap.add_argument("--out", default="out/service_scaling")
    ap.add_argument("--replot", action="store_true")
    args = ap.parse_args(argv)
    cpu = args.device_kind == "cpu"
    args.slots = args.slots or (1 if cpu else 4)
    args.warmup_s = args.warmup_s if args.warmup_s is not None else (0.0 if cpu else 20.0)
    if args.quick:
        args.trials, args.warmup, args.timed = 2, 1, 3
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "service_scaling.json"
    if args.replot:
        plot(json.loads(path.read_text()), out / "service_scaling.png")
        return 0
    ks = sorted({int(k) for k in args.gpus.split(",") if k.strip()})
    plan = []
    for k in [] if args.no_scaling else ks:
        plan.append((f"local-k{k}", "local", k, False, False))
        if args.shared_net_ab:
            plan.append((f"local-k{k}-sharednet", "local", k, False, True))
    if args.kill_one_worker:
        plan.append((f"local-k{ks[-1]}-kill", "local", ks[-1], True, False))
    if args.ray:
        plan.append((f"ray-k{ks[-1]}", "ray", ks[-1], False, False))
    earlier = json.loads(path.read_text()) if path.exists() and not args.fresh else {}
    runs = dict(earlier.get("runs", {})) if earlier.get("device_kind") == args.device_kind else {}
    for name, backend, k, kill, shared_net in plan:
        runs[name] = asdict(run_service(args, name, backend, k, kill, shared_net)) | {"shared_net": shared_net}
    result = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "host": socket.gethostname(), "device_kind": args.device_kind, "args": vars(args),
              "runs": runs, "landlock_abi": landlock_abi(), **derived(runs)}
    path.write_text(json.dumps(result, indent=1))
    print(f"wrote {path}")
    plot(result, out / "service_scaling.png")
    lines = verdicts(result)
    for level, text in lines:
        print(f"{level} {text}")
    return 1 if any(level == "FAIL" for level, _ in lines) else 0


if __name__ == "__main__":
    sys.exit(main())
