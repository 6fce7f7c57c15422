"""Service configuration: one frozen dataclass, every field documented, unknown keys are errors."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

from drkernel.config import from_mapping
from drkernel.errors import ConfigError

SYNCHRONOUS_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")
DEFAULT_PORT = 8765
"""`drkernel gym serve`'s port (8000 is the OpenAI-compatible model server's, `agent serve-model`)."""


def state_dir() -> Path:
    """Where a server keeps its store, lock and single-user token by default: ``$XDG_STATE_HOME/
    drkernel`` (``~/.local/state/drkernel``), outside any repository."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "drkernel"


def default_db_path() -> str:
    return str(state_dir() / "kernelgym.sqlite")


@dataclass(frozen=True)
class ServiceConfig:
    """How the KernelGym service runs."""

    db_path: str = field(default_factory=default_db_path)
    """SQLite job store (WAL mode, created 0600). The store is the source of truth: jobs survive a
    restart. Default: ``kernelgym.sqlite`` in `state_dir`."""
    sqlite_synchronous: str = "FULL"
    """SQLite ``synchronous`` pragma. FULL: an acknowledged job survives power loss; NORMAL: it
    survives a crash of the server process (not of the machine) at a lower commit cost."""
    devices: str = "auto"
    """Local worker devices: ``auto`` (every visible GPU, else ``cpu:1``), ``cpu:N`` (N interpreter
    workers) or a comma list such as ``cuda:0,cuda:1``. Ignored with ``ray_address``."""
    evaluator: str = "drkernel.gym.cuda.evaluate:in_process_with_languages"
    """``module:callable`` building a worker's evaluator, called with ``device=`` and ``evaluator_kwargs``
    (the default: the in-process gym behind the CUDA front, so ``language: cuda`` requests are judged as CUDA)."""
    evaluator_kwargs: Mapping[str, Any] | None = None
    """Extra keyword arguments for the evaluator factory (e.g. ``concurrency``, ``pool_size``)."""
    slots_per_worker: int = 2
    """Jobs in flight per worker (per device). The gym overlaps their compilation and correctness
    and holds the device exclusively for each timed region."""
    device_memory_bytes: int | None = None
    """Device memory a worker may commit to admitted jobs; None: 90 % of what the device reports
    (CPU workers: 4 GiB each)."""
    host_memory_bytes: int | None = None
    """Host memory the request code on one worker may hold, all its slots together. Each slot gets an
    equal share, and the processes of an evaluation that run request code (its candidate; with a
    custom reference also that reference's own judge, half the share each) are killed past it,
    whatever ``rss_limit_mb`` a request asks: the smaller of the two applies. None: a CPU worker's
    ``device_memory_bytes`` (4 GiB when unset); a GPU worker 90 % of the host's physical memory
    divided among the host's GPUs."""
    max_attempts: int = 2
    """Attempts per job on infrastructure failure (a lost worker, a store error, a server restart).
    A bad solution is a result and is never retried."""
    lease_s: float = 30.0
    """A claim lapses this long after its last heartbeat; the job is then re-queued."""
    job_timeout_grace_s: float = 120.0
    """A worker that holds a job longer than the job's ``timeout_s`` plus this is killed as hung."""
    reserve_s: float = 60.0
    """A client with a job that ran on a worker keeps its fair share of that worker's slots reserved
    this long after its last activity (a submission, a job of its claimed or ended): another client
    at or over its own share does not take a slot the client is owed, so one sending a job at a time
    finds its slot free instead of preempting for it (`scheduler.reserved_slots`). 0: no reservations
    (a client below its share then takes a slot back by preemption only)."""
    canary: bool = True
    """Run a known-good canary evaluation when a worker starts and after a crash, timeout or
    infrastructure failure on it; a failing canary takes the device out of service."""
    cache: bool = True
    """Answer a request whose content hash (problem, solution, config, device model) was evaluated before."""
    token: str | None = None
    """A bearer token registered for client ``default`` at start (besides the stored tokens of
    `drkernel gym token add`). Every /v1 route except health needs a client's token."""
    max_body_bytes: int = 32 * 1024 * 1024
    """Largest accepted request body."""
    max_body_bytes_in_flight: int = 256 * 1024 * 1024
    """Request bodies held in memory at once, all clients together (each client at most two bodies of
    ``max_body_bytes``): past it a body is refused with 503 as it arrives, before it is held."""
    max_batch: int = 4096
    """Most requests in one batch submission."""
    max_wait_s: float = 300.0
    """Longest long-poll a client may ask for."""
    ray_address: str | None = None
    """Place device workers as Ray actors on this cluster (``auto``, ``local`` or ``ray://host:port``)."""
    ray_cpu_workers: int = 0
    """With Ray: CPU interpreter workers to place (besides one actor per GPU)."""
    problems: str = "builtin"
    """Problem sets the server evaluates against, named by key (comma list of `load_problems` specs)."""
    allow_custom_problems: bool = False
    """Accept reference code in a request for a key the server did not load (run by the judge, which
    the OS sandbox confines). Off: a request names a loaded problem by key."""
    max_trials: int = 100
    """Largest ``trials`` a request may ask for."""
    max_timed_calls: int = 10_000
    """Largest ``warmup_calls``, ``timed_calls`` and ``timed_calls_max`` a request may ask for."""
    max_timeout_s: float = 900.0
    """Largest ``timeout_s`` a request may ask for (the slot watchdog allows this plus the grace)."""
    max_rss_limit_mb: int = 32768
    """Largest ``rss_limit_mb`` a request may ask for."""
    max_problem_bytes: int = 64 << 10
    """Largest reference source (custom problems) in bytes. Admission parses it (a large one in a child
    process, `admission.INLINE_READ_BYTES`); KernelBench references are a few kB (levels 1-2: 2.7 kB at
    most; the builtin set: 1.6 kB), so 64 KiB leaves room for whole-model references."""
    max_solution_bytes: int = 256 << 10
    """Largest solution source in bytes. The source is read (static checks, the verdict's view, a CUDA
    contract) in a checker child that the request's ``timeout_s`` and a cancel kill, at about 65 us a
    statement on a 2-core host: 256 KiB keeps an honest reading near 10 s. Public kernel files are tens of KB."""
    max_queued_per_client: int = 10_000
    """Jobs a client may have queued or running at once; more are answered 429."""
    rate_per_client: float = 50.0
    """Requests per second a client may send on average (a token bucket); more are answered 429."""
    rate_burst: int = 200
    """Requests a client may send at once before the rate applies."""
    rate_per_peer: float = 20.0
    """Requests per second a peer address may send on average without a verified token (the open
    routes ``/metrics`` and ``/v1/health``, unknown tokens, a token's first use); more are 429.
    Clients behind one proxy share an address."""
    peer_burst: int = 200
    """Requests without a verified token a peer address may send at once before its rate applies."""
    rate_unverified: float = 200.0
    """Requests per second all peers together may send on average without a verified token (on top of
    ``rate_per_peer``): a client rotating source addresses (a host's loopback range, IPv6 prefixes) meets a
    new peer bucket each time, not this one; more are 429. A client whose token was verified is not
    charged (a token's re-check included), so it is unaffected by such floods."""
    unverified_burst: int = 1000
    """Requests without a verified token all peers together may send at once before ``rate_unverified``
    applies."""
    token_ttl_s: float = 10.0
    """How long a verified token is trusted from memory without the store (so a removed client's
    token keeps working at most this long)."""
    submit_rate_per_client: float = 100.0
    """Jobs per second a client may submit on average, cached ones included (a cached job is done
    at once, so ``max_queued_per_client`` never sees it); a submission past it is 429."""
    submit_burst: int = 8192
    """Jobs a client may submit at once before ``submit_rate_per_client`` applies (at least
    ``max_batch``, so a full batch can pass)."""
    parse_rate_per_client: int = 1 << 20
    """JSON values and keys a client's request bodies may have parsed per second, on average (about
    0.14 s of the GIL every client shares; a burst of two bodies at the per-body limit,
    `body_reader.MAX_BODY_TOKENS`); a body past it is 429 before it is parsed. A maximal legitimate
    batch (4,096 requests) is about half a million."""
    max_waits_per_client: int = 8
    """Long polls a client may hold open at once; more are answered 429."""
    answer_bytes_per_client: int = 4 << 20
    """Bytes of jobs (results, errors) a client's reads (a job, a long poll) may return per second on
    average: each read is charged what it returned, a client's reads of the store are made one at a
    time, and one that owes is answered 429 before its next read is made. Reading and encoding answers
    takes the store's read lock and the threads every client shares: one long poll of 4,096 finished
    jobs returns about 15 MB, and 8 of them in a loop made other clients' reads 280x slower."""
    answer_burst_bytes: int = 32 << 20
    """Bytes a client's reads may return at once before ``answer_bytes_per_client`` applies (a read
    returning more still passes when the client owes nothing; it then owes the difference)."""
    max_stored_bytes_per_client: int = 1 << 30
    """Bytes of requests and results a client may keep in the store; submissions beyond are 429
    until `retention_s` removes old jobs."""
    retention_s: float = 7 * 24 * 3600.0
    """Finished jobs (request, result) are removed this long after they finished."""
    head_timeout_s: float = 10.0
    """A connection must complete its request head this soon after it opens (or after its previous
    response), or it is closed."""
    body_timeout_s: float = 60.0
    """A request body must arrive whole this soon after its head, or the request is answered 408."""
    write_timeout_s: float = 30.0
    """A response its reader takes nothing of for this long (the socket's buffers full) is dropped
    with its connection."""
    max_connections: int = 1000
    """Open connections at most (lowered to what the descriptor limit allows); over it, the
    connection whose unfinished request (head or body still arriving) began first is closed."""
    token_file: str | None = None
    """Single-user mode: where the generated token of client ``local`` is written (0600) when the
    store has no client yet and no ``token`` is given; None: ``<db_path>.token``."""

    def __post_init__(self) -> None:
        problems = []
        if self.sqlite_synchronous.upper() not in SYNCHRONOUS_MODES:
            problems.append(f"sqlite_synchronous={self.sqlite_synchronous!r} (one of {SYNCHRONOUS_MODES})")
        if ":" not in self.evaluator:
            problems.append(f"evaluator={self.evaluator!r} (module:callable)")
        for name in (
            "slots_per_worker",
            "max_attempts",
            "max_batch",
            "max_trials",
            "max_timed_calls",
            "max_rss_limit_mb",
            "max_problem_bytes",
            "max_solution_bytes",
            "max_queued_per_client",
            "rate_burst",
            "peer_burst",
            "unverified_burst",
            "submit_burst",
            "max_waits_per_client",
            "answer_bytes_per_client",
            "answer_burst_bytes",
            "max_stored_bytes_per_client",
            "max_connections",
            "max_body_bytes_in_flight",
            "parse_rate_per_client",
        ):
            if getattr(self, name) < 1:
                problems.append(f"{name}={getattr(self, name)} (at least 1)")
        if self.host_memory_bytes is not None and self.host_memory_bytes < 1:
            problems.append(f"host_memory_bytes={self.host_memory_bytes} (at least 1, or None)")
        for name in ("lease_s", "max_wait_s", "max_timeout_s", "rate_per_client", "retention_s",
                     "head_timeout_s", "body_timeout_s", "write_timeout_s", "rate_per_peer",
                     "rate_unverified", "submit_rate_per_client",
                     "token_ttl_s"):
            if getattr(self, name) <= 0:
                problems.append(f"{name}={getattr(self, name)} (positive)")
        if not self.reserve_s >= 0:  # NaN included
            problems.append(f"reserve_s={self.reserve_s} (0 or more)")
        if self.submit_burst < self.max_batch:
            problems.append(f"submit_burst={self.submit_burst} below max_batch={self.max_batch} (a full "
                            "batch could never pass)")
        if problems:
            raise ConfigError("invalid ServiceConfig: " + "; ".join(problems))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["evaluator_kwargs"] = dict(self.evaluator_kwargs or {})
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ServiceConfig":
        """Types checked and unknown keys named by the project's one loader (`drkernel.config`)."""
        return from_mapping(cls, d)
