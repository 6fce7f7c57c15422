"""What a CUDA build is made from, and the two sources it compiles (torch-free: the host and the
compile child both use it).

A build renders ``load_inline``'s layout: ``main.cpp`` (torch's extension header, the solution's
``cpp_sources``, generated pybind11 bindings for ``functions``) and ``cuda.cu`` (torch's types and the
CUDA runtime headers, the solution's ``cuda_sources``). ``#line`` directives make the compiler name
the solution's own sources (``cuda_sources(12): error: ...``), so an error's line is the line the
model wrote.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sysconfig
from dataclasses import dataclass

DEFAULT_ARCH = "90"
"""The device architecture a CPU host compiles for (the H100's sm_90)."""
COMMON_NVCC_FLAGS = ("-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                     "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
                     "--expt-relaxed-constexpr", "-std=c++20", "--compiler-options", "-fPIC")
"""torch's own flags for extension CUDA code (`torch.utils.cpp_extension.COMMON_NVCC_FLAGS`), C++20 as
torch 2.13's headers need."""
COMMON_CXX_FLAGS = ("-std=c++20", "-fPIC", "-DTORCH_API_INCLUDE_EXTENSION_H", "-D_GLIBCXX_USE_CXX11_ABI=1")
TORCH_LIBS = ("c10", "c10_cuda", "torch_cpu", "torch_cuda", "torch", "torch_python")


def torch_dir() -> str:
    """torch's package folder, found without importing torch (the orchestrator stays torch-free)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("torch is not installed")
    return list(spec.submodule_search_locations)[0]


def include_dirs() -> list[str]:
    base = os.path.join(torch_dir(), "include")
    return [base, os.path.join(base, "torch", "csrc", "api", "include"), sysconfig.get_paths()["include"]]


def can_link() -> bool:
    """Whether this host's torch has the CUDA libraries an extension links against (a CPU build of
    torch has none: there the sources compile to objects and nothing is loaded)."""
    return os.path.exists(os.path.join(torch_dir(), "lib", "libc10_cuda.so"))


def cuda_home() -> str:
    """The toolkit's root: ``CUDA_HOME``, else the folder above the ``bin`` holding nvcc."""
    if os.environ.get("CUDA_HOME"):
        return os.environ["CUDA_HOME"]
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    real = os.path.realpath(nvcc)
    return os.path.dirname(os.path.dirname(real)) if real.endswith("/bin/nvcc") else "/usr/local/cuda"


@functools.cache
def toolchain() -> str:
    """What the compiled bytes depend on besides the sources and flags: nvcc's and the host
    compiler's versions, torch's and Python's. Part of every cache key."""
    parts = []
    for tool in ("nvcc", "c++"):
        try:
            done = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=30, check=False)
            parts.append(done.stdout)
        except (OSError, subprocess.TimeoutExpired):
            parts.append(f"{tool}: missing")
    parts.append("torch " + importlib.metadata.version("torch"))
    parts.append("python " + sysconfig.get_python_version())
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def have_compilers() -> bool:
    return shutil.which("nvcc") is not None and shutil.which("c++") is not None


@dataclass(frozen=True)
class Rendered:
    """The two files of one build."""

    main_cpp: str
    cuda_cu: str


def render(name: str, cpp_sources: tuple[str, ...], cuda_sources: tuple[str, ...],
           functions: tuple[str, ...]) -> Rendered:
    """``load_inline``'s two files, with ``#line`` markers naming the solution's sources."""
    bindings = "".join(f'  m.def("{f}", torch::wrap_pybind_function({f}), "{f}");\n' for f in functions)
    main = ("#include <torch/extension.h>\n#line 1 \"cpp_sources\"\n" + "\n".join(cpp_sources) + "\n"
            + ("#line 1 \"bindings\"\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n" + bindings + "}\n"
               if functions else ""))
    cu = ("#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n#line 1 \"cuda_sources\"\n"
          + "\n".join(cuda_sources) + "\n")
    return Rendered(main, cu)
