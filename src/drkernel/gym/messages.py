"""The messages between the gym's processes: one `Op` per kind, one frozen dataclass per message.

Three kinds of process talk over `drkernel.gym.ipc.Channel` (a JSON header, an optional blob, and
on export messages the candidate's staging buffer as a descriptor): the orchestrator (no torch,
owns the verdict), the judge (trusted, one per device) and the candidates (one per solution, running
solution code, so everything they send is an untrusted claim). The orchestrator parses every
candidate header through `parse_candidate`: a wrong type, a missing field, oversized text or an
unknown op is a `ProtocolViolation` (the run is a crash, never valid).

A child's start (both children; a candidate asks before it touches the device)::

    child: init                   orchestrator: go          (candidates only, inside the shared lock)
    child: ready pid ...          (the judge adds its device, versions and backend flags)

The candidate's side of one job (orchestrator replies in brackets; ``job`` comes first from it)::

    [job]
    solution_path
    (outputs trial=i [verdict])*            i = 0, 1, ... in order; stops at the first failure
    ((compare tag [verdict])* extra hook)*  one ``extra`` per hook of the job
    lock [locked] timing [continue | remeasure] (timing_sync [continue])? | unlock      GPU timing only
    (compare trial=timing tag [verdict])*   sampled timed calls
    done                                    (``error`` may come at any point; then only ``done``)

An ``outputs``/``compare`` whose staging buffer the judge cannot map gets ``[retry_host]`` instead of
a verdict, and the candidate sends it again as host bytes. The order is enforced by
`drkernel.gym.orchestrator.session.ProtocolOrder`.

The orchestrator's requests to the judge, one at a time (judge replies in brackets; any request may
be answered ``[error]`` instead)::

    prepare [prepared]                      a problem's scaled code, second size, op profile
    compare [verdict]                       relays a candidate's export (its blob and descriptor)
    time_reference [timed]                  inside the exclusive region
    release [released]                      a job's cached reference outputs are dropped
    shutdown                                no reply; the judge exits

The orchestrator and the zygote (`drkernel.gym.candidate.zygote`), which never sees a job::

    zygote: ready landlock=ABI
    fork seed=true [forked]                 once on a GPU: a trusted fork warms the Triton cache,
    seed [seeded]                           whose files the zygote keeps for every later fork
    (fork [forked | error])*                three descriptors each; the fork speaks init/go/ready
    shutdown

Standard library only: the orchestrator imports this module and stays torch-free.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar

from drkernel.gym.ipc import ProtocolViolation, tree_nodes

TEXT_CAP = 20000
"""Free text of a report (an error's message and traceback) is cut to this many characters."""
TAG_CAP = 200
"""A comparison's tag; longer is a violation (an honest hook's tags are short names)."""
NAME_CAP = 100
"""A hook's name, an error's stage and type; longer is a violation."""
PATH_CAP = 4096
LANDLOCK_MIN_ABI = 2
"""The zygote's ``ready`` must report at least this Landlock ABI for its forks to be used (ABI 2 brings
REFER; under ABI 1 a Landlock domain refuses every rename across directories)."""


class Op(str, enum.Enum):
    """The ``op`` field of every header. A str-Enum: ``Op.DONE == "done"``, and it serialises as the bare string."""

    # child start
    INIT = "init"
    GO = "go"
    READY = "ready"
    # orchestrator <-> candidate
    JOB = "job"
    SOLUTION_PATH = "solution_path"
    OUTPUTS = "outputs"
    COMPARE = "compare"
    VERDICT = "verdict"
    RETRY_HOST = "retry_host"
    EXTRA = "extra"
    LOCK = "lock"
    LOCKED = "locked"
    TIMING = "timing"
    TIMING_SYNC = "timing_sync"
    CONTINUE = "continue"
    REMEASURE = "remeasure"
    UNLOCK = "unlock"
    ERROR = "error"
    DONE = "done"
    # orchestrator <-> judge
    PREPARE = "prepare"
    PREPARED = "prepared"
    TIME_REFERENCE = "time_reference"
    TIMED = "timed"
    RELEASE = "release"
    RELEASED = "released"
    SHUTDOWN = "shutdown"
    # orchestrator <-> zygote (`drkernel.gym.candidate.zygote`)
    FORK = "fork"
    FORKED = "forked"
    SEED = "seed"
    SEEDED = "seeded"


def op_of(header: Any) -> Op:
    """The header's `Op`; anything else is a `ProtocolViolation`."""
    if not isinstance(header, dict):
        raise ProtocolViolation(f"a header that is {type(header).__name__}, not an object")
    raw = header.get("op")
    try:
        return Op(raw)
    except ValueError:
        raise ProtocolViolation(f"unknown message {str(raw)[:60]!r}") from None


# -- field validation ---------------------------------------------------------------------------

_MISSING = object()


def _get(h: dict[str, Any], key: str, types: tuple[type, ...], default: Any = _MISSING) -> Any:
    """``h[key]`` if it has one of ``types`` (bool is not an int here); ``default`` when absent (or
    None, when None is not among the types and a default is given)."""
    op = h.get("op")
    value = h.get(key, _MISSING)
    if value is _MISSING or (value is None and type(None) not in types and default is not _MISSING):
        if default is _MISSING:
            raise ProtocolViolation(f"{op} message without {key!r}")
        return default
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        names = " or ".join("null" if t is type(None) else t.__name__ for t in types)
        kind = "null" if value is None else type(value).__name__
        raise ProtocolViolation(f"{op} message: {key!r} is {kind}, not {names}")
    return value


def _text(h: dict[str, Any], key: str, cap: int, truncate: bool = False, default: Any = _MISSING) -> str:
    """A string field: cut to ``cap`` when ``truncate`` (free text), else longer is a violation."""
    value = _get(h, key, (str,), default)
    if value is not None and len(value) > cap:
        if not truncate:
            raise ProtocolViolation(f"{h.get('op')} message: {key!r} of {len(value)} characters (at most {cap})")
        value = value[:cap]
    return value


def _number(h: dict[str, Any], key: str, default: Any = _MISSING) -> float | None:
    value = _get(h, key, (int, float, type(None)) if default is None else (int, float), default)
    return None if value is None else float(value)


def _trial(h: dict[str, Any], timing_allowed: bool) -> int | str:
    """A trial's index, or (``timing_allowed``) ``"timing"`` for the timed calls' inputs."""
    trial = _get(h, "trial", (int, str) if timing_allowed else (int,))
    if isinstance(trial, str) and trial != "timing":
        raise ProtocolViolation(f"{h.get('op')} message: trial {trial[:40]!r} (an index, or 'timing')")
    if isinstance(trial, int) and trial < 0:
        raise ProtocolViolation(f"{h.get('op')} message: trial {trial}")
    return trial


# -- messages -----------------------------------------------------------------------------------

MESSAGES: dict[Op, type["Message"]] = {}


class Message:
    """Base of every message class: `to_header` and a validating `from_header`."""

    OPS: ClassVar[tuple[Op, ...]] = ()

    @property
    def op(self) -> Op:
        return self.OPS[0]

    def to_header(self) -> dict[str, Any]:
        return {"op": self.op.value, **{f.name: getattr(self, f.name) for f in fields(self)}}  # type: ignore[arg-type]

    @classmethod
    def from_header(cls, h: dict[str, Any]) -> "Message":
        op = op_of(h)
        if op not in cls.OPS:
            raise ProtocolViolation(f"a {op.value} message where {'/'.join(o.value for o in cls.OPS)} was expected")
        return cls._parse(op, h)

    @classmethod
    def _parse(cls, op: Op, h: dict[str, Any]) -> "Message":
        raise NotImplementedError


def _register(cls: type[Message]) -> type[Message]:
    for op in cls.OPS:
        assert op not in MESSAGES, op
        MESSAGES[op] = cls
    return cls


@_register
@dataclass(frozen=True)
class Signal(Message):
    """A message that carries nothing but its op."""

    OPS = (Op.INIT, Op.GO, Op.LOCK, Op.LOCKED, Op.CONTINUE, Op.REMEASURE, Op.UNLOCK, Op.RETRY_HOST,
           Op.RELEASED, Op.SHUTDOWN, Op.SEED, Op.SEEDED)
    kind: Op

    @property
    def op(self) -> Op:
        return self.kind

    def to_header(self) -> dict[str, Any]:
        return {"op": self.kind.value}

    @classmethod
    def _parse(cls, op: Op, h: dict[str, Any]) -> Signal:
        return cls(op)


@_register
@dataclass(frozen=True)
class Ready(Message):
    """A child started. The judge also names its device; a candidate only its pid."""

    OPS = (Op.READY,)
    pid: int
    device: str | None = None
    device_name: str | None = None
    total_memory: int | None = None
    versions: dict[str, Any] | None = None
    backend_flags: dict[str, Any] | None = None
    landlock: int | None = None  # the zygote: the kernel's Landlock ABI (its forks need >= 2)

    def to_header(self) -> dict[str, Any]:
        return {k: v for k, v in super().to_header().items() if v is not None}

    @classmethod
    def _parse(cls, op: Op, h: dict[str, Any]) -> Ready:
        return cls(_get(h, "pid", (int,)), _text(h, "device", NAME_CAP, default=None),
                   _text(h, "device_name", PATH_CAP, default=None), _get(h, "total_memory", (int,), None),
                   _get(h, "versions", (dict,), None), _get(h, "backend_flags", (dict,), None),
                   _get(h, "landlock", (int,), None))


@_register
@dataclass(frozen=True)
class Fork(Message):
    """Asks the zygote for a candidate; carries three descriptors (its channel, A's status socket,
    its log). ``seed``: the one trusted fork that warms the Triton cache for the later ones."""

    OPS = (Op.FORK,)
    tmp_bytes: int
    shm_bytes: int
    seed: bool = False

    @classmethod
    def _parse(cls, op: Op, h: dict[str, Any]) -> Fork:
        return cls(_get(h, "tmp_bytes", (int,)), _get(h, "shm_bytes", (int,)), _get(h, "seed", (bool,), False))


@_register
@dataclass(frozen=True)
class Forked(Message):
    """The zygote forked A (its pid in the zygote's namespace)."""

    OPS = (Op.FORKED,)
    pid: int

    @classmethod
    def _parse(cls, op: Op, h: dict[str, Any]) -> Forked:
        return cls(_get(h, "pid", (int,)))


@dataclass(frozen=True)
class NativeBuild:
    """One extension the host built for a CUDA solution (`drkernel.gym.cuda.build`), handed to its
    candidate: the ``name`` its ``load_inline`` call gives, the build ``key`` (the host's
    `drkernel.gym.cuda.messages.build_key` over the job and ``toolchain``, for the architecture ``arch``),
    the library's ``size`` in bytes and sha256 ``digest`` (the libraries ride first in the job's blob,
    in order), and its ``functions`` and ``__global__`` ``kernels`` (the solution's own)."""

    name: str
    key: str
    arch: str
    toolchain: str
    size: int
    digest: str
    functions: tuple[str, ...]
    kernels: tuple[str, ...]

    def to_header(self) -> dict[str, Any]:
        return {"name": self.name, "key": self.key, "arch": self.arch, "toolchain": self.toolchain,
                "size": self.size, "digest": self.digest, "functions": list(self.functions),
                "kernels": list(self.kernels)}

    @classmethod
    def from_header(cls, h: Any) -> NativeBuild:
        if not isinstance(h, dict):
            raise ProtocolViolation(f"a native build that is {type(h).__name__}, not an object")
        h = {**h, "op": Op.JOB.value}  # `_get` names the message in its errors
        size = _get(h, "size", (int,))
        if size <= 0:
            raise ProtocolViolation(f"a native build of {size} bytes")
        return cls(_text(h, "name", NAME_CAP), _text(h, "key", NAME_CAP), _text(h, "arch", NAME_CAP),
                   _text(h, "toolchain", PATH_CAP), size, _text(h, "digest", NAME_CAP), _names(h, "functions"),
                   _names(h, "kernels"))


def _names(h: dict[str, Any], key: str) -> tuple[str, ...]:
    value = _get(h, key, (list,))
    if not all(isinstance(v, str) and 0 < len(v) <= NAME_CAP for v in value):
        raise ProtocolViolation(f"{h.get('op')} message: {key!r} holds something other than names")
    return tuple(value)


@_register
@dataclass(frozen=True)
class Job(Message):
    """The orchestrator hands a candidate its job (`drkernel.gym.orchestrator.evaluator`); the fields
    stay one dict, read by the candidate's harness code, beside the typed ``native`` builds of a
    CUDA solution (none for Triton, whose header has no ``native`` key)."""

    OPS = (Op.JOB,)
    spec: dict[str, Any]
    native: tuple[NativeBuild, ...] = ()

    def to_header(self) -> dict[str, Any]:
        h = {**self.spec, "op": Op.JOB.value}
        if self.native:
            h["native"] = [b.to_header() for b in self.native]
        return h

    @property
    def native_bytes(self) -> int:
        """The bytes of the libraries at the head of the job's blob."""
        return sum(b.size for b in self.native)

    @classmethod
    def _parse(cls, op: Op, h: dict[str, Any]) -> Job:
        _get(h, "solution", (str,))
        _get(h, "trials", (list,))
        native = tuple(NativeBuild.from_header(b) for b in _get(h, "native", (list,), []))
        return cls({k: v for k, v in h.items() if k not in ("op", "native")}, native)


@_register
@dataclass(frozen=True)
class SolutionPath(Message):
    OPS = (Op.SOLUTION_PATH,)
    path: str

    @classmethod
    def _parse(cls, op: Op, h: dict[str, Any]) -> SolutionPath:
        return cls(_text(h, "path", PATH_CAP))


@_register
@dataclass(frozen=True)
class Outputs(Message):
    """A trial's (outputs, post-run inputs), exported for the judge. ``tree`` is the encoded tree
    (`drkernel.gym.ipc.encode_tree`), read only by the judge; ``staging`` the byte size of the
    staging buffer whose descriptor rides on the message (None: host bytes only)."""

    OPS = (Op.OUTPUTS,)
    trial: int
    tree: Any
    staging: int | None = None

    def to_header(self) -> dict[str, Any]:
        h = {"op": self.op.value, "trial": self.trial, "tree": self.tree}
        return h if self.staging is None else {**h, "staging": self.staging}

    def with_tree(self, tree: Any, staging: int | None) -> Outputs:
        """The message as sent: an encoded tree, and the staging buffer's size if one rides along."""
        return replace(self, tree=tree, staging=staging)

    @classmethod
    def _parse(cls, op: Op, h: dict[str, Any]) -> Outputs:
        return cls(_trial(h, False), _tree(h), _staging(h))


def _tree(h: dict[str, Any]) -> dict[str, Any]:
    """An export's encoded tree, at most `ipc.MAX_TREE_NODES` nodes (so the judge never reads more)."""
    tree = _get(h, "tree", (dict,))
    tree_nodes(tree)
    return tree


def _staging(h: dict[str, Any]) -> int | None:
    size = _get(h, "staging", (int,), None)
    if size is not None and size <= 0:
        raise ProtocolViolation(f"{h.get('op')} message: staging buffer of {size} bytes")
    return size


@_register
@dataclass(frozen=True)
class Compare(Message):
    """A tagged export (an integrity run, or a sampled timed call with ``trial="timing"``)."""

    OPS = (Op.COMPARE,)
    trial: int | str
    tag: str
    tree: Any
    staging: int | None = None

    def to_header(self) -> dict[str, Any]:
        h = {"op": self.op.value, "trial": self.trial, "tag": self.tag, "tree": self.tree}
        return h if self.staging is None else {**h, "staging": self.staging}

    def with_tree(self, tree: Any, staging: int | None) -> Compare:
        """The message as sent: an encoded tree, and the staging buffer's size if one rides along."""
        return replace(self, tree=tree, staging=staging)

    @classmethod
    def _parse(cls, op: Op, h: dict[str, Any]) -> Compare:
        tag = _text(h, "tag", TAG_CAP)
        if not tag:
            raise ProtocolViolation("compare message with an empty tag")
        return cls(_trial(h, True), tag, _tree(h), _staging(h))


@_register
@dataclass(frozen=True)
class Verdict(Message):
    """The judge's comparison of one export. The orchestrator records it and forwards it to the
    candidate (a trial's only as ``passed``). ``retry_host``: the staging buffer could not be mapped."""

    OPS = (Op.VERDICT,)
    passed: bool
    message: str = ""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    atol: float | None = None
    rtol: float | None = None
    inputs_changed: tuple[str, ...] | None = None
    retry_host: bool = False
    seconds: float | None = None
    degenerate: str | None = None
    """A trivial answer (zeros, a constant, an input) that meets the reference at the derived
    tolerance (`drkernel.gym.judge.tolerance`): this trial cannot tell computing from not computing."""
    skipped: str | None = None
    """Why the check this tagged comparison serves does not apply to the problem (the reference itself
    fails on the check's inputs): nothing was compared, ``passed`` is True, the result carries a warning."""

    def to_header(self) -> dict[str, Any]:
        h = {k: v for k, v in super().to_header().items() if v is not None}
        if self.inputs_changed is not None:
            h["inputs_changed"] = list(self.inputs_changed)
        if not self.retry_host:
            h.pop("retry_host")
        return h

    def record(self, trial: int | str) -> dict[str, Any]:
        """The form the orchestrator keeps (`SessionOutcome`): the header without its op, with the trial."""
        h = self.to_header()
        del h["op"]
        return {**h, "trial": trial}

    @classmethod
    def _parse(cls, op: Op, h: dict[str, Any]) -> Verdict:
        changed = _get(h, "inputs_changed", (list,), None)
        if changed is not None and not all(isinstance(c, str) for c in changed):
            raise ProtocolViolation("verdict message: inputs_changed is not a list of names")
        return cls(_get(h, "passed", (bool,)), _text(h, "message", TEXT_CAP, truncate=True, default=""),
                   _number(h, "max_abs_err", None), _number(h, "max_rel_err", None), _number(h, "atol", None),
                   _number(h, "rtol", None), None if changed is None else tuple(changed),
                   _get(h, "retry_host", (bool,), False), _number(h, "seconds", None),
                   _text(h, "degenerate", TEXT_CAP, truncate=True, default=None),
                   _text(h, "skipped", TEXT_CAP, truncate=True, default=None))


@_register
@dataclass(frozen=True)
class Extra(Message):
    """A hook's extra runs are done; ``result`` is its claim (any JSON)."""

    OPS = (Op.EXTRA,)
    hook: str
    result: Any = None

    @classmethod
    def _parse(cls, op: Op, h: dict[str, Any]) -> Extra:
        return cls(_text(h, "hook", NAME_CAP), h.get("result"))


SECOND_SIZE_NOTE = "at the second problem size"
"""How a candidate's ``Error`` message of a forward that failed only at the hidden second size begins."""
STAT_FIELDS = ("median_ms", "iqr_ms", "cv", "mean_ms", "min_ms")
OPTIONAL_STAT_FIELDS = ("wall_ms_per_call", "rse", "head_start_ms", "host_ms", "inputs_ms", "uncovered",
                        "profiled_ms", "profiled_span_ms", "profiled_calls")
SAMPLES_CAP = 100000
"""A timing's per-call samples (``samples_ms``) beyond this many are a claim not kept."""


def timing_samples(stats: dict[str, Any], n: int) -> tuple[float, ...] | None:
    """``stats["samples_ms"]`` as ``n`` finite non-negative numbers, else None (absent, or a claim
    that does not hold together: the interval is then left out, the stats still count)."""
    raw = stats.get("samples_ms")
    if not isinstance(raw, list) or len(raw) != n or n > SAMPLES_CAP:
        return None
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0 for x in raw):
        return None
    return tuple(float(x) for x in raw)


@_register
@dataclass(frozen=True)
class Timing(Message):
    """The candidate's timing stats (``timing``), or its synchronised re-measurement (``timing_sync``).
    A claim: `claimed` keeps it only as finite non-negative numbers."""

    OPS = (Op.TIMING, Op.TIMING_SYNC)
    kind: Op
    stats: dict[str, Any]

    @property
    def op(self) -> Op:
        return self.kind

    def to_header(self) -> dict[str, Any]:
        return {"op": self.kind.value, "stats": self.stats}

    @classmethod
    def _parse(cls, op: Op, h: dict[str, Any]) -> Timing:
        return cls(op, _get(h, "stats", (dict,)))

    def claimed(self) -> dict[str, Any] | None:
        """The stats as numbers, or None when any is missing, not a number, negative or not finite
        (the run then counts as not timed); ``samples_ms`` kept only as `timing_samples` allows."""
        d = self.stats
        try:
            out: dict[str, Any] = {k: float(d[k]) for k in STAT_FIELDS}
            out["n"] = int(d["n"])
            for k in OPTIONAL_STAT_FIELDS:
                out[k] = None if d.get(k) is None else float(d[k])
        except (KeyError, TypeError, ValueError, OverflowError):
            return None
        if not all(math.isfinite(v) and v >= 0 for v in out.values() if isinstance(v, float)):
            return None
        out["samples_ms"] = timing_samples(d, out["n"])
        return out


@_register
@dataclass(frozen=True)
class Error(Message):
    """A failure report: the candidate's (a stage of the solution failed) or the judge's (stage ``judge``)."""

    OPS = (Op.ERROR,)
    stage: str
    type: str
    message: str
    traceback: str = ""

    @classmethod
    def _parse(cls, op: Op, h: dict[str, Any]) -> Error:
        return cls(_text(h, "stage", NAME_CAP), _text(h, "type", NAME_CAP),
                   _text(h, "message", TEXT_CAP, truncate=True),
                   _text(h, "traceback", TEXT_CAP, truncate=True, default=""))

    def as_dict(self) -> dict[str, str]:
        return {"stage": self.stage, "type": self.type, "message": self.message, "traceback": self.traceback}


@_register
@dataclass(frozen=True)
class Done(Message):
    """The candidate's last message: seconds per stage and the hooks' reports (claims)."""

    OPS = (Op.DONE,)
    stages: dict[str, float] = field(default_factory=dict)
    reports: dict[str, Any] = field(default_factory=dict)
    backend_flags: dict[str, Any] | None = None
    compile_files: list[list[Any]] = field(default_factory=list)
    """``[name, size]`` of each file the candidate's kernels added to its compile cache, their bytes in
    the message's blob (`drkernel.gym.compile_cache`); checked where they are stored."""

    @classmethod
    def _parse(cls, op: Op, h: dict[str, Any]) -> Done:
        stages = _get(h, "stages", (dict,))
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in stages.values()):
            raise ProtocolViolation("done message: a stage's seconds are not a number")
        files = _get(h, "compile_files", (list,), [])
        if not all(isinstance(f, list) and len(f) == 2 for f in files):
            raise ProtocolViolation("done message: compile_files is not a list of [name, size]")
        return cls(stages, _get(h, "reports", (dict,)), _get(h, "backend_flags", (dict,), None), files)


# -- the judge's requests and replies -----------------------------------------------------------

@_register
@dataclass(frozen=True)
class Prepare(Message):
    OPS = (Op.PREPARE,)
    problem: dict[str, Any]
    cpu_scale: bool
    budget: int
    second_size: bool
    seed: int

    @classmethod
    def _parse(cls, op: Op, h: dict[str, Any]) -> Prepare:
        return cls(_get(h, "problem", (dict,)), _get(h, "cpu_scale", (bool,)), _get(h, "budget", (int,)),
                   _get(h, "second_size", (bool,)), _get(h, "seed", (int,)))


@_register
@dataclass(frozen=True)
class Prepared(Message):
    OPS = (Op.PREPARED,)
    code: str
    second_code: str | None
    input_bytes: int
    op_profile: dict[str, Any] | None
    roofline_ms: float | None
    seconds: float | None = None
    distributions: tuple[int, ...] | None = None
    """The input distributions (`drkernel.gym.seeds.Distribution`, plain included) the reference is
    defined and not degenerate on at the public seed. None: not probed (every one may be drawn)."""
    perturb_across: bool = False
    """Within-row swaps move no reference output past its tolerance: perturb across rows
    (`drkernel.gym.seeds.ACROSS_BIT`)."""

    def to_header(self) -> dict[str, Any]:
        h = super().to_header()
        if self.distributions is not None:
            h["distributions"] = list(self.distributions)
        return h

    @classmethod
    def _parse(cls, op: Op, h: dict[str, Any]) -> Prepared:
        dists = _get(h, "distributions", (list, type(None)), None)
        if dists is not None and not all(isinstance(d, int) and not isinstance(d, bool) for d in dists):
            raise ProtocolViolation("prepared message: distributions is not a list of integers")
        return cls(_get(h, "code", (str,)), _get(h, "second_code", (str, type(None))), _get(h, "input_bytes", (int,)),
                   _get(h, "op_profile", (dict, type(None))), _number(h, "roofline_ms", None),
                   _number(h, "seconds", None), None if dists is None else tuple(dists),
                   _get(h, "perturb_across", (bool,), False))


@dataclass(frozen=True)
class CompareRequest(Message):
    """A candidate's export relayed to the judge, with what the judge needs to rebuild the reference
    run (code and seeds come from the job, never from the candidate)."""

    OPS = (Op.COMPARE,)
    job: str
    trial: int | str
    code: str
    seed: int
    weight_seed: int
    profile: str
    tree: Any
    tag: str | None = None
    staging: int | None = None

    @classmethod
    def from_header(cls, h: dict[str, Any]) -> CompareRequest:  # COMPARE is registered to the candidate's `Compare`
        if op_of(h) is not Op.COMPARE:
            raise ProtocolViolation(f"a {h.get('op')} message where compare was expected")
        return cls(_text(h, "job", PATH_CAP), _trial(h, True), _get(h, "code", (str,)), _get(h, "seed", (int,)),
                   _get(h, "weight_seed", (int,)), _get(h, "profile", (str,)), _get(h, "tree", (dict,)),
                   _text(h, "tag", TAG_CAP, default=None), _staging(h))


@_register
@dataclass(frozen=True)
class TimeReference(Message):
    """Time the reference (``options``: the `EvalConfig` timing fields, flat in the header)."""

    OPS = (Op.TIME_REFERENCE,)
    code: str
    weight_seed: int
    seed: int
    options: dict[str, Any] = field(default_factory=dict)

    def to_header(self) -> dict[str, Any]:
        return {**self.options, "op": self.op.value, "code": self.code, "weight_seed": self.weight_seed,
                "seed": self.seed}

    @classmethod
    def _parse(cls, op: Op, h: dict[str, Any]) -> TimeReference:
        options = {k: v for k, v in h.items() if k not in ("op", "code", "weight_seed", "seed")}
        return cls(_get(h, "code", (str,)), _get(h, "weight_seed", (int,)), _get(h, "seed", (int,)), options)


@_register
@dataclass(frozen=True)
class Timed(Message):
    OPS = (Op.TIMED,)
    stats: dict[str, Any]
    seconds: float | None = None

    @classmethod
    def _parse(cls, op: Op, h: dict[str, Any]) -> Timed:
        return cls(_get(h, "stats", (dict,)), _number(h, "seconds", None))


@_register
@dataclass(frozen=True)
class Release(Message):
    OPS = (Op.RELEASE,)
    job: str

    @classmethod
    def _parse(cls, op: Op, h: dict[str, Any]) -> Release:
        return cls(_text(h, "job", PATH_CAP))


CANDIDATE_OPS = frozenset({Op.SOLUTION_PATH, Op.OUTPUTS, Op.COMPARE, Op.EXTRA, Op.LOCK, Op.TIMING, Op.TIMING_SYNC,
                           Op.UNLOCK, Op.ERROR, Op.DONE})
"""What a candidate may send during a job."""


def parse(header: Any) -> Message:
    """Any header as its message (``compare`` as the candidate's `Compare`)."""
    return MESSAGES[op_of(header)].from_header(header)


def parse_candidate(header: Any) -> Message:
    """A candidate's header during a job; an op it may not send is a `ProtocolViolation`."""
    op = op_of(header)
    if op not in CANDIDATE_OPS:
        raise ProtocolViolation(f"unknown message {op.value!r}")
    return MESSAGES[op].from_header(header)
