"""Names a solution may not spell, however it spells them (part of the static contract).

Some attribute names give reach past the contract whatever object they are read from: frame and code
internals (``f_back``, ``gi_frame``, ``co_consts``), function and module internals (``__globals__``,
``__closure__``), the class graph (``__subclasses__``, ``mro``). Some start work nothing observes:
``Tensor.apply_`` / ``map_`` / ``map2_`` call Python per element outside PyTorch's dispatcher, and a
thread's compute escapes the calling thread's dispatch modes. A run-time name reaches any of them
through ``getattr``, ``functools.update_wrapper(..., assigned=(name,))`` or a format field, so the
name is refused wherever it appears: as an attribute, in a string constant, or in a string the
source builds from constant parts (``"__glob" + "als__"``, ``"%s%s" % (...)``, f-strings,
``"".join([...])``, slices, ``chr``, ``bytes.decode``, str methods, names bound once to such values).
A name assembled from two or three constants found anywhere in the source is refused too, whatever
code joins them (a loop, ``+=``).

What escapes this (characters read from objects at run time, e.g. a docstring) is left to the
run-time guards in `drkernel.gym.candidate.guards`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator

from drkernel.gym.result import Hack
from drkernel.gym.verdict.hacks import make_hack

FRAME_NAMES = frozenset((
    "f_back", "f_locals", "f_globals", "f_builtins", "f_code", "f_lasti", "f_lineno", "f_trace",
    "f_trace_lines", "f_trace_opcodes", "f_generator", "tb_frame", "tb_next", "tb_lasti", "tb_lineno",
    "gi_frame", "gi_code", "gi_yieldfrom", "gi_running", "gi_suspended", "cr_frame", "cr_code", "cr_await",
    "cr_origin", "ag_frame", "ag_code", "ag_await", "cell_contents", "mro",
    "co_code", "co_consts", "co_names", "co_varnames", "co_freevars", "co_cellvars", "co_filename",
    "co_name", "co_qualname", "co_firstlineno", "co_lnotab", "co_linetable", "co_exceptiontable",
    "co_positions", "co_lines", "co_flags", "co_argcount", "co_posonlyargcount", "co_kwonlyargcount",
    "co_nlocals", "co_stacksize",
))
"""Frame, traceback, generator, code and cell internals: each leads to frames, locals or globals."""
REACH_DUNDERS = frozenset((
    "__globals__", "__builtins__", "__closure__", "__code__", "__subclasses__", "__mro__", "__bases__",
    "__base__", "__loader__", "__spec__", "__traceback__", "__dict__", "__class__", "__getattribute__",
    "__import__", "__self__", "__func__", "__wrapped__", "__defaults__", "__kwdefaults__", "__reduce__",
    "__reduce_ex__", "__init_subclass__", "__setattr__", "__delattr__", "__module__",
))
"""Dunders that give reach; the pieces check looks for these (any other dunder string is refused
whole by the contract's dunder rule, folded strings included)."""
CALLBACK_METHODS = frozenset(("apply_", "map_", "map2_"))
"""Tensor methods that call a Python function per element, invisible to PyTorch's dispatcher."""
CONCURRENCY_NAMES = frozenset((
    "Thread", "Timer", "start_new_thread", "start_new", "start_joinable_thread", "ThreadPoolExecutor",
    "ProcessPoolExecutor", "InterpreterPoolExecutor", "Process", "Pool", "ThreadPool", "run_in_executor",
    "to_thread", "new_event_loop", "get_event_loop", "run_coroutine_threadsafe", "parallel_apply",
))
"""Callables that start threads or processes (threading, _thread, concurrent.futures,
multiprocessing, asyncio, torch.nn.parallel)."""
MODULE_STRINGS = {
    **{m: 7 for m in ("threading", "_thread", "multiprocessing", "concurrent", "concurrent.futures",
                      "asyncio", "torch.multiprocessing", "torch.nn.parallel")},
    **{m: 14 for m in ("sys", "gc", "inspect", "importlib", "builtins", "ctypes", "subprocess", "os",
                       "posix", "operator", "_operator", "types", "traceback", "weakref", "marshal",
                       "import_module")},
}
"""Module names (and the importer) as whole strings: only an importer reached past the contract
would take them."""
ALLOWED_DUNDERS = frozenset(("__init__", "__name__", "__qualname__", "__doc__", "__future__", "__main__"))
"""As in `drkernel.gym.verdict.static`: the dunders a solution may name."""

MAX_LEN = 4096
"""Longest string or tuple the folder keeps (``"ab" * 10**9`` is not folded)."""
MAX_INT = 2**17
"""Largest integer it keeps (character codes of the Basic Multilingual Plane; no huge paddings)."""
MAX_DEPTH = 24
MAX_STEPS = 100_000
"""Folding steps per source: the orchestrator runs this on untrusted text, so its cost is bounded."""


def _category(word: str) -> tuple[int, str] | None:
    """(hack code, why) for a refused name."""
    if word in FRAME_NAMES or word in REACH_DUNDERS:
        return 14, "frame, code or object-graph introspection"
    if re.fullmatch(r"__\w+__", word) and word not in ALLOWED_DUNDERS:
        return 14, "a dunder name built or named in a string"
    if word in CALLBACK_METHODS:
        return 14, "a per-element Python callback (Tensor.apply_/map_/map2_), invisible to the op recorder"
    if word in CONCURRENCY_NAMES:
        return 7, "starts a thread or process"
    if word in MODULE_STRINGS:
        return MODULE_STRINGS[word], "names a module outside the contract (an importer's argument)"
    return None


ATTRIBUTE_NAMES = FRAME_NAMES | CALLBACK_METHODS | CONCURRENCY_NAMES | {"import_module"}
"""Refused as attributes of anything (dunder attributes are the contract's)."""
TOKEN_NAMES = FRAME_NAMES | CALLBACK_METHODS
"""Distinctive enough to refuse inside any string (a format field ``"{0.gi_frame}"``, a docstring)."""
PIECE_NAMES = tuple(sorted(FRAME_NAMES | REACH_DUNDERS | CALLBACK_METHODS | CONCURRENCY_NAMES
                           | {m for m in MODULE_STRINGS if len(m) >= 4}))
"""Names looked for as joins of two or three constants."""


class _Folder:
    """Fold expressions built from constants (and names bound once to such expressions) to values."""

    def __init__(self, tree: ast.AST) -> None:
        bound: dict[str, list[ast.AST | None]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            bound.setdefault(n.id, []).append(node.value if t is n else None)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                bound.setdefault(node.target.id, []).append(node.value)
            elif isinstance(node, (ast.AugAssign, ast.For, ast.comprehension, ast.NamedExpr)):
                for n in ast.walk(node.target):
                    if isinstance(n, ast.Name):
                        bound.setdefault(n.id, []).extend((None, None))
            elif isinstance(node, ast.arg):
                bound.setdefault(node.arg, []).extend((None, None))
        self.env = {k: v[0] for k, v in bound.items() if len(v) == 1 and v[0] is not None}
        self.values: dict[str, object] = {}
        self.active: set[str] = set()
        self.steps = 0

    def fold(self, node: ast.AST, local: dict | None = None, depth: int = 0) -> object:
        """The value of ``node`` (str, bytes, int or a tuple of them), or None."""
        self.steps += 1
        if depth > MAX_DEPTH or self.steps > MAX_STEPS:
            return None
        try:
            value = self._fold(node, local or {}, depth + 1)
        except (ValueError, TypeError, IndexError, KeyError, OverflowError, UnicodeError, AttributeError):
            return None
        if isinstance(value, (str, bytes, tuple)) and len(value) > MAX_LEN:
            return None
        if isinstance(value, int) and abs(value) > MAX_INT:
            return None
        return value

    def _fold(self, node: ast.AST, local: dict, depth: int) -> object:
        f = lambda n: self.fold(n, local, depth)
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, (str, bytes, int)) else None
        if isinstance(node, ast.Name):
            return self._name(node.id, local, depth)
        if isinstance(node, (ast.Tuple, ast.List)):
            items = tuple(f(e) for e in node.elts)
            return None if any(i is None for i in items) else items
        if isinstance(node, ast.BinOp):
            return _binop(node.op, f(node.left), f(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            value = f(node.operand)
            return -value if isinstance(value, int) else None
        if isinstance(node, ast.JoinedStr):
            return self._fstring(node, f)
        if isinstance(node, ast.Subscript):
            return _subscript(f(node.value), node.slice, f)
        if isinstance(node, ast.Call):
            return self._call(node, local, depth)
        if isinstance(node, (ast.GeneratorExp, ast.ListComp)):
            return self._comprehension(node, local, depth)
        return None

    def _name(self, name: str, local: dict, depth: int) -> object:
        if name in local:
            return local[name]
        if name not in self.env or name in self.active:
            return None
        if name not in self.values:  # a module-level value: folded once, in no comprehension's scope
            self.active.add(name)
            try:
                self.values[name] = self.fold(self.env[name], {}, depth)
            finally:
                self.active.discard(name)
        return self.values[name]

    @staticmethod
    def _fstring(node: ast.JoinedStr, f) -> str | None:
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(str(part.value))
                continue
            value = f(part.value)
            spec = f(part.format_spec) if part.format_spec is not None else ""
            if value is None or spec is None:
                return None
            if not _small_format(spec):
                return None
            value = {115: str, 114: repr, 97: ascii}.get(part.conversion, lambda v: v)(value)
            out.append(format(value, spec))
        return "".join(out)

    def _call(self, node: ast.Call, local: dict, depth: int) -> object:
        f = lambda n: self.fold(n, local, depth)
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            return None
        if isinstance(node.func, ast.Name) and node.func.id in ("map",) and len(node.args) == 2:
            fn, items = node.args[0], f(node.args[1])
            if isinstance(fn, ast.Name) and fn.id in FOLD_BUILTINS and isinstance(items, (tuple, str, bytes)):
                return tuple(FOLD_BUILTINS[fn.id](i) for i in items)
            return None
        args = [f(a) for a in node.args]
        if any(a is None for a in args):
            return None
        if isinstance(node.func, ast.Name) and node.func.id in FOLD_BUILTINS:
            return FOLD_BUILTINS[node.func.id](*args)
        if isinstance(node.func, ast.Attribute):
            if (isinstance(node.func.value, ast.Name) and node.func.value.id in ("str", "bytes")
                    and node.func.attr in ("join", "fromhex", "decode", "upper", "lower")):
                receiver = {"str": str, "bytes": bytes}[node.func.value.id]
                return getattr(receiver, node.func.attr)(*args)
            receiver = f(node.func.value)
            if node.func.attr == "format" and not _small_format(receiver):
                return None
            if isinstance(receiver, (str, bytes)) and node.func.attr in STR_METHODS:
                if node.func.attr == "join":
                    args = [tuple(args[0])] if args else args
                return getattr(receiver, node.func.attr)(*args)
        return None

    def _comprehension(self, node: ast.GeneratorExp | ast.ListComp, local: dict, depth: int) -> object:
        if len(node.generators) != 1 or node.generators[0].ifs or not isinstance(node.generators[0].target, ast.Name):
            return None
        gen = node.generators[0]
        items = self.fold(gen.iter, local, depth)
        if not isinstance(items, (tuple, str, bytes)) or len(items) > MAX_LEN:
            return None
        out = tuple(self.fold(node.elt, {**local, gen.target.id: i}, depth) for i in items)
        return None if any(o is None for o in out) else out


def _binop(op: ast.operator, a: object, b: object) -> object:
    if a is None or b is None:
        return None
    if isinstance(op, ast.Mult) and isinstance(a, (str, bytes, tuple)) and isinstance(b, int):
        return a * b if len(a) * b <= MAX_LEN else None
    if isinstance(op, ast.Mod) and isinstance(a, str):
        return a % b if _small_format(a) else None
    ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b}
    return ops[type(op)]() if type(op) in ops and not (isinstance(a, int) and abs(a) > 10**6) else None


def _small_format(text: object) -> bool:
    """A format string without widths large enough to build huge strings (``"%0999999d"``)."""
    return isinstance(text, str) and not re.search(r"\d{4,}", text)


def _subscript(value: object, index: ast.AST, f) -> object:
    if not isinstance(value, (str, bytes, tuple)):
        return None
    if isinstance(index, ast.Slice):
        parts = [f(p) if p is not None else None for p in (index.lower, index.upper, index.step)]
        if any(p is None and q is not None for p, q in zip(parts, (index.lower, index.upper, index.step))):
            return None
        return value[slice(*parts)]
    i = f(index)
    return value[i] if isinstance(i, int) else None


def _to_bytes(*args: object) -> bytes:
    if len(args) == 1 and isinstance(args[0], tuple):
        return bytes(args[0])
    return bytes(*args)


FOLD_BUILTINS = {"chr": chr, "str": str, "bytes": _to_bytes, "bytearray": lambda *a: _to_bytes(*a),
                 "reversed": lambda v: tuple(reversed(v)), "tuple": tuple, "list": tuple, "ord": ord,
                 "int": int}
STR_METHODS = frozenset(("lower", "upper", "strip", "lstrip", "rstrip", "replace", "swapcase", "capitalize",
                         "casefold", "title", "removeprefix", "removesuffix", "join", "format", "decode",
                         "encode", "zfill", "center", "ljust", "rjust"))


def _words(text: str) -> Iterator[tuple[str, bool]]:
    """(word, whole): the string itself and its dotted parts (whole), then every identifier in it."""
    yield text, True
    if re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", text):
        for part in text.split("."):
            yield part, True
    for token in re.findall(r"[A-Za-z_]\w*", text):
        yield token, False


def _pieces(target: str, bag: set[str], parts: int) -> tuple[str, ...] | None:
    """``target`` as a join of ``parts`` strings from ``bag`` (each at least two characters)."""
    if parts == 1:
        return (target,) if target in bag else None
    for i in range(2, len(target) - 1):
        if target[:i] in bag:
            rest = _pieces(target[i:], bag, parts - 1)
            if rest:
                return (target[:i], *rest)
    return None


def _texts(tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """Every string (or bytes) value the source holds or builds from constants, with its node."""
    folder = _Folder(tree)
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Constant, ast.BinOp, ast.JoinedStr, ast.Subscript, ast.Call, ast.Name)):
            continue
        if isinstance(node, ast.Name) and node.id not in folder.env:
            continue
        value = folder.fold(node)
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        if isinstance(value, tuple):
            value = "".join(v for v in value if isinstance(v, str))
        if isinstance(value, str) and value:
            yield node, value


def spelled_names(tree: ast.AST, resolve: Callable[[ast.AST], str | None] = lambda node: None) -> list[Hack]:
    """Refused names as attributes, strings, strings built from constants, or joins of constants;
    ``resolve``: a name or attribute chain to the dotted name it imports (``uw`` -> ``functools.update_wrapper``)."""
    hacks: list[Hack] = []

    def bad(node: ast.AST, code: int, what: str) -> None:
        hacks.append(make_hack(code, f"line {getattr(node, 'lineno', 0)}: {what} (solution contract)"))

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ATTRIBUTE_NAMES:
            code, why = (14, "loads modules by name") if node.attr == "import_module" else _category(node.attr)
            bad(node, code, f"reads .{node.attr}: {why}")
    bag: set[str] = set()
    for node, text in _texts(tree):
        if len(text) >= 2:
            bag.add(text)
        for word, whole in _words(text):
            hit = _category(word) if whole or word in TOKEN_NAMES else None
            if hit:
                bad(node, hit[0], f"the string {text[:60]!r} names {word!r}: {hit[1]}")
                break
    for target in PIECE_NAMES:
        for parts in (2, 3):
            found = _pieces(target, bag, parts)
            if found:
                code, why = _category(target) or (14, "")
                hacks.append(make_hack(code, f"the constants {found} join to {target!r}: {why} (solution contract)"))
                break
    return hacks + _wrapper_copies(tree, resolve) + _runtime_formats(tree)


WRAPPERS = {"update_wrapper": 2, "wraps": 1}
"""functools' attribute copiers and how many positional arguments they take before ``assigned``."""


def _wrapper_copies(tree: ast.AST, resolve: Callable[[ast.AST], str | None]) -> list[Hack]:
    """``functools.update_wrapper`` / ``wraps`` reading attributes the caller names (``assigned``,
    ``updated``) is getattr by name from inside the standard library: allowed only with the defaults."""
    hacks = []
    called = {id(n.func): n for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Attribute, ast.Name)) or isinstance(node.ctx, ast.Store):
            continue
        name = (resolve(node) or "").removeprefix("functools.")
        if name not in WRAPPERS:
            name = node.attr if isinstance(node, ast.Attribute) else node.id
        if name not in WRAPPERS:
            continue
        call = called.get(id(node))
        if call is None:
            why = f"passes {name} as a value"
        elif (len(call.args) > WRAPPERS[name] or any(isinstance(a, ast.Starred) for a in call.args)
              or any(k.arg in (None, "assigned", "updated") for k in call.keywords)):
            why = f"calls {name} with chosen attribute names (assigned/updated)"
        else:
            continue
        hacks.append(make_hack(14, f"line {node.lineno}: {why}: attribute access by names the analysis "
                                   f"cannot see (solution contract)"))
    return hacks


def _runtime_formats(tree: ast.AST) -> list[Hack]:
    """``fmt.format(obj)`` with a format string the folder cannot read: its fields (``{0.name}``)
    read attributes by names chosen at run time. A ``.format`` or ``.format_map`` taken as a value
    (``g = str.format``, ``partial(str.format, fmt)``, ``map(fmt.format, ...)``) is refused too: the
    call it reaches is out of sight (red team 15 reached ``sys.modules`` through a format run inside
    a library)."""
    folder = _Folder(tree)
    calls = {id(n.func): n for n in ast.walk(tree) if isinstance(n, ast.Call)}
    hacks = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr in ("format", "format_map")):
            continue
        if id(node) not in calls:
            hacks.append(make_hack(14, f"line {node.lineno}: .{node.attr} taken as a value (the format it "
                                       f"runs, and the attributes its fields read, are out of sight) "
                                       f"(solution contract)"))
            continue
        call = calls[id(node)]
        receiver = node.value
        if isinstance(receiver, ast.Name) and receiver.id == "str":
            receiver = call.args[0] if call.args else receiver
        if not isinstance(folder.fold(receiver), str):
            hacks.append(make_hack(14, f"line {node.lineno}: .{node.attr} on a format string built at run "
                                       f"time (its fields read attributes by name) (solution contract)"))
    return hacks