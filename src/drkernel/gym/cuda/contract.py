"""The CUDA solution contract, checked from the source alone (torch-free, safe in the orchestrator).

A CUDA solution is a Python file whose ``ModelNew`` calls functions of extensions built by
``torch.utils.cpp_extension.load_inline`` from sources written in the file itself::

    from torch.utils.cpp_extension import load_inline
    cuda_src = r'''__global__ void relu_kernel(...) {...}  torch::Tensor relu(torch::Tensor x) {...}'''
    ext = load_inline(name="relu_ext", cpp_sources="torch::Tensor relu(torch::Tensor x);",
                      cuda_sources=cuda_src, functions=["relu"])

Every argument of ``load_inline`` must be known without running the file (string literals, module-level
names bound once to them, ``+`` of those, lists of those), because the host compiles the sources in a
sandbox of its own before the solution runs (`drkernel.gym.cuda.build`); the candidate only loads what
the host built. ``load`` (sources from other files), ``extra_ldflags``, ``extra_include_paths``,
``build_directory`` and flags outside `ALLOWED_FLAGS` are out of contract. The solution's own kernels
are the ``__global__`` functions of its sources; the C++ is checked by `drkernel.gym.cuda.source_rules`.
The Python around the calls is held to the Triton contract (`drkernel.gym.verdict.static`), with the
validated ``load_inline`` imports and calls masked out of it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from drkernel import pyast
from drkernel.gym.cuda.source_rules import RULES, Finding, check_source, global_functions
from drkernel.gym.result import Hack
from drkernel.gym.verdict.hacks import dedupe, make_hack
from drkernel.gym.verdict.static import StaticReport, analyze

LOADERS = ("torch.utils.cpp_extension.load_inline",)
REFUSED_LOADERS = ("torch.utils.cpp_extension.load", "torch.utils.cpp_extension.CUDAExtension",
                   "torch.utils.cpp_extension.CppExtension", "torch.utils.cpp_extension.BuildExtension",
                   "torch.ops.load_library")
KNOWN_ARGS = ("name", "cpp_sources", "cuda_sources", "functions", "extra_cflags", "extra_cuda_cflags",
              "verbose", "with_cuda", "with_pytorch_error_handling")
ALLOWED_FLAGS = re.compile(r"-O[0-3]|--use_fast_math|-use_fast_math|-lineinfo|--expt-relaxed-constexpr"
                           r"|--extended-lambda|-maxrregcount=\d+|--maxrregcount=\d+|-Xptxas=?-O[0-3]"
                           r"|-Xptxas|--ptxas-options=-v|-D[A-Za-z_]\w*(=-?[0-9][0-9.]*[fFuUlL]*)?|-std=c\+\+(17|20)")
"""Compiler flags a solution may pass: optimisation levels, fast math, macros with numeric values (a
macro's text would reach the sources past `drkernel.gym.cuda.source_rules`). No include or library
paths, no linker flags, no ``-arch`` (the host picks the device's architecture)."""
NAME = re.compile(r"[A-Za-z_]\w{0,63}")


@dataclass(frozen=True)
class CudaModule:
    """One ``load_inline`` call, with every argument resolved from the source."""

    name: str
    cpp_sources: tuple[str, ...]
    cuda_sources: tuple[str, ...]
    functions: tuple[str, ...]
    cflags: tuple[str, ...] = ()
    cuda_cflags: tuple[str, ...] = ()
    line: int = 0

    @property
    def kernels(self) -> tuple[str, ...]:
        """Its ``__global__`` functions: the solution's own kernels."""
        sources = self.cuda_sources + self.cpp_sources
        return tuple(dict.fromkeys(k for s in sources for k in global_functions(s)))


@dataclass
class CudaReport:
    """What a CUDA solution's source says about itself."""

    modules: list[CudaModule] = field(default_factory=list)
    hacks: list[Hack] = field(default_factory=list)      # blocking: refused before anything compiles
    python: StaticReport | None = None                   # the Triton contract on the masked Python

    @property
    def own_kernels(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(k for m in self.modules for k in m.kernels))

    @property
    def all_hacks(self) -> list[Hack]:
        return dedupe(self.hacks + (self.python.all_hacks if self.python else []))


class _Unresolved(ValueError):
    """An argument whose value needs the file to run."""


def _constants(tree: ast.Module) -> dict[str, ast.AST]:
    """Module-level names bound exactly once by a plain assignment (the ones an argument may name)."""
    counts: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            counts[node.id] = counts.get(node.id, 0) + 1
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if counts.get(node.targets[0].id) == 1:
                out[node.targets[0].id] = node.value
    return out


def _value(node: ast.AST, consts: dict[str, ast.AST], depth: int = 0) -> str | tuple[str, ...] | bool:
    """A string, a tuple of strings or a bool, from literals, constant names, ``+`` and lists."""
    if depth > 20:
        raise _Unresolved("nested too deeply")
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bool)):
        return node.value
    if isinstance(node, ast.Name) and node.id in consts:
        return _value(consts[node.id], consts, depth + 1)
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_value(e, consts, depth + 1) for e in node.elts]
        if all(isinstance(i, str) for i in items):
            if sum(len(i) for i in items) > MAX_BUILT_CHARS:  # type: ignore[arg-type]
                raise _Unresolved(f"sources built past {MAX_BUILT_CHARS} characters")
            return tuple(items)  # type: ignore[arg-type]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _value(node.left, consts, depth + 1), _value(node.right, consts, depth + 1)
        if type(left) is type(right) and not isinstance(left, bool):
            if _size(left) + _size(right) > MAX_BUILT_CHARS:
                raise _Unresolved(f"a source built past {MAX_BUILT_CHARS} characters")
            return left + right  # type: ignore[operator]
    raise _Unresolved(ast.unparse(node)[:80])


MAX_BUILT_CHARS = 1 << 20
"""The most characters a source put together from constants may have (the request's own limit): a
name added to itself level by level doubles, so 20 levels of a few bytes made 16 MiB of source."""


def _size(value: str | tuple[str, ...]) -> int:
    return len(value) if isinstance(value, str) else sum(len(v) for v in value)


def _strings(value: str | tuple[str, ...] | bool) -> tuple[str, ...]:
    if isinstance(value, bool):
        raise _Unresolved(str(value))
    return (value,) if isinstance(value, str) else value


def parse_call(call: ast.Call, consts: dict[str, ast.AST]) -> tuple[CudaModule | None, list[Hack]]:
    """The module of one ``load_inline`` call, or the hacks that make it out of contract."""
    line = call.lineno

    def bad(code: int, why: str) -> tuple[None, list[Hack]]:
        return None, [make_hack(code, f"line {line}: load_inline {why} (CUDA solution contract)")]

    names = ("name", "cpp_sources", "cuda_sources")  # torch's order; its fourth is sycl_sources
    args = dict(zip(names, call.args))
    if len(call.args) > len(names) or any(k.arg is None for k in call.keywords):
        return bad(14, "takes at most name, cpp_sources and cuda_sources by position (functions= and the "
                       "flags by keyword), no **kwargs")
    args.update({k.arg: k.value for k in call.keywords if k.arg})
    unknown = sorted(set(args) - set(KNOWN_ARGS))
    if unknown:
        code = 14 if {"extra_ldflags", "extra_include_paths", "build_directory"} & set(unknown) else 16
        return bad(code, f"passes {', '.join(unknown)} (only {', '.join(KNOWN_ARGS)} are allowed: no "
                         "libraries, include paths or build folders)")
    try:
        v = {k: _value(node, consts) for k, node in args.items()}
        module = CudaModule(name=str(v.get("name", "")),
                            cpp_sources=_strings(v.get("cpp_sources", ())),
                            cuda_sources=_strings(v.get("cuda_sources", ())),
                            functions=_strings(v.get("functions", ())),
                            cflags=_strings(v.get("extra_cflags", ())),
                            cuda_cflags=_strings(v.get("extra_cuda_cflags", ())), line=line)
    except _Unresolved as e:
        return bad(14, f"argument {e} is not known before the file runs (use string literals or module-level "
                       "names bound once to them)")
    not_names = [n for n in (module.name, *module.functions) if not NAME.fullmatch(n)]
    if not_names:  # the name and functions are written into the generated bindings
        return bad(14, f"name or functions {not_names} are not identifiers")
    flags = [f for f in module.cflags + module.cuda_cflags if not ALLOWED_FLAGS.fullmatch(f)]
    if flags:
        return bad(14, f"passes compiler flags {flags} (allowed: -O0..3, --use_fast_math, -lineinfo, numeric "
                       "-D macros, -maxrregcount; no paths, libraries or -arch)")
    if not module.cuda_sources:
        return bad(16, "has no cuda_sources: the solution's kernels must be __global__ functions it writes")
    return module, []


def source_hacks(module: CudaModule) -> list[Hack]:
    """The C++ rules (`drkernel.gym.cuda.source_rules`) over every source of a module."""
    found: list[Finding] = []
    for kind, sources in (("cpp_sources", module.cpp_sources), ("cuda_sources", module.cuda_sources)):
        for text in sources:
            found += check_source(text, kind)
    hacks = [make_hack(f.code, f.evidence(module.name)) for f in found]
    if not module.kernels:
        hacks.append(make_hack(16, f"{module.name}: its sources define no __global__ function, so no kernel "
                                   "of the solution's own (CUDA solution contract)"))
    return hacks


def _loader_calls(tree: ast.Module, names: "_Names") -> tuple[list[ast.Call], list[Hack]]:
    """The ``load_inline`` calls, and hacks for every other use of an extension loader."""
    calls, hacks = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and names.resolve(node.func) in LOADERS:
            calls.append(node)
        elif isinstance(node, (ast.Name, ast.Attribute)) and names.resolve(node) in REFUSED_LOADERS:
            hacks.append(make_hack(16, f"line {node.lineno}: {names.resolve(node)}: only load_inline with "
                                       "sources in the solution's file builds its kernels (CUDA solution contract)"))
    return calls, hacks


def _bindings(tree: ast.Module) -> dict[str, int]:
    """How often each name is bound anywhere in the file: assignments, imports, definitions, parameters,
    loop and ``with`` targets, ``global`` / ``nonlocal`` declarations."""
    counts: dict[str, int] = {}
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names = [node.id]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.asname or a.name.split(".")[0] for a in node.names]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.arg):
            names = [node.arg]
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names = list(node.names)
        for name in names:
            counts[name] = counts.get(name, 0) + 1
    return counts


def _mask_spans(tree: ast.Module, calls: list[ast.Call], modules: list[CudaModule],
                refused: list[ast.Call] | None = None) -> list[tuple[ast.AST, str]]:
    """What to hide from the Triton contract: the validated calls (and the ``refused`` ones, which the
    CUDA contract has already flagged in its own words), the ``from torch.utils.cpp_extension import
    load_inline`` statements whose names only those calls use, and ``ext.fn`` for an extension bound at
    module level (``ext = load_inline(...)``) and one of its functions (a method call to the analyser,
    which would read ``ext.relu(x)`` as PyTorch's ``Tensor.relu``)."""
    exported = {}
    bound = _bindings(tree)
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.value in calls and bound.get(node.targets[0].id) == 1):  # never rebound
            exported[node.targets[0].id] = modules[calls.index(node.value)].functions
    every = [*calls, *(refused or [])]
    in_calls = {id(c.func) for c in every} | {id(n) for c in every for n in ast.walk(c.func)}
    used_elsewhere = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in in_calls}
    spans: list[tuple[ast.AST, str]] = [(c, "(None)") for c in every]
    for node in ast.walk(tree):
        only_ours = isinstance(node, ast.ImportFrom) and all(
            a.name == "load_inline" and (a.asname or a.name) not in used_elsewhere for a in node.names)
        if only_ours and node.module == "torch.utils.cpp_extension" and node.level == 0:
            spans.append((node, "pass"))
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.attr in exported.get(node.value.id, ())):
            spans.append((node, f"{node.value.id}_{node.attr}"))
    return spans


def mask(source: str, spans: list[tuple[ast.AST, str]]) -> str:
    """``source`` with each node's text replaced, line numbers kept (AST columns are UTF-8 offsets)."""
    lines = source.encode().split(b"\n")
    for node, text in sorted(spans, key=lambda s: (s[0].lineno, s[0].col_offset), reverse=True):
        first, last = node.lineno - 1, node.end_lineno - 1  # type: ignore[operator]
        filler = text.encode() if first == last else b"(" + text.encode() + b"\n" * (last - first) + b")"
        head, tail = lines[first][:node.col_offset], lines[last][node.end_col_offset:]
        lines[first:last + 1] = (head + filler + tail).split(b"\n")
    return b"\n".join(lines).decode()


def check_cuda(source: str) -> CudaReport:
    """The whole CUDA contract over a solution's source: the modules, the blocking hacks (C++ rules,
    loader arguments), and the Triton contract's report on the rest of the Python."""
    from drkernel.gym.verdict.static import _Names  # the analyser's own name resolution, not a second one

    report = CudaReport()
    try:
        tree = pyast.parse(source)
    except (SyntaxError, ValueError):
        report.python = analyze(source)  # the parse error, reported as the Triton path reports it
        return report
    names = _Names(tree)
    calls, report.hacks = _loader_calls(tree, names)
    consts = _constants(tree)
    valid: list[ast.Call] = []
    for call in calls:
        module, hacks = parse_call(call, consts)
        report.hacks += hacks
        if module is not None:
            valid.append(call)
            report.modules.append(module)
            report.hacks += source_hacks(module)
    if not calls:
        report.hacks.append(make_hack(16, "no load_inline call: a CUDA solution builds its kernels with "
                                          "torch.utils.cpp_extension.load_inline (CUDA solution contract)"))
    if len({m.name for m in report.modules}) < len(report.modules):
        report.hacks.append(make_hack(14, "two load_inline calls share a name (CUDA solution contract)"))
    refused = [c for c in calls if c not in valid]
    report.python = analyze(mask(source, _mask_spans(tree, valid, report.modules, refused)))
    report.hacks = dedupe(report.hacks)
    return report


CUDA_RULES: tuple[str, ...] = (
    "Build your kernels with `from torch.utils.cpp_extension import load_inline` called at module level: "
    "`ext = load_inline(name=..., cpp_sources=..., cuda_sources=..., functions=[...])`, every argument a "
    "string literal, a module-level name bound once to one, `+` of those or a list of them (the sources are "
    "compiled before your file runs). Optional: `extra_cuda_cflags` / `extra_cflags` with -O0..3, "
    "--use_fast_math, -lineinfo, -D macros, -maxrregcount. No `load`, `extra_ldflags`, "
    "`extra_include_paths`, `build_directory`, `-arch`.",
    "Your own kernels are the `__global__` functions of your sources, launched from the C++ functions "
    "`forward` calls; cuBLAS, cuDNN and ATen compute called from C++ count as PyTorch compute.",
    "Launch on the current stream (`<<<grid, block>>>` or `c10::cuda::getCurrentCUDAStream()`); allocate "
    "outputs with `torch::empty*`. Include only torch's, the CUDA toolkit's and pure C++ standard headers; "
    "no `extern \"C\"`, asm labels, token pasting or line splices that spell names.",
    "Refused in the C++ (each a reward hack): "
    + "; ".join(dict.fromkeys(r.why.split(" (")[0] for r in RULES)) + ".",
    "Import only: torch, torch.nn, torch.nn.functional, math, typing, functools, and `load_inline` from "
    "torch.utils.cpp_extension. No file, process, thread or network access, no streams or CUDA graphs, no "
    "other compilers (`torch.compile`, Triton, `load`).",
)
"""The CUDA-specific rules; `contract_text` adds the Triton contract's rules for the Python around them."""


def contract_text() -> str:
    """The CUDA contract as a numbered list (the CUDA prompt's ``$solution_contract``)."""
    from drkernel.gym.verdict.static import CONTRACT

    python = [r.text for r in CONTRACT if r.key not in ("imports", "io")]
    return "\n".join(f"{i}. {text}" for i, text in enumerate([*CUDA_RULES, *python], 1))
