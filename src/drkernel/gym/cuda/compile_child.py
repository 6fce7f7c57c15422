"""The compile child (``python -m drkernel.gym.cuda.compile_child``): one build, then exit.

Started by `drkernel.gym.cuda.build.Compiler` through the gym's `Runner` (the sandbox: no network, a
private /tmp, read-only system and Python folders, a CPU-time limit). It receives one `CompileJob`,
writes the two rendered files into its private /tmp, runs nvcc and the host C++ compiler side by side
(the first failure stops the other), or one after the other where the host asks (``in_turn``: its
evaluation's memory share holds one compiler, not two), links when asked, and answers one `CompileReply` whose blob is
the linked library. It never writes the shared cache: the host does, under the key it computed itself.
It imports no torch (the headers are found from torch's folder), so it starts in a fraction of a second.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time

from drkernel.gym.cuda import toolchain
from drkernel.gym.cuda.messages import CompileJob, CompileReply

CPU_STUB = "#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n"
"""c10/cuda/impl/cuda_cmake_macros.h, which torch generates only in its CUDA builds: on a CPU build the
c10/cuda headers (the current stream) still compile against this stub."""


def commands(job: CompileJob, work: str) -> tuple[list[str], list[str], list[str]]:
    """nvcc for cuda.cu, c++ for main.cpp, and the link line."""
    inc = [f"-I{d}" for d in (*toolchain.include_dirs(), os.path.join(work, "stub"))]
    define = f"-DTORCH_EXTENSION_NAME={job.name}"
    nvcc = ["nvcc", "-c", os.path.join(work, "cuda.cu"), "-o", os.path.join(work, "cuda.o"), *inc, define,
            "-DTORCH_API_INCLUDE_EXTENSION_H", "-D_GLIBCXX_USE_CXX11_ABI=1", *toolchain.COMMON_NVCC_FLAGS,
            f"-gencode=arch=compute_{job.arch},code=sm_{job.arch}", "-O3", *job.cuda_cflags]
    cxx = ["c++", "-c", os.path.join(work, "main.cpp"), "-o", os.path.join(work, "main.o"), *inc, define,
           *toolchain.COMMON_CXX_FLAGS, "-O2", *job.cflags]
    lib = os.path.join(toolchain.torch_dir(), "lib")
    link = ["c++", "-shared", os.path.join(work, "main.o"), os.path.join(work, "cuda.o"), f"-L{lib}",
            *(f"-l{name}" for name in toolchain.TORCH_LIBS), f"-L{toolchain.cuda_home()}/lib64", "-lcudart",
            f"-Wl,-rpath,{lib}", "-o", os.path.join(work, f"{job.name}.so")]
    return nvcc, cxx, link


def run_both(first: list[str], second: list[str], work: str) -> tuple[bool, str]:
    """Both compiles at once; when one fails the other is stopped. (ok, the failing one's output)."""
    return _run_together([first, second], work)


def run_in_turn(first: list[str], second: list[str], work: str) -> tuple[bool, str]:
    """One compile, then the other (each alone peaks at about half of both at once); the first failure
    stops there. (ok, the failing one's output)."""
    for cmd in (first, second):
        ok, out = _run_together([cmd], work)
        if not ok:
            return ok, out
    return True, ""


def _run_together(cmds: list[list[str]], work: str) -> tuple[bool, str]:
    """``cmds`` at once; when one fails the others are stopped. (ok, the failing one's output)."""
    procs = [subprocess.Popen(cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for cmd in cmds]
    pending = list(procs)
    while pending:
        for p in list(pending):
            if p.poll() is None:
                continue
            pending.remove(p)
            if p.returncode != 0:
                for other in pending:
                    other.kill()
                    other.wait()
                out = p.stdout.read() if p.stdout else ""
                if p.returncode < 0:  # SIGXCPU / SIGKILL: RLIMIT_CPU, set by the sandbox's boot
                    out += f"\nerror: {p.args[0]} stopped by signal {-p.returncode} (the CPU-time limit)"
                return False, out
        time.sleep(0.05)
    return True, ""


def build(job: CompileJob, in_turn: bool = False) -> tuple[CompileReply, bytes]:
    """One build in a fresh folder of the private /tmp (``in_turn``: its compilers one after the other)."""
    start = time.monotonic()
    work = tempfile.mkdtemp(prefix="cuda-build-")
    rendered = toolchain.render(job.name, job.cpp_sources, job.cuda_sources, job.functions)
    stub = os.path.join(work, "stub", "c10", "cuda", "impl")
    os.makedirs(stub)
    if not os.path.exists(os.path.join(toolchain.include_dirs()[0], "c10/cuda/impl/cuda_cmake_macros.h")):
        with open(os.path.join(stub, "cuda_cmake_macros.h"), "w") as f:
            f.write(CPU_STUB)
    for fname, text in (("main.cpp", rendered.main_cpp), ("cuda.cu", rendered.cuda_cu)):
        with open(os.path.join(work, fname), "w") as f:
            f.write(text)
    nvcc, cxx, link = commands(job, work)
    ok, log = (run_in_turn if in_turn else run_both)(nvcc, cxx, work)
    blob = b""
    if ok and job.link:
        done = subprocess.run(link, cwd=work, capture_output=True, text=True)
        ok, log = done.returncode == 0, done.stdout + done.stderr
        if ok:
            with open(os.path.join(work, f"{job.name}.so"), "rb") as f:
                blob = f.read()
    log = log.replace(work + os.sep, "")  # "cuda.cu", not the private folder's random name
    return CompileReply(ok=ok, seconds=time.monotonic() - start, log=log[-200000:], linked=bool(blob)), blob


def main() -> None:
    from drkernel.gym import ipc

    channel = ipc.child_channel()
    msg = channel.recv()
    reply, blob = build(CompileJob.from_header(msg.header), in_turn=msg.header.get("in_turn") is True)
    channel.send(reply.to_header(), blob)


if __name__ == "__main__":
    main()
