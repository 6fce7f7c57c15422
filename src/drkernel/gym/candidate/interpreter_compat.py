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
- **The driver.** ``triton.runtime.driver.active`` has no active backend on a CPU; most tutorials
  read the target and the device's properties at import. CPU mode answers as the reference GPU
  (an H100: sm_90, 132 SMs), the device the gym's GPU verdicts come from.
"""

from __future__ import annotations

import math
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
        scope = original(fn)
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
    install_libdevice()
    install_driver()
