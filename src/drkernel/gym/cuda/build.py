"""Compiling a CUDA solution's extensions on the host, once per content (torch-free).

Builds of different keys run side by side up to ``parallel`` (default half the host's cores: each
build runs nvcc and the host compiler at once). Where a service gives each evaluation a share of the
host's memory (`Compiler.memory_share`), an evaluation's builds hold that share together, measured
over each compile child's whole process tree (`build_plan`, `Compiler.build_all`): the compilers are
counted where its candidate is, so builds cannot over-commit the host beside the candidates.

`Compiler.build(module)` looks the module up in the host's `CompileCache` and, on a miss, starts a
compile child (`drkernel.gym.cuda.compile_child`) through the gym's `Runner`: the sandbox, with its own
CPU-time limit (`COMPILE_LIMITS`). The key is computed here, by the host, from the sources, the
flags, the toolchain (`toolchain.toolchain`), the device architecture and whether the build links; a
child only ever answers for the one job it was given, and only the host writes entries. Candidates
see the cache read-only, so none can write an entry another loads. A compile that fails is cached too
(a repeat of a broken source is free). Concurrent builds of one key wait for the first (single flight).

Compile errors are trimmed (`trim_errors`) to the lines that name an error, with the source line and
caret the compiler prints under each: what a model needs to fix its source, not the header chains.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from drkernel.errors import InfrastructureError
from drkernel.gym.cuda import toolchain
from drkernel.gym.cuda.contract import CudaModule
from drkernel.gym.cuda.messages import CompileJob, CompileReply, build_key
from drkernel.gym.ipc import ChannelClosed, ChannelTimeout
from drkernel.gym.orchestrator.memory import RssWatch
from drkernel.gym.orchestrator.sandbox import Limits, Runner

COMPILE_LIMITS = Limits(cpu_s=600, nproc=256, as_bytes=8 << 30)
"""A build's CPU seconds and address space (per process: nvcc, cicc, ptxas and cc1plus each; nvcc's front
end holds ~1.3 GB parsing torch's headers, a template explosion tens of GB without a bound) and processes."""
HOST_ENDED = re.compile(r"signal terminated program|Killed signal|killed by signal|died due to signal|"
                        r"^\s*Killed\s*$|virtual memory exhausted|out of memory|cannot allocate memory|"
                        r"std::bad_alloc|the compile stopped", re.I | re.M)
"""A failed build that its host ended (a compiler killed by a signal, out of memory, the time limit), not a
diagnostic of the source: such an outcome is not cached (a later build may pass) and the evaluation ends
as a timeout or crash, which the service does not cache either."""
COMPILE_TIMEOUT_S = 900.0
COMPILER_BYTES = 7 << 28
"""Host memory one compiler of a build is planned at when an evaluation's share bounds its builds
(`build_plan`): 1.75 GiB, the larger peak of the two, 1.50 GiB, and a sixth more. Measured on gelu's
gold over each compiler's process tree (nvcc 13.0 and its cicc, ptxas: 1.47 GiB; the host's c++:
1.50 GiB; each parsing torch's headers; a 2-core CPU host, 2026-11-27)."""
BUILD_BYTES = 2 * COMPILER_BYTES
"""A build whose two compilers run side by side (3.1 GB measured together, the sum of the two)."""
WAIT_POLL_S = 0.2
"""How often a build waiting for its key's lock or a compile slot looks whether it was cancelled."""
ERROR_LINES = 40
ERROR_CHARS = 3000
MISSING_ON_CPU = re.compile(r"fatal error: (cusparse|cublas\w*|cudnn|cusolver\w*|curand\w*|cufft\w*|nccl)"
                            r"[\w./]*: No such file")
"""A header of a CUDA library this host's toolkit lacks: a gap of the host, not the solution's error."""
_ERROR = re.compile(r"\berror\b|\bfatal\b|undefined reference", re.I)


def trim_errors(log: str) -> str:
    """The lines of a compiler's output that name an error, each with the two lines after it (the
    source line and caret), without ``In file included from`` chains; at most `ERROR_LINES` lines
    and `ERROR_CHARS` characters. The whole tail when no line names an error."""
    chains = ("In file included", "from ")
    lines = [line for line in log.splitlines() if line.strip() and not line.lstrip().startswith(chains)]
    keep: list[int] = []
    for i, line in enumerate(lines):
        if _ERROR.search(line):
            keep += [j for j in range(i, min(i + 3, len(lines))) if j not in keep]
    picked = [lines[i] for i in keep] if keep else lines[-ERROR_LINES:]
    text = "\n".join(picked[:ERROR_LINES])
    return text[:ERROR_CHARS]


@dataclass(frozen=True)
class BuildOutcome:
    """One module's build as an evaluation sees it."""

    key: str
    ok: bool
    seconds: float            # the compile's own seconds (of the build that made the entry)
    cached: bool              # found in the cache: this evaluation compiled nothing
    linked: bool              # a loadable library exists (hosts whose torch has CUDA)
    error: str | None = None  # trimmed compiler output
    host_gap: bool = False    # failed for a header this host lacks (CPU hosts): not the solution's error
    host_ended: bool = False  # failed because the host ended it (`HOST_ENDED`): never cached
    library: str | None = None  # the library's path in the cache


def job_for(module: CudaModule, arch: str, link: bool) -> CompileJob:
    return CompileJob(name=module.name, cpp_sources=module.cpp_sources, cuda_sources=module.cuda_sources,
                      functions=module.functions, cflags=module.cflags, cuda_cflags=module.cuda_cflags,
                      arch=arch, link=link)


CACHE_BYTES = 4 << 30
"""The compile cache's size on disk past which its oldest entries are removed (every distinct source
adds an entry: without a bound, a client's stream of variants fills the host's disk)."""


class CompileCache:
    """Entries ``<root>/<key>/outcome.json`` (+ ``<name>.so``), written by the host only: built in a
    temp folder beside them, made read-only, renamed into place (atomic; the first writer wins). Past
    ``max_bytes`` the oldest entries go (`evict`)."""

    def __init__(self, root: str | os.PathLike, max_bytes: int = CACHE_BYTES) -> None:
        self.root = Path(root)  # made by the first `put`: a gym that never builds leaves no folder
        self.max_bytes = max_bytes

    def get(self, key: str) -> BuildOutcome | None:
        path = self.root / key / "outcome.json"
        try:
            data = json.loads(path.read_text())
        except (FileNotFoundError, NotADirectoryError):  # absent, or evicted meanwhile
            return None
        return BuildOutcome(**{**data, "cached": True})

    def evict(self) -> int:
        """Remove the oldest entries (by when they were written) until the cache holds at most
        ``max_bytes``; returns how many went."""
        entries = []
        for entry in self.root.iterdir() if self.root.is_dir() else ():
            if entry.name.startswith(".tmp-") or not entry.is_dir():
                continue
            try:
                size = sum(f.stat().st_size for f in entry.iterdir())
                entries.append((entry.stat().st_mtime, size, entry))
            except FileNotFoundError:  # another process evicted it
                continue
        total, removed = sum(size for _, size, _ in entries), 0
        for _, size, entry in sorted(entries):
            if total <= self.max_bytes:
                break
            entry.chmod(0o755)
            shutil.rmtree(entry, ignore_errors=True)
            total, removed = total - size, removed + 1
        return removed

    def put(self, key: str, name: str, reply: CompileReply, blob: bytes, error: str | None,
            host_gap: bool) -> BuildOutcome:
        entry = self.root / key
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.root))
        library = str(entry / f"{name}.so") if blob else None
        if blob:
            (tmp / f"{name}.so").write_bytes(blob)
        outcome = BuildOutcome(key=key, ok=reply.ok, seconds=reply.seconds, cached=False, linked=bool(blob),
                               error=error, host_gap=host_gap, library=library)
        (tmp / "outcome.json").write_text(json.dumps(asdict(outcome)))
        for f in tmp.iterdir():
            f.chmod(0o444)
        tmp.chmod(0o555)
        try:
            os.rename(tmp, entry)
        except OSError:  # another host process wrote the same key first: same content, keep theirs
            tmp.chmod(0o755)
            shutil.rmtree(tmp, ignore_errors=True)
        self.evict()
        return outcome


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "drkernel", "cuda")


def build_plan(modules: int, share: int | None) -> tuple[int, int | None, bool]:
    """How an evaluation's ``modules`` builds run within its host-memory ``share`` (None: unbounded):
    ``(at_once, bytes_each, in_turn)``. As many at once as `BUILD_BYTES` each fit the share (at most
    every module), each watched against its part of the share; where not even one fits, one build at
    a time with its two compilers one after the other (`COMPILER_BYTES`, about half), watched against
    the whole share: a default CPU worker's 2 GiB a slot builds so. Without a share every module builds
    at once, each bounded per process by `COMPILE_LIMITS` alone."""
    if share is None:
        return max(1, modules), None, False
    if share < BUILD_BYTES:
        return 1, max(1, share), True
    at_once = min(max(1, modules), share // BUILD_BYTES)
    return at_once, share // at_once, False


class BuildCancelled(Exception):
    """A build stopped because the evaluation that asked for it was cancelled (`Compiler.cancel`);
    nothing of it is cached."""


class Compiler:
    """Builds modules through compile children, one cache per host, single flight per key. Builds
    made for an ``owner`` (an evaluation, inside `owned`) stop when `cancel` names it."""

    def __init__(self, runner: Runner, cache: CompileCache, arch: str = toolchain.DEFAULT_ARCH,
                 link: bool | None = None, limits: Limits = COMPILE_LIMITS,
                 timeout_s: float = COMPILE_TIMEOUT_S, parallel: int | None = None) -> None:
        self.runner, self.cache, self.arch = runner, cache, arch
        self.limits, self.timeout_s = limits, timeout_s
        # a build runs two compilers (nvcc's front end alone holds ~1.3 GB parsing torch's headers)
        self._slots = threading.BoundedSemaphore(parallel or max(1, (os.cpu_count() or 2) // 2))
        self.link = toolchain.can_link() if link is None else link
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._owners: dict[int, list] = {}  # owner -> its compile children under way
        self._cancelled: set[int] = set()
        self.memory_share: int | None = None  # host bytes one evaluation's builds hold together (`build_all`)

    @contextlib.contextmanager
    def owned(self, owner: int) -> Iterator[None]:
        """Builds inside are ``owner``'s: `cancel(owner)` kills their compile children."""
        with self._guard:
            self._owners[owner] = []
            self._cancelled.discard(owner)
        try:
            yield
        finally:
            with self._guard:
                self._owners.pop(owner, None)
                self._cancelled.discard(owner)

    def cancel(self, owner: int) -> bool:
        """Stop ``owner``'s builds (their `build` raises `BuildCancelled`); False when it has none
        under way (it is not inside `owned`)."""
        with self._guard:
            if owner not in self._owners:
                return False
            self._cancelled.add(owner)
            children = list(self._owners[owner])
        for child in children:
            child.kill()
        return True

    def key(self, module: CudaModule) -> str:
        return build_key(job_for(module, self.arch, self.link), toolchain.toolchain())

    def build_all(self, modules: Sequence[CudaModule], owner: int | None = None) -> list[BuildOutcome]:
        """One evaluation's ``modules``, built side by side within its host-memory share
        (`memory_share`, `build_plan`): the share that bounds its candidate bounds its compilers too,
        so a worker's slots cannot hold more than the worker's host memory with builds either."""
        at_once, each, in_turn = build_plan(len(modules), self.memory_share)
        if at_once == 1:
            return [self.build(m, owner, each, in_turn) for m in modules]
        with concurrent.futures.ThreadPoolExecutor(max_workers=at_once) as pool:
            return list(pool.map(lambda m: self.build(m, owner, each, in_turn), modules))

    def build(self, module: CudaModule, owner: int | None = None,
              memory_bytes: int | None = None, in_turn: bool = False) -> BuildOutcome:
        """``module``'s build (from the cache, or a compile child whose processes together hold at most
        ``memory_bytes`` of host memory: killed past it, a host-ended outcome, not cached; ``in_turn``:
        its compilers one after the other)."""
        job = job_for(module, self.arch, self.link)
        key = build_key(job, toolchain.toolchain())
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with self._waiting(lock, owner):
            found = self.cache.get(key)
            if found is not None:
                return found
            with self._waiting(self._slots, owner):
                reply, blob = self._run(job, owner, memory_bytes, in_turn)
            error = None if reply.ok else trim_errors(reply.log)
            if not reply.ok and HOST_ENDED.search(reply.log):
                return BuildOutcome(key=key, ok=False, seconds=reply.seconds, cached=False, linked=False,
                                    error=error or reply.log[-ERROR_CHARS:], host_ended=True)
            return self.cache.put(key, job.name, reply, blob, error,
                                  host_gap=not reply.ok and bool(MISSING_ON_CPU.search(reply.log)))

    @contextlib.contextmanager
    def _waiting(self, lock: Any, owner: int | None) -> Iterator[None]:
        """Hold ``lock`` (the key's single flight, a compile slot), waiting for it in a way a cancel of
        ``owner`` ends (`BuildCancelled`): a job queued behind another's slow build stops alone."""
        while not lock.acquire(timeout=WAIT_POLL_S):
            if owner is not None and owner in self._cancelled:
                raise BuildCancelled("the evaluation was cancelled while its build waited")
        try:
            yield
        finally:
            lock.release()

    def _adopt(self, owner: int | None, child) -> None:
        """Count ``child`` among ``owner``'s builds; `BuildCancelled` when the owner was cancelled."""
        if owner is None:
            return
        with self._guard:
            if owner in self._cancelled:
                raise BuildCancelled("the evaluation was cancelled before its build")
            if owner in self._owners:
                self._owners[owner].append(child)

    def _run(self, job: CompileJob, owner: int | None = None, memory_bytes: int | None = None,
             in_turn: bool = False) -> tuple[CompileReply, bytes]:
        from drkernel.gym.orchestrator.pool import Child

        t = time.monotonic()
        child = Child("drkernel.gym.cuda.compile_child", "cpu", {}, self.runner, limits=self.limits)
        watch = RssWatch(child.pid, memory_bytes, cpu_share=False) if memory_bytes else None
        try:
            self._adopt(owner, child)
            with watch or contextlib.nullcontext():
                child.send({**job.to_header(), "in_turn": in_turn})  # not the job's: its key is the same
                msg = child.recv(deadline=time.monotonic() + self.timeout_s)
            return CompileReply.from_header(msg.header), bytes(msg.blob)
        except (ChannelClosed, ChannelTimeout) as e:
            if owner in self._cancelled:
                raise BuildCancelled("the evaluation was cancelled during its build") from e
            if watch is not None and watch.fired:
                log = (f"error: the compile stopped: its compilers held more than {memory_bytes >> 20} MiB, "
                       f"the evaluation's share of the host's memory (peak seen {watch.peak >> 20} MiB)")
                return CompileReply(ok=False, seconds=time.monotonic() - t, linked=False, log=log), b""
            rc = child.returncode
            if isinstance(e, ChannelTimeout) or rc is not None and rc < 0:  # RLIMIT_CPU or the wall clock
                log = f"error: the compile stopped (its time limit): {child.log_tail()}"
                return CompileReply(ok=False, seconds=self.timeout_s, linked=False, log=log), b""
            raise InfrastructureError(f"compile child failed: {e}\n{child.log_tail()}") from e
        finally:
            child.discard()
