"""Device memory shared between two sandboxes by file descriptor (CUDA virtual memory management).

Legacy CUDA IPC handles (``cudaIpcGetMemHandle``) open only in a process of the same pid namespace,
and every child of the gym has a pid namespace of its own (measured on an H100, 2026-11-24: the judge
got "invalid device context", and full-size outputs fell back to host copies that broke the RSS
limit). So the candidate's staging buffer is a VMM allocation exported as a POSIX file descriptor:

    candidate                          orchestrator                 judge
    cuMemCreate + map (`Exported`) ─► fd over the channel (SCM_RIGHTS) ─► cuMemImportFromShareableHandle,
                                       relayed unread                  map, copy out, unmap (`imported`)

A descriptor names one allocation and nothing else: the judge maps exactly the bytes the candidate
allocated (a larger size fails in ``cuMemMap``), copies, and unmaps before it replies. ctypes on the
driver (``libcuda.so.1``); torch sees the mapping through ``__cuda_array_interface__``.

    x = Exported(nbytes, device)          # candidate: x.tensor (uint8), x.fd, x.nbytes
    with imported(fd, nbytes, device) as t:  # judge: t is a uint8 view, valid inside the block
        out = t[a:b].view(dtype).view(shape).clone()
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
from typing import Any, Iterator

import torch

POSIX_FD = 1          # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
PINNED = 1            # CU_MEM_ALLOCATION_TYPE_PINNED
LOCATION_DEVICE = 1   # CU_MEM_LOCATION_TYPE_DEVICE
READ_WRITE = 3        # CU_MEM_ACCESS_FLAGS_PROT_READWRITE


class VmmError(RuntimeError):
    """The driver refused a VMM call (no driver, no POSIX fd handles, a size that does not match)."""


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Prop(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_driver: Any = None


def _cuda() -> Any:
    global _driver
    if _driver is None:
        try:
            _driver = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise VmmError(f"no CUDA driver library: {e}") from e
    return _driver


def _check(rc: int, what: str) -> None:
    if rc != 0:
        msg = ctypes.c_char_p()
        _cuda().cuGetErrorString(rc, ctypes.byref(msg))
        raise VmmError(f"{what} failed: {(msg.value or b'').decode() or rc}")


def _index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


@functools.lru_cache(maxsize=None)
def _ordinal(index: int) -> int:
    """The driver's device for torch's ``index``, looked up once per process (every export and every
    mapping needs it)."""
    torch.cuda.init()  # the driver's cuInit, in a process where torch has not touched the device yet
    ordinal = ctypes.c_int()
    _check(_cuda().cuDeviceGet(ctypes.byref(ordinal), index), "cuDeviceGet")
    return ordinal.value


def _location(device: torch.device) -> _Location:
    return _Location(LOCATION_DEVICE, _ordinal(_index(device)))


def _prop(device: torch.device) -> _Prop:
    return _Prop(type=PINNED, requestedHandleTypes=POSIX_FD, location=_location(device))


def granularity(device: torch.device) -> int:
    return _granularity(_index(device))


@functools.lru_cache(maxsize=None)
def _granularity(index: int) -> int:
    g = ctypes.c_size_t()
    prop = _Prop(type=PINNED, requestedHandleTypes=POSIX_FD, location=_Location(LOCATION_DEVICE, _ordinal(index)))
    _check(_cuda().cuMemGetAllocationGranularity(ctypes.byref(g), ctypes.byref(prop), 0), "cuMemGetAllocationGranularity")
    return g.value


class _Raw:
    """Hands a device pointer to torch (``torch.as_tensor`` keeps this object alive with the tensor)."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "strides": None, "version": 3}


def _map(handle: int, nbytes: int, device: torch.device) -> tuple[int, torch.Tensor]:
    """Reserve an address range, map ``handle`` there read-write for ``device``; (pointer, uint8 view)."""
    lib, ptr = _cuda(), ctypes.c_uint64()
    torch.cuda.synchronize(device)  # makes torch's primary context current on this thread
    _check(lib.cuMemAddressReserve(ctypes.byref(ptr), ctypes.c_size_t(nbytes), ctypes.c_size_t(0),
                                   ctypes.c_uint64(0), ctypes.c_uint64(0)), "cuMemAddressReserve")
    try:
        _check(lib.cuMemMap(ptr, ctypes.c_size_t(nbytes), ctypes.c_size_t(0), ctypes.c_uint64(handle),
                            ctypes.c_uint64(0)), "cuMemMap")
        try:
            desc = _AccessDesc(_location(device), READ_WRITE)
            _check(lib.cuMemSetAccess(ptr, ctypes.c_size_t(nbytes), ctypes.byref(desc), ctypes.c_size_t(1)),
                   "cuMemSetAccess")
        except VmmError:
            lib.cuMemUnmap(ptr, ctypes.c_size_t(nbytes))
            raise
    except VmmError:
        lib.cuMemAddressFree(ptr, ctypes.c_size_t(nbytes))
        raise
    return ptr.value, torch.as_tensor(_Raw(ptr.value, nbytes), device=device)


def _unmap(ptr: int, nbytes: int) -> None:
    lib = _cuda()
    lib.cuMemUnmap(ctypes.c_uint64(ptr), ctypes.c_size_t(nbytes))
    lib.cuMemAddressFree(ctypes.c_uint64(ptr), ctypes.c_size_t(nbytes))


class Exported:
    """A device allocation of at least ``nbytes`` (rounded up to the driver's granularity) that can be
    handed to another process as a descriptor (`fd`). `close` unmaps it and frees it once no other
    process holds it."""

    def __init__(self, nbytes: int, device: torch.device) -> None:
        lib, handle = _cuda(), ctypes.c_uint64()
        g = granularity(device)
        self.nbytes = max(g, -(-nbytes // g) * g)
        prop = _prop(device)
        _check(lib.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(self.nbytes), ctypes.byref(prop),
                               ctypes.c_uint64(0)), "cuMemCreate")
        self.handle = handle.value
        try:
            self.ptr, self.tensor = _map(self.handle, self.nbytes, device)
            fd = ctypes.c_int(-1)
            _check(lib.cuMemExportToShareableHandle(ctypes.byref(fd), ctypes.c_uint64(self.handle), POSIX_FD,
                                                    ctypes.c_uint64(0)), "cuMemExportToShareableHandle")
            self.fd = fd.value
        except VmmError:
            lib.cuMemRelease(ctypes.c_uint64(self.handle))
            raise

    def close(self) -> None:
        """Free the allocation; every view of `tensor` must be gone (the device synchronised)."""
        if self.handle is None:
            return
        self.tensor = None
        _unmap(self.ptr, self.nbytes)
        _cuda().cuMemRelease(ctypes.c_uint64(self.handle))
        os.close(self.fd)
        self.handle = None


@contextlib.contextmanager
def imported(fd: int, nbytes: int, device: torch.device) -> Iterator[torch.Tensor]:
    """Map another process's `Exported` allocation (``fd``, ``nbytes`` as it says) for the block's
    duration. ``fd`` stays the caller's. Views of the yielded tensor must not outlive the block."""
    lib, handle = _cuda(), ctypes.c_uint64()
    _check(lib.cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd), POSIX_FD),
           "cuMemImportFromShareableHandle")
    try:
        if nbytes <= 0 or nbytes % granularity(device):
            raise VmmError(f"a staging buffer of {nbytes} bytes is not a whole number of allocation granules")
        ptr, view = _map(handle.value, nbytes, device)
        try:
            yield view
        finally:
            del view
            torch.cuda.synchronize(device)
            _unmap(ptr, nbytes)
    finally:
        lib.cuMemRelease(handle)
