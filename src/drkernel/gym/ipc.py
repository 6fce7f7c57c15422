"""Messages between the orchestrator and its children, and the tensor wire format.

A message is one JSON header plus an optional binary blob, framed on a pipe as

    [4-byte header length][header JSON][8-byte blob length][blob]

The orchestrator only ever parses JSON; it relays blobs between candidate and judge unread, so
untrusted bytes are never unpickled anywhere. Tensors travel as a JSON tree that names, per leaf,
either a slice of the blob (host bytes) or a CUDA IPC handle (device memory exported by the
candidate, mapped and copied by the judge). The judge never exports an allocation.

Standard library only at import time; the tensor helpers import torch when called.
"""

from __future__ import annotations

import base64
import json
import os
import select
import struct
import time
from dataclasses import dataclass
from typing import Any

MAX_HEADER = 64 << 20
MAX_BLOB = 16 << 30


class ChannelClosed(EOFError):
    """The other side closed its end of the pipe (it exited or crashed)."""


class ChannelTimeout(TimeoutError):
    """No complete message arrived before the deadline."""


class ProtocolViolation(ValueError):
    """The other side sent bytes that are not a well-formed message."""


class IpcUnavailable(RuntimeError):
    """A CUDA IPC handle could not be opened here; the sender should send host bytes instead."""


@dataclass
class Message:
    header: dict[str, Any]
    blob: bytes = b""

    @property
    def op(self) -> str:
        return str(self.header.get("op", ""))


class Channel:
    """A framed, bidirectional message channel over two file descriptors."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd

    def send(self, header: dict[str, Any], blob: bytes = b"") -> None:
        data = json.dumps(header, separators=(",", ":")).encode()
        payload = b"".join((struct.pack(">I", len(data)), data, struct.pack(">Q", len(blob))))
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

    def recv(self, deadline: float | None = None) -> Message:
        """Next message; ``deadline`` is a ``time.monotonic()`` value (None waits forever)."""
        (n,) = struct.unpack(">I", self._read_exact(4, deadline))
        if n > MAX_HEADER:
            raise ProtocolViolation(f"header of {n} bytes")
        try:
            header = json.loads(self._read_exact(n, deadline))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ProtocolViolation(f"header is not JSON: {e}") from e
        if not isinstance(header, dict):
            raise ProtocolViolation("header is not an object")
        (m,) = struct.unpack(">Q", self._read_exact(8, deadline))
        if m > MAX_BLOB:
            raise ProtocolViolation(f"blob of {m} bytes")
        return Message(header, self._read_exact(m, deadline) if m else b"")

    def _read_exact(self, n: int, deadline: float | None) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.read_fd], [], [], left)[0]:
                    raise ChannelTimeout(f"no message within the deadline ({len(buf)}/{n} bytes read)")
            try:
                chunk = os.read(self.read_fd, min(n - len(buf), 1 << 24))
            except OSError as e:
                raise ChannelClosed(f"the channel is closed: {e}") from e
            if not chunk:
                raise ChannelClosed("peer closed the pipe")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        """Close both ends once. A second close must not touch the numbers again: by then another
        thread may have been given the same descriptors for a new child's pipes."""
        fds, self.read_fd, self.write_fd = (self.read_fd, self.write_fd), -1, -1
        for fd in fds:
            if fd < 0:
                continue
            try:
                os.close(fd)
            except OSError:
                pass


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
    """One CUDA allocation of the candidate through which every export travels.

    Exporting each output's own allocation would leave it, once freed, in PyTorch's IPC limbo until
    the judge's release is seen, so full-size trials (gigabytes each) would pile up in the
    candidate. Instead, outputs are copied into this buffer (a device-to-device copy) and the judge
    copies them out; the buffer lives as long as the candidate and grows only when an export needs
    more room."""

    ALIGN = 256

    def __init__(self, device: Any) -> None:
        self.device = device
        self.buf: Any = None
        self.handle: list[Any] | None = None

    def reserve(self, nbytes: int) -> None:
        import torch

        if self.buf is None or self.buf.numel() < nbytes:
            self.buf = self.handle = None
            self.buf = torch.empty(max(nbytes, self.ALIGN), dtype=torch.uint8, device=self.device)
            (dev, handle, size, off, rc_handle, rc_off, ev_handle, ev_sync) = \
                self.buf.untyped_storage()._share_cuda_()
            self.handle = [dev, _b64(handle), size, off, _b64(rc_handle), rc_off, _b64(ev_handle), bool(ev_sync)]

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

    With ``staging``, CUDA tensors are copied into the candidate's `StagingBuffer` and travel as IPC
    handles of it; everything else (and everything without ``staging``) is copied to host bytes.
    """
    import torch

    chunks: list[bytes] = []
    offset = 0
    staged: dict[int, int] = {}  # id(tensor) -> byte offset in the staging buffer
    if staging is not None:
        leaves = [t for t in _tensor_leaves(value) if t.is_cuda and t.numel() > 0]
        offsets, total = StagingBuffer.layout(leaves)
        staging.reserve(total)
        for t, start in zip(leaves, offsets):
            n = t.numel() * t.element_size()
            staging.buf[start:start + n].view(t.dtype).view(t.shape).copy_(t.detach())
            staged[id(t)] = start

    def enc(v: Any) -> Any:
        nonlocal offset
        if isinstance(v, torch.Tensor):
            t = v.detach()
            head = {"k": "tensor", "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                    "type": type(v).__name__}
            if id(v) in staged:
                head.update(ipc=list(staging.handle), stride=_contiguous_strides(list(t.shape)),
                            storage_offset=staged[id(v)] // t.element_size())
                return head
            raw = t.contiguous().cpu().reshape(-1).view(torch.uint8).numpy().tobytes()
            head.update(offset=offset, nbytes=len(raw))
            chunks.append(raw)
            offset += len(raw)
            return head
        if isinstance(v, (tuple, list)):
            return {"k": type(v).__name__, "items": [enc(x) for x in v]}
        if v is None or isinstance(v, (bool, int, float, str)):
            return {"k": "scalar", "value": v}
        if hasattr(v, "item") and callable(v.item):  # numpy scalars
            return {"k": "scalar", "value": v.item()}
        raise TypeError(f"cannot export an output of type {type(v).__name__}")

    tree = enc(value)
    return tree, b"".join(chunks)


def _contiguous_strides(shape: list[int]) -> list[int]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return strides[::-1]


def _tensor_leaves(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensor_leaves(v)]
    return []


def _b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode()


def _unb64(s: str | None) -> bytes | None:
    return None if s is None else base64.b64decode(s)


def decode_tree(tree: Any, blob: bytes, device: Any) -> Any:
    """Rebuild an encoded tree as tensors the caller owns (copies; IPC mappings released)."""
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
        if "ipc" in node:
            return _open_ipc(node, dtype, shape)
        start, n = int(node["offset"]), int(node["nbytes"])
        if start < 0 or start + n > len(blob):
            raise ProtocolViolation("tensor bytes outside the blob")
        numel = 1
        for s in shape:
            numel *= s
        itemsize = torch.empty(0, dtype=dtype).element_size()
        if numel * itemsize != n:
            raise ProtocolViolation("tensor bytes do not match its shape")
        if n == 0:
            return torch.empty(shape, dtype=dtype, device=device)
        host = torch.frombuffer(bytearray(blob[start:start + n]), dtype=torch.uint8)
        return host.view(dtype).reshape(shape).to(device)

    return dec(tree)


def _open_ipc(node: dict[str, Any], dtype: Any, shape: list[int]) -> Any:
    """Map a candidate's CUDA allocation, copy the tensor out, drop the mapping."""
    import torch

    dev, handle, size, off, rc_handle, rc_off, ev_handle, ev_sync = node["ipc"]
    try:
        storage = torch.UntypedStorage._new_shared_cuda(
            int(dev), _unb64(handle), int(size), int(off), _unb64(rc_handle), int(rc_off), _unb64(ev_handle),
            bool(ev_sync))
    except RuntimeError as e:
        raise IpcUnavailable(str(e)) from e
    view = torch.empty(0, dtype=dtype, device=f"cuda:{int(dev)}")
    # set_ checks that size/stride/offset stay inside the storage the candidate declared.
    view.set_(storage, int(node["storage_offset"]), shape, [int(s) for s in node["stride"]])
    out = view.clone()
    torch.cuda.current_stream().synchronize()
    del view, storage
    return out
