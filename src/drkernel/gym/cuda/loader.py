"""The candidate's side of a CUDA solution: ``load_inline`` that loads what the host built, never compiles.

Not wired into the candidate yet (see `drkernel.gym.cuda.evaluate`). Installed before the solution is
imported, `install` replaces ``torch.utils.cpp_extension.load_inline`` with a function that turns the
arguments the call really got into the `CompileJob` the host built, computes its key
(`drkernel.gym.cuda.messages.build_key`, the host's own function) and imports ``<key>/<name>.so`` from
the host's cache, which the candidate sees read-only. A call whose arguments differ from what the
source said (so the host never built them) finds no entry and fails as an import error: nothing is
compiled in the candidate, and nothing it does can add an entry.
"""

from __future__ import annotations

import importlib.util
import os
from types import ModuleType
from typing import Any

from drkernel.gym.cuda.messages import CompileJob, build_key


def _strings(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(str(v) for v in value)


def runtime_job(arch: str, name: str, cpp_sources: Any, cuda_sources: Any = None, functions: Any = None,
                extra_cflags: Any = None, extra_cuda_cflags: Any = None, **_ignored: Any) -> CompileJob:
    """The job a ``load_inline(...)`` call stands for, as the host rendered it from the source."""
    return CompileJob(name=name, cpp_sources=_strings(cpp_sources), cuda_sources=_strings(cuda_sources),
                      functions=_strings(functions), cflags=_strings(extra_cflags),
                      cuda_cflags=_strings(extra_cuda_cflags), arch=arch, link=True)


def _import(name: str, path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def install(cache_root: str, arch: str, toolchain_id: str) -> None:
    """Replace ``load_inline`` in this process (the candidate, before the solution's import)."""
    from torch.utils import cpp_extension

    def load_inline(name: str, cpp_sources: Any, cuda_sources: Any = None, **kwargs: Any) -> ModuleType:
        job = runtime_job(arch, name, cpp_sources, cuda_sources, **kwargs)
        path = os.path.join(cache_root, build_key(job, toolchain_id), f"{name}.so")
        if not os.path.exists(path):
            raise ImportError(f"load_inline({name!r}): no build of these sources; their arguments must be the "
                              "ones the source states (CUDA solution contract)")
        return _import(name, path)

    cpp_extension.load_inline = load_inline
