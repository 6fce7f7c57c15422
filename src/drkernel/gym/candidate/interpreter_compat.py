"""CPU mode: what a GPU gives Triton code that the interpreter (triton 3.9) lacks, so CPU mode reaches
the GPU's verdict for code the interpreter can run. Installed by `drkernel.gym.candidate.interpreter`.

- **Python floats are fp32 scalars.** On a GPU a ``float`` kernel argument arrives as an fp32 scalar
  (``x.to(tl.float32)`` and ``x.dtype`` work); the interpreter passed a Python float, so
  ``scale.to(tl.float32)`` failed there alone.
- **libdevice.** ``triton.language.extra.libdevice`` and ``triton.language.extra.cuda.libdevice``
  (Liger-Kernel's import and its fallback) get NumPy versions of their elementwise functions, fp32 and
  fp64 only, as on the GPU (libdevice has no fp16 variants). Functions not listed here still fail
  and are classified ``unsupported_on_cpu``.
- **Aliases of builtins.** A kernel may call a builtin through a module-level alias (lmdeploy's
  ``fast_expf = tl.math.exp``, unsloth's ``triton_cast = tl.cast``); the GPU's code generator resolves
  the global to the builtin. The interpreter patches builtins where ``triton.language`` holds them, so
  the alias, still the unpatched builtin, raised "Did you forget to add @triton.jit?". While a kernel
  runs, each such alias among its globals is bound to the interpreted builtin, and restored after.
- **Comparisons are int1.** The interpreter typed a comparison's result as its operands' type (its
  values bool): a block mask combined with a scalar condition (``(offs < n) & (pid < T)``) splatted
  the scalar by that type, to int32, and the load refused the int32 mask ("mask has unsupported dtype").
  Comparisons now answer int1, as on the GPU.
- **fp8 conversions.** The interpreter's own fp8 conversion rounds ties away from zero, loses the
  carry of a round-up into the exponent (fp32 7.75 -> e4m3 4.0) and drops subnormals; the GPU rounds
  to nearest even (``cvt.rn``), as torch does. Conversions from fp16/bf16/fp32 to the fp8 formats
  torch has (e4m3fn, e5m2 and their fnuz variants), and from those to fp16/bf16/fp32/fp64, round to
  nearest even over the format's values (read from torch) for every finite value within the
  destination's range; the rest (overflow, inf, NaN, whose saturation is the backend's choice; fp64
  sources) keep the interpreter's answer.
- **The driver.** ``triton.runtime.driver.active`` has no active backend on a CPU; most tutorials
  read the target and the device's properties at import. CPU mode answers as the reference GPU
  (an H100: sm_90, 132 SMs), the device the gym's GPU verdicts come from.
"""

from __future__ import annotations

import math
import types
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

REFERENCE_GPU_PROPERTIES = {"max_shared_mem": 232448, "max_num_regs": 65536, "multiprocessor_count": 132,
                            "warpSize": 32, "sm_clock_rate": 1980000, "mem_clock_rate": 2619000,
                            "mem_bus_width": 5120}
"""An H100 SXM's properties as ``driver.active.utils.get_device_properties`` reports them."""


def _vectorized(fn: Callable[[float], float]) -> Callable[[np.ndarray], np.ndarray]:
    ufunc = np.frompyfunc(fn, 1, 1)
    return lambda x: ufunc(x).astype(np.float64)


def _rsqrt(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 / np.sqrt(x)


FLOAT_FUNCTIONS: dict[str, Callable[..., np.ndarray]] = {
    "tanh": np.tanh, "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(10.0, x), "expm1": np.expm1,
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt, "rsqrt": _rsqrt,
    "cbrt": np.cbrt, "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "atan2": np.arctan2, "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh,
    "acosh": np.arccosh, "atanh": np.arctanh, "pow": np.power, "floor": np.floor, "ceil": np.ceil,
    "trunc": np.trunc, "rint": np.rint, "nearbyint": np.rint, "round": lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5),
    "fabs": np.abs, "abs": np.abs, "fmax": np.fmax, "fmin": np.fmin, "fmod": np.fmod, "copysign": np.copysign,
    "hypot": np.hypot, "fma": lambda a, b, c: a * b + c, "div_rn": np.divide, "erf": _vectorized(math.erf),
    "erfc": _vectorized(math.erfc), "lgamma": _vectorized(math.lgamma), "tgamma": _vectorized(math.gamma),
    "fast_expf": np.exp, "fast_logf": np.log, "fast_powf": np.power, "fast_tanhf": np.tanh,
    "saturatef": lambda x: np.clip(x, 0.0, 1.0),
}
INT_FUNCTIONS: dict[str, Callable[..., np.ndarray]] = {
    "isnan": np.isnan, "isinf": np.isinf, "finitef": np.isfinite, "isfinited": np.isfinite, "signbit": np.signbit,
}
"""libdevice functions that answer an int32 flag."""


def _libdevice_function(module: str, name: str, np_fn: Callable[..., np.ndarray], flag: bool) -> Callable[..., Any]:
    def fn(*args: Any, _semantic: Any = None, **_: Any) -> Any:
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle

        tensors = [a for a in args if isinstance(a, tl.tensor)]
        if not tensors:
            raise TypeError(f"libdevice.{name} takes a tensor")
        dtypes = {t.dtype.scalar for t in tensors}
        if not dtypes <= {tl.float32, tl.float64}:
            raise ValueError(f"libdevice.{name} is defined for fp32 and fp64, not {sorted(map(str, dtypes))}")
        dtype = tl.float64 if tl.float64 in dtypes else tl.float32
        values = [np.asarray(a.handle.data) if isinstance(a, tl.tensor) else np.asarray(getattr(a, "value", a))
                  for a in args]
        with np.errstate(all="ignore"):
            out = np.asarray(np_fn(*values))
        widest = max(tensors, key=lambda t: np.asarray(t.handle.data).size)
        out_dtype = tl.int32 if flag else dtype
        out = out.astype(np.int32 if flag else np.float64 if dtype == tl.float64 else np.float32)
        out = np.broadcast_to(out, np.asarray(widest.handle.data).shape).copy()
        ty = tl.block_type(out_dtype, widest.type.shape) if widest.type.is_block() else out_dtype
        return tl.tensor(TensorHandle(out, out_dtype), ty)

    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = module  # it stands in for the library's function (the module scan reads this)
    return fn


def install_libdevice() -> None:
    """Replace the libdevice modules' functions by NumPy versions (the interpreter runs jit bodies as
    Python, so a kernel calls these directly)."""
    import importlib

    for module_name in ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for name, np_fn in FLOAT_FUNCTIONS.items():
            setattr(module, name, _libdevice_function(module_name, name, np_fn, flag=False))
        for name, np_fn in INT_FUNCTIONS.items():
            setattr(module, name, _libdevice_function(module_name, name, np_fn, flag=True))


def install_float_scalars() -> None:
    """Python float arguments become fp32 scalar tensors, as a GPU launch passes them."""
    import triton.language as tl
    from triton.runtime import interpreter

    original = interpreter._implicit_cvt

    def implicit_cvt(arg: Any) -> Any:
        if isinstance(arg, float):
            return tl.tensor(interpreter.TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32)
        return original(arg)

    interpreter._implicit_cvt = implicit_cvt


def _interpreted(member: Callable[..., Any]) -> Callable[..., Any]:
    """``member`` (a builtin) as the interpreter calls it: with its semantic, as `_patch_lang` binds them."""
    from triton.runtime import interpreter

    def call(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("_semantic", None)
        return member(*args, **kwargs, _semantic=interpreter.interpreter_semantic)

    return call


def _language_builtins() -> dict[int, Callable[..., Any]]:
    """The builtins the interpreter binds where ``triton.language`` holds them (`_patch_lang`), by identity."""
    import inspect

    import triton.language as tl

    holders = (tl, tl.core, tl.math, tl.tensor, tl.core.tensor_descriptor_base)
    return {id(member): member for holder in holders for _, member in inspect.getmembers(holder)
            if tl.core.is_builtin(member)}


def install_builtin_aliases() -> None:
    """While a kernel runs, the builtins its globals hold by another name are the interpreted builtins.
    Only Triton's own builtins, by identity (read before any solution loads): a function of the
    solution's dressed as one (``functools.wraps(tl.exp)``) is not handed the interpreter's semantic."""
    from triton.runtime import interpreter

    builtins = _language_builtins()
    original = interpreter._patch_lang

    def patch_lang(fn: Any) -> Any:
        # The interpreter finds triton.language among the kernel's globals to patch it; a kernel that
        # reaches it through its closure or another module (a helper built in a function) has it elsewhere.
        import triton.language as tl

        scope = original(types.SimpleNamespace(__globals__={**fn.__globals__, " triton.language": tl}))
        namespace = fn.__globals__
        aliases = {name: value for name, value in list(namespace.items()) if builtins.get(id(value)) is value}
        bound = {name: _interpreted(member) for name, member in aliases.items()}
        namespace.update(bound)
        restore = scope.restore

        def restore_all() -> None:
            for name, member in aliases.items():
                if namespace.get(name) is bound[name]:
                    namespace[name] = member
            restore()

        scope.restore = restore_all
        return scope

    interpreter._patch_lang = patch_lang


def _int1(compare: Callable[..., Any]) -> Callable[..., Any]:
    def typed(self: Any, lhs: Any, rhs: Any) -> Any:
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle

        return TensorHandle(compare(self, lhs, rhs).data, tl.int1)

    return typed


def install_int1_comparisons() -> None:
    """Every integer and float comparison of the interpreter's builder answers an int1 (bool) handle."""
    from triton.runtime.interpreter import InterpreterBuilder

    for name in [n for n in vars(InterpreterBuilder) if n.startswith(("create_icmp", "create_fcmp"))]:
        setattr(InterpreterBuilder, name, _int1(getattr(InterpreterBuilder, name)))


TORCH_FP8 = {"fp8e4nv": "float8_e4m3fn", "fp8e5": "float8_e5m2", "fp8e4b8": "float8_e4m3fnuz",
             "fp8e5b16": "float8_e5m2fnuz"}
"""Triton's fp8 element types by name -> torch's dtypes of the same format."""
WIDE_FLOATS = ("fp16", "bf16", "fp32", "fp64")
ROUNDED_FROM = ("fp16", "bf16", "fp32")
"""Sources of the fp8 roundings done here: each rounds once on the GPU (fp64's path is the backend's)."""


@dataclass(frozen=True)
class _Fp8Format:
    """An fp8 format's values by code, read from torch before any solution runs (the conversions then
    run in NumPy, as the rest of the interpreter does: no torch op inside a kernel)."""

    by_code: np.ndarray  # (256,) float64: the value of each byte (NaN, inf included)
    codes: np.ndarray  # (P,) uint8: the finite non-negative codes, ascending by value
    values: np.ndarray  # (P,) float64: their values
    signed_zero: bool  # -0 exists (not in the fnuz formats, where 0x80 is NaN)

    @classmethod
    def of(cls, torch_name: str) -> "_Fp8Format":
        import torch

        by_code = torch.arange(256, dtype=torch.uint8).view(getattr(torch, torch_name)).double().numpy()
        codes = np.array([c for c in range(128) if np.isfinite(by_code[c])], dtype=np.uint8)
        return cls(by_code, codes, by_code[codes], "fnuz" not in torch_name)

    def round(self, x: np.ndarray) -> np.ndarray:
        """Codes of ``x`` (float64, |x| <= the largest finite value) rounded to nearest, ties to even."""
        mag = np.abs(x)
        i = np.clip(np.searchsorted(self.values, mag), 1, self.values.size - 1)
        below, above = mag - self.values[i - 1], self.values[i] - mag
        up = (above < below) | ((above == below) & (self.codes[i] % 2 == 0))
        code = np.where(up, self.codes[i], self.codes[i - 1])
        negative = np.signbit(x) & (self.signed_zero | (code != 0))
        return (code | np.where(negative, 0x80, 0)).astype(np.uint8)


def _wide_to_float64(data: np.ndarray, name: str) -> np.ndarray:
    if name == "bf16":  # stored as the upper half of an fp32
        return (data.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return data.astype(np.float64)


def _float64_to_wide(values: np.ndarray, name: str) -> np.ndarray:
    """Values exact in the destination (any fp8 value is) in its storage."""
    if name == "bf16":
        return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return values.astype({"fp16": np.float16, "fp32": np.float32, "fp64": np.float64}[name])


def _fp8_conversion(convert: Callable[..., Any], formats: dict[str, _Fp8Format]) -> Callable[..., Any]:
    def fp_to_fp(self: Any, src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        from triton.runtime import interpreter

        s, d = src.dtype.scalar.name, dst_type.scalar.name
        data = np.asarray(src.data)
        if s in ROUNDED_FROM and d in formats and rounding_mode == interpreter._ir.ROUNDING_MODE.RTNE:
            x = _wide_to_float64(data, s)
            exact = np.isfinite(x) & (np.abs(x) <= formats[d].values[-1])
            mine = formats[d].round(np.where(exact, x, 0.0))
        elif s in formats and d in WIDE_FLOATS:
            x = formats[s].by_code[data]
            exact = np.isfinite(x)
            mine = _float64_to_wide(np.where(exact, x, 0.0), d)
        else:
            return convert(self, src, dst_type, rounding_mode)
        if not exact.all():  # the interpreter's own answer where the backend's choice is not known here
            mine = np.where(exact, mine, convert(self, src, dst_type, rounding_mode).data)
        return interpreter.TensorHandle(mine.reshape(data.shape), dst_type.scalar)

    return fp_to_fp


def install_fp8_conversions() -> None:
    """fp8 conversions as the GPU rounds them (to nearest even), for values within range."""
    from triton.runtime.interpreter import InterpreterBuilder

    formats = {name: _Fp8Format.of(torch_name) for name, torch_name in TORCH_FP8.items()}
    InterpreterBuilder.create_fp_to_fp = _fp8_conversion(InterpreterBuilder.create_fp_to_fp, formats)


class _Utils:
    @staticmethod
    def get_device_properties(device: Any = 0) -> dict[str, int]:
        return dict(REFERENCE_GPU_PROPERTIES)


class ReferenceGpuDriver:
    """``triton.runtime.driver.active`` in CPU mode: read-only queries answered as the reference GPU."""

    utils = _Utils()

    @staticmethod
    def get_current_target() -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", 90, 32)

    @staticmethod
    def get_current_device() -> int:
        return 0

    @staticmethod
    def get_active_torch_device() -> Any:
        import torch

        return torch.device("cpu")

    @staticmethod
    def is_active() -> bool:
        return True


def install_driver() -> None:
    from triton.runtime import driver

    try:
        driver.active  # noqa: B018 - a real backend, if any, stays
    except RuntimeError:
        driver.set_active(ReferenceGpuDriver())


def install() -> None:
    install_float_scalars()
    install_builtin_aliases()
    install_int1_comparisons()
    install_fp8_conversions()
    install_libdevice()
    install_driver()
