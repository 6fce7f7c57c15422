"""CPU mode gives Triton code what a GPU gives it: fp32 float scalars, libdevice, the driver's queries.

One child process (TRITON_INTERPRET must be set before triton is imported) runs a kernel written in
Liger-Kernel's and the tutorials' idioms and prints its error against PyTorch."""

from __future__ import annotations

import os
import subprocess
import sys

CHILD = r'''
import torch, triton, triton.language as tl
from drkernel.gym.candidate import interpreter
interpreter.install()
try:
    from triton.language.extra.cuda import libdevice
except ImportError:
    from triton.language.extra import libdevice
from triton.language.extra.libdevice import tanh

props = triton.runtime.driver.active.utils.get_device_properties(0)
target = triton.runtime.driver.active.get_current_target()

@triton.jit
def k(x_ptr, y_ptr, n, scale, B: tl.constexpr):
    o = tl.arange(0, B)
    x = tl.load(x_ptr + o, mask=o < n)
    s = scale.to(tl.float32)
    y = tanh(x) + libdevice.erf(x) + libdevice.rsqrt(tl.abs(x) + 1) + libdevice.isnan(x).to(tl.float32)
    tl.store(y_ptr + o, y * s, mask=o < n)

@triton.jit
def half(x_ptr, y_ptr, B: tl.constexpr):
    o = tl.arange(0, B)
    tl.store(y_ptr + o, libdevice.tanh(tl.load(x_ptr + o)))

x = torch.randn(8)
y = torch.empty(8)
k[(1,)](x, y, 8, 0.5, B=8)
want = (torch.tanh(x) + torch.erf(x) + torch.rsqrt(x.abs() + 1)) * 0.5
try:
    h = torch.randn(8).half()
    half[(1,)](h, torch.empty_like(h), B=8)
    fp16 = "accepted"
except Exception as e:
    fp16 = "refused"
print(target.backend, target.arch, props["multiprocessor_count"], float((y - want).abs().max()), fp16)
'''


def test_float_scalars_libdevice_and_driver_queries_under_the_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    backend, arch, sms, err, fp16 = out.stdout.split()
    assert (backend, arch, sms) == ("cuda", "90", "132")
    assert float(err) < 1e-5
    assert fp16 == "refused"  # libdevice has no fp16 variants on the GPU either


ALIASES = r"""
import functools
import torch, triton, triton.language as tl
from drkernel.gym.candidate import interpreter
interpreter.install()

fast_exp = tl.math.exp
to = tl.cast
seen = []


@functools.wraps(tl.math.exp)  # looks like the builtin (its name, module and flag) but is the solution's
def dressed(x, _semantic=None):
    seen.append(_semantic)
    return x


@triton.jit
def neg_exp(x):
    return fast_exp(-x)


@triton.jit
def silu(x_ptr, y_ptr, n, B: tl.constexpr):
    o = tl.arange(0, B)
    x = dressed(to(tl.load(x_ptr + o, mask=o < n), tl.float32))
    tl.store(y_ptr + o, x / (1 + neg_exp(x)), mask=o < n)


x = torch.randn(8)
y = torch.empty(8)
silu[(1,)](x, y, 8, B=8)
print(float((y - torch.nn.functional.silu(x)).abs().max()), fast_exp is tl.math.exp, to is tl.cast, seen)
"""


def test_module_level_aliases_of_builtins_run_in_kernels_under_the_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", ALIASES], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    err, exp_restored, cast_restored, seen = out.stdout.split()
    assert float(err) < 1e-5
    assert (exp_restored, cast_restored) == ("True", "True")  # the aliases are the builtins again after the run
    assert seen == "[None]"  # only Triton's own builtins are handed the interpreter's semantic


MASKS = r"""
import torch, triton, triton.language as tl
from drkernel.gym.candidate import interpreter
interpreter.install()


@triton.jit
def k(x_ptr, out_ptr, n, T, B: tl.constexpr):
    pid = tl.program_id(0)
    o = pid * B + tl.arange(0, B)
    inb = o < n
    live = pid < T                                                          # a scalar condition
    x = tl.load(x_ptr + o, mask=inb & live, other=0.0)
    tl.store(out_ptr + o, x, mask=inb)
    tl.store(out_ptr + n + o, tl.where(~(live & inb), 5.0, x), mask=inb)


# 3 programs of 4 over n = 10, the first 2 live: x[0:8], then 0, 0 (the dead program's loads)
# and 5, 5 where the inverted mask holds.
x = torch.arange(1, 11, dtype=torch.float32)
out = torch.full((2, 10), 9.0)
k[(3,)](x, out, 10, 2, B=4)
print(out.flatten().int().tolist())
"""


def test_a_block_mask_and_a_scalar_condition_combine_under_the_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", MASKS], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    live = list(range(1, 9))
    assert out.stdout.strip() == str(live + [0, 0] + live + [5, 5])


FP8 = r"""
import torch, triton, triton.language as tl
from drkernel.gym.candidate import interpreter
interpreter.install()


@triton.jit
def cast(x_ptr, y_ptr, n, B: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=o < n).to(y_ptr.dtype.element_ty), mask=o < n)


def run(x, dtype):
    y = torch.empty(x.shape, dtype=dtype)
    cast[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), B=256)
    return y


# Ties to even (1.0625 -> 1.0, 17 -> 16) and round-ups that carry into the exponent (7.75 -> 8, 31 -> 32).
print(run(torch.tensor([1.0625, 17.0, 7.75, 31.0, -7.75]), torch.float8_e4m3fn).float().tolist())
bad = 0
for fp8 in (torch.float8_e4m3fn, torch.float8_e5m2):
    values = torch.arange(256, dtype=torch.uint8).view(fp8).float()
    values = values[values.isfinite()].unique()                  # every value, and every midpoint
    x = torch.cat([values, (values[1:] + values[:-1]) / 2, torch.tensor([-0.0])])
    for source in (torch.float32, torch.float16, torch.bfloat16):
        x_s = x.to(source)
        keep = x_s.float().abs() <= torch.finfo(fp8).max
        bad += int((run(x_s[keep], fp8).view(torch.uint8) != x_s[keep].to(fp8).view(torch.uint8)).sum())
    codes = torch.arange(256, dtype=torch.uint8).view(fp8)    # widening, subnormals included
    finite = codes.float().isfinite()
    bad += int((run(codes, torch.float16).float() != codes.float())[finite].sum())
print(bad)
"""


def test_fp8_conversions_round_to_nearest_even_under_the_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", FP8], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    ties, bad = out.stdout.strip().splitlines()
    assert ties == str([1.0, 16.0, 8.0, 32.0, -8.0])
    assert bad == "0"  # every fp8 value and midpoint, from fp32/fp16/bf16, byte for byte as torch rounds


BUILT = r"""
import torch, triton
from drkernel.gym.candidate import interpreter
interpreter.install()


def build():
    import triton.language as lang  # imported where the kernel is built: the module never binds it

    @triton.jit
    def twice(x):  # a device function whose own globals hold no triton.language
        return x * 2

    @triton.jit
    def k(x_ptr, y_ptr, n, B: lang.constexpr):
        o = lang.arange(0, B)
        lang.store(y_ptr + o, twice(lang.load(x_ptr + o, mask=o < n)), mask=o < n)

    return k


x = torch.arange(8, dtype=torch.float32)
y = torch.empty(8)
build()[(1,)](x, y, 8, B=8)
print(torch.equal(y, x * 2), "lang" in globals())
"""


def test_a_kernel_built_in_a_function_runs_on_its_closure_under_the_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", BUILT], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "False"]  # right values, and the module still binds no `lang`
