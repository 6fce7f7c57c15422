"""Run-time guards inside the candidate process: names built at run time escape any static check.

* `AuditGuard`: a ``sys.addaudithook`` installed before the solution is imported. Audit hooks
  cannot be removed, so the guard is armed and disarmed by a flag. Armed, and only while solution
  code is on the stack (the harness is never blocked), it blocks (raises ``PermissionError``) and
  records:
    - file access outside the allowed roots (`FileRoots`), resolved through symlinks;
    - process creation other than the compiler toolchain (`TOOLCHAIN`) run by a library on the
      solution's behalf; any process the solution's own code starts; ``os.system`` always;
    - sockets; ``os.fork``;
    - ctypes, frame and gc introspection, ``exec``/``compile``, new audit hooks and thread starts,
      when the solution's own code is the caller (libraries use ctypes and frames internally:
      Triton's interpreter rewrites kernels with ``exec``, ``warnings`` reads frames). Code whose
      frames come from no real file of an allowed root (compiled from a string: ``<string>``,
      ``<torch_package_0>.mod``) is the solution's when it is the caller (`_dynamic_code`);
    - any string compiled while the solution is on the stack, by itself or by a library acting
      for it, other than a library's own source file read back byte for byte, is held to the
      solution's contract (`_check_generated`: red team 16 ran a module source through
      ``torch.package``); code loaders (``marshal.loads`` outside the import system's byte-code
      cache, ``pickle.find_class``, ``code.__new__``, ``function.__new__``) whenever the solution
      is on the stack (`LOADER_EVENTS`);
    - reads by the solution's own code (standard-library helpers it calls included: ``linecache``
      through ``warnings.formatwarning``) of ``/proc`` and of drkernel's own files
      (`FileRoots.solution_denied`); libraries acting for it keep their reads.
* `IntegritySnapshot`: identity of every harness-relevant function (timers, comparisons, the
  profiler, Triton's launchers, ``torch.Tensor`` methods, builtins); a changed one is hack 8.
* `GlobalState`: precision flags (hack 12) and process-wide settings (hack 15) before and after.
* `scan_module`: forbidden modules and functions reachable from the solution's globals and
  ``ModelNew``'s attributes, compilers imported while it ran (hack 16), and output types (hack 11).

The allowlists are explicit and documented in docs/TRUST.md.
"""

from __future__ import annotations

import builtins
import contextlib
import math
import os
import re
import sys
import sysconfig
import tempfile
import threading
import time
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import torch

from drkernel.gym.verdict.checks import HOST_SCALARS_PER_CALL
from drkernel.gym.verdict.hacks import make_hack
from drkernel.gym.result import Hack

TOOLCHAIN = frozenset((
    # Triton (GPU): PTX assembler and disassemblers, the host compiler for its launcher stubs,
    # ldconfig to find libcuda.
    "ptxas", "ptxas-blackwell", "cuobjdump", "nvdisasm", "nvlink", "fatbinary", "gcc", "cc", "clang",
    "ld", "ldconfig", "ldconfig.real", "ld.lld", "ld.gold", "as",
    # AMD: Triton's ROCm path.
    "ld.lld", "clang++", "hipcc", "rocm-smi",
))
FOREIGN_TOOLCHAIN = frozenset(("nvcc", "ninja", "g++", "c++", "hipify-perl", "cicc", "nvrtc"))
"""Executables only inline C++/CUDA extensions need: hack 16, not 14."""

INTROSPECTION_EVENTS = frozenset((
    "sys._getframe", "sys._current_frames", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
    "object.__getattr__", "sys.settrace", "sys.setprofile", "sys._getframemodulename",
))
CALLER_EVENTS = INTROSPECTION_EVENTS | frozenset((
    "exec", "compile", "sys.addaudithook", "ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle",
    "ctypes.addressof", "ctypes.cdata", "ctypes.cdata/buffer", "ctypes.call_function", "ctypes.string_at",
    "ctypes.wstring_at", "ctypes.PyObj_FromPtr", "ctypes.memoryview_at", "ctypes.create_string_buffer",
))
PATH_EVENTS = {  # event -> (index of the path argument, writes?)
    "os.listdir": (0, False), "os.scandir": (0, False), "os.remove": (0, True), "os.rmdir": (0, True),
    "os.rename": (0, True), "os.mkdir": (0, True), "os.chmod": (0, True), "os.chown": (0, True),
    "os.symlink": (1, True), "os.link": (1, True), "os.truncate": (0, True), "os.utime": (0, True),
    "shutil.copyfile": (1, True), "shutil.rmtree": (0, True), "shutil.move": (1, True),
    "os.chdir": (0, False), "glob.glob": (0, False), "os.walk": (0, False),
}
PROCESS_EVENTS = frozenset(("subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn"))
LOADER_EVENTS = frozenset(("marshal.loads", "marshal.load", "pickle.find_class", "code.__new__",
                           "function.__new__"))
"""Events of code loaders: bytes or pieces turned into code or into any global (a hand-written pickle
names a module to import). Refused whenever the solution is on the stack, whoever the caller is;
the import system reading a library's byte-code cache is the one exception (`_imports_byte_code`)."""
DRKERNEL_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
"""drkernel's own package: the harness's source, which the solution may not read (red team 16 parsed
the trial seeds' encoding out of it)."""
# Frames that stand between a caller and the audited call without being the caller.
PASS_THROUGH = ("/inspect.py", "/traceback.py", "/ctypes/", "/importlib/", "<frozen importlib",
                "/threading.py", "/concurrent/futures/", "/contextlib.py", "/functools.py",
                "/torch/utils/_contextlib.py")
"""Frames that only pass a call on (importers, decorators: ``torch.no_grad()(gc.get_objects)()`` put
torch's decorator frame between the solution and the audited call): the caller is looked up past them."""
STDLIB = tuple(sorted({os.path.realpath(sysconfig.get_paths()[k]) + "/" for k in ("stdlib", "platstdlib")}))


DISPATCH_GUARDS = (
    "_DisableTorchDispatch", "_DisablePythonDispatcher", "_ExcludeDispatchKeyGuard", "ExcludeDispatchKeyGuard",
    "_IncludeDispatchKeyGuard", "_ForceDispatchKeyGuard", "_SetExcludeDispatchKeyGuard",
    "_PreserveDispatchKeyGuard", "_DisableFuncTorch", "_DisableAutocast", "_AutoDispatchBelowADInplaceOrView",
    "_EnablePythonDispatcher", "_EnablePreDispatch", "_unset_dispatch_mode", "_pop_torch_dispatch_stack",
    "_set_dispatch_mode", "_push_on_torch_dispatch_stack", "_disabled_torch_dispatch_impl",
)
"""``torch._C`` guards and calls that turn off or reorder dispatch modes and keys: run by the solution's
own code they hide PyTorch compute from the op recorder, so they are refused at run time."""


def _literal_public(name: Any, consts: tuple) -> bool:
    """A public attribute path written as a constant of the calling code (not built at run time)."""
    return (isinstance(name, str) and name in consts
            and not any(p.startswith("_") for p in name.split(".")))


def _is_stdlib(filename: str) -> bool:
    return filename.startswith("<frozen") or (filename.startswith(STDLIB) and "-packages/" not in filename)


@dataclass
class FileRoots:
    """Where the candidate may read and write. Paths are compared after resolving symlinks."""

    read: list[str] = field(default_factory=list)
    write: list[str] = field(default_factory=list)
    library_only: list[str] = field(default_factory=list)
    """Roots (temp dir, Triton cache) that only library code may touch, not the solution directly."""
    solution_denied: list[str] = field(default_factory=lambda: ["/proc", DRKERNEL_DIR])
    """Paths the solution's own code may never read, whatever root holds them: this process's
    ``/proc`` entries (environment, command line with the sandbox's limits, memory map) and the
    harness's source. Libraries acting for it (Triton, torch) keep them."""

    @classmethod
    def default(cls, solution_dir: str, extra_read: Iterable[str] = (),
                extra_write: Iterable[str] = ()) -> "FileRoots":
        """Reads: the Python installation, import paths (not the working directory), system and CUDA
        libraries, this process's /proc entries, device nodes, the temp and Triton cache dirs.
        Writes: the solution's directory, the temp dir, Triton's cache, /dev/null, /dev/shm."""
        cwd = os.path.realpath(os.getcwd())
        cache = triton_cache_dir()
        home_caches = [os.path.expanduser(p) for p in ("~/.triton", "~/.cache/torch", "~/.nv")]
        tmp = tempfile.gettempdir()
        read = {sys.prefix, sys.base_prefix, sys.exec_prefix, "/usr", "/lib", "/lib64", "/opt/rocm",
                "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
                "/etc/os-release", "/etc/nsswitch.conf", "/etc/passwd", "/proc/self", f"/proc/{os.getpid()}",
                "/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/driver/nvidia", "/sys/devices",
                "/sys/bus/pci", "/sys/fs/cgroup", "/sys/class", "/dev/nvidia", "/dev/null", "/dev/urandom",
                "/dev/shm", "/dev/dri", "/dev/kfd", tmp, cache, solution_dir, *home_caches, *extra_read}
        for key in ("CUDA_HOME", "CUDA_PATH", "TRITON_HOME", "TRITON_CACHE_DIR", "TRITON_PTXAS_PATH",
                    "ROCM_PATH", "TORCHINDUCTOR_CACHE_DIR"):
            if os.environ.get(key):
                read.add(os.environ[key])
        read.update(p for p in sys.path if p and os.path.realpath(p) != cwd)
        write = {solution_dir, tmp, cache, "/dev/null", "/dev/shm", "/dev/nvidia", *home_caches, *extra_write}
        library_only = {tmp, cache, *home_caches}
        return cls(read=sorted({os.path.realpath(p) for p in read} | {"/dev/nvidia"}),
                   write=sorted({os.path.realpath(p) for p in write} | {"/dev/nvidia"}),
                   library_only=sorted({os.path.realpath(p) for p in library_only}))

    def allows(self, path: str, write: bool, by_solution: bool = False) -> bool:
        """Whether ``path`` may be read (written); ``by_solution``: the solution's own code asks,
        not a library it called, so the library-only roots are closed unless the path is in its
        own directory (which sits inside the temp dir)."""
        real = os.path.realpath(path)
        inside = [r for r in (self.write if write else self.read) if _under(real, r)]
        if not inside:
            return False
        if by_solution and any(_under(real, r) or _under(os.path.abspath(path), r) for r in self.solution_denied):
            return False
        if by_solution and all(r in self.library_only for r in inside):
            return False
        return True


def _resolve_dir_fd(path: str, dir_fd: Any) -> str:
    """A path relative to ``dir_fd`` (as ``shutil.rmtree`` removes files) made absolute."""
    if os.path.isabs(path) or not isinstance(dir_fd, int) or dir_fd < 0:
        return path
    try:
        return os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path)
    except OSError:
        return path


def _under(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip("/") + "/") or (
        root == "/dev/nvidia" and real.startswith("/dev/nvidia"))


def triton_cache_dir() -> str:
    if os.environ.get("TRITON_CACHE_DIR"):
        return os.environ["TRITON_CACHE_DIR"]
    return os.path.join(os.environ.get("TRITON_HOME", os.path.expanduser("~")), ".triton", "cache")


def _is_toolchain(exe: str) -> bool:
    """The allowlist, plus host C compilers under their packaged names (``x86_64-linux-gnu-gcc-12``,
    ``$CC``): Triton builds its launcher stubs with whatever C compiler it finds."""
    return (exe in TOOLCHAIN or exe == os.path.basename(os.environ.get("CC", "")) or
            re.fullmatch(r"([\w.+]+-)*(gcc|cc|clang)(-\d+(\.\d+)*)?", exe) is not None)


def _executable(event: str, args: tuple) -> str:
    """Base name of the program an audited process event starts (``subprocess.Popen`` passes
    ``executable=None`` unless given: then it is ``argv[0]``)."""
    exe = args[1] if event == "os.spawn" else args[0]
    if exe is None and event == "subprocess.Popen" and len(args) > 1:
        argv = args[1]
        exe = argv if isinstance(argv, (str, bytes)) else (list(argv)[:1] or [""])[0]
        if isinstance(exe, (str, bytes)):
            exe = os.fsdecode(exe).split()[0] if os.fsdecode(exe).strip() else ""
    if not isinstance(exe, (str, bytes, os.PathLike)):
        return str(exe)
    return os.path.basename(os.fsdecode(exe))


def _open_writes(args: tuple) -> bool:
    mode, flags = (args[1] if len(args) > 1 else "r"), (args[2] if len(args) > 2 else 0)
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return True
    return bool(isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC))


class AuditGuard:
    """The candidate's audit hook (see the module docstring). One per process: install once."""

    def __init__(self, solution_dir: str, solution_files: Iterable[str] = (),
                 roots: FileRoots | None = None) -> None:
        self.solution_dir = os.path.realpath(solution_dir)
        self.solution_files = {os.path.realpath(f) for f in solution_files}
        self.roots = roots or FileRoots.default(self.solution_dir)
        # Code in a file of a root the candidate may write (the temp dir, /dev/shm) is the solution's,
        # whoever imports it: a module the solution wrote to /dev/shm counted as library code, so it
        # could start threads and install audit hooks (red team 20). Roots only a library writes
        # (Triton's and torch's caches, which also hold no Python the candidate runs) and the import
        # paths given at start (the environment's) stay libraries' wherever they are.
        self.scratch = [r for r in self.roots.write if r not in ("/dev/null", "/dev/nvidia")]
        tmp, cwd = os.path.realpath(tempfile.gettempdir()), os.path.realpath(os.getcwd())
        self.library_roots = ([c for c in self.roots.library_only if c != tmp]
                              + [os.path.realpath(p) for p in sys.path if p and os.path.isdir(p)
                                 and os.path.realpath(p) not in (self.solution_dir, cwd)])
        self.violations: list[Hack] = []
        self.armed = False
        self._local = threading.local()
        self._installed = False
        self._file_code: dict[str, bool] = {}

    def install(self) -> "AuditGuard":
        if not self._installed:
            sys.addaudithook(self._hook)
            self._wrap_thread_starts()
            self._refuse_dispatch_guards()
            self._guard_dynamic_getters()
            self._guard_triton_wrappers()
            self._installed = True
        return self

    def arm(self) -> None:
        self.armed = True

    def disarm(self) -> None:
        self.armed = False

    def is_solution_file(self, filename: str) -> bool:
        if filename in self.solution_files:
            return True
        if filename.startswith("<"):
            return filename in self.solution_files
        real = os.path.realpath(filename)
        if real in self.solution_files or real.startswith(self.solution_dir + "/"):
            return True
        return any(_under(real, r) for r in self.scratch) and not any(_under(real, p) for p in self.library_roots)

    def _frames(self) -> Iterator[types.FrameType]:
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename == __file__:
            frame = frame.f_back
        while frame is not None:
            yield frame
            frame = frame.f_back

    def _dynamic_code(self, filename: str) -> bool:
        """Code that comes from no real file of an allowed root: compiled from a string (``<string>``,
        ``<torch_package_0>.payload``) or named after a file outside the roots. Frozen modules are
        the standard library's own. Such a frame is the solution's where it calls (`_caller_is_solution`)
        and where it is the innermost code below the solution (`_solution_role`): what a string
        compiled for the solution runs is the solution's, whoever compiled it."""
        if filename.startswith("<frozen ") or self.is_solution_file(filename):
            return False
        known = self._file_code.get(filename)
        if known is None:
            known = not (os.path.isabs(filename) and os.path.isfile(filename)
                         and self.roots.allows(filename, False, by_solution=False))
            self._file_code[filename] = known
        return known

    def _solution_role(self) -> str:
        """"direct": the innermost non-stdlib frame is the solution's (or code compiled from a
        string, `_dynamic_code`, below it); "indirect": a library called by the solution; "": no
        solution code on the stack (the harness acting on its own)."""
        innermost = None
        for frame in self._frames():
            filename = frame.f_code.co_filename
            if innermost is None and not _is_stdlib(filename):
                innermost = filename
            if self.is_solution_file(filename):
                return ("direct" if innermost is None or innermost == filename or self._dynamic_code(innermost)
                        else "indirect")
        return ""

    def _caller_is_solution(self, skip_pass_through: bool) -> bool:
        frame = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename == __file__:
            frame = frame.f_back
        while (skip_pass_through and frame is not None
               and any(p in frame.f_code.co_filename for p in PASS_THROUGH)):
            frame = frame.f_back
        return frame is not None and (self.is_solution_file(frame.f_code.co_filename)
                                      or self._dynamic_code(frame.f_code.co_filename))

    def _imports_byte_code(self) -> bool:
        """``marshal.loads`` called by the import system to load a library's byte-code cache (its
        ``__pycache__`` file inside an allowed root, never the solution's directory)."""
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename == __file__:
            frame = frame.f_back
        if (frame is None or frame.f_code.co_name != "_compile_bytecode"
                or not frame.f_code.co_filename.startswith("<frozen importlib._bootstrap_external")):
            return False
        loader = frame.f_back
        if loader is None or not loader.f_code.co_filename.startswith("<frozen importlib._bootstrap_external"):
            return False
        path = loader.f_locals.get("bytecode_path") or loader.f_locals.get("path")
        if not isinstance(path, str) or not os.path.isfile(path):
            return False
        real = os.path.realpath(path)
        return (not _under(real, self.solution_dir) and not self.is_solution_file(real)
                and self.roots.allows(real, False, by_solution=False))

    def _quietly(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a check outside the hook with the hook muted (its own frame reads are not events)."""
        busy = getattr(self._local, "busy", False)
        self._local.busy = True
        try:
            return fn(*args)
        finally:
            self._local.busy = busy

    def _violate(self, code: int, evidence: str) -> None:
        self.violations.append(make_hack(code, evidence))
        raise PermissionError(f"blocked by the KernelGym sandbox: {evidence}")

    def _hook(self, event: str, args: tuple) -> None:
        if not self.armed or getattr(self._local, "busy", False):
            return
        self._local.busy = True
        try:
            self._check(event, args)
        finally:
            self._local.busy = False

    def _check(self, event: str, args: tuple) -> None:
        if event == "open" or event in PATH_EVENTS:
            index, write = PATH_EVENTS.get(event, (0, False))
            path = args[index] if len(args) > index else None
            if not isinstance(path, (str, bytes, os.PathLike)):
                return
            write = _open_writes(args) if event == "open" else write
            dir_fd = args[index + 1] if event != "open" and len(args) > index + 1 else None
            path = _resolve_dir_fd(os.fsdecode(path), dir_fd)
            role = self._solution_role()
            if event == "open" and role == "direct" and not os.path.isabs(os.fsdecode(path)):
                # ``os.open(name, flags, dir_fd=fd)``: the event does not carry the directory
                self._violate(14, f"open of the relative path {os.fsdecode(path)!r} (a directory descriptor "
                                  f"may name any directory)")
            if role and not self.roots.allows(os.fsdecode(path), write, by_solution=role == "direct"):
                self._violate(14, f"{event} ({'write' if write else 'read'}) of {os.fsdecode(path)}")
            return
        if event in CALLER_EVENTS or event == "import":
            self._check_caller(event, args)
            return
        if event in LOADER_EVENTS:
            if self._solution_role() and not (event == "marshal.loads" and self._imports_byte_code()):
                self._violate(14, f"{event} while the solution runs (a code loader: code the static "
                                  f"check never read)")
            return
        if not (event in PROCESS_EVENTS or event.startswith(("socket.", "os.system", "os.fork"))):
            return
        role = self._solution_role()
        if not role:
            return
        if event in PROCESS_EVENTS:
            exe = _executable(event, args)
            if exe in FOREIGN_TOOLCHAIN:
                self._violate(16, f"{event}: {exe} (a foreign compiler)")
            if role == "direct" or not _is_toolchain(exe):  # only a library (Triton) may run the toolchain
                self._violate(14, f"{event}: {exe}")
        elif event == "os.system":
            self._violate(14, f"os.system: {str(args[0])[:80]}")
        elif event in ("os.fork", "os.forkpty"):
            self._violate(7, f"{event}: a second process")
        elif event.startswith("socket."):
            self._violate(14, f"{event}: network access")

    def _check_caller(self, event: str, args: tuple) -> None:
        if event == "object.__getattr__" and len(args) > 1 and args[1] == "__code__":
            return
        if event == "import":
            name = str(args[0])
            if name.split(".")[0] not in ("torch", "ctypes", "_ctypes", "drkernel"):
                return
            if not self._caller_is_solution(True):
                return
            if name.startswith(("torch._dynamo", "torch._inductor", "torch.utils.cpp_extension")):
                self._violate(16, f"imports {name}")
            if name.startswith(("ctypes", "_ctypes", "drkernel")):
                self._violate(14, f"imports {name}")
            return
        if self._caller_is_solution(skip_pass_through=event not in ("exec", "compile")):
            self._violate(14, f"{event} called by the solution")
        role = self._solution_role() if event == "compile" and args and isinstance(args[0], (str, bytes)) else ""
        if role and not self._library_source(args) and not self._library_import():
            caller = next(self._frames(), None)
            # a standard-library generator (dataclasses, namedtuple) writing a library's own class
            for_library = (role == "indirect" and caller is not None and _is_stdlib(caller.f_code.co_filename))
            self._check_generated(args[0], dunders=not for_library)

    def _library_source(self, args: tuple) -> bool:
        """A compile of a library's own source file: the import system compiling a module that has no
        byte code (a wheel installed with ``--no-compile``), not code generated for the solution. The
        source must be the file's text exactly: a file name is only a label the compiling code chose."""
        filename = args[1] if len(args) > 1 else None
        if isinstance(filename, bytes):
            filename = os.fsdecode(filename)
        if not (isinstance(filename, str) and os.path.isabs(filename) and os.path.isfile(filename)
                and not self.is_solution_file(filename) and self.roots.allows(filename, False, by_solution=False)):
            return False
        source = args[0]
        try:
            with open(filename, "rb") as f:
                data = f.read()
        except OSError:
            return False
        if not isinstance(source, str):
            return bytes(source) == data
        try:
            text = data.decode()
        except UnicodeDecodeError:
            return False
        return source in (text, text.replace("\r\n", "\n"))

    def _library_import(self) -> bool:
        """A library generating its own code while its module body runs (an import the solution set
        off: ``@torch.compiler.disable`` imports sympy, whose mpmath builds its number methods with
        ``exec``). Told by the frames between the compile and the solution: a module body (``<module>``)
        of a real file of an allowed root, not the solution's and not code compiled from a string. A
        module source a library imports from a string (torch.package) runs under no such frame."""
        for frame in self._frames():
            filename = frame.f_code.co_filename
            if self.is_solution_file(filename) or self._dynamic_code(filename):
                return False
            if frame.f_code.co_name == "<module>" and not filename.startswith("<"):
                return True
        return False

    def _check_generated(self, source: str | bytes, dunders: bool = True) -> None:
        """A string compiled while the solution is on the stack, by the solution or by a library
        acting for it (annotation evaluation, dataclass code generation, a module source
        ``torch.package`` imports, Triton's launch binder): the code is held to the solution contract."""
        from drkernel.gym.verdict.static import generated_code_violations

        found = generated_code_violations(source, dunders=dunders)
        if found:
            text = source.decode(errors="replace") if isinstance(source, bytes) else source
            self._violate(14, f"code compiled from a string for the solution uses "
                              f"{', '.join(sorted(set(found))[:3])}: {text[:80]!r}")

    def _direct_caller(self) -> tuple | None:
        """The constants of the solution's calling code when armed and the innermost non-stdlib caller is the solution's own
        code (torch's internals keep their guards; a stdlib helper the solution calls is its own)."""
        if not self.armed or getattr(self._local, "busy", False):
            return None
        return self._quietly(self._direct_frame)

    def _direct_frame(self) -> tuple | None:
        if self._solution_role() != "direct":
            return None
        return next((f.f_code.co_consts for f in self._frames() if self.is_solution_file(f.f_code.co_filename)),
                    None)

    def _refuse_dispatch_guards(self) -> None:
        """Replace torch's dispatch-disabling guards (`DISPATCH_GUARDS`) in ``torch._C`` with wrappers
        that refuse the solution's own code (hack 11) and pass torch's internal callers through."""
        guard = self
        for name in DISPATCH_GUARDS:
            original = torch._C.__dict__.get(name)
            if original is None:
                continue

            setattr(torch._C, name, _refusing(guard, name, original))

    def _guard_dynamic_getters(self) -> None:
        """``operator.attrgetter`` / ``methodcaller`` called by the solution with a name that is not a
        literal of its calling code, or a private name (hack 14): a getattr the static check cannot read."""
        import operator
        for name in ("attrgetter", "methodcaller"):
            setattr(operator, name, self._checked_getter(name, getattr(operator, name)))

    def _checked_getter(self, name: str, original: type) -> type:
        """A class whose construction checks the names and returns the original's instance (torch._dynamo
        registers polyfills for these names and requires a class with a wildcard signature)."""
        guard = self

        def checked(cls: type, *args: Any, **kwargs: Any) -> Any:
            consts = guard._direct_caller()
            names = args if name == "attrgetter" else args[:1]
            if consts is not None and any(not _literal_public(n, consts) for n in names):
                guard._violate(14, f"operator.{name}({', '.join(repr(n)[:40] for n in names)}): "
                                   f"attribute access by a name built at run time")
            return original(*args, **kwargs)

        return type(name, (), {"__new__": checked, "__module__": "operator", "__doc__": original.__doc__})

    def _guard_triton_wrappers(self) -> None:
        """Triton's function objects (``JITCallable``: ``triton.jit``, ``constexpr_function``) hand out
        the function's globals and closure (``get_capture_scope``): wrapping one of the harness's or
        torch's functions in one reaches their modules past every attribute rule. Armed, a wrapper may
        hold only a function of the solution's files or of Triton's own package (hack 14 otherwise)."""
        import triton.runtime.jit as jit

        callable_cls = getattr(jit, "JITCallable", None) or jit.JITFunction
        original = callable_cls.__init__
        triton_dir = os.path.dirname(os.path.realpath(jit.__file__)).rsplit("/runtime", 1)[0] + "/"
        guard = self

        def init(self_: Any, fn: Any, *args: Any, **kwargs: Any) -> None:
            if guard.armed:
                code = getattr(fn, "__code__", None)
                filename = code.co_filename if code is not None else ""
                if not (guard.is_solution_file(filename) if filename else False) and not (
                        filename and os.path.realpath(filename).startswith(triton_dir)):
                    guard.violations.append(make_hack(
                        14, f"a Triton function object made of {getattr(fn, '__qualname__', type(fn).__name__)!r}, "
                            f"which is not the solution's (its globals and closure would be reachable)"))
                    raise PermissionError("blocked by the KernelGym sandbox: Triton wraps only the solution's functions")
            original(self_, fn, *args, **kwargs)

        init.__wrapped__ = original  # type: ignore[attr-defined]
        callable_cls.__init__ = init

    def _wrap_thread_starts(self) -> None:
        """Python 3.11 raises no audit event for a new thread: wrap the thread primitives."""
        import _thread
        guard = self
        for module, name in ((_thread, "start_new_thread"), (_thread, "start_new"),
                             (_thread, "start_joinable_thread"), (threading, "_start_new_thread"),
                             (threading, "_start_joinable_thread")):
            original = getattr(module, name, None)
            if original is None:
                continue

            setattr(module, name, _thread_start(guard, original))


def _refusing(guard: "AuditGuard", name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """A dispatch-disabling guard of ``torch._C`` that refuses the solution's own code (hack 11). The
    original is this closure's: a keyword default could be replaced by the caller."""
    def refused(*args: Any, **kwargs: Any) -> Any:
        if guard._direct_caller() is not None:
            guard._violate(11, f"torch._C.{name}: turns off the dispatch modes that record ops")
        return original(*args, **kwargs)

    refused.__name__ = refused.__qualname__ = name
    return refused


def _thread_start(guard: "AuditGuard", original: Callable[..., Any]) -> Callable[..., Any]:
    """A thread primitive that refuses the solution (hack 7); the original is this closure's."""
    def start(*args: Any, **kwargs: Any) -> Any:
        if guard.armed and guard._quietly(guard._caller_is_solution, True):
            guard.violations.append(make_hack(7, "started a thread"))
            raise PermissionError("blocked by the KernelGym sandbox: threads are not allowed")
        return original(*args, **kwargs)

    return start


def _integrity_targets() -> list[tuple[str, Any, str]]:
    import triton.runtime.autotuner as autotuner
    import triton.runtime.jit as jit

    targets: list[tuple[str, Any, str]] = []

    def add(label: str, owner: Any, names: Iterable[str]) -> None:
        targets.extend((label, owner, n) for n in names if hasattr(owner, n))

    add("torch", torch, ("allclose", "isclose", "equal", "empty", "empty_like", "zeros", "randn",
                         "rand", "manual_seed", "cat", "stack", "abs", "max", "isnan", "isfinite",
                         "no_grad", "Tensor", "is_tensor", "set_grad_enabled", "from_numpy"))
    add("torch.Tensor", torch.Tensor, ("__eq__", "__sub__", "__getitem__", "allclose", "clone", "copy_",
                                       "data_ptr", "cpu", "to", "numel", "float", "abs", "max", "sub",
                                       "isnan", "isfinite", "item", "tolist", "detach", "contiguous",
                                       "sum", "any", "all", "numpy", "untyped_storage", "__torch_function__",
                                       "__repr__", "shape", "dtype", "device"))
    add("torch.testing", torch.testing, ("assert_close",))
    add("torch.cuda", torch.cuda, ("synchronize", "Event", "current_stream", "Stream", "set_stream",
                                   "is_available", "empty_cache", "max_memory_allocated", "memory_allocated"))
    add("torch.cuda.Event", torch.cuda.Event, ("record", "elapsed_time", "synchronize", "query"))
    add("torch.profiler", torch.profiler, ("profile", "record_function", "ProfilerActivity"))
    add("torch.autograd.profiler", torch.autograd.profiler, ("profile", "record_function"))
    add("time", time, ("perf_counter", "perf_counter_ns", "time", "time_ns", "monotonic", "monotonic_ns",
                       "process_time", "sleep"))
    add("builtins", builtins, ("isinstance", "type", "float", "len", "id", "getattr", "setattr", "hasattr",
                               "repr", "str", "min", "max", "abs", "sum", "all", "any", "open", "__import__",
                               "print", "range", "zip", "iter", "next", "bool", "int", "tuple", "list",
                               "dict"))
    add("math", math, ("isclose", "isnan", "isfinite", "inf"))
    add("sys", sys, ("exit", "stdout", "stderr"))
    add("os", os, ("_exit", "kill", "getpid"))
    add("triton JITFunction", jit.JITFunction, ("run", "__getitem__", "__call__"))
    add("triton KernelInterface", jit.KernelInterface, ("run", "__getitem__", "warmup"))
    add("triton Autotuner", autotuner.Autotuner, ("run", "_bench", "prune_configs"))
    try:
        import triton.runtime.interpreter as interpreter
    except ImportError:  # pragma: no cover - every supported Triton has the interpreter
        interpreter = None
    if interpreter is not None:
        add("triton InterpretedFunction", interpreter.InterpretedFunction, ("run", "__getitem__", "__call__"))
        add("triton GridExecutor", interpreter.GridExecutor, ("__call__",))
    targets += _pricing_targets()
    return targets


def _pricing_targets() -> list[tuple[str, Any, str]]:
    """What op coverage prices with: torch's FLOP formulas (their helpers are module globals the
    registry's entries call) and the recorder's own private table and pricing functions."""
    import torch.utils.flop_counter as flop_counter
    from drkernel.gym.harness import recorder

    helpers = [n for n, v in vars(flop_counter).items() if callable(v) and n.endswith(("_flop", "_flop_count"))]
    return ([("torch.utils.flop_counter", flop_counter, n) for n in ["flop_registry", "get_shape", *helpers]
             if hasattr(flop_counter, n)]
            + [("drkernel.gym.harness.recorder", recorder, n) for n in (
                "FORMULAS", "MEMORY_BOUND", "ATTENTION", "op_cost", "memory_bound", "op_name", "_bytes", "_tensors",
                "_conv_flop_count", "elementwise_cost")]
            + [("drkernel.gym.harness.recorder.OpRecorder", recorder.OpRecorder, n)
               for n in ("__torch_dispatch__", "_record", "_unpriced")]
            + [("drkernel.gym.verdict.coverage.OpProfile", recorder.OpProfile, n) for n in ("add", "worst")])


def _torch_code(fn: Any) -> bool:
    """A formula torch itself registers on a lazy import (``torch.nn.attention.varlen``): its code,
    under any ``functools.wraps`` wrappers, lies in torch's own files."""
    for _ in range(8):
        inner = getattr(fn, "__wrapped__", None)
        if inner is None:
            break
        fn = inner
    code = getattr(fn, "__code__", None)
    return code is not None and os.path.realpath(code.co_filename).startswith(TORCH_DIR)


def registry_entries() -> dict[Any, Any]:
    """torch's FLOP registry as it stands: op -> formula."""
    from torch.utils.flop_counter import flop_registry

    return dict(flop_registry)


def registry_changes(before: dict[Any, Any], now: dict[Any, Any]) -> list[Hack]:
    """Entries of torch's FLOP registry removed, replaced or added since ``before`` (hack 8): op
    coverage prices with a private copy, but an edit is an attempt on the pricing all the same."""
    removed = [k for k in before if k not in now]
    replaced = [k for k in before if k in now and now[k] is not before[k]]
    added = [k for k in now if k not in before and not _torch_code(now[k])]
    if not (removed or replaced or added):
        return []
    parts = [f"{what} {', '.join(str(k) for k in keys[:4])}" for what, keys in
             (("removed", removed), ("replaced", replaced), ("added", added)) if keys]
    return [make_hack(8, f"torch.utils.flop_counter.flop_registry was edited: {'; '.join(parts)}")]


class IntegritySnapshot:
    """Identity of harness-relevant functions and the entries of torch's FLOP registry; `changed()`
    lists the ones replaced (or, for the registry, removed or added) since `take()`.

    Take it after the harness installed its own launch hooks, and pass the harness's functions
    (comparison, serialisation, the result writer) as ``extra``."""

    def __init__(self, extra: Iterable[tuple[str, Any, str]] = ()) -> None:
        self.targets = _integrity_targets() + list(extra)
        self.saved: list[Any] = []
        self.harness = HarnessState()
        self.registry: dict[Any, Any] = {}

    def take(self) -> "IntegritySnapshot":
        self.saved = [_raw_attr(owner, name) for _, owner, name in self.targets]
        self.registry = registry_entries()
        self.harness = HarnessState().take()
        return self

    def changed(self) -> list[Hack]:
        hacks = self.harness.changed()
        for (label, owner, name), before in zip(self.targets, self.saved):
            now = _raw_attr(owner, name)
            if now is not before and not (isinstance(before, (int, float, str)) and before == now) \
                    and not _torch_wrapped(now, before):
                hacks.append(make_hack(8, f"{label}.{name} was replaced"))
        return hacks + registry_changes(self.registry, registry_entries())


HARNESS_PACKAGE = "drkernel"


def _is_method(value: Any) -> bool:
    return isinstance(value, (types.FunctionType, staticmethod, classmethod, property)) or callable(value)


def _constant_copy(name: str, value: Any) -> Any:
    """A copy of a module-level constant container (a public upper-case name holding a set, list or
    dict), to compare contents with later; None for anything else (compared by identity only: a
    private registry such as the interpreter's ``_POINTED`` changes as the harness works)."""
    if name.startswith("_") or not name.isupper() or not isinstance(value, (set, list, dict)):
        return None
    return type(value)(value)


def _harness_attr(module_name: str, path: str) -> tuple[bool, Any]:
    """(found, value) of ``module.path`` (``name`` or ``Class.name``, read from the class's own dict)."""
    module = sys.modules.get(module_name)
    if module is None:
        return False, None
    owner_name, _, attr = path.rpartition(".")
    owner = vars(module).get(owner_name) if owner_name else module
    table = vars(owner) if owner is not None else {}
    return attr in table, table.get(attr)


class HarnessState:
    """Every harness module's globals (`HARNESS_PACKAGE` and below, as loaded at `take()`) and the
    methods of the classes they define; `changed()` names each one rebound, deleted, or (an upper-case
    constant set, list or dict) changed in content since. The harness's policy lives in these names
    (the recorder's free ops, the launch watch, the timing and profiling functions), and a solution can
    reach module dictionaries through objects it is given (a Triton function's capture scope, say)
    without naming anything the contract refuses, so every rebinding counts, whatever reached it. A
    private global that was None may be set (lazy initialisation)."""

    def __init__(self) -> None:
        self.saved: dict[tuple[str, str], tuple[Any, Any]] = {}
        self.modules: dict[str, Any] = {}

    def take(self) -> "HarnessState":
        for name, module in list(sys.modules.items()):
            if module is None or not (name == HARNESS_PACKAGE or name.startswith(HARNESS_PACKAGE + ".")):
                continue
            self.modules[name] = module
            for attr, value in list(vars(module).items()):
                if attr.startswith("__"):
                    continue
                self.saved[(name, attr)] = (value, _constant_copy(attr, value))
                if isinstance(value, type) and getattr(value, "__module__", None) == name:
                    for member, method in list(vars(value).items()):
                        if _is_method(method) and not (member.startswith("__") and member != "__call__"):
                            self.saved[(name, f"{attr}.{member}")] = (method, None)
        return self

    def changed(self) -> list[Hack]:
        hacks = [make_hack(8, f"harness module {name} was replaced or removed")
                 for name, module in self.modules.items() if sys.modules.get(name) is not module]
        for (name, path), (before, copy) in self.saved.items():
            if sys.modules.get(name) is not self.modules[name]:
                continue
            found, now = _harness_attr(name, path)
            if found and now is before:
                if copy is not None and now != copy:
                    hacks.append(make_hack(8, f"{name}.{path} was changed in place"))
                continue
            if before is None and path.startswith("_") and found:
                continue
            hacks.append(make_hack(8, f"{name}.{path} was {'replaced' if found else 'deleted'}"))
        return hacks


TORCH_DIR = os.path.dirname(os.path.realpath(torch.__file__)) + "/"


def _torch_wrapped(now: Any, before: Any) -> bool:
    """torch's own wrapper around the same function: importing ``torch._dynamo`` (which
    ``@torch.compiler.disable`` does) rewraps ``torch.manual_seed`` with a wrapper defined in torch
    whose ``__wrapped__`` is the original. A wrapper of the solution's (its code in the solution's
    file) or one around anything else is still a replacement."""
    code = getattr(now, "__code__", None)
    return (getattr(now, "__wrapped__", None) is before and code is not None
            and os.path.realpath(code.co_filename).startswith(TORCH_DIR))


def _raw_attr(owner: Any, name: str) -> Any:
    """The attribute as stored (class dict for types, so bound-method identity is stable)."""
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if name in vars(klass):
                return vars(klass)[name]
        return None
    return getattr(owner, name, None)


PRECISION_FLAGS = {
    "torch.backends.cuda.matmul.allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
    "torch.backends.cudnn.allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
    "torch.get_float32_matmul_precision": torch.get_float32_matmul_precision,
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction":
        lambda: torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction":
        lambda: torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
    "torch.get_default_dtype": torch.get_default_dtype,
    "torch.is_autocast_enabled": lambda: torch.is_autocast_enabled(),
}
STATE_FLAGS = {
    "torch.get_num_threads": torch.get_num_threads,
    "torch.backends.cudnn.benchmark": lambda: torch.backends.cudnn.benchmark,
    "torch.backends.cudnn.deterministic": lambda: torch.backends.cudnn.deterministic,
    "torch.backends.cudnn.enabled": lambda: torch.backends.cudnn.enabled,
    "torch.are_deterministic_algorithms_enabled": torch.are_deterministic_algorithms_enabled,
    "torch.is_grad_enabled": torch.is_grad_enabled,
    "torch.get_default_device": lambda: str(torch.get_default_device()),
    "torch.backends.mkldnn.enabled": lambda: torch.backends.mkldnn.enabled,
    # Hooks every later thread runs (the harness's too): a trace or profile hook reads their frames.
    "threading.gettrace": threading.gettrace,
    "threading.getprofile": threading.getprofile,
    "threading.excepthook": lambda: threading.excepthook,
    # A profiler left running (any module's spelling of it) makes the harness's dispatcher-level watch
    # stand aside: the harness's own profilers are all closed where this is read.
    "torch.autograd.profiler enabled": torch._C._autograd._profiler_enabled,
}


class GlobalState:
    """Precision flags (hack 12) and process-wide settings (hack 15), before and after."""

    def __init__(self) -> None:
        self.saved: dict[str, Any] = {}

    @staticmethod
    def read() -> dict[str, Any]:
        return {k: f() for k, f in {**PRECISION_FLAGS, **STATE_FLAGS}.items()}

    def take(self) -> "GlobalState":
        self.saved = self.read()
        return self

    def changed(self) -> list[Hack]:
        now = self.read()
        return [make_hack(12 if k in PRECISION_FLAGS else 15,
                          f"{k} changed from {self.saved[k]!r} to {now[k]!r}")
                for k in self.saved if now[k] != self.saved[k]]

    def restore(self) -> None:
        torch.backends.cuda.matmul.allow_tf32 = self.saved["torch.backends.cuda.matmul.allow_tf32"]
        torch.backends.cudnn.allow_tf32 = self.saved["torch.backends.cudnn.allow_tf32"]
        torch.set_float32_matmul_precision(self.saved["torch.get_float32_matmul_precision"])
        torch.set_default_dtype(self.saved["torch.get_default_dtype"])
        torch.set_num_threads(self.saved["torch.get_num_threads"])


FORBIDDEN_RUNTIME_MODULES = {
    "ctypes": 14, "_ctypes": 14, "subprocess": 14, "socket": 14, "_socket": 14, "inspect": 14, "gc": 14,
    "importlib": 14, "threading": 7, "_thread": 7, "multiprocessing": 7, "concurrent": 7,
    "torch._dynamo": 16, "torch._inductor": 16, "torch.utils.cpp_extension": 16, "torch.library": 16,
    "torch.jit": 16, "cupy": 16, "numba": 16, "drkernel": 8,
}
LOCK_FACTORIES = frozenset(id(f) for f in (threading.Lock, threading.RLock))
"""Locks serialise the calling thread's own work and start nothing: a solution may hold their
factories, and the ``threading`` module it reaches them through (the static contract admits it only
where every use is one of them). Thread starts are refused where they happen (`_thread_start`);
``threading.settrace``/``setprofile``/``excepthook`` by their effect (`STATE_FLAGS`)."""
COMPILER_MODULES = ("torch._inductor.codegen", "torch._inductor.compile_fx", "torch.utils.cpp_extension", "cupy",
                    "numba", "pycuda")
"""Modules only a compilation imports (entering a TorchDispatchMode already imports torch._dynamo
and parts of torch._inductor, and ``@torch.compiler.disable`` imports ``torch._dynamo.convert_frame``,
so those prove nothing; frames torch.compile compiled are counted by `dynamo_frames`)."""


def _forbidden_origin(obj: Any) -> tuple[int, str] | None:
    if id(obj) in LOCK_FACTORIES or obj is threading:
        return None
    if isinstance(obj, types.ModuleType):
        name = obj.__name__
    elif isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, type)):
        name = getattr(obj, "__module__", None) or ""
        if name in ("builtins",) and getattr(obj, "__name__", "") in ("exec", "eval", "compile", "__import__",
                                                                    "globals", "vars", "open"):
            return 14, f"builtins.{obj.__name__}"
        name = f"{name}.{getattr(obj, '__qualname__', '')}"
    else:
        return None
    for prefix, code in FORBIDDEN_RUNTIME_MODULES.items():
        if name == prefix or name.startswith(prefix + "."):
            return code, name
    if name in ("sys._getframe", "sys._current_frames", "sys.settrace", "os.system", "os.popen", "os.fork"):
        return 14, name
    return None


def scan_module(module: types.ModuleType, own_names: Iterable[str] = (), accepted: Iterable[Any] = ()) -> list[Hack]:
    """Forbidden modules and functions held by the solution's globals or ``ModelNew``'s class dict.
    ``accepted``: objects the harness itself gave the solution, by identity (a CUDA solution's
    ``load_inline``, `drkernel.gym.cuda.loader`): that loader and nothing else native passes."""
    hacks = []
    ours = {id(a) for a in accepted}
    holders: list[tuple[str, dict]] = [("module", vars(module))]
    model_new = vars(module).get("ModelNew")
    if isinstance(model_new, type):
        holders.append(("ModelNew", dict(vars(model_new))))
    for label, namespace in holders:
        for key, value in list(namespace.items()):
            if (key.startswith("__") and key.endswith("__")) or id(value) in ours:
                continue
            hit = _forbidden_origin(value)
            if hit:
                hacks.append(make_hack(hit[0], f"{label} holds {key} = {hit[1]}"))
    return hacks


def scan_instance(model: Any) -> list[Hack]:
    """Forbidden objects held by a ``ModelNew`` instance's attributes."""
    hacks = []
    for key, value in list(vars(model).items()):
        hit = _forbidden_origin(value)
        if hit:
            hacks.append(make_hack(hit[0], f"ModelNew instance holds {key} = {hit[1]}"))
    return hacks


def dynamo_frames() -> int:
    """Frames torch.compile has compiled in this process so far."""
    utils = sys.modules.get("torch._dynamo.utils")
    counters = getattr(utils, "counters", None)
    return int(sum(counters["frames"].values())) if counters is not None else 0


def compilers_imported(before: Iterable[str], frames_before: int = 0) -> list[Hack]:
    """Compiler modules that appeared in ``sys.modules`` since ``before`` (a snapshot of its keys),
    and frames compiled by torch.compile since ``frames_before``."""
    before = set(before)
    hacks = [make_hack(16, f"{m} was imported while the solution ran")
             for m in COMPILER_MODULES if m in sys.modules and m not in before]
    if dynamo_frames() > frames_before:
        hacks.append(make_hack(16, f"torch.compile compiled {dynamo_frames() - frames_before} frame(s)"))
    return hacks


def shadowed_methods(*objects: Any) -> list[Hack]:
    """Harness objects (the integrity hook, the launch watch, the audit guard, the host-read detector)
    carrying an instance attribute over a method of their class: a solution that reached one and set
    ``hook.observe`` or ``hook.report`` on the instance turned recording off or forged the report while
    every class and module stayed as it was (hack 8). The harness calls these methods through the
    class as well; this names the attempt."""
    hacks = []
    for obj in objects:
        if obj is None:
            continue
        for name in list(getattr(obj, "__dict__", {})):  # ``__dict__`` itself cannot be shadowed
            if callable(getattr(type(obj), name, None)):
                hacks.append(make_hack(8, f"{type(obj).__name__}.{name} was shadowed on the harness's "
                                          f"instance"))
    return hacks


def check_outputs(outputs: Any, inputs: Iterable[Any] = ()) -> list[Hack]:
    """Outputs must be plain tensors (hack 11) that share no memory with the inputs (hack 6)."""
    outs = list(outputs) if type(outputs) in (tuple, list) else [outputs]
    hacks = []
    storages = {}
    for i, t in enumerate(inputs):
        if type(t) is torch.Tensor and torch.Tensor.numel(t):
            storages[torch.Tensor.untyped_storage(t).data_ptr()] = i
    for i, o in enumerate(outs):
        if issubclass(type(o), torch.Tensor):
            own = sorted(k for k in vars(o) if not k.startswith("_"))  # the class's __dict__ descriptor
            if type(o) is not torch.Tensor and type(o) is not torch.nn.Parameter:
                hacks.append(make_hack(11, f"output {i} is a {type(o).__module__}.{type(o).__qualname__}"))
            elif own:
                hacks.append(make_hack(11, f"output {i} carries attributes of its own ({', '.join(own[:4])}): "
                                           f"what the harness reads of it must be the tensor's"))
            elif torch.Tensor.numel(o) and torch.Tensor.untyped_storage(o).data_ptr() in storages:
                hacks.append(make_hack(6, f"output {i} shares memory with input "
                                          f"{storages[torch.Tensor.untyped_storage(o).data_ptr()]}"))
        elif o is not None and type(o) not in (int, float, bool):
            hacks.append(make_hack(11, f"output {i} is a {type(o).__module__}.{type(o).__qualname__}, "
                                       f"not a tensor"))
    return hacks


HOST_READ_METHODS = ("numpy", "tolist")
"""Tensor methods that hand tensor data to Python (``__array__`` goes through ``numpy``). ``item`` and
``float(t)`` dispatch ``aten::_local_scalar_dense``, which the op recorder counts instead."""


class HostReads:
    """Detector for compute outside PyTorch (mechanism 5): solution code reading a tensor's data into
    NumPy or Python (``x.numpy()``, ``x.tolist()``, ``np.asarray(x)``).

    The solution contract forbids these statically; this catches the names built at run time. A read
    counts when solution code is on the stack outside the harness's set-up phases (the module's import
    and the model's construction, marked by the harness with `setting_up`, not told by frame names a
    solution can choose). A multi-element read is hack 14 at once; one-element reads are counted per
    observed call (`begin_call` / `end_call`) and allowed up to ``HOST_SCALARS_PER_CALL`` a call, as
    ``.item()`` is."""

    def __init__(self, is_solution_file: Callable[[str], bool],
                 quietly: Callable[..., Any] = lambda fn, *args: fn(*args)) -> None:
        self.is_solution_file = is_solution_file
        self.quietly = quietly  # the audit guard's mute: our own frame reads are not the solution's
        self.reads: list[tuple[str, int]] = []
        self.setup = 0  # depth of the harness's set-up phases (import, construction)
        self.scalars = 0  # one-element reads in the current observed call
        self.most_scalars = 0  # the most in any observed call
        self._installed = False

    def _reading(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        """``Tensor.<name>`` recording reads by the solution (the original in this closure: a keyword
        default could be replaced by the caller)."""
        def read(t: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            n = torch.Tensor.numel(t)
            if n >= 1 and self.quietly(self._from_solution):
                if n > 1:
                    self.reads.append((name, int(n)))
                else:
                    self.scalars += 1
            return original(t, *args, **kwargs)

        read.__name__ = name
        return read

    def install(self) -> "HostReads":
        if self._installed:
            return self
        for name in HOST_READ_METHODS:
            original = getattr(torch.Tensor, name)

            setattr(torch.Tensor, name, self._reading(name, original))
        self._installed = True
        return self

    @contextlib.contextmanager
    def setting_up(self) -> Iterator[None]:
        """The harness's import of the solution or construction of its model: reads there are set-up."""
        self.setup += 1
        try:
            yield
        finally:
            self.setup -= 1

    def begin_call(self) -> None:
        self.scalars = 0

    def end_call(self) -> None:
        self.most_scalars = max(self.most_scalars, self.scalars)

    def _from_solution(self) -> bool:
        """Is solution code on the stack, outside the harness's set-up phases?"""
        if self.setup:
            return False
        frame = sys._getframe(3)  # above this, the guard's mute and the read wrapper
        for _ in range(256):
            if frame is None:
                break
            if self.is_solution_file(frame.f_code.co_filename):
                return True
            frame = frame.f_back
        return False

    def hacks(self) -> list[Hack]:
        hacks = []
        if self.most_scalars > HOST_SCALARS_PER_CALL:
            hacks.append(make_hack(14, f"one forward read {self.most_scalars} one-element tensors on the host "
                                       f"(.tolist() / .numpy()); at most {HOST_SCALARS_PER_CALL} are allowed"))
        if not self.reads:
            return hacks
        elements = sum(n for _, n in self.reads)
        shown = ", ".join(sorted({f".{m}()" for m, _ in self.reads}))
        return hacks + [make_hack(14, f"solution code copied {elements} tensor elements to the host ({shown}, "
                                      f"{len(self.reads)} reads): compute outside PyTorch and Triton")]
