"""Map a failure in the candidate to a `Status`, and trim its error text to the useful part.

The candidate reports the stage that failed (``import``, ``construct``, ``signature``, ``forward``,
``timing``), the exception's type name and its traceback. The orchestrator classifies; the
candidate's own claim about the status is never trusted. Runs in the orchestrator: stdlib only.
"""

from __future__ import annotations

import io
import re
import tokenize

from drkernel.gym.result import Status

MAX_LINES = 30
MAX_CHARS = 2000

_CRASH_MARKERS = (
    "illegal memory access", "illegal instruction", "misaligned address", "unspecified launch failure",
    "device-side assert", "an illegal", "cudaErrorLaunchFailure", "CUDA_ERROR_ILLEGAL_ADDRESS",
    "hardware exception", "uncorrectable ECC",
)
_OOM_MARKERS = ("OutOfMemoryError", "out of memory", "CUDA_ERROR_OUT_OF_MEMORY", "MemoryError")
_COMPILE_TYPES = ("CompilationError", "CompileTimeAssertionFailure", "UnsupportedLanguageConstruct",
                  "PTXASError", "MLIRCompilationError")
_INTERPRETER_ONLY = ("not supported in interpreter mode", "is not supported by the Triton interpreter",
                     # compiled Triton hands a kernel a dtype argument as a constexpr (its `.value` the
                     # dtype); the interpreter hands over the bare dtype (FlagGems' `dtype.value`)
                     "'dtype' object has no attribute 'value'")
# A solution that uses these and then fails under the interpreter is not blamed for it.
_GPU_ONLY_SOURCE = ("libdevice", "tl.extra.cuda", "language.extra.cuda", "inline_asm_elementwise")
_DOT_SIZE = "tl.dot needs every dimension >= 16 on GPU"
# Lines of our own harness, dropped from tails shown to humans and models.
_CARETS = re.compile(r"^\s*[\^~]+\s*$")
_HARNESS = re.compile(r'File ".*?/drkernel/gym/|File ".*?/(triton|torch)/.*?(runtime/interpreter|jit|autotuner|'
                      r'nn/modules/module)\.py"')


def trim_tail(text: str, solution_path: str | None = None) -> str:
    """Last ``MAX_LINES`` useful lines (at most ``MAX_CHARS``), harness frames stripped.

    A traceback frame of our harness (or of Triton's and torch's dispatch plumbing) is dropped
    with its source lines; caret-only marker lines are dropped everywhere. The solution's temp
    path is shown as ``solution.py``.
    """
    kept: list[str] = []
    in_harness_frame = False
    for line in text.rstrip().splitlines():
        if _CARETS.match(line):
            continue
        if line.lstrip().startswith("File "):
            in_harness_frame = bool(_HARNESS.search(line))
            if in_harness_frame:
                continue
        elif in_harness_frame and line.startswith("    "):
            continue
        else:
            in_harness_frame = False
        kept.append(line)
    out = "\n".join(kept[-MAX_LINES:])
    if solution_path:
        out = out.replace(solution_path, "solution.py")
    if len(out) > MAX_CHARS:
        out = "..." + out[-(MAX_CHARS - 3):]
    return out


def _raised_in_triton_language(traceback: str) -> bool:
    """Whether the innermost frame of the first exception is Triton's language layer (where the
    interpreter runs the checks that the compiler runs on GPU)."""
    first = traceback.split("The above exception was the direct cause")[0]
    frames = [line for line in first.splitlines() if line.lstrip().startswith("File ")]
    return bool(frames) and "/triton/language/" in frames[-1]


_KERNEL_BODY_ERRORS = ("AttributeError", "NameError", "UnboundLocalError", "TypeError")
_INTERPRETER_FRAME = "/triton/runtime/interpreter.py"


def _raised_in_kernel_body(traceback: str) -> bool:
    """Whether the first exception is a name or type error raised by the solution's own lines inside
    a kernel run by the Triton interpreter (``tl.gelu``, an undefined name, a wrong helper call).

    On a GPU the compiler reads the kernel's source and rejects these as a ``CompilationError``; the
    interpreter runs the body as Python, so they arrive as an ``InterpreterError`` whose cause was
    raised in solution.py below the interpreter's frame. An error raised inside Triton or torch is not
    the body's own and is left to the other rules.
    """
    first = traceback.split("The above exception was the direct cause")[0]
    lines = [line for line in first.strip().splitlines() if line.strip()]
    frames = [line for line in lines if line.lstrip().startswith("File ")]
    if not lines or not frames or not any(_INTERPRETER_FRAME in f for f in frames):
        return False
    innermost = frames[-1]
    own = "site-packages" not in innermost and "/triton/" not in innermost and "/torch/" not in innermost
    return own and lines[-1].split(":", 1)[0].rsplit(".", 1)[-1] in _KERNEL_BODY_ERRORS


def _code_of(source: str) -> str:
    """The source's names and operators, without comments or strings (a comment that mentions
    ``libdevice`` makes no kernel GPU-only); the source itself where it does not tokenize."""
    try:
        out, last = [], None
        for t in tokenize.generate_tokens(io.StringIO(source).readline):
            if t.type in (tokenize.NAME, tokenize.OP):
                out.append((" " if t.type == last == tokenize.NAME else "") + t.string)
                last = t.type
        return "".join(out)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source


def classify_error(stage: str, exc_type: str, message: str, traceback: str, *, cpu_mode: bool,
                   source: str = "") -> Status:
    """Status for an exception the candidate reported from ``stage`` (``source``: the solution's)."""
    text = f"{exc_type}: {message}\n{traceback}"
    if stage == "syntax" or exc_type in ("SyntaxError", "IndentationError", "TabError"):
        return Status.SYNTAX_ERROR
    if stage == "no_modelnew":
        return Status.NO_MODELNEW
    if stage == "signature":
        return Status.SIGNATURE_MISMATCH
    if stage == "output":
        return Status.INCORRECT
    if any(m in text for m in _OOM_MARKERS):
        return Status.OUT_OF_MEMORY
    if any(m in text for m in _CRASH_MARKERS):
        return Status.CRASHED
    if cpu_mode and stage != "import" and (any(m in text for m in _INTERPRETER_ONLY)
                                           or any(m in _code_of(source) for m in _GPU_ONLY_SOURCE)):
        return Status.UNSUPPORTED_ON_CPU
    if _DOT_SIZE in text or (cpu_mode and stage == "forward" and (_raised_in_triton_language(traceback)
                                                                  or _raised_in_kernel_body(traceback))):
        return Status.COMPILE_ERROR
    if any(t in exc_type for t in _COMPILE_TYPES) or any(f"{t}:" in text for t in _COMPILE_TYPES):
        return Status.COMPILE_ERROR
    if stage == "import":
        return Status.IMPORT_ERROR
    return Status.RUNTIME_ERROR


SIGSYS = 31
"""Linux's SIGSYS (x86_64 and aarch64): what seccomp's kill action leaves as the exit status."""


def killed_by_seccomp(returncode: int | None) -> bool:
    """Whether the candidate died by ``SIGSYS``, the kernel's refusal of a forbidden system call."""
    return returncode == -SIGSYS


def classify_exit(returncode: int | None, log_tail: str) -> tuple[Status, str]:
    """Status and message for a candidate that died without reporting an error."""
    if any(m in log_tail for m in _OOM_MARKERS):
        return Status.OUT_OF_MEMORY, "the candidate ran out of memory"
    if killed_by_seccomp(returncode):
        return Status.CRASHED, "the kernel killed the candidate (SIGSYS) for a forbidden system call"
    if returncode is not None and returncode < 0:
        import signal

        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return Status.CRASHED, f"the candidate process was killed by {name}"
    return Status.CRASHED, f"the candidate process exited with code {returncode} before finishing"
