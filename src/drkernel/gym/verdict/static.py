"""Static analysis of a solution's source: pure AST, nothing executed, safe in the orchestrator.

`analyze(source)` resolves every name through the solution's imports and aliases (``import torch.nn
.functional as F``, ``from torch.utils.cpp_extension import load_inline as li``, ``f = torch.relu``), a
name that may hold one of several modules once per member (``lib = A if hip else B``: `_Unions`), and
reports:

* certain hacks (blocking): references to forbidden modules and calls anywhere in the source
  (ctypes, subprocess, sockets, frame/gc introspection, dynamic code, threads, streams, compilers,
  foreign kernels, precision and global-state flags), assignments into library modules
  (monkey-patching), tensor subclasses and dispatch hooks, and ``ModelNew`` reusing ``Model``;
* PyTorch compute reachable from ``ModelNew.forward`` through helpers, methods, submodules, base
  classes and every branch (``try/except`` fallbacks and ``if self.training`` included). These are
  ``strict_only`` hacks: the strict verdict counts them, the lenient one relies on the run-time
  passthrough checks;
* the ``@triton.jit`` kernels the source defines (the only kernels that count as its own).

Names that reach frames, code or the object graph, per-element Python callbacks (``Tensor.apply_``)
and thread starters are refused however the source spells them, strings built from constants
included (`drkernel.gym.verdict.spelling`). Names built from run-time data escape any static check;
the guards in `drkernel.gym.candidate.guards` catch them while the solution runs.
"""

from __future__ import annotations

import ast
import codecs
import functools
import io
import re
import sys
import tokenize
from dataclasses import dataclass, field
from typing import Callable

from drkernel import pyast
from drkernel.gym.verdict.hacks import dedupe, make_hack
from drkernel.gym.verdict.module_index import STOP, ModuleGraph, Node, module_graph
from drkernel.gym.verdict.spelling import spelled_names
from drkernel.gym.result import Hack

# Dotted-name prefixes that are hacks wherever they appear: prefix -> (code, why).
FORBIDDEN: dict[str, tuple[int, str]] = {
    **{m: (14, "native code / process / network access") for m in (
        "ctypes", "cffi", "subprocess", "socket", "pty", "signal", "mmap", "urllib", "http",
        "requests", "ftplib", "smtplib", "shutil", "tempfile", "pickle", "marshal", "pathlib",
        "os.system", "os.popen", "os.fork", "os.forkpty", "os.kill", "os.open", "os.read", "os.write",
        "os.remove", "os.unlink", "os.rename", "os.listdir", "os.scandir", "os.walk", "os.chdir",
        "os.getpid", "os.getppid", "os.dup", "os.pipe", "os.setsid", "io.open", "os.fdopen",
        "builtins.open", "builtins.__import__", "builtins.eval", "builtins.exec",
        "builtins.compile", "builtins.globals", "builtins.vars", "builtins.breakpoint",
        "builtins.input")},
    **{m: (14, "process execution") for m in (
        "os.execv", "os.execve", "os.execl", "os.execlp", "os.execvp", "os.spawnv", "os.spawnl",
        "os.posix_spawn", "os.posix_spawnp")},
    **{m: (14, "frame / object-graph introspection") for m in (
        "inspect", "gc", "traceback", "sys._getframe", "sys._current_frames", "sys.settrace",
        "sys.setprofile", "sys.modules", "sys.addaudithook", "sys.audit", "sys.exc_info",
        "sys.exception", "sys.last_traceback", "sys.meta_path", "sys.path_hooks", "importlib",
        "runpy", "code", "codeop", "dis", "types.FrameType", "types.CodeType",
        "types.FunctionType", "weakref")},
    **{m: (14, "evaluates strings as code") for m in (
        "typing.get_type_hints", "typing.ForwardRef", "typing.get_overloads", "dataclasses.make_dataclass",
        "functools.singledispatch", "functools.singledispatchmethod", "logging.config")},
    **{m: (14, "attributes by computed name") for m in ("operator.attrgetter", "operator.methodcaller")},
    **{m: (14, "frame introspection") for m in ("logging.currentframe",)},
    # a formatter applies its format string's fields inside logging ("{msg.__globals__}" reads
    # attributes by name where no .format is in sight: red team 15)
    **{m: (14, "format fields applied inside logging") for m in (
        "logging.Formatter", "logging.BufferingFormatter", "logging.StrFormatStyle", "logging.PercentStyle",
        "logging.StringTemplateStyle", "logging.LoggerAdapter")},
    **{m: (14, "file or network output") for m in (
        "logging.handlers", "logging.FileHandler", "logging.setLoggerClass",
        "logging.setLogRecordFactory", "logging.captureWarnings")},
    # admitted only as a plain call that attaches a stderr handler (`_stderr_basic_config`)
    "logging.basicConfig": (14, "logging configured with a file, stream, handlers or a {}/$-style format "
                                "(only level, a %-style format, datefmt and force are admitted)"),
    # Code loaders: they turn bytes into running code the static check never read (red team 16: a
    # module source stored by torch.package and run by `load_pickle`, a hand-written pickle).
    **{m: (14, "a code loader (runs code the check never read)") for m in (
        "torch.package", "torch.utils.show_pickle", "torch.utils.benchmark", "copyreg", "shelve", "dill",
        "cloudpickle", "joblib", "zipimport", "pkgutil", "imp", "torch.utils.model_zoo")},
    **{m: (14, "the Triton cache, its settings or the interpreter's internals") for m in (
        "triton.runtime.cache", "triton.runtime.interpreter", "triton.knobs", "triton.runtime.jit.get_cache_manager")},
    **{m: (7, "work outside the calling thread or current stream") for m in (
        "threading", "_thread", "multiprocessing", "concurrent", "asyncio", "sched",
        "torch.multiprocessing", "torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.streams",
        "torch.cuda.ExternalStream", "torch.cuda.set_stream", "torch.cuda.StreamContext",
        "torch.Stream", "torch.cuda.graph", "torch.cuda.CUDAGraph", "torch.cuda.graphs",
        "torch.cuda.make_graphed_callables", "torch.cuda.comm", "torch.distributed", "torch.nn.parallel",
        "torch.nn.DataParallel", "torch.nn.DistributedDataParallel")},
    **{m: (16, "a compiler or foreign kernels instead of own Triton") for m in (
        "torch.compile", "torch._dynamo", "torch._inductor", "torch.jit", "torch.fx",
        "torch.export", "torch.utils.cpp_extension", "torch.library", "torch.ops.load_library",
        "torch.classes", "torch.cuda.jiterator", "torch._C._jit", "triton.compile", "torch.onnx",
        "triton.runtime.driver.active.utils.load_binary", "triton.runtime.driver.utils.load_binary",
        "triton.runtime.build", "triton.backends", "triton.tools", "triton.compiler",
        "cupy", "numba", "pycuda",
        "tvm", "jax", "tilelang", "cuda", "cutlass", "thunderkittens", "tensorrt", "torch_tensorrt",
        "apex", "flash_attn", "xformers", "liger_kernel", "bitsandbytes", "deepspeed", "transformer_engine")},
    # native helpers of Triton's driver (TMA descriptor fillers, launchers) beyond its read-only
    # device queries (`ALLOWED_REFERENCES`): no compiler, but native host code outside the contract
    "triton.runtime.driver": (16, "Triton's native driver helpers (descriptor fillers, launchers) "
                                  "beyond its read-only device queries"),
    **{m: (12, "precision flags") for m in (
        "torch.set_float32_matmul_precision", "torch.backends.cuda.matmul",
        "torch.backends.cudnn.allow_tf32", "torch.backends.cudnn.conv", "torch.backends.fp32_precision",
        "torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp", "torch.set_default_dtype",
        "torch.set_default_tensor_type", "torch.autocast", "torch.cuda.amp", "torch.amp",
        "torch.cpu.amp")},
    **{m: (15, "process-wide state") for m in (
        "torch.set_num_threads", "torch.set_num_interop_threads", "torch.backends.cudnn.benchmark",
        "torch.backends.cudnn.deterministic", "torch.backends.cudnn.enabled", "torch.backends.mkldnn",
        "torch.backends.openmp", "torch.use_deterministic_algorithms", "torch.set_flush_denormal",
        "torch.cuda.set_per_process_memory_fraction", "torch.cuda.memory", "torch.cuda.empty_cache",
        "torch.cuda.set_sync_debug_mode", "torch.cuda.set_device", "torch.set_default_device",
        "torch.cuda.caching_allocator_alloc", "torch.cuda.caching_allocator_delete",
        "torch.cuda.memory._set_allocator_settings")},
    **{m: (11, "tensor subclass / dispatch interception") for m in (
        "torch.Tensor._make_subclass", "torch.Tensor._make_wrapper_subclass", "torch.overrides",
        "torch.utils._python_dispatch", "torch._C._DisableTorchDispatch", "torch._subclasses",
        "torch._C.DispatchKey", "torch._C._dispatch", "torch.utils._pytree")},
    **{m: (8, "harness internals") for m in ("drkernel", "torch.profiler", "torch.autograd.profiler",
                                             "torch._C._profiler", "pytest", "unittest")},
}
# References that are harmless although a prefix above matches them.
ALLOWED_REFERENCES = (
    "os.environ.get", "os.getenv", "torch.cuda.current_device", "torch.backends.cuda.matmul.__doc__",
    # Read-only topology queries of tensor-parallel code paths (a process group, which the collectives
    # need, cannot be made: its constructors stay refused).
    "torch.distributed.is_available", "torch.distributed.is_initialized", "torch.distributed.get_world_size",
    "torch.distributed.get_rank",
    # PyTorch's wrapper of a Triton kernel for tracing: eager, it launches the kernel it wraps.
    "torch.library.wrap_triton",
    # Read-only device queries most Triton tutorials start with.
    "triton.runtime.driver.active.get_current_target", "triton.runtime.driver.active.get_current_device",
    "triton.runtime.driver.active.get_active_torch_device", "triton.runtime.driver.active.utils.get_device_properties",
    "triton.runtime.driver.utils.get_device_properties",  # the same query in Triton 2's spelling
    # Host-side tensor descriptors (TMA): a plain record of a tensor's base, shape and strides.
    "triton.tools.tensor_descriptor.TensorDescriptor",
    # autograd.Function decorators: they cast only with a `cast_inputs` dtype, which the kernelbench
    # profile's half-type rule names like any other cast (kernelgym allows it, as it allows fp16 tiles)
    "torch.amp.custom_fwd", "torch.amp.custom_bwd", "torch.cuda.amp.custom_fwd", "torch.cuda.amp.custom_bwd",
    # PyTorch's own "is Triton usable here" queries (torchao gates its kernels on them): they try an
    # import and read the device's capability, nothing else of that private module is admitted.
    *(f"torch.utils._triton.{q}" for q in (
        "has_triton", "has_triton_package", "has_triton_tma", "has_triton_tma_device",
        "has_triton_experimental_host_tma", "has_triton_tensor_descriptor_host_tma", "has_triton_stable_tma_api",
        "has_datacenter_blackwell_tma_device")),
    # A lock serialises the calling thread's own work (a kernel built lazily, once); it starts nothing.
    # Everything else of `threading` (Thread, Timer, settrace, excepthook) stays refused.
    "threading.Lock", "threading.RLock",
)
# Roots whose attributes must never be assigned (monkey-patching, hack 8).
PATCH_ROOTS = ("torch", "triton", "time", "numpy", "builtins", "sys", "os", "math", "random",
               "functools", "json", "drkernel", "gc", "operator", "copy", "timeit", "warnings", "collections",
               "heapq", "bisect", "itertools", "contextlib", "logging", "typing", "dataclasses", "enum")
PATCH_EXEMPT = ("os.environ",)  # setting an environment variable is not patching a function
TENSOR_BASES = ("torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase",
                "torch.nn.Parameter", "torch.nn.parameter.Parameter")
DISPATCH_HOOKS = ("__torch_function__", "__torch_dispatch__")

# torch-level functions that allocate, view, reshape or change dtype/contiguity: always allowed.
ALLOWED_TORCH_CALLS = frozenset((
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
    "full_like", "arange", "tensor", "as_tensor", "as_strided", "from_numpy", "is_tensor",
    "is_floating_point", "numel", "broadcast_shapes", "result_type", "promote_types", "finfo",
    "iinfo", "device", "dtype", "Size", "no_grad", "inference_mode", "enable_grad", "get_default_dtype",
    "is_grad_enabled", "cuda.is_available", "cuda.current_device", "cuda.device", "cuda.get_device_name",
    "cuda.get_device_properties", "cuda.device_count", "view_as_real", "view_as_complex",
    "reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "permute", "transpose", "t",
    "movedim", "narrow", "select", "split", "chunk", "unbind", "broadcast_to", "expand_copy",
    "nn.Parameter", "nn.parameter.Parameter", "nn.Module", "nn.ModuleList", "nn.ModuleDict",
    "nn.ParameterList", "nn.ParameterDict", "nn.init", "nn.Identity", "nn.Flatten", "nn.Unflatten",
    "nn.functional.pad_shape", "Generator", "get_rng_state",
    "library.wrap_triton",  # eager, it launches the solution's own Triton kernel it wraps
))
# Tensor methods that are bookkeeping, not compute.
ALLOWED_METHODS = frozenset((
    "view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze",
    "permute", "transpose", "t", "T", "mT", "expand", "expand_as", "contiguous", "to", "float",
    "half", "bfloat16", "double", "int", "long", "bool", "type", "type_as", "cuda", "cpu",
    "detach", "clone", "copy_", "zero_", "fill_", "size", "shape", "stride", "dim", "ndim",
    "numel", "element_size", "data_ptr", "is_contiguous", "storage_offset", "new_empty",
    "new_zeros", "new_ones", "new_full", "new_tensor", "narrow", "select", "split", "chunk",
    "unbind", "as_strided", "item", "tolist", "requires_grad_", "get_device", "is_cuda",
    "movedim", "unfold_shape", "nelement", "resize_", "empty_like", "numpy",
    # Python containers and str methods share names with nothing below; keep them out of the way.
    "append", "extend", "items", "keys", "values", "get", "pop", "insert", "join", "format",
    "parameters", "named_parameters", "buffers", "modules", "children", "register_buffer",
    "register_parameter", "train", "eval", "state_dict", "load_state_dict", "apply", "__init__",
))
TENSOR_COMPUTE_METHODS = frozenset((
    "sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "norm", "var", "std",
    "matmul", "mm", "bmm", "addmm", "baddbmm", "add", "add_", "sub", "sub_", "mul", "mul_", "div",
    "div_", "pow", "pow_", "sqrt", "rsqrt", "exp", "exp_", "log", "log_", "abs", "neg", "relu",
    "relu_", "sigmoid", "sigmoid_", "tanh", "tanh_", "softmax", "log_softmax", "clamp", "clamp_",
    "clip", "clamp_min", "clamp_max", "cumsum", "cumprod", "logsumexp", "masked_fill",
    "masked_fill_", "where", "gather", "scatter", "scatter_add", "index_select", "sort", "topk",
    "erf", "sin", "cos", "reciprocal", "square", "addcmul", "lerp", "einsum", "conv2d", "linear",
    "dot", "outer", "all", "any", "eq", "ne", "lt", "gt", "le", "ge", "floor", "ceil", "round",
    "sign", "maximum", "minimum", "fmod", "remainder", "logical_and", "logical_or", "triu", "tril",
    "diag", "trace", "flip", "roll", "repeat", "repeat_interleave", "tile", "unfold", "hardtanh",
    "gelu", "silu", "mish", "softplus", "elu", "leaky_relu", "log1p", "expm1", "bernoulli",
    "normal_", "uniform_", "sub", "mv", "addmv", "cross", "cumsum_", "nan_to_num", "exponential_",
))


@dataclass(frozen=True)
class TorchCall:
    """One PyTorch compute call reachable from ``ModelNew.forward``."""

    name: str     # resolved dotted name, e.g. "torch.nn.functional.relu" or ".sum" (a method)
    line: int
    where: str    # the function it sits in, e.g. "ModelNew.forward"


@dataclass
class StaticReport:
    """What the source says about itself, before anything runs."""

    hacks: list[Hack] = field(default_factory=list)           # certain findings (blocking)
    strict_hacks: list[Hack] = field(default_factory=list)    # strict_only findings
    own_kernels: tuple[str, ...] = ()                         # @triton.jit functions defined here
    torch_calls: tuple[TorchCall, ...] = ()
    has_modelnew: bool = False
    parse_error: str | None = None

    @property
    def all_hacks(self) -> list[Hack]:
        return dedupe(self.hacks + self.strict_hacks)


BUILTIN_NAMES = {"open": "builtins.open", "__import__": "builtins.__import__", "eval": "builtins.eval",
                 "exec": "builtins.exec", "compile": "builtins.compile", "globals": "builtins.globals",
                 "vars": "builtins.vars", "breakpoint": "builtins.breakpoint", "input": "builtins.input",
                 "__builtins__": "builtins"}
"""Builtins the rules name by their module (``open`` is ``builtins.open``)."""


class _Names:
    """Resolve names and attribute chains to dotted names through imports and simple aliases.

    A name that may hold one of several modules (`_Unions`) stands here for one of them: ``seeds`` fix the
    chain such names stand for (None: an object the resolver does not know), and `worlds` gives one
    resolver per choice, so that a check run in each world sees every member of every union."""

    def __init__(self, tree: ast.Module, seeds: dict[str, str | None] | None = None,
                 unions: _Unions | None = None) -> None:
        self.tree = tree
        self.alias: dict[str, str] = dict(BUILTIN_NAMES)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    chain = _import_chain(a, node)
                    if chain:
                        self.alias[a.asname or a.name.split(".")[0]] = chain
        # Names the solution binds itself (a parameter called ``input`` is not the builtin).
        self.defined: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.arg):
                self.defined.add(node.arg)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.defined.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.defined.add(node.id)
        for name in self.defined & SOFT_BUILTINS:  # ``def forward(self, input)``: not builtins.input
            self.alias.pop(name, None)
        imported = dict(self.alias)
        seeds = seeds or {}
        self.alias.update({name: chain for name, chain in seeds.items() if chain is not None})
        for name in (name for name, chain in seeds.items() if chain is None):
            self.alias.pop(name, None)
        # Simple aliases (``relu = torch.relu``, ``F = nn.functional``), to a fixed point.
        for _ in range(3):
            for node in ast.walk(tree):
                if (isinstance(node, ast.Assign) and len(node.targets) == 1
                        and isinstance(node.targets[0], ast.Name) and node.targets[0].id not in seeds):
                    target = node.targets[0].id
                    resolved = self.resolve(node.value)
                    if resolved and target not in self.alias:
                        self.alias[target] = resolved
        self.unions = unions or _Unions(tree, imported, self.alias)

    def worlds(self) -> list[_Names]:
        """This resolver, or one per choice of union members where a name may hold several modules."""
        seeds = self.unions.seeds()
        return [_Names(self.tree, s, self.unions) for s in seeds] if seeds else [self]

    def resolve(self, node: ast.AST) -> str | None:
        """``F.relu`` -> ``torch.nn.functional.relu``; None for anything not rooted in an import.
        Each attribute chain is walked once (`_chain`): asking every link of an ``a.b.b...`` chain
        costs Python steps linear in its length, not quadratic."""
        node, attrs = self._chain(node) if isinstance(node, ast.Attribute) else (node, [])
        if isinstance(node, ast.Call) and _is_getattr(node):
            base = self.resolve(node.args[0])
            if base is None:
                return None
            return ".".join([base, node.args[1].value, *attrs])
        if not isinstance(node, ast.Name) or node.id not in self.alias:
            return None
        return ".".join([self.alias[node.id], *attrs])

    def _chain(self, node: ast.Attribute) -> tuple[ast.AST, list[str]]:
        """The root under an attribute chain and the chain's attributes, root outward; every link
        walked is remembered (its root, the chain's attributes, how many of them are its own)."""
        memo: dict[int, tuple[ast.AST, list[str], int]] = self.__dict__.setdefault("_chains", {})
        links: list[ast.Attribute] = []
        while isinstance(node, ast.Attribute) and id(node) not in memo:
            links.append(node)
            node = node.value
        root, attrs = node, []
        if id(node) in memo:
            root, inner, k = memo[id(node)]
            attrs = inner[:k]
        attrs += [link.attr for link in reversed(links)]
        for k, link in enumerate(reversed(links), start=len(attrs) - len(links) + 1):
            memo[id(link)] = (root, attrs, k)
        return root, attrs


def _import_chain(alias: ast.alias, node: ast.Import | ast.ImportFrom) -> str | None:
    """The dotted name an import binds (``import a.b`` binds ``a``); None for a relative import."""
    if isinstance(node, ast.Import):
        return alias.name if alias.asname else alias.name.split(".")[0]
    return f"{node.module}.{alias.name}" if node.module and node.level == 0 else None


def _bound_names(node: ast.AST) -> list[str]:
    """The names ``node`` binds or unbinds (``global``/``nonlocal`` only declare where a binding goes)."""
    if isinstance(node, ast.Name):
        return [] if isinstance(node.ctx, ast.Load) else [node.id]
    if isinstance(node, ast.alias):
        return [node.asname or node.name.split(".")[0]]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
        return [node.name] if node.name else []
    return [node.rest] if isinstance(node, ast.MatchMapping) and node.rest else []


UNION_ROUNDS = 16
UNION_LIMIT = 16
"""How far the chains a name may hold are followed: a name rebound through its own attributes (``m = m.cuda``)
holds ever longer chains, and one still growing after `UNION_ROUNDS` rounds or past `UNION_LIMIT` chains
holds modules the analysis cannot bound (hack 14)."""


@dataclass
class _Source:
    """One binding of a name: the expressions whose value it binds (a string: the dotted name an import
    binds), the getter calls followed to them, whether the value is chosen at run time (an if-expression,
    a loop, a getter's returns, a parameter) rather than aliased, and whether callers the analysis does not
    see may pass other values (a parameter bound through ``functools.partial``)."""

    leaves: list[ast.expr | str]
    calls: list[ast.Call] = field(default_factory=list)
    chosen: bool = False
    opaque: bool = False


class _Unions:
    """Names that hold one of a finite set of module chains, chosen at run time.

    A union is a name every binding of which is a module chain (or None) reached through the branches of an
    if-expression (``lib = A if hip else B``), the elements of the literal tuple or list a ``for`` loop walks,
    the returns of a getter (a function whose every call binds its result to a union), or a parameter's default
    and what its call sites pass (``def f(x, lang=tl)``, ``functools.partial(f, lang=tl)``). The module
    expressions flowing into a union are `admitted`; every chain through it is checked against each member
    (`_Names.worlds`), and refused if any member's would be. A name bound any other way as well is not a union,
    and the modules flowing into it stay modules used as values (hack 14). A plain alias (``lib = tl.math``)
    also bound to values the resolver cannot name gains a world where it is such a value (the rules on objects
    then apply to its chains)."""

    def __init__(self, tree: ast.Module, imported: dict[str, str], legacy: dict[str, str]) -> None:
        self.legacy = legacy
        self.parents = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
        self.bindings: dict[str, list[ast.AST]] = {}
        self.refs: dict[str, list[ast.Name]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                self.refs.setdefault(node.id, []).append(node)
            for name in _bound_names(node):
                self.bindings.setdefault(name, []).append(node)
        self.members = {name: [chain] for name, chain in imported.items()}
        self.sources: dict[str, list[_Source]] = {}
        self.unknown: set[str] = set()  # names with a binding whose value is not followed
        for name, nodes in self.bindings.items():
            for node in nodes:
                source = self._source(node)
                if source is None:
                    self.unknown.add(name)
                else:
                    self.sources.setdefault(name, []).append(source)
        self.unbounded = self._grow()
        self.holding = {name for name in self.sources if any(map(_names_module, self.members.get(name, ())))}
        self.admitted: set[int] = set()  # ids of module expressions that flow into a union
        self.opaque: set[str] = set()    # module-holding names that may hold an unknown object too
        self._settle()

    def class_scope(self, node: ast.AST) -> bool:
        """Whether ``node`` runs in a class body (the names it binds are the class's attributes)."""
        while (node := self.parents.get(id(node))) is not None:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                return False
            if isinstance(node, ast.ClassDef):
                return True
        return False

    def _source(self, node: ast.AST) -> _Source | None:
        """What a binding binds its name to; None where the value is not followed."""
        parent = self.parents.get(id(node))
        if isinstance(node, ast.alias):
            chain = _import_chain(node, parent)
            return _Source([chain]) if chain else None
        if isinstance(node, ast.arg):
            return self._parameter(node)
        if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)) or self.class_scope(node):
            return None
        calls: list[ast.Call] = []
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and parent.targets[0] is node:
            leaves = self._expand(parent.value, calls, frozenset())
            return _Source(leaves, calls, chosen=leaves != [parent.value])
        if (isinstance(parent, ast.For) and parent.target is node and isinstance(parent.iter, (ast.Tuple, ast.List))
                and not any(isinstance(e, ast.Starred) for e in parent.iter.elts)):
            return _Source([leaf for e in parent.iter.elts for leaf in self._expand(e, calls, frozenset())],
                           calls, chosen=True)
        return None

    def _expand(self, expr: ast.expr, calls: list[ast.Call], seen: frozenset[str]) -> list[ast.expr]:
        """The expressions whose value ``expr`` takes: both branches of an if-expression, the returns of a
        function it calls (recorded in ``calls``), else itself."""
        if isinstance(expr, ast.IfExp):
            return self._expand(expr.body, calls, seen) + self._expand(expr.orelse, calls, seen)
        fn = self._function(expr.func.id) if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) else None
        if fn is None or fn.name in seen or any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(fn)):
            return [expr]
        calls.append(expr)
        return [leaf for value in _own_returns(fn) for leaf in self._expand(value, calls, seen | {fn.name})]

    def _function(self, name: str) -> ast.FunctionDef | None:
        """The function ``name`` binds, where that is all it binds and a call runs just its body: a plain
        function (not a method, a lambda or a coroutine) without decorators."""
        nodes = self.bindings.get(name, [])
        fn = nodes[0] if len(nodes) == 1 else None
        if isinstance(fn, ast.FunctionDef) and not fn.decorator_list and not self.class_scope(fn):
            return fn
        return None

    def _parameter(self, arg: ast.arg) -> _Source | None:
        """A parameter's values: its default and what each call site passes it, positionally or by keyword
        (``functools.partial``'s too, whose later callers may pass other values: objects to the analysis).
        None where the function is used otherwise or a call's arguments cannot be matched (``*args``)."""
        fn = self.parents.get(id(self.parents.get(id(arg))))
        if not isinstance(fn, ast.FunctionDef) or self._function(fn.name) is not fn or arg in (
                fn.args.vararg, fn.args.kwarg):
            return None
        source = _Source([], chosen=True)
        for value in _default(fn, arg):
            source.leaves += self._expand(value, source.calls, frozenset())
        for ref in self.refs.get(fn.name, []):
            call = self.parents.get(id(ref))
            partial = (isinstance(call, ast.Call) and bool(call.args) and call.args[0] is ref
                       and "functools.partial" in self._chains(call.func))
            passed = _passed(call, 1 if partial else 0, fn, arg) if (
                partial or isinstance(call, ast.Call) and call.func is ref) else None
            if passed is None:
                return None
            source.opaque |= partial
            for value in passed:
                source.leaves += self._expand(value, source.calls, frozenset())
        return source

    def _chains(self, leaf: ast.expr | str) -> list[str]:
        """Every dotted name ``leaf`` may stand for, through every chain its root name may hold."""
        if isinstance(leaf, str):
            return [leaf]
        attrs = []
        while isinstance(leaf, ast.Attribute):
            attrs.append(leaf.attr)
            leaf = leaf.value
        if isinstance(leaf, ast.Call) and _is_getattr(leaf) and leaf.func.id == "getattr":
            roots = [f"{base}.{leaf.args[1].value}" for base in self._chains(leaf.args[0])]
        else:
            roots = self.members.get(leaf.id, []) if isinstance(leaf, ast.Name) else []
        return [".".join([root, *reversed(attrs)]) for root in roots]

    def _grow(self) -> set[str]:
        """Follow every binding's chains into ``members`` to a fixed point; the names still growing after
        `UNION_ROUNDS` rounds or past `UNION_LIMIT` chains."""
        for _ in range(UNION_ROUNDS):
            growing = set()
            for name, sources in self.sources.items():
                held = self.members.setdefault(name, [])
                for chain in [c for s in sources for leaf in s.leaves for c in self._chains(leaf)]:
                    if chain not in held:
                        growing.add(name)
                        if len(held) < UNION_LIMIT:
                            held.append(chain)
            if not growing:
                break
        return growing

    def _settle(self) -> None:
        """Which module-holding names are unions (their inflows admitted) and which may hold an object too."""
        followed: set[int] = set()  # calls of getters whose result a union binds
        for name in self.holding:
            sources = self.sources[name]
            known = name not in self.unknown and name not in self.unbounded
            leaves = [leaf for s in sources for leaf in s.leaves]
            if not known or any(not _is_none(leaf) and not self._chains(leaf) for leaf in leaves):
                self.opaque.add(name)  # also bound to what the resolver cannot name
            elif any(s.chosen for s in sources) and all(
                    _is_none(leaf) or all(map(_names_module, self._chains(leaf))) for leaf in leaves):
                self.admitted |= {id(leaf) for leaf in leaves if not isinstance(leaf, str)}
                followed |= {id(call) for s in sources for call in s.calls}
                if any(s.opaque for s in sources):
                    self.opaque.add(name)
        for name in {call.func.id for ss in self.sources.values() for s in ss for call in s.calls}:
            calls = [self.parents.get(id(ref)) for ref in self.refs.get(name, [])]
            if not all(isinstance(c, ast.Call) and c.func is ref and id(c) in followed
                       for c, ref in zip(calls, self.refs.get(name, []))):
                fn = self._function(name)  # a result that reaches anything else: its returns are values
                self.admitted -= {id(leaf) for value in _own_returns(fn)
                                  for leaf in self._expand(value, [], frozenset({name}))}

    def seeds(self) -> list[dict[str, str | None]] | None:
        """One choice of chain per module-holding name for each world (every member of every name in one of
        them); None where each such name holds just the chain the plain resolver gives it."""
        options = {}
        for name in sorted(self.holding):
            first = [self.legacy[name]] if name in self.legacy else []
            options[name] = first + [c for c in self.members[name] if c not in first] + (
                [None] if name in self.opaque else [])
        if all(chains == [self.legacy.get(name)] for name, chains in options.items()):
            return None
        count = max(len(chains) for chains in options.values())
        return [{name: chains[w % len(chains)] for name, chains in options.items()} for w in range(count)]

    def unbounded_bindings(self) -> list[tuple[str, int]]:
        """(name, line) of each module-holding name whose chains are not bounded."""
        return [(name, getattr(self.bindings[name][0], "lineno", 0)) for name in sorted(self.unbounded & self.holding)]


def _is_none(leaf: ast.expr | str) -> bool:
    return isinstance(leaf, ast.Constant) and leaf.value is None


def _own_returns(fn: ast.FunctionDef) -> list[ast.expr]:
    """The values ``fn``'s own ``return`` statements give (a bare ``return``: None), not nested functions'."""
    out, todo = [], list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return):
            out.append(node.value or ast.Constant(None))
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
    return out


def _default(fn: ast.FunctionDef, arg: ast.arg) -> list[ast.expr]:
    a = fn.args
    positional = a.posonlyargs + a.args
    pairs = [*zip(positional[len(positional) - len(a.defaults):], a.defaults), *zip(a.kwonlyargs, a.kw_defaults)]
    return [value for param, value in pairs if param is arg and value is not None]


def _passed(call: ast.Call, skip: int, fn: ast.FunctionDef, arg: ast.arg) -> list[ast.expr] | None:
    """What ``call`` (past its first ``skip`` arguments) passes to ``arg`` of ``fn``; None where that cannot
    be told (``*args``, ``**kwargs``)."""
    args = call.args[skip:]
    if any(isinstance(a, ast.Starred) for a in args) or any(k.arg is None for k in call.keywords):
        return None
    positional = fn.args.posonlyargs + fn.args.args
    index = next((i for i, param in enumerate(positional) if param is arg), len(args))
    by_name = [] if any(p is arg for p in fn.args.posonlyargs) else [k.value for k in call.keywords if k.arg == arg.arg]
    return args[index:index + 1] + by_name


def _is_getattr(node: ast.Call) -> bool:
    return (isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr", "delattr", "hasattr")
            and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str))


def _matches(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _forbidden(name: str, imported: bool = False) -> tuple[int, str, str] | None:
    """The longest FORBIDDEN prefix of ``name``; ``imported``: the name is imported, not used, so a
    module on the way to an allowed reference (``from triton.runtime import driver``) is admitted
    and its uses are checked one by one."""
    if any(_matches(name, ok) or imported and _matches(ok, name) for ok in ALLOWED_REFERENCES):
        return None
    best = None
    for prefix, (code, why) in FORBIDDEN.items():
        if _matches(name, prefix) and (best is None or len(prefix) > len(best[2])):
            best = (code, why, prefix)
    return best


MODULE_PACKAGES = ("torch", "triton")
"""Packages whose submodules a solution may reach as attributes (each name still checked against
FORBIDDEN). Any other module reached as an attribute of an allowed one (``typing.sys``,
``torch.nn.functional.np``, ``contextlib.os``) is outside the contract."""


def _module_admitted(name: str) -> bool:
    return _import_allowed(name) or name.split(".")[0] in MODULE_PACKAGES


def _importable(name: str) -> bool:
    """Whether the check imports ``name`` itself when a chain reaches it (a solution may import it)."""
    return not any(p.startswith("_") for p in name.split(".")) and not _forbidden(name) and _module_admitted(name)


def _real_module(name: str, graph: ModuleGraph) -> Node | None:
    """An admitted module by name, imported if needed; None when it is private, forbidden or not installed."""
    found = graph.loaded(name)
    if found is None and _importable(name):
        found = graph.load(name)
    return found


@functools.lru_cache(maxsize=4096)
def canonical(name: str) -> tuple[str, str | None]:
    """``typing.sys.modules`` -> (``"sys.modules"``, ``"sys"``): the dotted name through the modules the
    chain really passes, and the first module it reaches as an attribute that the contract does not
    admit (None when there is none). The modules are read from the index a child process recorded
    (`drkernel.gym.verdict.module_index`), so the calling process imports none of them unless it
    already has torch."""
    if not _import_allowed(name.split(".")[0]):
        return name, None
    return canonical_in(module_graph(), name)


def canonical_in(graph: ModuleGraph, name: str) -> tuple[str, str | None]:
    """`canonical` through the given modules. Only module namespaces are read (``vars``), so no code
    of the library runs; a chain is followed while its steps are modules."""
    parts = name.split(".")
    module = _real_module(parts[0], graph) if _import_allowed(parts[0]) else None
    if module is None:
        return name, None
    outside = None
    for i, attr in enumerate(parts[1:], 1):
        value = graph.attribute(module, attr)
        if value is None and not attr.startswith("_"):
            value = _real_module(f"{graph.name(module)}.{attr}", graph)
        if value is None or value is STOP:
            return ".".join([graph.name(module), *parts[i:]]), outside
        if outside is None and not _module_admitted(graph.name(value)):
            outside = graph.name(value)
        module = value
    return graph.name(module), outside


def analyze(source: str) -> StaticReport:
    """Analyse a solution source; a syntax error is reported, never raised.

    Memoised by source: the orchestrator's blocking check and the verdict share one analysis per
    evaluation (the report is read-only to callers). Source nested past the interpreter's recursion
    limit (a chain of thousands of operators) is the solution's parse error too, never ours."""
    try:
        return _analyze(source)
    except RecursionError:
        return StaticReport(parse_error="RecursionError: the source nests too deeply to be read "
                            "(a very long chain of operators or brackets)")


@functools.lru_cache(maxsize=128)
def _analyze(source: str) -> StaticReport:
    try:
        tree = pyast.parse(source)
    except (SyntaxError, ValueError) as e:
        return StaticReport(parse_error=f"{type(e).__name__}: {e}")
    report = StaticReport()
    report.hacks.extend(_without_main_blocks(tree))
    report.hacks.extend(_declared_encoding(source))
    report.hacks.extend(_explicit_super(tree))
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    report.has_modelnew = "ModelNew" in classes or _assigned_name(tree, "ModelNew")
    calls: list[TorchCall] = []
    for names in _Names(tree).worlds():
        calls += _resolved_checks(tree, names, classes, report)
    calls = list(dict.fromkeys(calls))
    report.torch_calls = tuple(calls)
    if calls:
        shown = ", ".join(sorted({f"{c.name} (line {c.line})" for c in calls})[:6])
        report.strict_hacks.append(make_hack(
            2, f"PyTorch compute reachable from ModelNew.forward: {shown}", strict_only=True))
    report.hacks = dedupe(report.hacks)
    return report


def _resolved_checks(tree: ast.Module, names: _Names, classes: dict[str, ast.ClassDef],
                     report: StaticReport) -> list[TorchCall]:
    """The checks that read names through the resolver, for one choice of union members (`_Names.worlds`):
    hacks and own kernels go into ``report``; the PyTorch compute reachable from forward is returned."""
    report.hacks.extend(_contract(tree, names))
    report.hacks.extend(_forbidden_references(tree, names))
    report.hacks.extend(_code_in_strings(tree, names))
    report.hacks.extend(spelled_names(tree, names.resolve))
    report.hacks.extend(_patching(tree, names))
    report.hacks.extend(_class_patterns(tree))
    report.hacks.extend(_modules_as_values(tree, names))
    report.hacks.extend(_jit_body_escapes(tree, names))
    report.hacks.extend(_subclasses(tree, names))
    report.hacks.extend(_inheritance(tree, classes, names))
    report.own_kernels = tuple(dict.fromkeys(report.own_kernels + tuple(_own_kernels(tree, names))))
    reach = _Reach(tree, classes, names)
    calls = reach.from_forward()
    in_class = [n.lineno for n in ast.walk(classes["ModelNew"])
                if isinstance(n, ast.Name) and n.id == "Model" and isinstance(n.ctx, ast.Load)
                ] if "ModelNew" in classes else []
    report.hacks.extend(make_hack(4, f"line {line}: ModelNew's code uses the reference Model")
                        for line in sorted(set(reach.model_refs + in_class)))
    report.hacks.extend(_host_reads(reach))
    return calls


def _is_main_test(test: ast.AST) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = (test.left, test.comparators[0])
    return (any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides)
            and any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides))


def _binds(node: ast.AST, name: str) -> bool:
    """Does ``node`` bind ``name`` (assignment, deletion, import, definition, parameter, global,
    handler, pattern)?"""
    return name in _bound_names(node) or isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names


def _without_main_blocks(tree: ast.Module) -> list[Hack]:
    """A module-level ``if __name__ == "__main__":`` body (a file's self-test or benchmark) never runs:
    the candidate imports the solution under another module name. Its statements are left out of every
    check, unless the file binds ``__name__`` anywhere (hack 14: the block could then run)."""
    rebound = [n for n in ast.walk(tree) if _binds(n, "__name__")]
    if rebound:
        return [make_hack(14, f"line {getattr(rebound[0], 'lineno', 0)}: binds __name__ (solution contract)")]
    for node in tree.body:
        if isinstance(node, ast.If) and _is_main_test(node.test):
            node.body = [ast.copy_location(ast.Pass(), node.body[0])]
    return []


def static_check(source: str) -> list[Hack]:
    """The orchestrator's `StaticCheck`: certain hacks and strict-only findings, deduplicated."""
    return analyze(source).all_hacks


def _assigned_name(tree: ast.Module, name: str) -> bool:
    return any(isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
               for n in tree.body)


INTROSPECTION_ATTRS = frozenset((
    "__globals__", "__builtins__", "__subclasses__", "__closure__", "__code__", "__mro__", "__bases__",
    "__getattribute__", "f_back", "f_locals", "f_globals", "f_builtins", "tb_frame", "gi_frame", "cr_frame",
    "ag_frame", "__loader__", "__spec__", "co_consts", "get_capture_scope",
))
"""Attributes that walk the object graph or frames whatever they are read from (hack 14)."""


READABLE_FLAGS = frozenset((
    "torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.allow_tf32",
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction"))
"""Precision flags a solution may read (tutorials pick ``tl.dot``'s input precision from the TF32
flag): a read changes nothing, and a write is caught where it happens (an assignment into torch is
hack 8, ``setattr`` with the name is still refused here, and the flags are compared after every call)."""


ANNOTATION_READERS = frozenset({"get_type_hints", "get_annotations", "__annotations__", "__annotate__",
                                "annotationlib", "signature", "getfullargspec", "singledispatch",
                                "singledispatchmethod", "ForwardRef", "_eval_type", "infer_schema"})
"""Names through which a program reads its functions' annotations back as objects. Where the source
names none of them, a signature's annotation is only evaluated, never used (`_type_hints_only`)."""
_TYPE_EXPR = (ast.Name, ast.Attribute, ast.Subscript, ast.Tuple, ast.List, ast.Constant, ast.BinOp,
              ast.BitOr, ast.Load)


def _type_hints_only(tree: ast.Module) -> set[int]:
    """The nodes of a function signature's annotations (parameters, return) that are plain type
    expressions (names, attributes, subscripts, ``|`` unions, constants: no call, no lambda), where the
    source names no way to read annotations back (`ANNOTATION_READERS`): evaluating such an annotation
    only looks an attribute up, and nothing can get the object it names, so the names in it (a
    ``torch.distributed.ProcessGroup`` in a real-world launcher's signature) are no reference. A
    class body's annotations are read by ``dataclasses`` and are not exempt."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            words = {n.id}
        elif isinstance(n, ast.Attribute):
            words = {n.attr}
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            words = {a.name.split(".")[-1] for a in n.names} | {(getattr(n, "module", None) or "").split(".")[-1]}
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            words = {w for w in ANNOTATION_READERS if w in n.value}
        else:
            continue
        if words & ANNOTATION_READERS:
            return set()
    exempt: set[int] = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = fn.args
        hints = [x.annotation for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
                 if x is not None and x.annotation is not None] + ([fn.returns] if fn.returns else [])
        for hint in hints:
            nodes = list(ast.walk(hint))
            if all(isinstance(n, _TYPE_EXPR) for n in nodes):
                exempt |= {id(n) for n in nodes}
    return exempt


STDERR_CONFIG_KEYWORDS = frozenset(("level", "format", "datefmt", "force", "style"))
"""What ``logging.basicConfig`` may be given: with no ``filename``, ``stream`` or ``handlers`` it only
attaches a stderr handler (as ``print`` writes), and a %-style format reads a record's own fields by
key, never attributes (a ``{``-style one walks them: red team 15's ``{msg.__globals__}``)."""


def _stderr_basic_config(tree: ast.Module, names: _Names) -> set[int]:
    """The callee nodes of each ``logging.basicConfig(...)`` call that only sets up logging to stderr
    (`STDERR_CONFIG_KEYWORDS`, no positional or ``**`` arguments, the style a literal ``"%"`` if
    given), and the ``from logging import basicConfig`` imports whose every use is such a call. Any
    other use of the name (a value, a file, a stream, a ``{}``-style format) stays refused."""
    admitted: set[int] = set()
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and names.resolve(call.func) == "logging.basicConfig"):
            continue
        style = [k.value for k in call.keywords if k.arg == "style"]
        if (not call.args and all(k.arg in STDERR_CONFIG_KEYWORDS for k in call.keywords)
                and all(isinstance(v, ast.Constant) and v.value == "%" for v in style)):
            admitted.add(id(call.func))
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.module == "logging" and node.level == 0):
            continue
        for alias in node.names:
            bound = alias.asname or alias.name
            uses = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == bound]
            if (alias.name == "basicConfig" and uses
                    and all(isinstance(n.ctx, ast.Load) and id(n) in admitted for n in uses)):
                admitted.add(id(alias))
    return admitted


def _forbidden_references(tree: ast.Module, names: _Names) -> list[Hack]:
    hacks = []
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    hints = _type_hints_only(tree)
    stderr_config = _stderr_basic_config(tree, names)
    for node in ast.walk(tree):
        if id(node) in hints or id(node) in stderr_config:
            continue
        if isinstance(node, ast.Attribute) and (node.attr in INTROSPECTION_ATTRS or (
                node.attr == "__dict__" and names.resolve(node.value) is not None)):
            hacks.append(make_hack(14, f"line {node.lineno}: reads .{node.attr} "
                                       f"(object-graph introspection)"))
            continue
        found: list[str] = []
        imported = isinstance(node, (ast.Import, ast.ImportFrom))
        if isinstance(node, ast.Import):
            found = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                hacks.append(make_hack(14, f"line {node.lineno}: relative import (harness modules)"))
                continue
            found = [f"{node.module}.{a.name}" for a in node.names if id(a) not in stderr_config] + [node.module or ""]
        elif (isinstance(node, (ast.Attribute, ast.Name)) and id(node) not in inner
              and not isinstance(getattr(node, "ctx", None), ast.Store)):
            resolved = names.resolve(node)  # the whole chain: its prefixes are checked through it
            found = [resolved] if resolved and resolved not in READABLE_FLAGS else []
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "setattr", "delattr")):
            if (len(node.args) >= 2 and not isinstance(node.args[1], ast.Constant)
                    and names.resolve(node.args[0])):
                hacks.append(make_hack(14, f"line {node.lineno}: attribute of {names.resolve(node.args[0])} "
                                           f"looked up by a name built at run time"))
            elif len(node.args) >= 2:
                resolved = names.resolve(node)
                found = [resolved] if resolved else []
        for name in found:
            hacks.extend(_reference_hacks(name, node.lineno, imported))
    return hacks


def _reference_hacks(name: str, line: int, imported: bool) -> list[Hack]:
    """A dotted name, as written and as the modules it passes through really name it."""
    real, outside = canonical(name)
    if outside is not None:
        return [make_hack(14, f"line {line}: {name} reaches the module {outside}, which the solution "
                              f"may not import (solution contract)")]
    for candidate in dict.fromkeys((name, real)):
        hit = _forbidden(candidate, imported)
        if hit:
            return [make_hack(hit[0], f"line {line}: {candidate} ({hit[1]})")]
    return []


CODE_IN_STRINGS_DEPTH = 3
"""How deep strings inside strings are read as code."""


def _code_in_strings(tree: ast.AST, names: _Names, depth: int = 0) -> list[Hack]:
    """String constants that parse as Python are read as the code they may become: annotations that
    ``typing.get_type_hints`` evaluates, the bodies that stdlib code generators (dataclasses,
    namedtuple) compile. Such code is held to the same contract as the solution's own."""
    hacks = []
    for node in ast.walk(tree):
        text = node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""
        if not any(c in text for c in "(.[") or len(text) > 20000:
            continue
        try:
            code = pyast.parse(text.strip())
        except (SyntaxError, ValueError):
            continue
        found = _contract(code, names) + _forbidden_references(code, names)
        if depth < CODE_IN_STRINGS_DEPTH:
            found += _code_in_strings(code, names, depth + 1)
        hacks.extend(make_hack(h.code, f"line {node.lineno}: a string holds code: {h.evidence}") for h in found)
    return hacks


GENERATED_DUNDERS = frozenset(("__setattr__", "__delattr__", "__class__", "__qualname__", "__init__", "__name__",
                               "__post_init__"))
"""Dunder attributes the standard library's code generators read in what they compile (dataclasses'
``__init__`` sets fields through ``object.__setattr__``; its ``__repr__`` reads ``__qualname__``)."""


def generated_code_violations(source: str | bytes, dunders: bool = True) -> list[str]:
    """Code compiled from strings while the solution runs (an annotation ``typing.get_type_hints``
    evaluates, a dataclass's generated methods, a module source a library imports from a string),
    checked where it is compiled, inside the candidate: no imports, no builtins that run code or
    enumerate namespaces, no object-graph attributes, no module outside the contract reached through
    an allowed one. ``dunders=False``: a standard-library generator's code for a library's own class
    (Triton's dataclasses have fields named ``__self__``/``__func__``): other dunder reads pass, the
    object-graph ones (`INTROSPECTION_ATTRS`, ``__dict__``) still do not."""
    try:
        tree = pyast.parse(source.decode() if isinstance(source, bytes) else source)
    except (SyntaxError, ValueError, UnicodeDecodeError):
        return []
    found = []
    # a parameter named like a soft builtin (a Triton kernel's ``input``, which its launch binder and a
    # dataclass's ``__init__`` take as an argument) is the value passed, as in the solution's own code
    params = {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments)
              for a in (*n.posonlyargs, *n.args, *n.kwonlyargs, n.vararg, n.kwarg) if a is not None}
    refused = (FORBIDDEN_BUILTINS | ATTRIBUTE_FUNCTIONS | {"__builtins__"}) - (params & SOFT_BUILTINS)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append("an import")
        elif isinstance(node, ast.Name) and node.id in refused:
            found.append(f"the builtin {node.id}")
        elif isinstance(node, ast.Attribute) and (
                node.attr in INTROSPECTION_ATTRS or node.attr == "__dict__" or dunders and node.attr.startswith("__")
                and node.attr.endswith("__") and node.attr not in GENERATED_DUNDERS | ALLOWED_DUNDERS):
            found.append(f"the attribute .{node.attr}")
        elif isinstance(node, ast.Attribute) and not isinstance(getattr(node, "ctx", None), ast.Store):
            chain = _dotted(node)
            if chain and _import_allowed(chain.split(".")[0]) and canonical(chain)[1]:
                found.append(f"{chain} (the module {canonical(chain)[1]})")
    return found


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


def _patching(tree: ast.Module, names: _Names) -> list[Hack]:
    hacks = []
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("setattr", "delattr")):
            if node.args and names.resolve(node.args[0]):
                targets = [node]
        for t in targets:
            while isinstance(t, ast.Subscript):
                t = t.value
            if isinstance(t, ast.Name):
                continue
            resolved = names.resolve(t.args[0] if isinstance(t, ast.Call) else t)
            if (resolved is None or resolved.split(".")[0] not in PATCH_ROOTS
                    or any(_matches(resolved, p) for p in PATCH_EXEMPT)):
                continue
            hit = _forbidden(resolved)
            code = hit[0] if hit and hit[0] in (12, 15) else 8
            hacks.append(make_hack(code, f"line {node.lineno}: assigns {resolved}"))
    return hacks


def _subclasses(tree: ast.Module, names: _Names) -> list[Hack]:
    hacks = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                resolved = names.resolve(base)
                if resolved in TENSOR_BASES:
                    hacks.append(make_hack(11, f"line {node.lineno}: class {node.name} subclasses "
                                               f"{resolved}"))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in DISPATCH_HOOKS:
            hacks.append(make_hack(11, f"line {node.lineno}: defines {node.name}"))
    return hacks


def _inheritance(tree: ast.Module, classes: dict[str, ast.ClassDef], names: _Names) -> list[Hack]:
    """ModelNew deriving from Model (directly, through local classes or an import), aliasing or calling it."""
    hacks = []

    def derives_from_model(cls: ast.ClassDef, seen: set[str]) -> bool:
        for base in cls.bases:
            bname = base.id if isinstance(base, ast.Name) else (names.resolve(base) or "").split(".")[-1]
            if bname == "Model":
                return True
            if bname in classes and bname not in seen and derives_from_model(classes[bname], seen | {bname}):
                return True
        return False

    if "ModelNew" in classes and derives_from_model(classes["ModelNew"], {"ModelNew"}):
        hacks.append(make_hack(4, f"line {classes['ModelNew'].lineno}: ModelNew derives from Model"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ModelNew"
                                                for t in node.targets):
            hacks.append(make_hack(4, f"line {node.lineno}: ModelNew is assigned, not defined"))
    return hacks


def _decorator_name(dec: ast.AST, names: _Names) -> str | None:
    return names.resolve(dec.func if isinstance(dec, ast.Call) else dec)


JIT_NAMES = ("triton.jit", "triton.runtime.jit.jit", "triton.runtime.jit")
SELF_MATCHING = frozenset(("bool", "bytearray", "bytes", "dict", "float", "frozenset", "int", "list", "set", "str",
                           "tuple"))
"""Builtin classes whose one positional pattern matches the subject itself (``case int(n)``)."""


def _names_module(name: str) -> bool:
    """Does the dotted ``name`` (as the resolver gives it) name a module, through imported modules only?"""
    parts = name.split(".")
    graph = module_graph()
    module = graph.loaded(parts[0]) or (_real_module(parts[0], graph) if _import_allowed(parts[0]) else None)
    if module is None:
        return len(parts) == 1 and parts[0] in sys.stdlib_module_names  # ``import os``: a module all the same
    for attr in parts[1:]:
        value = graph.attribute(module, attr)
        if value is None and not attr.startswith("_"):
            value = _real_module(f"{graph.name(module)}.{attr}", graph)
        if value is None or value is STOP or isinstance(value, str):
            return False
        module = value
    return True


def _module_use_ok(node: ast.AST, parent: ast.AST | None, in_class: bool) -> bool:
    """A module named by ``node`` may be aliased (``F = torch.nn.functional``, outside a class body: the
    resolver follows it), asked for a literal attribute (``getattr(tl, "extra", None)``), or stand alone."""
    if isinstance(parent, ast.Assign):
        return (parent.value is node and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name)
                and not in_class)
    if isinstance(parent, ast.Call):
        return (isinstance(parent.func, ast.Name) and parent.func.id in ("getattr", "hasattr") and parent.args
                and parent.args[0] is node and _is_getattr(parent))
    if isinstance(parent, ast.Compare):  # ``libdevice is not None``: a test hands nothing on
        return all(isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)) for op in parent.ops)
    if isinstance(parent, (ast.If, ast.IfExp, ast.While, ast.Assert)):  # ``if triton:``
        return parent.test is node
    if isinstance(parent, ast.UnaryOp):
        return isinstance(parent.op, ast.Not)
    return isinstance(parent, ast.Expr)


def _modules_as_values(tree: ast.Module, names: _Names) -> list[Hack]:
    """A module used as a value (in a list, an argument, a default, a return, a class attribute: ``[sys][0]``,
    ``[getattr(torch, "cuda")][0]``) is one the resolver no longer follows, so every rule on its attributes
    (private names, modules outside the contract, forbidden entry points) would pass unseen (hack 14). A
    module chosen at run time among modules only is followed as a union (`_Unions`) and admitted."""
    unions = names.unions
    hacks = [make_hack(14, f"line {line}: the modules {name} may hold are not bounded (it is rebound through "
                           f"its own attributes) (solution contract)") for name, line in unions.unbounded_bindings()]
    hacks += _class_body_imports(tree, unions)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Name) and node.func.id == "getattr" and _is_getattr(node)):
                continue
        elif not isinstance(node, (ast.Name, ast.Attribute)) or not isinstance(node.ctx, ast.Load):
            continue
        parent = unions.parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.value is node:
            continue  # not the whole chain
        resolved = names.resolve(node)
        if not resolved or not _names_module(resolved) or id(node) in unions.admitted:
            continue
        if not _module_use_ok(node, parent, unions.class_scope(node)):
            hacks.append(make_hack(14, f"line {node.lineno}: uses the module {resolved} as a value, where the "
                                       f"rules on its attributes no longer follow it (solution contract)"))
    return hacks


def _class_body_imports(tree: ast.Module, unions: _Unions) -> list[Hack]:
    """An import in a class body binds the module as a class attribute (``A.torch``), out of the resolver's
    reach like any module held in a value (hack 14)."""
    hacks = []
    for node in ast.walk(tree):
        if isinstance(node, ast.alias) and unions.class_scope(node):
            chain = _import_chain(node, unions.parents[id(node)])
            if chain and _names_module(chain):
                hacks.append(make_hack(14, f"line {node.lineno}: imports the module {chain} into a class body, where "
                                           f"the rules on its attributes no longer follow it (solution contract)"))
    return hacks


def _explicit_super(tree: ast.Module) -> list[Hack]:
    """``super`` only as the call ``super()``, or ``super(C, x)`` written in a method of class ``C`` with
    ``x`` that method's first parameter (the old spelling of the same call). Any other class or object
    resolves past the methods the harness wraps: ``super(torch.Tensor, t).tolist()`` is the C method
    beneath ``torch.Tensor.tolist``, where no host read is counted (hack 14)."""
    hacks: list[Hack] = []

    def visit(node: ast.AST, cls: str | None, first: str | None, parent: ast.AST | None) -> None:
        if isinstance(node, ast.ClassDef):
            cls, first = node.name, None
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            params = node.args.posonlyargs + node.args.args
            in_class = isinstance(parent, ast.ClassDef)
            first = params[0].arg if in_class and params else None
            cls = cls if in_class else None
        elif isinstance(node, ast.Lambda):
            cls, first = None, None
        if isinstance(node, ast.Name) and node.id == "super" and not _plain_super_call(node, parent, cls, first):
            hacks.append(make_hack(14, f"line {node.lineno}: super used other than as super() or "
                                       f"super(ThisClass, self) in a method (solution contract)"))
        for child in ast.iter_child_nodes(node):
            visit(child, cls, first, node)

    visit(tree, None, None, None)
    return hacks


def _plain_super_call(name: ast.Name, parent: ast.AST | None, cls: str | None, first: str | None) -> bool:
    if not (isinstance(name.ctx, ast.Load) and isinstance(parent, ast.Call) and parent.func is name):
        return False
    args = parent.args
    if not args and not parent.keywords:
        return True
    return (len(args) == 2 and not parent.keywords and cls is not None and first is not None
            and isinstance(args[0], ast.Name) and args[0].id == cls
            and isinstance(args[1], ast.Name) and args[1].id == first)


def _class_patterns(tree: ast.Module) -> list[Hack]:
    """``case C(attr=p)`` reads ``attr`` of the subject, and ``case C(p)`` whatever ``C.__match_args__``
    names: attribute reads by a route the attribute rules do not see (``case object(f_back=f)`` is
    ``f = x.f_back``). A class pattern may test the type only, capture the subject of a builtin
    self-matching class, or read public attributes of a class the solution defines (hack 14 otherwise)."""
    own = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    hacks = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.MatchClass) or not (node.patterns or node.kwd_attrs):
            continue
        cls = node.cls.id if isinstance(node.cls, ast.Name) else None
        if not node.kwd_attrs and len(node.patterns) == 1 and cls in SELF_MATCHING:
            continue
        if cls in own and not node.patterns and all(
                not a.startswith("_") and a not in INTROSPECTION_ATTRS for a in node.kwd_attrs):
            continue  # the solution's own class: only its instances match, by public attributes
        read = ", ".join(node.kwd_attrs) or "its __match_args__"
        hacks.append(make_hack(14, f"line {node.lineno}: a class pattern reads attributes ({read}) of the "
                                   f"matched value (solution contract)"))
    return hacks


JIT_ESCAPES = frozenset(("handle",))
"""Attributes a ``@triton.jit`` body has no use for: a Triton value's ``handle`` is the compiler's IR
value on a GPU and the interpreter's NumPy buffer on CPU, where a body reading it runs NumPy (or any
Python) on the data as if it were the kernel's work, code that would not compile for a GPU."""


def _jit_body_escapes(tree: ast.Module, names: _Names) -> list[Hack]:
    """In a ``@triton.jit`` function: `JIT_ESCAPES` attributes and ``getattr``/``setattr``/``hasattr``
    (which Triton does not compile) are hack 14: the body reaching past the language."""
    hacks = []
    for fn in ast.walk(tree):
        if not (isinstance(fn, ast.FunctionDef)
                and any(_decorator_name(d, names) in JIT_NAMES for d in fn.decorator_list)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Attribute) and node.attr in JIT_ESCAPES:
                what = f".{node.attr}"
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ATTRIBUTE_FUNCTIONS:
                what = f"{node.func.id}()"
            else:
                continue
            hacks.append(make_hack(14, f"line {node.lineno}: the Triton kernel {fn.name} uses {what}, which "
                                       f"reaches past the Triton language (solution contract)"))
    return hacks


def _own_kernels(tree: ast.Module, names: _Names) -> list[str]:
    """The solution's Triton kernels: functions decorated with ``triton.jit``, and functions of the
    solution passed to it (``kernel = triton.jit(f)``)."""
    out = []
    defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    bound: dict[str, set[str]] = {}  # ``kernel = group_norm_kernel``, in any scope
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Name)
                and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            bound.setdefault(node.targets[0].id, set()).add(node.value.id)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            decs = [_decorator_name(d, names) for d in node.decorator_list]
            if any(d in JIT_NAMES for d in decs):
                out.append(node.name)
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name)
              and names.resolve(node.func) in JIT_NAMES):
            out.extend(f for f in _bound_functions(node.args[0].id, bound) if f in defined)
    return list(dict.fromkeys(out))


def _bound_functions(name: str, bound: dict[str, set[str]]) -> set[str]:
    """``name`` and the names it is bound to through simple assignments (``triton.jit(kernel)`` where
    ``kernel = group_norm_kernel``: stable-fast's kernel factories)."""
    seen, todo = {name}, [name]
    while todo:
        for other in bound.get(todo.pop(), ()):
            if other not in seen:
                seen.add(other)
                todo.append(other)
    return seen


class _Reach:
    """Walk every function reachable from ``ModelNew.forward`` and collect PyTorch compute calls."""

    def __init__(self, tree: ast.Module, classes: dict[str, ast.ClassDef], names: _Names) -> None:
        self.names = names
        self.classes = classes
        self.functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        self.calls: list[TorchCall] = []
        self.model_refs: list[int] = []  # lines where reachable code names the reference Model
        self.host_reads: list[tuple[str, int, str]] = []  # (what, line, where) host copies of tensor data
        self.seen: set[tuple[str, str]] = set()

    def _methods(self, cls_name: str) -> dict[str, ast.FunctionDef]:
        """Methods of a local class and its local bases (the subclass wins)."""
        out: dict[str, ast.FunctionDef] = {}
        cls = self.classes.get(cls_name)
        if cls is None:
            return out
        for base in reversed(cls.bases):
            if isinstance(base, ast.Name) and base.id in self.classes and base.id != cls_name:
                out.update(self._methods(base.id))
        out.update({n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)})
        return out

    def _submodules(self, cls_name: str) -> dict[str, str]:
        """``self.x = Something(...)`` in ``__init__`` -> {"x": resolved or local class name}."""
        out: dict[str, str] = {}
        init = self._methods(cls_name).get("__init__")
        if init is None:
            return out
        for node in ast.walk(init):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                for t in node.targets:
                    if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                            and t.value.id == "self"):
                        f = node.value.func
                        local = f.id if isinstance(f, ast.Name) and f.id in self.classes else None
                        out[t.attr] = local or self.names.resolve(f) or ""
        return out

    def from_forward(self) -> list[TorchCall]:
        if "ModelNew" in self.classes:
            self._visit_class_method("ModelNew", "forward")
        return self.calls

    def _visit_class_method(self, cls_name: str, method: str) -> None:
        if (cls_name, method) in self.seen:
            return
        self.seen.add((cls_name, method))
        fn = self._methods(cls_name).get(method)
        if fn is not None:
            self._visit_body(fn, cls_name, f"{cls_name}.{method}")

    def _visit_function(self, name: str) -> None:
        if ("", name) in self.seen or name not in self.functions:
            return
        self.seen.add(("", name))
        self._visit_body(self.functions[name], None, name)

    def _visit_body(self, fn: ast.FunctionDef, cls_name: str | None, where: str) -> None:
        submodules = self._submodules(cls_name) if cls_name else {}
        methods = self._methods(cls_name) if cls_name else {}
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and node.id == "Model" and isinstance(node.ctx, ast.Load):
                self.model_refs.append(node.lineno)
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                self.calls.append(TorchCall("@ (matmul)", node.lineno, where))
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Attribute) and _is_host_read(f.attr, node):
                self.host_reads.append((f".{f.attr}()", node.lineno, where))
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
                if f.attr in methods:
                    self._visit_class_method(cls_name, f.attr)
                elif f.attr in submodules:
                    self._visit_submodule(submodules[f.attr], node.lineno, where)
                continue
            if isinstance(f, ast.Name) and f.id in self.functions:
                self._visit_function(f.id)
                continue
            if isinstance(f, ast.Name) and f.id in self.classes:
                self._visit_class_method(f.id, "forward")
                continue
            resolved = self.names.resolve(f)
            if resolved in ("operator.matmul", "operator.imatmul"):  # `@` spelled as a call (red team 15)
                self.calls.append(TorchCall("@ (matmul)", node.lineno, where))
            elif resolved is not None:
                if self._is_torch_compute(resolved):
                    self.calls.append(TorchCall(resolved, node.lineno, where))
            elif isinstance(f, ast.Attribute) and f.attr in TENSOR_COMPUTE_METHODS:
                self.calls.append(TorchCall("." + f.attr, node.lineno, where))

    def _visit_submodule(self, ctor: str, line: int, where: str) -> None:
        if ctor in self.classes:
            self._visit_class_method(ctor, "forward")
        elif ctor.startswith("torch.") and self._is_torch_compute(ctor):
            self.calls.append(TorchCall(ctor, line, where))

    @staticmethod
    def _is_torch_compute(resolved: str) -> bool:
        if not resolved.startswith("torch."):
            return False
        short = resolved[len("torch."):]
        return short not in ALLOWED_TORCH_CALLS and not any(
            short.startswith(p) for p in ("nn.init.", "cuda.", "backends.", "testing.", "utils."))


# --- The solution contract ----------------------------------------------------------------------
# Deny by default: a solution may import only the modules below, and every rule is checked by
# `_contract` on the AST. The same data renders the rules for the agent's prompt (`contract_text`)
# and docs/TRUST.md, so the model is told exactly what is checked.

ALLOWED_IMPORTS = (
    "torch", "torch.nn", "torch.nn.functional", "torch.nn.init", "triton", "triton.language",
    "triton.language.extra", "triton.language.extra.libdevice", "triton.language.extra.cuda",
    "triton.language.extra.cuda.libdevice", "triton.language.extra.hip", "triton.language.extra.hip.libdevice",
    "triton.language.math", "triton.runtime", "triton.tools.tensor_descriptor", "math", "typing", "functools",
    "dataclasses", "itertools", "collections", "collections.abc", "enum", "numbers", "contextlib", "logging",
    "operator", "warnings", "heapq", "bisect", "packaging", "packaging.version", "torch.autograd",
    "torch.autograd.function", "__future__",
)
"""The modules a solution may import (``import x`` / ``from x import y``). Any other import is
admitted only where all it yields is `ALLOWED_REFERENCES` (`_restricted_import`)."""
ALLOWED_DUNDERS = frozenset(("__init__", "__name__", "__qualname__", "__doc__", "__future__", "__main__",
                             "__version__", "__all__"))
OPERATOR_DUNDERS = frozenset(("__getitem__", "__len__", "__contains__", "__lt__", "__le__", "__gt__", "__ge__",
                              "__eq__", "__ne__"))
"""Dunder methods a solution may read from a value (``sorted(idx, key=strides.__getitem__)``): each is
what ordinary syntax on the value calls (``x[i]``, ``len(x)``, ``a < b``), so reading it grants nothing
more. Only as attributes: a string naming one is still refused (``getattr`` takes literal public names)."""
"""The only dunder names a solution may read (``super().__init__()``, ``__name__``, a library's
``__version__`` string, which real kernels compare to pick an import path)."""
FORBIDDEN_BUILTINS = frozenset((
    "open", "eval", "exec", "compile", "__import__", "globals", "locals", "vars", "dir", "breakpoint",
    "input", "memoryview", "help", "delattr"))
"""Builtins that do I/O, run code, or enumerate namespaces. Not ``exit``/``quit``: they raise
``SystemExit``, which the harness takes as the solution's failure like any other exception (red team
17, a11), and real kernels call them in an import guard (lion-pytorch's ``except ImportError: ...
exit()``, honest round 13)."""
ATTRIBUTE_FUNCTIONS = frozenset(("getattr", "setattr", "hasattr", "delattr"))
"""Allowed only as a direct call with a literal, public name (``getattr(self, "weight")``)."""
SOFT_BUILTINS = frozenset(("input",))
"""Of those, the name a solution may bind itself (``def forward(self, input)``, everywhere in real
kernels): binding it anywhere exempts it in the whole file, and the builtin reads a line of a closed
stdin. Binding any other (``def f(open): ...``, ``def _p(dir=None)``) does not make the name safe
elsewhere in the file (a class body nested in the function reads globals and builtins, not its
parameters: red team 20), so those stay rejected wherever they are read."""
HOST_READS = frozenset(("numpy", "tolist", "cpu", "__array__", "tobytes", "untyped_storage", "storage"))
"""Tensor methods that copy data to the host; forbidden in code reachable from ``forward``."""
FILE_CALLS = ("torch.from_file", "torch.load", "torch.save", "torch.UntypedStorage.from_file",
              "torch.TypedStorage.from_file", "torch.Storage", "torch.UntypedStorage", "torch.serialization",
              "torch.hub", "torch.utils.data", "torch.utils.dlpack", "torch.from_dlpack", "torch.testing",
              "triton.testing")
"""torch / triton entry points that reach files, foreign memory or benchmarking clocks."""


@dataclass(frozen=True)
class ContractRule:
    """One rule of the solution contract, as the model reads it."""

    key: str
    text: str


CONTRACT: tuple[ContractRule, ...] = (
    ContractRule("imports", "Import only: " + ", ".join(m for m in ALLOWED_IMPORTS if m != "__future__")
                 + ". Anything else (os, sys, numpy, ctypes, subprocess, io, ...) is rejected."),
    ContractRule("private", "Do not use private attributes (names starting with `_`) of any module, "
                 "e.g. `torch._C`, `torch._dynamo`, `tl._x`, `dataclasses._create_fn`, and do not reach a module "
                 "the rule above does not allow as an attribute of one it does (`typing.sys`)."),
    ContractRule("attributes", "No attribute access by computed or dunder names: no `getattr(x, name)` "
                 "with a non-literal name, no `__dict__`, `__class__`, `__subclasses__`, `__globals__`, "
                 "no `vars`, `globals`, `dir`, `eval`, `exec`, `compile`, `type(name, bases, dict)`, no "
                 "`functools.update_wrapper`/`wraps` with chosen attribute names. Frame, code and class-graph "
                 "names (`f_back`, `f_locals`, `gi_frame`, `tb_frame`, `co_code`, `cell_contents`, `mro`) and "
                 "`Tensor.apply_`/`map_`/`map2_` are refused in any spelling, strings built from pieces included."),
    ContractRule("host", "Inside forward (and anything it calls), do not copy tensor data to the host: "
                 "no `.numpy()`, `.tolist()`, `.cpu()`, and at most a few `.item()` calls on one-element "
                 "tensors (e.g. a scalar parameter). Compute on the device."),
    ContractRule("io", "No file, descriptor, process, thread or network access (`open`, `torch.load`, "
                 "`torch.from_file`, `Thread`, executors, `torch.nn.parallel`, ...), no streams or CUDA graphs, "
                 "no compilers other than `@triton.jit`."),
    ContractRule("harness", "Do not assign attributes of torch, triton or other libraries, do not subclass "
                 "torch.Tensor or define `__torch_function__`/`__torch_dispatch__`, and do not use or "
                 "inherit the reference `Model`."),
)
"""The rules; `contract_text` renders them for prompts and docs."""


def contract_text() -> str:
    """The contract as a numbered list (the prompt's ``$contract`` placeholder)."""
    return "\n".join(f"{i}. {rule.text}" for i, rule in enumerate(CONTRACT, 1))


def _import_allowed(module: str) -> bool:
    return module in ALLOWED_IMPORTS


def _declared_encoding(source: str) -> list[Hack]:
    """A source that declares an encoding other than UTF-8 (PEP 263): the checks read the text as
    UTF-8, while Python importing the file would decode it by the declaration, so the checks and the
    interpreter would read two different programs (hack 14)."""
    try:
        declared, _ = tokenize.detect_encoding(io.BytesIO(source.encode("utf-8", "surrogatepass")).readline)
    except SyntaxError as e:
        return [make_hack(14, f"the source's encoding declaration is not one Python reads: {e}")]
    if codecs.lookup(declared).name in ("utf-8", "utf-8-sig"):
        return []
    return [make_hack(14, f"the source declares the {declared} encoding; a solution is UTF-8 text (the "
                          f"checks would read another program than the one that runs)")]


def _contract(tree: ast.Module, names: _Names) -> list[Hack]:
    """Deny-by-default rules: imports, private attributes, dynamic or dunder attributes, builtins."""
    hacks = []

    def bad(node: ast.AST, why: str, code: int = 14) -> None:
        hacks.append(make_hack(code, f"line {getattr(node, 'lineno', 0)}: {why} (solution contract)"))

    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    uses = _NameUses(tree, names)
    own_new = _own_new_calls(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in ATTRIBUTE_FUNCTIONS and id(node) not in called:
            bad(node, f"passes {node.id} as a value (attribute access by computed names)")
        if isinstance(node, ast.Import):
            for a in node.names:
                if not _import_allowed(a.name) and not _restricted_import(a, uses):
                    bad(node, f"imports {a.name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            if not _import_allowed(node.module or "") and not all(
                    f"{node.module}.{a.name}" in ALLOWED_REFERENCES for a in node.names):
                bad(node, f"imports from {node.module}")
            for a in node.names:
                if a.name.startswith("_") and node.module != "__future__" or a.name == "*":
                    bad(node, f"imports {a.name} from {node.module}")
        elif isinstance(node, ast.Attribute) and id(node) not in own_new:
            _attribute_rule(node, names, bad)
        elif isinstance(node, ast.Name):
            if node.id.startswith("__") and node.id.endswith("__") and node.id not in ALLOWED_DUNDERS:
                bad(node, f"uses {node.id}")
            elif node.id in FORBIDDEN_BUILTINS and not (node.id in SOFT_BUILTINS and node.id in names.defined):
                bad(node, f"uses the builtin {node.id}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            _call_rule(node, bad)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if re.fullmatch(r"__\w+__", node.value) and node.value not in ALLOWED_DUNDERS:
                bad(node, f"names the dunder {node.value!r} in a string")
            elif re.search(r"\{[^{}]*[.\[]_", node.value):  # "{0.__class__}".format(x): attribute walk by name
                bad(node, "a format string that reads private or dunder attributes")
    return hacks


NESTED_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp,
                 ast.DictComp, ast.GeneratorExp)


def _in_scope(fn: ast.FunctionDef) -> list[ast.AST]:
    """The nodes of ``fn``'s body that run in its own scope (not in a nested function, class or comprehension)."""
    found, todo = [], list(fn.body)
    while todo:
        node = todo.pop()
        found.append(node)
        todo.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, NESTED_SCOPES))
    return found


def _own_new_calls(tree: ast.Module) -> set[int]:
    """The ``.__new__`` of each ``super().__new__(cls)`` written in a class's own ``__new__`` (a singleton's
    constructor) with ``cls`` its first parameter, never rebound, and ``super`` the builtin: the call makes
    the instance that calling the class makes anyway, so reading this dunder grants nothing more."""
    if any("super" in _bound_names(n) for n in ast.walk(tree)):
        return set()
    found = set()
    for klass in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for fn in klass.body:
            params = [*fn.args.posonlyargs, *fn.args.args] if isinstance(fn, ast.FunctionDef) else []
            if not params or fn.name != "__new__":
                continue
            cls = params[0].arg
            if any(cls in _bound_names(n) for n in ast.walk(fn) if n is not params[0] and n is not fn):
                continue
            found.update(id(n.func) for n in _in_scope(fn) if _is_super_new(n, cls))
    return found


def _is_super_new(node: ast.AST, cls: str) -> bool:
    """``super().__new__(cls)``, exactly."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "__new__"
            and isinstance(node.func.value, ast.Call) and isinstance(node.func.value.func, ast.Name)
            and node.func.value.func.id == "super" and not node.func.value.args and not node.func.value.keywords
            and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Name)
            and node.args[0].id == cls)


class _NameUses:
    """Each use of a bare name, as the longest dotted chain it heads (``os`` in ``os.environ.get(k)``:
    ``os.environ.get``; ``os`` alone where the module itself is passed on or read otherwise)."""

    def __init__(self, tree: ast.Module, names: _Names) -> None:
        inner = {id(n.value): n for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        self.chains: dict[str, list[str | None]] = {}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Name):
                continue
            if not isinstance(node.ctx, ast.Load):
                self.chains.setdefault(node.id, []).append(None)  # rebound: its uses are no longer the import's
                continue
            top: ast.AST = node
            while id(top) in inner:
                top = inner[id(top)]
            self.chains.setdefault(node.id, []).append(names.resolve(top) if top is not node else None)


def _restricted_import(alias: ast.alias, uses: _NameUses) -> bool:
    """``import os`` admitted where every use of the name it binds is an `ALLOWED_REFERENCES` chain
    (``os.environ.get("FLAG")``): the module is then only ever read through references the contract
    allows, whatever else it holds. A dotted import without ``as`` binds its package, not the module."""
    if "." in alias.name and alias.asname is None:
        return False
    chains = uses.chains.get(alias.asname or alias.name, [])
    return bool(chains) and all(c is not None and c in ALLOWED_REFERENCES for c in chains)


MODULE_ATTRS = frozenset(("operator", "_operator", "inspect", "sys", "os", "posix", "builtins", "importlib",
                          "gc", "ctypes", "subprocess", "marshal"))
"""Attribute names that are modules the contract does not admit; read from any object (a module a
parameter holds, ``m.operator``) they reach past the contract, whatever the object is."""
def _on_self(node: ast.Attribute) -> bool:
    """``self._time``: an attribute of the solution's own instance (what it holds, it put there, through
    reads these rules checked)."""
    return isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")


def _module_attr(attr: str) -> bool:
    """An attribute name that names a module the contract does not admit, private spellings included
    (``collections._sys``, ``torch._C``): `MODULE_ATTRS`, or any standard-library module's name."""
    bare = attr.lstrip("_")
    return (attr in MODULE_ATTRS or bare in MODULE_ATTRS or attr == "_C"
            or attr.startswith("_") and bare in sys.stdlib_module_names and not _import_allowed(bare))


DYNAMIC_ACCESSORS = frozenset(("attrgetter", "methodcaller"))
"""``operator``'s getattr by name: never needed by a solution (``operator`` is not importable), so
reading one from any object is attribute access by names the analysis cannot see."""


def _attribute_rule(node: ast.Attribute, names: _Names, bad: Callable[..., None]) -> None:
    attr = node.attr
    if attr.startswith("__") and attr.endswith("__") and attr not in ALLOWED_DUNDERS | OPERATOR_DUNDERS:
        bad(node, f"reads .{attr}")
        return
    resolved = names.resolve(node)
    if resolved is None:  # rooted in a value (a parameter, a call): the module it holds is unknown
        if _module_attr(attr) and not isinstance(node.ctx, ast.Store) and not _on_self(node):
            bad(node, f"reads .{attr}, a module outside the contract, from an object")
        elif attr in DYNAMIC_ACCESSORS:
            bad(node, f"reads .{attr} (attribute access by computed names)")
        return
    parts = resolved.split(".")
    if any(p.startswith("_") and not p.startswith("__") for p in parts[1:]):  # any library's, stdlib's too
        bad(node, f"uses the private {resolved}")
    elif any(_matches(resolved, f) for f in FILE_CALLS):
        bad(node, f"uses {resolved} (files, foreign memory or clocks)")


def _call_rule(node: ast.Call, bad: Callable[..., None]) -> None:
    fn = node.func.id
    if fn in ATTRIBUTE_FUNCTIONS:
        if len(node.args) < 2 or not (isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            bad(node, f"{fn} with a name computed at run time")
        elif node.args[1].value.startswith("_"):
            bad(node, f"{fn} of the private name {node.args[1].value!r}")
    elif fn == "type" and len(node.args) == 3:
        bad(node, "builds a class with type(name, bases, dict)", 11)  # a Tensor subclass made at run time


def _is_host_read(method: str, call: ast.Call) -> bool:
    """``x.numpy()``, ``x.tolist()``, ``x.cpu()``, ``x.to("cpu")``, ``x.to(device="cpu")``."""
    if method in HOST_READS:
        return True
    if method != "to":
        return False
    values = list(call.args) + [k.value for k in call.keywords if k.arg == "device"]
    return any(isinstance(v, ast.Constant) and isinstance(v.value, str) and v.value.startswith("cpu")
               or isinstance(v, ast.Call) and v.args and isinstance(v.args[0], ast.Constant)
               and str(v.args[0].value).startswith("cpu") for v in values)


def _host_reads(reach: "_Reach") -> list[Hack]:
    """``.numpy()`` / ``.tolist()`` / ``.cpu()`` / ``.to("cpu")`` in code reachable from forward."""
    return [make_hack(14, f"line {line}: {what} in {where} copies tensor data to the host "
                          f"(solution contract)") for what, line, where in reach.host_reads]
