"""Messages between the orchestrator and its children, and the tensor wire format.

A message is one JSON header plus an optional binary blob, framed on a Unix socket (or a pair of pipes) as

    [4-byte header length][header JSON][8-byte blob length][blob]

The orchestrator only ever parses JSON; it relays blobs between candidate and judge unread, so
untrusted bytes are never unpickled anywhere. Tensors travel as a JSON tree that names, per leaf,
either a slice of the blob (host bytes) or a byte range of the candidate's staging buffer, a device
allocation whose descriptor travels with the message over the channel's Unix socket (SCM_RIGHTS),
relayed by the orchestrator and mapped and copied by the judge (`drkernel.gym.harness.vmm`). The
judge never exports an allocation.

Standard library only at import time; the tensor helpers import torch when called.
"""

from __future__ import annotations

import json
import os
import re
import select
import socket
import stat
import struct
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

MAX_HEADER = 64 << 20
"""A header from a trusted peer (the orchestrator, a shared judge, the zygote, a checker child): a job
with its solution, a prepared problem's code, a CUDA contract's sources."""
CANDIDATE_HEADER = 4 << 20
"""A header from a candidate, whose solution code can write any bytes on its channel: what its messages
legitimately hold (an output tree's description of at most `MAX_TREE_BYTES`, a timed region's
samples: at most `drkernel.gym.messages.SAMPLES_CAP`, about 2.5 MB; a traceback of 20,000
characters; tensors travel out of band, in the blob or the staging buffer). Parsing JSON costs up
to 25 times its size in memory outside every limit: 4 MiB is about 100 MiB, 64 MiB was 1.6 GiB."""
REFERENCE_HEADER = 8 << 20
"""A header from a judge that runs a request's reference (`drkernel.gym.orchestrator.own_judge`):
the prepared problem's two codes (1 MiB sources, escaped), its op profile, a timing's samples."""
MAX_BLOB = 16 << 30
MAX_FDS = 4  # descriptors taken per read; the kernel closes any beyond
MAX_TREE_NODES = 1 << 16
"""Nodes (tensors, tuples, lists, scalars) of one exported output tree: outputs are tensors, so a
tree of millions of Python scalars (a header of tens of MiB that the orchestrator and the judge
would parse outside every memory limit) is refused where it is encoded and where it is read."""
MAX_TREE_BYTES = 2 << 20
"""The JSON of one exported output tree, refused where it is encoded (the solution's output error)
so that an honest candidate's message stays within `CANDIDATE_HEADER` whatever its tensors' shapes."""
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # a JSON escape that may decode to a lone surrogate


class ChannelClosed(EOFError):
    """The other side closed its end of the pipe (it exited or crashed)."""


class ChannelTimeout(TimeoutError):
    """No complete message arrived before the deadline."""


class ProtocolViolation(ValueError):
    """The other side sent bytes that are not a well-formed message."""


@dataclass
class Message:
    header: dict[str, Any]
    blob: bytes = b""
    fds: list[int] = field(default_factory=list)  # descriptors that came with it (the receiver closes them)

    @property
    def op(self) -> str:
        return str(self.header.get("op", ""))


class Channel:
    """A framed, bidirectional message channel over two file descriptors (one Unix socket, or two
    pipes). Over a socket a message can carry file descriptors (SCM_RIGHTS): the candidate's staging
    buffer travels that way (`drkernel.gym.harness.vmm`)."""

    def __init__(self, read_fd: int, write_fd: int | None = None) -> None:
        self.read_fd = read_fd
        self.write_fd = read_fd if write_fd is None else write_fd
        self._rsock, self._wsock = _socket(self.read_fd), _socket(self.write_fd)
        self._fds: list[int] = []  # descriptors received with the message being read

    def send(self, header: dict[str, Any], blob: bytes = b"", fds: Sequence[int] = ()) -> None:
        data = json.dumps(header, separators=(",", ":")).encode()
        payload = b"".join((struct.pack(">I", len(data)), data, struct.pack(">Q", len(blob))))
        if fds:
            if self.write_fd < 0:
                raise ChannelClosed("the channel is closed")
            if self._wsock is None:
                raise ProtocolViolation("descriptors can only travel over a socket")
            try:
                sent = socket.send_fds(self._wsock, [payload], list(fds))
            except OSError as e:
                raise ChannelClosed(f"the channel is closed: {e}") from e
            payload = payload[sent:]
        self._write_all(payload)
        if blob:
            self._write_all(blob)

    def _write_all(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.write_fd, view[: 1 << 24])
            except BrokenPipeError as e:
                raise ChannelClosed("peer closed the pipe") from e
            except OSError as e:  # our end was closed (the child was killed)
                raise ChannelClosed(f"the channel is closed: {e}") from e
            view = view[n:]

    def recv(self, deadline: float | None = None, max_fds: int = 0,
             max_blob: int | Callable[[], int] = MAX_BLOB, max_header: int = MAX_HEADER) -> Message:
        """Next message; ``deadline`` is a ``time.monotonic()`` value (None waits forever). A message
        may carry at most ``max_fds`` descriptors (the caller owns them: `Message.fds`); more is a
        `ProtocolViolation`, and every descriptor of a message that fails is closed. A blob declared
        larger than ``max_blob`` (a callable: asked once the header has arrived), or a header longer
        than ``max_header`` (an untrusted peer's: `CANDIDATE_HEADER`), is a `ProtocolViolation` before
        any of it is read; so is a header nested past the parser's recursion limit."""
        try:
            msg = self._recv(deadline, max_blob, min(max_header, MAX_HEADER))
            if len(self._fds) > max_fds:
                raise ProtocolViolation(f"a message with {len(self._fds)} descriptors (at most {max_fds})")
        except BaseException:
            close_fds(self._fds)
            self._fds = []
            raise
        msg.fds, self._fds = self._fds, []
        return msg

    def _recv(self, deadline: float | None, max_blob: int | Callable[[], int] = MAX_BLOB,
              max_header: int = MAX_HEADER) -> Message:
        (n,) = struct.unpack(">I", self._read_exact(4, deadline))
        if n > max_header:
            raise ProtocolViolation(f"a message header of {n} bytes (at most {max_header} here)")
        data = self._read_exact(n, deadline)
        try:
            header = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ProtocolViolation(f"header is not JSON: {e}") from e
        except RecursionError:
            raise ProtocolViolation("a header nested past the parser's recursion limit") from None
        if not isinstance(header, dict):
            raise ProtocolViolation("header is not an object")
        if _SURROGATE_ESCAPE.search(data):
            header = valid_text(header)
        (m,) = struct.unpack(">Q", self._read_exact(8, deadline))
        limit = min(max_blob() if callable(max_blob) else max_blob, MAX_BLOB)
        if m > limit:
            raise ProtocolViolation(f"blob of {m} bytes (at most {max(limit, 0)} here)")
        return Message(header, self._read_exact(m, deadline) if m else b"")

    def _read_exact(self, n: int, deadline: float | None) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.read_fd], [], [], left)[0]:
                    raise ChannelTimeout(f"no message within the deadline ({len(buf)}/{n} bytes read)")
            want = min(n - len(buf), 1 << 24)
            try:
                if self._rsock is not None:
                    chunk, fds, _, _ = socket.recv_fds(self._rsock, want, MAX_FDS)
                    self._fds.extend(fds)
                else:
                    chunk = os.read(self.read_fd, want)
            except OSError as e:
                raise ChannelClosed(f"the channel is closed: {e}") from e
            if not chunk:
                raise ChannelClosed("peer closed the pipe")
            buf += chunk
        return bytes(buf)

    def readable(self, timeout_s: float) -> bool:
        """Whether a message has begun to arrive (or the peer closed) within ``timeout_s``."""
        return self.read_fd >= 0 and bool(select.select([self.read_fd], [], [], max(0.0, timeout_s))[0])

    def close(self) -> None:
        """Close both ends once. A second close must not touch the numbers again: by then another
        thread may have been given the same descriptors for a new child's pipes."""
        fds, self.read_fd, self.write_fd = {self.read_fd, self.write_fd}, -1, -1
        for sock in (self._rsock, self._wsock):
            if sock is not None:
                sock.detach()  # the socket objects only borrowed the numbers
        self._rsock = self._wsock = None
        close_fds([fd for fd in fds if fd >= 0])
        close_fds(self._fds)
        self._fds = []


def valid_text(value: Any) -> Any:
    """``value`` (a parsed JSON tree) with every string, keys included, made valid UTF-8: a lone
    surrogate, which JSON's ``\\ud800`` escape lets a child send, becomes the text ``\\ud800``.
    Every header a child sends passes here (`Channel.recv`), so nothing downstream (the result, the
    job store, an HTTP answer) meets a str that cannot be encoded. Iterative: a tree as deep as
    ``json.loads`` accepts does not exhaust the stack."""
    def fix(v: Any) -> Any:
        return v.encode("utf-8", "backslashreplace").decode("utf-8") if type(v) is str else v

    root = [fix(value)]
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        if type(node) is dict:
            items = [(fix(k), fix(v)) for k, v in node.items()]
            node.clear()
            node.update(items)
            stack.extend(v for _, v in items if type(v) in (dict, list))
        else:
            for i, v in enumerate(node):
                node[i] = fix(v)
                if type(node[i]) in (dict, list):
                    stack.append(node[i])
    return root[0]


def _socket(fd: int) -> socket.socket | None:
    """A socket object borrowing ``fd`` if it is a socket (detached again by `Channel.close`)."""
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            return None
    except OSError:
        return None
    return socket.socket(fileno=fd)


def close_fds(fds: Sequence[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def channel_pair() -> tuple[int, int]:
    """A Unix stream socket pair for a child's channel: (our end, the child's end)."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    return a.detach(), b.detach()


_adopted: list[Channel] = []


def adopt_stdio_channel() -> None:
    """In a child's boot: the parent hands the channel over as stdin (its messages) and stdout (ours).
    Move both onto fresh descriptors, point stdin at /dev/null and stdout at stderr (the child's log),
    so that no descriptor number is named in the environment or on the command line, and whatever
    the child prints cannot corrupt the channel."""
    read_fd, write_fd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    _adopted.append(Channel(read_fd, write_fd))


def child_channel() -> Channel:
    """The channel of a child process, adopted by its boot (`drkernel.gym.orchestrator.sandbox`); handed out once."""
    if not _adopted:
        raise RuntimeError("no channel: a child must be started through drkernel.gym.orchestrator.sandbox")
    return _adopted.pop()


# ---------------------------------------------------------------------------------------------
# Tensor trees: outputs (tensor, tuple/list of tensors, scalars) <-> JSON tree + blob.

class StagingBuffer:
    """One device allocation of the candidate through which every export travels.

    Outputs are copied into it (device to device) and the judge copies them out. It is a VMM
    allocation exported as a file descriptor (`drkernel.gym.harness.vmm`): legacy CUDA IPC handles
    do not open across the sandboxes' pid namespaces, and a descriptor passes over the channel. It
    lives as long as the candidate and grows only when an export needs more room; each export
    message carries its descriptor and size (``staging``)."""

    ALIGN = 256

    def __init__(self, device: Any) -> None:
        self.device = device
        self.alloc: Any = None  # vmm.Exported
        self.used = False  # did the last encoded tree stage anything

    @property
    def buf(self) -> Any:
        return self.alloc.tensor

    def reserve(self, nbytes: int) -> None:
        from drkernel.gym.harness import vmm

        if self.alloc is None or self.alloc.nbytes < nbytes:
            if self.alloc is not None:
                import torch

                torch.cuda.synchronize(self.device)
                self.alloc.close()
                self.alloc = None
            self.alloc = vmm.Exported(max(nbytes, self.ALIGN), self.device)

    @classmethod
    def layout(cls, tensors: list[Any]) -> tuple[list[int], int]:
        """Byte offsets of ``tensors`` packed with `ALIGN`, and the total."""
        offsets, end = [], 0
        for t in tensors:
            offsets.append(end)
            end += -(-t.numel() * t.element_size() // cls.ALIGN) * cls.ALIGN
        return offsets, end


def encode_tree(value: Any, staging: StagingBuffer | None = None) -> tuple[Any, bytes]:
    """Encode an output tree. Returns (tree, blob).

    With ``staging``, CUDA tensors are copied into the candidate's `StagingBuffer` and their nodes
    name byte ranges of it (``staged``); the message must then carry the buffer (`staged_fds`).
    Everything else (and everything without ``staging``) is copied to host bytes.
    """
    import torch

    chunks: list[bytes] = []
    offset = 0
    plain = {id(t): plain_tensor(t) for t in _tensor_leaves(value)}  # each leaf's, made once
    staged: dict[int, int] = {}  # id(tensor) -> byte offset in the staging buffer
    if staging is not None:
        leaves = [(k, t) for k, t in plain.items() if t.is_cuda and t.numel() > 0]
        staging.used = bool(leaves)
        if leaves:
            offsets, total = StagingBuffer.layout([t for _, t in leaves])
            staging.reserve(total)
            for (k, t), start in zip(leaves, offsets):
                n = t.numel() * t.element_size()
                staging.buf[start:start + n].view(t.dtype).view(t.shape).copy_(t)
                staged[k] = start

    nodes = 0

    def enc(v: Any) -> Any:
        nonlocal offset, nodes
        nodes += 1
        if nodes > MAX_TREE_NODES:
            raise TypeError(f"cannot export an output tree of more than {MAX_TREE_NODES} values: outputs "
                            "are tensors, not long sequences of Python numbers")
        if issubclass(type(v), torch.Tensor):
            t = plain[id(v)]
            head = {"k": "tensor", "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                    "type": type(v).__name__}
            if id(v) in staged:
                head.update(staged=staged[id(v)], nbytes=t.numel() * t.element_size())
                return head
            raw = t.contiguous().cpu().reshape(-1).view(torch.uint8).numpy().tobytes()
            head.update(offset=offset, nbytes=len(raw))
            chunks.append(raw)
            offset += len(raw)
            return head
        if type(v) in (tuple, list):  # exactly: a subclass's own iteration is the solution's code
            return {"k": type(v).__name__, "items": [enc(x) for x in v]}
        if v is None or type(v) in (bool, int, float, str):
            return {"k": "scalar", "value": v}
        raise TypeError(f"cannot export an output of type {type(v).__module__}.{type(v).__qualname__}: "
                        f"outputs are tensors, tuples or lists of them, or plain numbers")

    try:
        tree = enc(value)
    finally:  # `enc` is a reference cycle (its closure holds itself): without this, `plain` kept every
        del enc  # exported tensor alive until the cyclic collector ran (a candidate at full size grew by
        plain.clear()  # a trial's inputs and outputs each trial, 12 to 62 GB on an H100, 2026-11-28)
    size = len(json.dumps(tree, separators=(",", ":")))
    if size > MAX_TREE_BYTES:
        raise TypeError(f"cannot export an output tree whose description takes {size} bytes (at most "
                        f"{MAX_TREE_BYTES}): outputs are a few tensors")
    return tree, b"".join(chunks)


def tree_nodes(tree: Any, limit: int = MAX_TREE_NODES) -> int:
    """Nodes of an encoded tree (a `ProtocolViolation` past ``limit``), counted without recursion."""
    count, stack = 0, [tree]
    while stack:
        node = stack.pop()
        count += 1
        if count > limit:
            raise ProtocolViolation(f"an output tree of more than {limit} nodes")
        items = node.get("items") if isinstance(node, dict) else None
        if isinstance(items, list):
            stack.extend(items)
    return count


def staged_fds(staging: StagingBuffer | None) -> tuple[dict[str, Any], list[int]]:
    """What the message carrying the tree `encode_tree` just made adds: the staging buffer's size
    (header ``staging``) and its descriptor, if any node of the tree is staged."""
    if staging is None or staging.alloc is None or not staging.used:
        return {}, []
    return {"staging": staging.alloc.nbytes}, [staging.alloc.fd]


def _contiguous_strides(shape: list[int]) -> list[int]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return strides[::-1]


def plain_tensor(value: Any) -> Any:
    """``value`` as a plain ``torch.Tensor`` sharing its data, made without running any of the
    solution's code: the class's ``detach`` (a method looked up on the tensor finds an attribute set on
    it first, such as a ``detach`` that computes the answer at export) with subclass dispatch off. The
    result has no attributes of its own."""
    import torch

    with torch._C.DisableTorchFunction():
        return torch.Tensor.detach(value)


def _tensor_leaves(value: Any) -> list[Any]:
    import torch

    if issubclass(type(value), torch.Tensor):
        return [value]
    if type(value) in (tuple, list):  # a subclass could run code of its own when iterated
        return [t for v in value for t in _tensor_leaves(v)]
    return []


def decode_tree(tree: Any, blob: bytes, device: Any, staging: Any = None) -> Any:
    """Rebuild an encoded tree as tensors the caller owns (copies). ``staging``: the candidate's
    staging buffer as a uint8 device tensor (mapped by the judge, `drkernel.gym.harness.vmm`)."""
    import torch

    def dec(node: Any) -> Any:
        if not isinstance(node, dict) or "k" not in node:
            raise ProtocolViolation("malformed output tree")
        k = node["k"]
        if k in ("tuple", "list"):
            items = [dec(x) for x in node["items"]]
            return tuple(items) if k == "tuple" else items
        if k == "scalar":
            return node["value"]
        if k != "tensor":
            raise ProtocolViolation(f"unknown node kind {k!r}")
        dtype = getattr(torch, str(node["dtype"]), None)
        if not isinstance(dtype, torch.dtype):
            raise ProtocolViolation(f"unknown dtype {node['dtype']!r}")
        shape = [int(s) for s in node["shape"]]
        numel = 1
        for s in shape:
            if s < 0:
                raise ProtocolViolation("negative size")
            numel *= s
        itemsize = torch.empty(0, dtype=dtype).element_size()
        start, n = int(node["staged"] if "staged" in node else node["offset"]), int(node["nbytes"])
        if numel * itemsize != n:
            raise ProtocolViolation("tensor bytes do not match its shape")
        if n == 0:
            return torch.empty(shape, dtype=dtype, device=device)
        if "staged" in node:
            if staging is None:
                raise ProtocolViolation("a staged tensor in a message without a staging buffer")
            if start < 0 or start % itemsize or start + n > staging.numel():
                raise ProtocolViolation("tensor bytes outside the staging buffer")
            return staging[start:start + n].view(dtype).reshape(shape).clone()
        if start < 0 or start + n > len(blob):
            raise ProtocolViolation("tensor bytes outside the blob")
        host = torch.frombuffer(bytearray(blob[start:start + n]), dtype=torch.uint8)
        return host.view(dtype).reshape(shape).to(device)

    return dec(tree)
