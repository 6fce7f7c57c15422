"""The static checks in a child process, where a job's deadline and a cancel reach them.

The static checks read the solution's source (untrusted, up to the service's size limit) in pure
Python; some shapes of source cost far more than others, and a thread cannot be stopped from
outside. So each evaluation hands its source to a checker child and waits for the answer with its
deadline (the request's ``timeout_s``) and its cancellation: either kills the child, and the
evaluation ends there (`StaticTimeout`, or `WaitCancelled` as any cancelled wait does). A child
that answered is kept for the next evaluation (`IDLE_CHILDREN`), so an evaluation pays no start.

The child's answer is the one reading of the source an evaluation makes (`StaticFacts`): besides the
checks' findings it carries what the verdict reads from the source (the kernels it defines, the
PyTorch compute reachable from forward, its TF32 findings, the functions it defines), so nothing in
the evaluation's own thread parses or analyses the solution (the analysis of a hostile 256 KiB
source took 10-38 s there, where no deadline or cancel reached it).

The parent sends the checks (pickled: our own objects, parent to child only) once, then per job the
source, the problem, the language (a CUDA solution's contract takes the checks' place, read here
before its build: `drkernel.gym.cuda.evaluate`) and whether the checks run; the child answers one
JSON header per job
(`drkernel.gym.ipc.Channel`)::

    parent: checks <pickled registry.static>
    (parent: check <pickled (source, problem, language, run_checks)>
     child: found hacks=[...] blocked=... own_kernels=... ... | error text=...)*

The parent never unpickles what the child sends; it parses the header into `StaticFacts`.
"""

from __future__ import annotations

import logging
import pickle
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, fields
from typing import Any, Callable, ContextManager, Sequence

from drkernel.errors import InfrastructureError
from drkernel.gym.ipc import Channel, ChannelClosed, ChannelTimeout, ProtocolViolation
from drkernel.gym.orchestrator.runtime import WaitCancelled
from drkernel.gym.cuda.contract import CudaModule
from drkernel.gym.result import Hack
from drkernel.gym.verdict.static import TorchCall

log = logging.getLogger(__name__)

IDLE_CHILDREN = 4
"""Checker children kept between evaluations (one per evaluation running at once is enough)."""
START_TIMEOUT_S = 60.0
"""How long a checker child may take to start and take the checks (our cost, not the request's)."""
_HACK_FIELDS = {f.name: f.type for f in fields(Hack)}
_MODULE_FIELDS = {f.name for f in fields(CudaModule)}
NAMES_CAP = 1 << 16
"""Most names (kernels, functions, calls, findings) an answer lists; more is a violation."""
_CHILD = "from drkernel.gym.orchestrator.static_child import main; main()"


class StaticTimeout(Exception):
    """The static checks did not finish within the request's ``timeout_s``."""


@dataclass(frozen=True)
class StaticFacts:
    """What the checker child read from one solution source (`drkernel.gym.verdict.checks.source_view`
    and `static_tf32`, read by the verdict through `drkernel.gym.verdict.checks.static_view`).

    Attributes:
        hacks: the static checks' findings (a CUDA source's: its contract's, `CudaReport.all_hacks`);
            ``blocked``: a blocking check found one.
        language: ``Triton`` or ``CUDA``.
        own_kernels: the kernels the source defines (``@triton.jit`` functions; ``__global__`` ones).
        torch_calls: the PyTorch compute reachable from ``ModelNew.forward`` (the strict verdict).
        tf32: ``tl.dot`` calls that may run as TF32 and half-precision casts (hack 12 under kernelbench).
        functions: the functions the source defines (`drkernel.gym.orchestrator.session.forged_claims`).
        parse_error: why the (Python) source does not parse; ``has_modelnew``: it defines ``ModelNew``.
        modules: a CUDA source's ``load_inline`` calls, resolved (what the host builds).
    """

    hacks: tuple[Hack, ...] = ()
    blocked: bool = False
    language: str = "Triton"
    own_kernels: tuple[str, ...] = ()
    torch_calls: tuple[TorchCall, ...] = ()
    tf32: tuple[str, ...] = ()
    functions: frozenset[str] = frozenset()
    parse_error: str | None = None
    has_modelnew: bool = True
    modules: tuple[CudaModule, ...] = ()

    def to_header(self) -> dict[str, Any]:
        return {"op": "found", "hacks": [asdict(h) for h in self.hacks], "blocked": self.blocked,
                "language": self.language, "own_kernels": list(self.own_kernels),
                "torch_calls": [[c.name, c.line, c.where] for c in self.torch_calls], "tf32": list(self.tf32),
                "functions": sorted(self.functions), "parse_error": self.parse_error,
                "has_modelnew": self.has_modelnew, "modules": [asdict(m) for m in self.modules]}

    @classmethod
    def from_header(cls, h: dict[str, Any]) -> "StaticFacts":
        """The child's ``found`` answer; anything malformed is a `ProtocolViolation`."""
        calls = _listed(h, "torch_calls")
        if not all(isinstance(c, list) and len(c) == 3 and isinstance(c[0], str) and type(c[1]) is int
                   and isinstance(c[2], str) for c in calls):
            raise ProtocolViolation("a malformed torch call from the static checks' process")
        language, parse_error = h.get("language"), h.get("parse_error")
        if (language not in ("Triton", "CUDA") or not isinstance(h.get("blocked"), bool)
                or not isinstance(h.get("has_modelnew"), bool) or not isinstance(parse_error, (str, type(None)))):
            raise ProtocolViolation("a malformed answer from the static checks' process")
        return cls(tuple(_hacks(h)), h["blocked"], language, _strings(h, "own_kernels"),
                   tuple(TorchCall(*c) for c in calls), _strings(h, "tf32"), frozenset(_strings(h, "functions")),
                   parse_error, h["has_modelnew"], tuple(_module(m) for m in _listed(h, "modules")))


class _Checker:
    """One checker child and its channel; ``cancel()`` kills it (a `Cancellation` part)."""

    def __init__(self, payload: bytes) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _CHILD],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.channel = Channel(self.proc.stdout.fileno(), self.proc.stdin.fileno())
        self.channel.send({"op": "checks"}, payload)
        self.cancelled = False
        self.ready = False  # it said ``ready``: its start is over, and a request's deadline may begin

    def wait_ready(self) -> None:
        """Its start (imports, the module index the analysis walks): our cost, bounded by
        `START_TIMEOUT_S`, never a request's ``timeout_s``."""
        if not self.ready:
            if self.channel.recv(deadline=time.monotonic() + START_TIMEOUT_S).header.get("op") != "ready":
                raise ProtocolViolation("the static checks' process did not say ready")
            self.ready = True

    def cancel(self) -> None:
        self.cancelled = True
        self.proc.kill()

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.proc.stdin.close()  # the channel's descriptors
        self.proc.stdout.close()


class StaticChecks:
    """Runs ``checks`` (a registry's static checks) in checker children; see the module docstring."""

    def __init__(self, checks: Sequence[Any]) -> None:
        self.checks = tuple(checks)
        self._payload = pickle.dumps(self.checks)
        self._idle: list[_Checker] = []
        self._lock = threading.Lock()

    def run(self, source: str, problem: Any, timeout_s: float, joined: Callable[[Any], ContextManager[Any]],
            language: str = "triton", run_checks: bool = True) -> StaticFacts:
        """The source's `StaticFacts`: the checks' findings (none when not ``run_checks``) and what the
        verdict reads from it (``language``: the request's). ``joined``: the evaluation's
        cancellation context (`InProcessEvaluator._cancellable`). Raises `StaticTimeout` past
        ``timeout_s``, `WaitCancelled` when the evaluation is cancelled."""
        with self._lock:
            checker = self._idle.pop() if self._idle else None
        checker = checker or _Checker(self._payload)
        answer: dict[str, Any] | None = None
        try:
            with joined(checker):
                answer = self._ask(checker, (source, problem, language, run_checks), timeout_s)
        finally:
            self._keep(checker, answered=answer is not None)
        if answer.get("op") == "error":
            raise InfrastructureError(f"the static checks failed: {str(answer.get('error'))[:400]}")
        return StaticFacts.from_header(answer)

    def _ask(self, checker: _Checker, job: tuple[str, Any, str, bool], timeout_s: float) -> dict[str, Any]:
        try:
            checker.wait_ready()
        except ChannelTimeout:
            raise InfrastructureError(f"the static checks' process did not start within {START_TIMEOUT_S:g} s") from None
        except ChannelClosed:
            if checker.cancelled:
                raise WaitCancelled("the evaluation was cancelled during its static checks") from None
            raise InfrastructureError(f"the static checks' process ended ({checker.proc.poll()})") from None
        deadline = time.monotonic() + max(0.0, timeout_s)
        try:
            checker.channel.send({"op": "check"}, pickle.dumps(job))
            return checker.channel.recv(deadline=deadline).header
        except ChannelTimeout:
            raise StaticTimeout(f"the static checks did not finish within timeout_s ({timeout_s:g} s)") from None
        except ChannelClosed:
            if checker.cancelled:
                raise WaitCancelled("the evaluation was cancelled during its static checks") from None
            raise InfrastructureError(f"the static checks' process ended ({checker.proc.poll()})") from None

    def _keep(self, checker: _Checker, answered: bool) -> None:
        """Keep a child that answered (and lives) for the next evaluation; close any other."""
        with self._lock:
            if answered and not checker.cancelled and checker.proc.poll() is None and len(self._idle) < IDLE_CHILDREN:
                self._idle.append(checker)
                return
        checker.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for checker in idle:
            checker.close()


def _listed(answer: dict[str, Any], key: str) -> list[Any]:
    value = answer.get(key)
    if not isinstance(value, list) or len(value) > NAMES_CAP:
        raise ProtocolViolation(f"a malformed {key} from the static checks' process")
    return value


def _strings(answer: dict[str, Any], key: str) -> tuple[str, ...]:
    value = _listed(answer, key)
    if not all(isinstance(v, str) for v in value):
        raise ProtocolViolation(f"a malformed {key} from the static checks' process")
    return tuple(value)


def _module(m: Any) -> CudaModule:
    """One resolved ``load_inline`` call of the child's answer, each field checked against `CudaModule`'s."""
    if not isinstance(m, dict) or set(m) != set(_MODULE_FIELDS):
        raise ProtocolViolation("a malformed CUDA module from the static checks' process")
    texts = {k: v for k, v in m.items() if k not in ("name", "line")}
    if not (isinstance(m["name"], str) and type(m["line"]) is int
            and all(isinstance(v, list) and all(isinstance(x, str) for x in v) for v in texts.values())):
        raise ProtocolViolation("a malformed CUDA module from the static checks' process")
    return CudaModule(m["name"], **{k: tuple(v) for k, v in texts.items()}, line=m["line"])


def _hacks(answer: dict[str, Any]) -> list[Hack]:
    """The child's hacks, each field checked against `Hack`'s."""
    out = []
    for h in _listed(answer, "hacks"):
        if not isinstance(h, dict) or set(h) != set(_HACK_FIELDS):
            raise ProtocolViolation("a malformed hack from the static checks' process")
        out.append(Hack(**h))
    return out


def read_source(checks: Sequence[Any], source: str, problem: Any, language: str, run_checks: bool) -> StaticFacts:
    """Everything an evaluation reads from ``source``, in one process (the analysis is memoised by
    source, so the checks and the verdict's view share it): the checker child's work. A CUDA source
    is read by its contract (`drkernel.gym.cuda.contract.check_cuda`), which takes the checks' place."""
    if language == "cuda":
        return _read_cuda(source)
    from drkernel.gym.verdict.checks import source_view, static_tf32

    hacks: list[Hack] = []
    blocked = False
    for check in checks if run_checks else ():
        found = check.check(source, problem)
        hacks.extend(found)
        blocked = blocked or (bool(found) and check.blocking)
    report, own, name = source_view(source, language)
    if report.parse_error:  # the solution's compile error: nothing more to read (nor to run)
        return StaticFacts(tuple(hacks), blocked, name, tuple(own), parse_error=report.parse_error,
                           has_modelnew=False)
    return StaticFacts(tuple(hacks), blocked, name, tuple(own), tuple(report.torch_calls), tuple(static_tf32(source)),
                       defined_functions(source), has_modelnew=report.has_modelnew)


def _read_cuda(source: str) -> StaticFacts:
    from drkernel.gym.cuda.contract import check_cuda
    from drkernel.gym.verdict.static import analyze

    report = check_cuda(source)
    python = report.python or analyze(source)
    blocking = report.hacks + python.hacks
    return StaticFacts(tuple(report.all_hacks), bool(blocking), "CUDA", report.own_kernels, tuple(python.torch_calls),
                       (), defined_functions(source) if not python.parse_error else frozenset(),
                       python.parse_error, python.has_modelnew, tuple(report.modules))


def defined_functions(source: str) -> frozenset[str]:
    """The names of the functions ``source`` defines (none where it does not parse)."""
    import ast

    from drkernel import pyast

    try:
        return frozenset(n.name for n in ast.walk(pyast.parse(source))
                         if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    except (SyntaxError, ValueError, RecursionError):
        return frozenset()


def unreadable(language: str, e: BaseException) -> StaticFacts:
    """The facts of a source nested past what the parser or a check's walk can hold (CPython raises
    `MemoryError` for 50,000 nested unary operators, `RecursionError` deeper in a walk): the
    solution's compile error, like any source that does not parse, never our failure."""
    return StaticFacts(language="CUDA" if language == "cuda" else "Triton", has_modelnew=False,
                       parse_error=f"the source nests too deeply to be read ({type(e).__name__})")


def _serve(channel: Channel) -> None:
    checks = pickle.loads(channel.recv().blob)  # our parent's, never a peer's
    from drkernel.gym.cuda import contract  # noqa: F401 - the readers, imported before the first deadline
    from drkernel.gym.verdict import checks as _verdict  # noqa: F401
    from drkernel.gym.verdict.module_index import module_graph

    module_graph()  # the module index the analysis walks (read from disk, or built once by a child)
    channel.send({"op": "ready"})
    while True:
        try:
            msg = channel.recv()
        except ChannelClosed:
            return
        job = pickle.loads(msg.blob)
        try:
            facts = read_source(checks, *job)
        except (MemoryError, RecursionError) as e:  # the parser's or a walk's limit on nesting: the source's
            facts = unreadable(job[2], e)
        except Exception as e:  # noqa: BLE001 - our checks' failure, reported to the evaluation
            log.exception("static check failed")
            channel.send({"op": "error", "error": f"{type(e).__name__}: {str(e)[:300]}"})
            continue
        channel.send(facts.to_header())


def main() -> None:
    """A checker child's entry (`_CHILD`): its stdin and stdout are the channel."""
    from drkernel.gym.ipc import adopt_stdio_channel, child_channel

    adopt_stdio_channel()
    _serve(child_channel())
