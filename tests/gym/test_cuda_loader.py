"""The candidate's ``load_inline`` (`drkernel.gym.cuda.loader`) finds exactly what the host built.

Every gold is run with the loader installed over a cache the test fills: the key a call computes from
the arguments it really got equals the host's key from the source alone, and the library under it is
imported (a plain CPython extension stands in for the CUDA one, which a CPU host cannot link)."""

from __future__ import annotations

import runpy
import subprocess
import sysconfig
from pathlib import Path

import pytest

from drkernel.gym.cuda.build import job_for
from drkernel.gym.cuda.contract import check_cuda
from drkernel.gym.cuda.loader import install
from drkernel.gym.cuda.messages import build_key

GOLDS = sorted(Path(__file__).resolve().parents[2].glob("src/drkernel/problems/builtin_cuda/level*/*/gold.py"))
STUB = """#include <Python.h>
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "NAME", "host-built stand-in", -1, NULL};
PyMODINIT_FUNC PyInit_NAME(void) { PyObject* m = PyModule_Create(&def);
    PyModule_AddStringConstant(m, "origin", "cache"); return m; }
"""


def stub_library(name: str, path: Path) -> None:
    source = path.with_suffix(".c")
    source.write_text(STUB.replace("NAME", name))
    subprocess.run(["cc", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}", str(source), "-o", str(path)],
                   check=True, capture_output=True)


@pytest.fixture
def restore_load_inline():
    from torch.utils import cpp_extension

    original = cpp_extension.load_inline
    yield
    cpp_extension.load_inline = original


def test_every_gold_loads_the_host_built_library(tmp_path, restore_load_inline):
    builds = {}
    for gold in GOLDS:
        (module,) = check_cuda(gold.read_text()).modules
        key = build_key(job_for(module, "90", True), "tc")
        (tmp_path / key).mkdir()
        stub_library(module.name, tmp_path / key / f"{module.name}.so")
        builds[key] = str(tmp_path / key / f"{module.name}.so")
    install(builds, "90", "tc")
    for gold in GOLDS:
        namespace = runpy.run_path(str(gold))
        assert namespace["ext"].origin == "cache" and "ModelNew" in namespace, gold.parent.name


def test_arguments_the_host_did_not_build_find_nothing(tmp_path, restore_load_inline):
    from torch.utils import cpp_extension

    install({}, "90", "tc")
    with pytest.raises(ImportError, match="no build of these sources"):
        cpp_extension.load_inline("m", "torch::Tensor f(torch::Tensor x);", cuda_sources="__global__ void k() {}",
                                  functions=["f"])
