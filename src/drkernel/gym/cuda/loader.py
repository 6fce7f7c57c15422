"""The candidate's side of a CUDA solution: ``load_inline`` that loads what the host built, never compiles.

The host hands a candidate the libraries it built for the solution (`drkernel.gym.messages.NativeBuild`:
name, key, digest-checked bytes in the job's blob), which the harness writes to a folder of the
candidate's own before the solution is imported (`write_builds`). `install` then replaces
``torch.utils.cpp_extension.load_inline`` with a function that turns the arguments the call really
got into the `CompileJob` the host built, computes its key (`drkernel.gym.cuda.messages.build_key`,
the host's own function) and imports that build. A call whose arguments differ from what the source
said (so the host never built them) finds no build and fails as an import error: nothing is compiled
in the candidate, and nothing it does adds a build.

Each function the extension exports (its ``functions``) is wrapped so that a call counts as a launch
of the solution's own code (``record``: the candidate's launch watch, `drkernel.gym.candidate.launches`),
which is how launch counts, the skip-own run and the call-count checks see a CUDA solution. Which
device kernels are its own is decided from the profiler's records (`drkernel.gym.cuda.attribution`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from types import ModuleType
from typing import Any, Callable, Mapping, Sequence

from drkernel.gym.cuda.messages import CompileJob, build_key
from drkernel.gym.messages import NativeBuild

Record = Callable[[str, Callable[..., Any], tuple, dict], Any]
"""``record(qualified name, function, args, kwargs)``: runs one call of an extension function."""


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


def library_path(root: str, build: NativeBuild) -> str:
    return os.path.join(root, build.key, f"{build.name}.so")


def write_builds(root: str, builds: Sequence[NativeBuild], blob: bytes) -> dict[str, str]:
    """The libraries at the head of the job's ``blob``, each checked against its digest and written to
    ``root/<key>/<name>.so`` (read-only); returns key -> path."""
    paths, offset = {}, 0
    for build in builds:
        data = blob[offset:offset + build.size]
        offset += build.size
        if len(data) != build.size or hashlib.sha256(data).hexdigest() != build.digest:
            raise ValueError(f"the library of {build.name} ({build.key[:12]}) arrived damaged")
        path = library_path(root, build)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o555)
        paths[build.key] = path
    return paths


def _import(name: str, path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _counted(module: ModuleType, functions: Sequence[str], record: Record) -> None:
    """Wrap ``module``'s exported functions so each call goes through ``record``; the wrappers carry
    the extension's own module and name (what the solution's globals show)."""
    for fn_name in functions:
        original = getattr(module, fn_name, None)
        if not callable(original):
            continue
        qualified = f"{module.__name__}.{fn_name}"

        def call(*args: Any, __fn: Callable[..., Any] = original, __name: str = qualified, **kwargs: Any) -> Any:
            return record(__name, __fn, args, kwargs)

        call.__name__ = call.__qualname__ = fn_name
        call.__module__ = module.__name__
        call.__doc__ = getattr(original, "__doc__", None)
        setattr(module, fn_name, call)


def _plain(name: str, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    return fn(*args, **kwargs)


def install(builds: Mapping[str, str], arch: str, toolchain_id: str, record: Record = _plain) -> Callable[..., Any]:
    """Replace ``load_inline`` in this process (the candidate, before the solution's import) with the
    loader of ``builds`` (key -> library path); returns the loader, the one native entry the
    candidate's guards accept (`drkernel.gym.candidate.guards.scan_module`)."""
    from torch.utils import cpp_extension

    def load_inline(name: str, cpp_sources: Any, cuda_sources: Any = None, **kwargs: Any) -> ModuleType:
        job = runtime_job(arch, name, cpp_sources, cuda_sources, **kwargs)
        path = builds.get(build_key(job, toolchain_id))
        if path is None or not os.path.exists(path):
            raise ImportError(f"load_inline({name!r}): no build of these sources; their arguments must be the "
                              "ones the source states (CUDA solution contract)")
        module = _import(name, path)
        _counted(module, job.functions, record)
        return module

    cpp_extension.load_inline = load_inline
    return load_inline

