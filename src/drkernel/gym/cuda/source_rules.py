"""What a CUDA solution's C++ may contain, decided from the text before anything compiles.

The rules read the C++ and CUDA sources a solution hands to ``load_inline`` with comments and string
literals blanked out (so a word in a comment is not a finding, and a finding keeps its line number).
Each rule names the hack family of `drkernel.gym.verdict.hacks` it belongs to:

    code  what the source does                                   why it is refused
    7     streams, events, graphs, host callbacks, host threads  work the timed stream does not see
    8     CUPTI, NVTX ranges, profiler control                   the harness's measuring tools
    9     a ``static`` tensor                                    a result kept across calls
    14    dlopen, processes, files, the environment, host-       native code that is not the solution's
          mapped memory, the timers (%globaltimer, %clock,       kernels, or a clock to steer by
          clock(), clock64()), an include outside the
          toolkit's and torch's headers
    15    cudaDeviceSetLimit, cache / shared-memory config,      process-wide device state the reference
          persisting-L2 access policies, device reset            runs under too
    16    NVRTC, driver-API module loading, TorchScript          foreign kernels instead of own ones

Calls into cuBLAS, cuDNN or ATen compute are not refused here: they compile, and the device's
activity records count their time against the solution (time coverage), as PyTorch compute in a
Triton solution. What only a run can show (a ``__global__`` defined but never launched, a result
cached by pointer in a device buffer, a write past the output) is left to the GPU run. Reading the
reference's output buffer is ruled out by construction: the reference runs in the judge, another
process with its own allocator.
"""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class SourceRule:
    """One refused pattern: a regular expression over the blanked source, its hack code, and why."""

    code: int
    pattern: str
    why: str


RULES: tuple[SourceRule, ...] = (
    SourceRule(7, r"\bcuda(Stream|Event)Create\w*|\bcuStream(Create|BeginCapture)\w*|\bcuEventCreate\w*",
               "creates a CUDA stream or event (launch on the current stream; no cross-stream sync)"),
    SourceRule(7, r"\bgetStreamFromPool\b|\bCUDAStreamGuard\b|\bsetCurrentCUDAStream\b|\bgetStreamFromExternal\b",
               "switches to another stream"),
    SourceRule(7, r"\bcuda(Graph|StreamBeginCapture|StreamEndCapture)\w*|\bCUDAGraph\b",
               "captures or launches a CUDA graph"),
    SourceRule(7, r"\bcuda(LaunchHostFunc|StreamAddCallback)\b",
               "runs host work from the stream"),
    SourceRule(7, r"\bstd\s*::\s*(thread|jthread|async)\b|\bpthread_\w+|\bat\s*::\s*launch\b|\bomp\s+parallel\b",
               "starts a host thread"),
    SourceRule(8, r"\bcupti\w*|\bnvtx\w*|\bcudaProfiler(Start|Stop)\b|\bcuProfiler\w*",
               "touches the profiler the harness measures with"),
    SourceRule(9, r"\bstatic\s+(const\s+)?(torch|at)\s*::\s*Tensor\b|\bstatic\s+(std\s*::\s*)?(unordered_)?map\b",
               "keeps tensors or a lookup table across calls"),
    SourceRule(14, r"\bdl(open|sym|mopen|vsym|close)\b|\bLoadLibrary\w*",
               "loads a native library at run time"),
    SourceRule(14, r"\b(system|popen|fork|vfork|execv\w*|execl\w*|posix_spawn\w*|kill|ptrace)\s*\(",
               "starts or signals a process"),
    SourceRule(14, r"\b(fopen|freopen|open|openat|creat|getenv|setenv|putenv|unsetenv|mmap|syscall|socket)\s*\(",
               "reads files, the environment or the system"),
    SourceRule(14, r"\bstd\s*::\s*(ifstream|ofstream|fstream|filesystem)\b",
               "reads or writes files"),
    SourceRule(14, r"%globaltimer\w*|%clock(64)?\b|\bclock(64)?\s*\(|\b__globaltimer\b|\bstd\s*::\s*chrono\b"
                   r"|\b(clock_gettime|gettimeofday|time|__rdtsc|rdtsc|__builtin_readcyclecounter)\s*\(",
               "reads a clock (timers steer a kernel by the harness's measurement)"),
    SourceRule(14, r"\b(signal|sigaction|mprotect|dl_iterate_phdr|dladdr)\s*\(|\b__libc_\w+",
               "handles signals or walks and patches the process's code"),
    SourceRule(14, r"\bpybind11\b|\bpy\s*::|\bPYBIND11_\w+|\bPy[A-Z][A-Za-z]*_\w+|\bPy_\w+",
               "reaches Python from C++ (the functions listed in load_inline are its only bindings)"),
    SourceRule(14, r"\bcuda(MallocHost|HostAlloc|HostRegister|MallocManaged|HostGetDevicePointer)\b",
               "maps host memory into the device"),
    SourceRule(14, r"\bcuda(IpcOpenMemHandle|IpcGetMemHandle)\b|\bcuMem(Import|Export)\w*",
               "shares device memory with another process"),
    SourceRule(15, r"\bcuda(DeviceSetLimit|DeviceSetCacheConfig|DeviceSetSharedMemConfig|"
                   r"CtxResetPersistingL2Cache|DeviceReset|SetDevice|SetDeviceFlags|DeviceSetMemPool|"
                   r"DeviceSetGraphMemAttribute|StreamSetAttribute)\b|\bcuCtxSetLimit\b",
               "changes process-wide device state"),
    SourceRule(15, r"\baccessPolicyWindow\b|\bcudaAccessPolicyWindow\b|\bcudaLaunchAttributeAccessPolicyWindow\b"
                   r"|\bcudaAccessProperty\w*",
               "sets a persisting-L2 access policy"),
    SourceRule(12, r"\bsetAllowTF32\w*|\bsetFloat32MatmulPrecision\b|\bsetAllow(FP16|BF16)\w*|\ballow_tf32\b",
               "lowers the precision flags PyTorch runs under"),
    SourceRule(15, r"\bglobalContext\s*\(\s*\)\s*\.\s*set\w*|\bset_num(_interop)?_threads\b|\bCUDACachingAllocator\b",
               "changes torch's process-wide settings or its allocator"),
    SourceRule(16, r"\bnvrtc\w*|\bcuModule(Load|LoadData|LoadDataEx|LoadFatBinary)\b|\bcuLibraryLoad\w*|"
                   r"\bcudaLibraryLoad\w*|\btorch\s*::\s*jit\b|\bcudaGetDriverEntryPoint\w*|\bcuGetProcAddress\w*",
               "compiles or loads kernels that are not in its source"),
)
"""Every pattern a CUDA solution's C++ may not match, with the hack it is."""

ALLOWED_INCLUDE = re.compile(
    r"(torch/(extension|types|all|torch)\.h|ATen/\w+\.h|ATen/cuda/\w+\.cuh?|c10/cuda/\w+\.h|c10/util/\w+\.h"
    r"|cuda(_runtime|_runtime_api|_fp16|_bf16|_fp8|_pipeline|_awbarrier|)\.h|mma\.h|cuda/(barrier|pipeline|std/\w+)"
    r"|cooperative_groups(\.h|/\w+\.h)?|cub/[\w/]+\.cuh|vector_types\.h|device_launch_parameters\.h"
    r"|cublas(_v2|Lt)?\.h|cudnn\.h|math_constants\.h|sm_\d+_intrinsics\.h"
    r"|(c)?(math|stdint|stddef|float|limits|assert|cstdio|stdio)(\.h)?"
    r"|vector|array|algorithm|limits|type_traits|utility|tuple|numeric|cmath|cstdint|cstddef|cfloat|climits"
    r"|cassert|stdexcept|string|sstream|iostream|initializer_list|functional|optional|memory)")
"""Headers a solution may include (``#include <...>``): torch's, the toolkit's, the C++ standard
library's pure ones. Quoted includes, absolute paths and anything else are refused (code 14): the
solution's native code is its source and nothing else."""

_RAW_OPEN = re.compile(r'R"([^()\\\s"]{0,16})\(')
_CHAR = re.compile(r"'(?:\\.|[^'\\\n])'")
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include(?:_next)?[ \t]*(?:([<\"])([^>\"\n]*)[>\"]|(.*))", re.M)
_PRAGMA_LIB = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+comment[ \t]*\(\s*lib", re.M)
_ASM = re.compile(r"\b(asm|__asm__)\s*(volatile|__volatile__)?\s*\(", re.S)
_GLOBAL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:\w+\s+){0,4}?void\s+"
                     r"(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(")
"""A ``__global__`` function's name. At most four qualifiers between ``__global__`` and ``void``
(``static``, ``inline``, ...): an unbounded run rescanned the rest of the text from every occurrence
(36,000 ``__global__`` in a 396 KB source took minutes, holding the worker)."""


@dataclass(frozen=True)
class Finding:
    """One rule broken: its hack code, the source it is in, the line there, and what was seen."""

    code: int
    source: str   # "cpp_sources" or "cuda_sources" of the module
    line: int
    why: str

    def evidence(self, module: str) -> str:
        return f"{module} {self.source} line {self.line}: {self.why} (CUDA solution contract)"


def _spaces(m: re.Match) -> str:
    return re.sub(r"[^\n]", " ", m.group(0))


def blank(text: str, literals: bool = True) -> str:
    """``text`` with comments and string/char literals replaced by spaces (newlines kept), so patterns
    see code only and line numbers stay. Asm templates are strings: `asm_findings` reads them.

    One pass, each literal's end found by a forward search from its start: a pattern whose lazy ``.*?``
    rescanned the rest of the text from every unterminated ``R"(`` or ``/*`` took quadratic time (a
    source of them held a worker for minutes). An unterminated literal or comment runs to its end (the
    line's, or the text's): such a source does not compile, so what it hides is never built."""
    spans = []
    i, n = 0, len(text)
    while i < n:
        j = _literal_end(text, i)
        if j is None:
            i += 1
            continue
        if literals or text.startswith(("//", "/*"), i):  # ``literals=False``: comments only
            spans.append((i, j))
        i = j
    if not spans:
        return text
    out, last = [], 0
    for a, b in spans:
        out.append(text[last:a])
        out.append(re.sub(r"[^\n]", " ", text[a:b]))
        last = b
    out.append(text[last:])
    return "".join(out)


def _literal_end(text: str, i: int) -> int | None:
    """Where the comment or literal starting at ``i`` ends (exclusive), or None when none starts there."""
    c = text[i]
    if c == "/" and text.startswith("//", i):
        j = text.find("\n", i)
        return len(text) if j < 0 else j
    if c == "/" and text.startswith("/*", i):
        j = text.find("*/", i + 2)
        return len(text) if j < 0 else j + 2
    if c == "R" and text.startswith('R"', i):
        m = _RAW_OPEN.match(text, i)
        if m is not None:
            j = text.find(")" + m.group(1) + '"', m.end())
            return len(text) if j < 0 else j + len(m.group(1)) + 2
    if c == '"':
        k = i + 1
        while k < len(text) and text[k] not in '"\n':
            k += 2 if text[k] == "\\" else 1
        return min(k + 1, len(text)) if k < len(text) and text[k] == '"' else k
    if c == "'":
        m = _CHAR.match(text, i)
        return m.end() if m is not None else None
    return None


def _line(text: str, pos: int) -> int:
    return bisect.bisect_right(_newlines(text), pos - 1) + 1


@functools.lru_cache(maxsize=16)
def _newlines(text: str) -> list[int]:
    """Where ``text``'s newlines are, once per text (a count from the start per finding was quadratic
    in a source with many findings)."""
    return [m.start() for m in re.finditer("\n", text)]


def rule_findings(text: str, source: str) -> list[Finding]:
    """Every `RULES` match in ``text`` (comments and literals blanked), one finding per rule and line."""
    code = blank(text)
    out: dict[tuple[int, int, str], Finding] = {}
    for rule in RULES:
        for m in re.finditer(rule.pattern, code):
            line = _line(code, m.start())
            out.setdefault((rule.code, line, rule.why),
                           Finding(rule.code, source, line, f"{m.group(0).strip()}: {rule.why}"))
    return list(out.values())


def include_findings(text: str, source: str) -> list[Finding]:
    """Includes outside `ALLOWED_INCLUDE`, ``#pragma comment(lib, ...)`` (a library to link) and
    ``extern "C"`` (C linkage: a symbol of the solution's own could stand in for the runtime's)."""
    out = []
    without_comments = blank(text, literals=False)
    for m in _INCLUDE.finditer(without_comments):
        if m.group(1) is None:  # ``#include MACRO``: a header the text does not name
            out.append(Finding(14, source, _line(text, m.start()), f"includes {m.group(3).strip()!r}, not a "
                               "<header> or \"header\" named in the text"))
            continue
        quote, header = m.group(1), m.group(2).strip()
        if quote == '"' or not ALLOWED_INCLUDE.fullmatch(header):
            out.append(Finding(14, source, _line(text, m.start()),
                               f"includes {quote}{header}{'>' if quote == '<' else quote}, a header outside "
                               "torch's, the CUDA toolkit's and the pure C++ standard library's"))
    for m in _PRAGMA_LIB.finditer(without_comments):
        out.append(Finding(14, source, _line(text, m.start()), "links a library by pragma"))
    for m in re.finditer(r'\bextern\s*"C', without_comments):
        out.append(Finding(14, source, _line(text, m.start()), 'declares C linkage (extern "C")'))
    return out


def asm_findings(text: str, source: str) -> list[Finding]:
    """Inline ``asm`` whose template (a string literal, so `blank` hides it) reads a timer register, and
    asm labels (``void* f(const char*, int) __asm__("dlopen");``: a declaration bound to any symbol)."""
    out = []
    code = re.sub(r"^[ \t]*#[^\n]*", _spaces, blank(text), flags=re.M)  # directives are not declarations
    for m in _ASM.finditer(code):
        j = m.start() - 1
        while j >= 0 and code[j].isspace():  # runs between matches: one pass in all
            j -= 1
        before = code[max(0, j - 8):j + 1]
        if before and (before[-1] in ")]" or before[-1].isalnum() or before[-1] == "_") \
                and not re.search(r"\b(return|else|do)$", before):
            out.append(Finding(14, source, _line(code, m.start()), "an asm label (a declaration bound to a "
                               "symbol by name)"))
    for m in _ASM.finditer(text):
        template = text[m.end():m.end() + 400].split(":")[0]
        if re.search(r"%(globaltimer|clock)", template):
            out.append(Finding(14, source, _line(text, m.start()),
                               "inline asm reads a timer register (%globaltimer / %clock)"))
    return out


HIDING: tuple[SourceRule, ...] = (
    SourceRule(14, r"##", "token pasting (names built by the preprocessor escape these rules)"),
    SourceRule(14, r"\\[uU][0-9a-fA-F]{4}", "a universal character name outside a string (it spells names)"),
    SourceRule(14, r"\?\?[=/'()!<>\-]", "a trigraph"),
)
"""Ways to spell a name so that the rules above do not see it."""


def splice(text: str) -> str:
    """Backslash-newline joins lines before anything else in C++ (``dlo\\<newline>pen`` is ``dlopen``):
    the rules read the joined text; the newlines move to the end of the joined line, so every other
    line keeps its number."""
    out, pending = [], 0
    for part in re.split(r"(\\\n)", text):
        if part == "\\\n":
            pending += 1
        elif pending and "\n" in part:
            head, _, rest = part.partition("\n")
            out.append(head + "\n" * (pending + 1) + rest)
            pending = 0
        else:
            out.append(part)
    return "".join(out) + "\n" * pending


def hiding_findings(text: str, source: str) -> list[Finding]:
    code = blank(text)
    return [Finding(r.code, source, _line(code, m.start()), r.why)
            for r in HIDING for m in re.finditer(r.pattern, code)]


def check_source(text: str, source: str) -> list[Finding]:
    """All findings in one C++/CUDA source string, ordered by line."""
    text = splice(text)
    found = (rule_findings(text, source) + include_findings(text, source) + asm_findings(text, source)
             + hiding_findings(text, source))
    return sorted(found, key=lambda f: (f.line, f.code))


def global_functions(text: str) -> tuple[str, ...]:
    """The ``__global__`` functions a source defines (its own kernels), in order, without repeats."""
    return tuple(dict.fromkeys(_GLOBAL.findall(blank(text))))
