"""CPU mode: a kernel's launch under the interpreter leaves the solution's module globals as they were.

Triton's interpreter rewrites a kernel and, to run the rewrite, copied every global of its own module
(``np``, ``inspect``, ``triton``, ...) into the kernel's module: a solution could then use names its
source never binds, which the static checks never see (red team twelve: NumPy on a DLPack view,
``inspect`` reaching the harness). One child process (TRITON_INTERPRET must be set before triton is
imported) launches a kernel defined in a fresh module and prints the names the launch added."""

from __future__ import annotations

import json
import os
import subprocess
import sys

CHILD = r'''
import json, sys
import torch
from drkernel.gym.candidate import interpreter
interpreter.install()
src = """
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, y_ptr, n, B: tl.constexpr):
    o = tl.arange(0, B)
    m = (o < n) & (o >= 0)
    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=m) * 2, mask=m)
"""
import importlib.util, os, tempfile
path = os.path.join(tempfile.mkdtemp(), "solution_like.py")  # the rewrite reads the kernel's source file
with open(path, "w") as f:
    f.write(src)
spec = importlib.util.spec_from_file_location("solution_like", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
before = set(mod.__dict__)
x = torch.arange(8, dtype=torch.float32)
y = torch.empty(8)
mod.k[(1,)](x, y, 8, B=8)
mod.k[(1,)](x, y, 8, B=8)  # the cached rewrite too
print(json.dumps({"added": sorted(set(mod.__dict__) - before), "ok": bool(torch.equal(y, x * 2))}))
'''


def test_a_launch_adds_no_names_to_the_kernels_module():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["ok"], got  # the kernel still ran, comparisons chained and all
    assert got["added"] == [], got


def test_a_storage_that_moved_no_longer_opens_its_old_span():
    """Red team 18: a tensor whose address the solution took (``data_ptr()``) was reachable by kernels
    at that address for as long as it lived, also after ``resize_`` moved its memory: the old span was
    freed memory a Python object then took, written through a kernel to read the whole process. A span
    holds only while its storage is still there, at that size."""
    import torch

    from drkernel.gym.candidate import interpreter

    recording = interpreter._recording_data_ptr(torch.Tensor.data_ptr)
    t = torch.zeros(16)
    start = recording(t)
    assert any(s == start for s, _ in interpreter._pointed_spans())
    t.resize_(1 << 20)  # a new allocation: the first 64 bytes are freed
    assert t.untyped_storage().data_ptr() != start
    assert not any(s == start for s, _ in interpreter._pointed_spans())
    again = recording(t)  # taken again: the new span is open
    assert any(s == again for s, _ in interpreter._pointed_spans())
