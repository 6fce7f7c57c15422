"""Admission by estimated device memory: a worker takes jobs while their estimates fit its budget.

The estimate reads the problem statically (`size_reader`; no reference code is run): module-level
integer constants, with the problem's CPU overrides on CPU, give the sizes of the tensors that
``get_inputs()`` builds; the job's footprint is a multiple of those bytes (the judge's inputs and
reference outputs, the candidate's copies and outputs, the clones of timed calls) plus a fixed
overhead for the CUDA context and the L2 flush buffer. The estimate is at most ``MAX_ESTIMATE_BYTES``.

Reading is bounded in size and kept off the HTTP server's interpreter: a source of at most
``INLINE_READ_BYTES`` (every KernelBench reference: the largest of levels 1-2 is 2.7 kB) is parsed
in the server (milliseconds); a larger one is read in a child process with a wall-clock limit
(``READ_TIMEOUT_S``), at most ``READERS`` children at once and ``READERS_PER_CLIENT`` per client
(past them: `ReadersBusy`, a 429), so no client's source holds the GIL every client's requests share.
Code that cannot be read is `Unreadable` (a 422). What is remembered per problem is a digest and its
answer (a number, or the refusal), never the code, so a refused source is not read twice and refused
or distinct references cannot grow the server.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from drkernel.gym.config import EvalRequest
from drkernel.service import body_reader
from drkernel.service.size_reader import (
    MAX_FOLD_WORK,
    MAX_STATIC_INT,
    MAX_STATIC_TUPLE,
    Unreadable,
    read_elements,
)

__all__ = ["DTYPE_BYTES", "FOOTPRINT_FACTOR", "MAX_FOLD_WORK", "MAX_STATIC_INT", "MAX_STATIC_TUPLE",
           "OVERHEAD_BYTES", "BodyTooComplex", "ReadersBusy", "TooLargeForCpu", "Unreadable", "estimate_device_bytes",
           "prepared_on_cpu"]

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "int32": 4}
FOOTPRINT_FACTOR = 6
OVERHEAD_BYTES = 256 << 20
MAX_ESTIMATE_BYTES = 1 << 62
MAX_UNSCALED_CPU_ELEMENTS = 1 << 22
"""Most input elements a request with ``cpu_scale: false`` may ask of a CPU judge (`TooLargeForCpu`):
a loaded problem's reference runs in the device's shared judge, where neither the request's
``timeout_s`` nor a cancel reaches, and at a GPU size (2**25 elements of a matmul) it computes for minutes."""
INLINE_READ_BYTES = 8 << 10
"""Largest source parsed in the server's own process (about 25 ms of GIL on a loaded 2-core host);
a larger one is read in a child process."""
READ_TIMEOUT_S = 10.0
"""Wall-clock limit of a reading child (a 64-KiB source parses in about 0.2 s); past it the code is
`Unreadable`."""
READERS = 2
"""Reading children at once, server-wide."""
READERS_PER_CLIENT = 1
"""Reading children one client may hold at once."""


def prepared_on_cpu(device: str, served: Sequence[str] = ()) -> bool:
    """Whether the judge that runs a request for ``device`` is a CPU's (it then prepares the problem at
    its CPU size): ``cpu``; or ``auto`` where every worker of the server (``served``, their devices) is a
    CPU worker, since ``auto`` runs on the device of whichever worker claims the job. Where a worker
    with a GPU may claim it, ``auto`` is estimated at the GPU's size, the larger."""
    if device == "auto":
        return bool(served) and all(d == "cpu" for d in served)
    return device == "cpu"


def estimate_device_bytes(request: EvalRequest, served: Sequence[str] = (), client: str = "") -> int:
    """Estimated peak device bytes of one evaluation of ``request`` on a server whose workers run
    ``served`` (see the module docstring and `prepared_on_cpu`); `Unreadable` for code nested too
    deeply to read or whose constants take more than `MAX_FOLD_WORK` values to fold; `TooLargeForCpu` for an
    unscaled CPU request past `MAX_UNSCALED_CPU_ELEMENTS`; `ReadersBusy` when ``client`` (who asks) may
    not start another reading child now."""
    problem, cfg = request.problem, request.config
    on_cpu = prepared_on_cpu(cfg.device, served)
    scaled = on_cpu and cfg.cpu_scale  # as the judge prepares it: unscaled, the problem's own sizes
    overrides = tuple(sorted(problem.cpu_overrides.items())) if scaled else ()
    elements = _input_elements(problem.code, overrides, client)
    if on_cpu and not cfg.cpu_scale and elements > MAX_UNSCALED_CPU_ELEMENTS:
        raise TooLargeForCpu(
            f"cpu_scale: false asks {problem.key} at its full size ({elements:,} input elements) of a CPU "
            f"worker, past the {MAX_UNSCALED_CPU_ELEMENTS:,} one runs unscaled (its reference would hold "
            "a judge that no timeout or cancel reaches); leave cpu_scale on to run it at its CPU size")
    if scaled:
        elements = min(elements, cfg.cpu_element_budget)
    return min(MAX_ESTIMATE_BYTES, OVERHEAD_BYTES + FOOTPRINT_FACTOR * elements * DTYPE_BYTES.get(problem.dtype, 4))


class TooLargeForCpu(ValueError):
    """An unscaled request (``cpu_scale: false``) for a CPU judge whose problem is larger than
    `MAX_UNSCALED_CPU_ELEMENTS`. The request's fault, refused before it is stored."""


class ReadersBusy(RuntimeError):
    """Every reading child a client may use is busy (`READERS`, `READERS_PER_CLIENT`): retry shortly."""


ELEMENTS_CACHE_ENTRIES = 4096
"""Problems whose answer is remembered. An entry is a digest, the overrides and an int or a refusal's
message (a few hundred bytes, whatever the code's size), so the cache holds about 2 MB at most."""
_elements: OrderedDict[tuple[bytes, tuple], int | str] = OrderedDict()
_elements_lock = threading.Lock()
_readers: dict[str, int] = {}


def _input_elements(code: str, overrides: tuple[tuple[str, int], ...], client: str = "") -> int:
    """Elements of the tensors ``get_inputs()`` builds, read statically (0 when unknown); remembered
    by the code's digest, a refusal too (`ELEMENTS_CACHE_ENTRIES`). Raises `Unreadable`, `ReadersBusy`."""
    key = (hashlib.sha256(code.encode("utf-8", "surrogatepass")).digest(), overrides)
    with _elements_lock:
        known = _elements.get(key)
        if known is not None:
            _elements.move_to_end(key)
    if known is None:
        try:
            known = (read_elements(code, dict(overrides)) if len(code) <= INLINE_READ_BYTES
                     else _read_in_child(code, overrides, client))
        except Unreadable as e:
            known = str(e)
        with _elements_lock:
            _elements[key] = known
            if len(_elements) > ELEMENTS_CACHE_ENTRIES:
                _elements.popitem(last=False)
    if isinstance(known, str):
        raise Unreadable(known)
    return known


def _read_in_child(code: str, overrides: tuple, client: str) -> int:
    """`size_reader.read_elements` in a child process (see the module docstring); `Unreadable` when
    the child refuses the code, is killed by its own limits or passes `READ_TIMEOUT_S`; a child that
    exits without an answer (it could not start: our failure) raises `RuntimeError`."""
    answer = _ask_reader("size_reader", json.dumps({"code": code, "overrides": list(overrides)}).encode(),
                         client, Unreadable, "the problem's code")
    if type(answer.get("elements")) is int:
        return answer["elements"]
    if isinstance(answer.get("unreadable"), str):
        raise Unreadable(answer["unreadable"])
    raise RuntimeError(f"admission's reading child answered {str(answer)[:300]}")


class BodyTooComplex(ValueError):
    """A request body holding more JSON values and keys than the server parses (`body_reader`);
    ``tokens``: how many its reading child counted (None when the child's limits ended it first)."""

    def __init__(self, message: str, tokens: int | None = None) -> None:
        super().__init__(message)
        self.tokens = tokens


def read_body_tokens(body: bytes, client: str) -> int:
    """Refuse a body past `body_reader.MAX_BODY_TOKENS` before the server parses it: read from its bytes
    when their bound allows (`body_reader.upper_bound`), else counted in a reading child (one of
    ``client``'s, `_reader_slot`). `BodyTooComplex` past the limit or when the child's own limits end
    it; `ReadersBusy` as for references; a body that is not JSON passes (the server's parse answers it).
    Returns what the server's parse will cost in tokens: the bound, or the child's count."""
    bound = body_reader.upper_bound(body)
    if bound <= body_reader.MAX_BODY_TOKENS:
        return bound
    tokens = _ask_reader("body_reader", body, client, BodyTooComplex, "the body").get("tokens")
    if type(tokens) is not int:  # not JSON: the server's parse refuses it at its first error
        return body_reader.MAX_BODY_TOKENS
    if tokens > body_reader.MAX_BODY_TOKENS:
        raise BodyTooComplex(f"the body holds {tokens} JSON values and keys; at most "
                             f"{body_reader.MAX_BODY_TOKENS} are parsed", tokens)
    return tokens


def _ask_reader(module: str, payload: bytes, client: str, refused: type[Exception], what: str) -> dict:
    """``python -m drkernel.service.<module>`` with ``payload`` on stdin, in one of ``client``'s reading
    slots; its JSON answer. ``refused`` (the client's fault) when it passes `READ_TIMEOUT_S` or its own
    memory and CPU limits end it; `RuntimeError` (ours) when it exits without an answer otherwise."""
    with _reader_slot(client):
        try:
            done = subprocess.run([sys.executable, "-m", f"drkernel.service.{module}"], input=payload,
                                  capture_output=True, timeout=READ_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise refused(f"{what} took more than {READ_TIMEOUT_S:g} s to read") from None
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        answer = None
    if isinstance(answer, dict):
        return answer
    if done.returncode < 0:  # a signal: its own CPU limit (SIGXCPU), the address space, the OOM killer
        raise refused(f"{what} could not be read within the reader's memory and time limits")
    tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
    raise RuntimeError(f"admission's reading child ({module}) exited {done.returncode} without an answer: "
                       f"{tail[0][:300]}")


@contextmanager
def _reader_slot(client: str) -> Iterator[None]:
    """One of the `READERS` reading children, at most `READERS_PER_CLIENT` of them ``client``'s."""
    with _elements_lock:
        if sum(_readers.values()) >= READERS or _readers.get(client, 0) >= READERS_PER_CLIENT:
            raise ReadersBusy(f"admission reads at most {READERS} large references at once, "
                              f"{READERS_PER_CLIENT} per client; retry shortly")
        _readers[client] = _readers.get(client, 0) + 1
    try:
        yield
    finally:
        with _elements_lock:
            _readers[client] -= 1
            if not _readers[client]:
                del _readers[client]
