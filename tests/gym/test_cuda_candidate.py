"""A CUDA solution's run in the candidate, the parts a CPU can show: the job message carries the host's
builds, the candidate's ``load_inline`` finds the right one, its run-time guards accept that loader
and nothing else native, extension calls are own launches (skipped: without effect), own device
kernels by ``__global__`` name, and a CUDA result speaks CUDA.

The end-to-end case runs the real in-process gym on CPU (sandboxed candidate, judge, integrity runs)
with a library that stands in for a CUDA build: a plain CPython extension whose ``relu_forward``
writes ``max(x, 0)`` through the tensors' data pointers, as a kernel would, and one that asks torch
to do it instead (a passthrough). A CUDA build itself cannot link on a CPU host.
"""

from __future__ import annotations

import hashlib
import subprocess
import sysconfig
import types
from pathlib import Path

import pytest
import torch

from drkernel.gym.candidate.guards import scan_module
from drkernel.gym.candidate.integrity import native_decoy
from drkernel.gym.candidate.launches import LaunchWatch
from drkernel.gym.config import EvalRequest
from drkernel.gym.cuda.build import job_for
from drkernel.gym.cuda.contract import check_cuda
from drkernel.gym.cuda.loader import install, write_builds
from drkernel.gym.cuda.messages import build_key
from drkernel.gym.cuda.wording import MESSAGES, relabel
from drkernel.gym.ipc import ProtocolViolation
from drkernel.gym.messages import Job, NativeBuild
from drkernel.gym.orchestrator.session import forged_claims
from drkernel.gym.result import EvalResult, Status
from drkernel.gym.verdict.hacks import CATALOGUE, LAZY_WARNING, make_hack

from gym_cases import FAST, RELU

SOLUTION = '''
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__global__ void relu_kernel(const float* x, float* y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

torch::Tensor relu_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long long n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

ext = load_inline(name="relu_ext", cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
                  cuda_sources=CUDA_SRC, functions=["relu_forward"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_forward(x)
'''

HEAD = """#include <Python.h>
static PyObject* call(PyObject* o, const char* m) { return PyObject_CallMethod(o, m, NULL); }
"""
POINTERS = HEAD + """
static PyObject* relu_forward(PyObject* self, PyObject* x) {  /* what a kernel does: raw stores */
    PyObject* shape = PyObject_GetAttrString(x, "shape");
    PyObject* y = PyObject_CallMethod(x, "new_empty", "(O)", shape);
    Py_DECREF(shape);
    PyObject *px = call(x, "data_ptr"), *py = call(y, "data_ptr"), *pn = call(x, "numel");
    const float* in = (const float*)PyLong_AsVoidPtr(px);
    float* out = (float*)PyLong_AsVoidPtr(py);
    long long n = PyLong_AsLongLong(pn);
    for (long long i = 0; i < n; i++) out[i] = in[i] > 0.f ? in[i] : 0.f;
    Py_DECREF(px); Py_DECREF(py); Py_DECREF(pn);
    return y;
}
"""
TORCH_DOES_IT = HEAD + """
static PyObject* relu_forward(PyObject* self, PyObject* x) { return call(x, "relu"); }
"""
TAIL = """
static PyMethodDef methods[] = {{"relu_forward", relu_forward, METH_O, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "relu_ext", "", -1, methods};
PyMODINIT_FUNC PyInit_relu_ext(void) { return PyModule_Create(&def); }
"""


def stand_in(body: str, folder: Path) -> bytes:
    """A CPython extension named ``relu_ext`` (the solution's module) with ``body``'s relu_forward."""
    source = folder / "relu_ext.c"
    source.write_text(body + TAIL)
    out = folder / "relu_ext.so"
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}", str(source),
                    "-o", str(out)], check=True, capture_output=True)
    return out.read_bytes()


def native_build(source: str, data: bytes, toolchain: str = "tc") -> NativeBuild:
    """The entry the CUDA front makes for the solution's one module (`drkernel.gym.cuda.evaluate`)."""
    (module,) = check_cuda(source).modules
    return NativeBuild(name=module.name, key=build_key(job_for(module, "90", True), toolchain), arch="90",
                       toolchain=toolchain, size=len(data), digest=hashlib.sha256(data).hexdigest(),
                       functions=module.functions, kernels=module.kernels)


@pytest.fixture
def restore_load_inline():
    from torch.utils import cpp_extension

    original = cpp_extension.load_inline
    yield
    cpp_extension.load_inline = original


# -- the job message -------------------------------------------------------------------------------

def test_the_job_carries_the_builds_typed_and_a_triton_job_has_no_native_key():
    build = native_build(SOLUTION, b"\x7fELF....")
    spec = {"solution": SOLUTION, "trials": [{"seed": 1, "code": "x", "size": "primary"}]}
    header = Job(spec, (build,)).to_header()
    parsed = Job.from_header(header)
    assert parsed.native == (build,) and parsed.spec == spec and parsed.native_bytes == 8
    assert parsed.native[0].kernels == ("relu_kernel",) and parsed.native[0].functions == ("relu_forward",)
    assert "native" not in Job(spec).to_header() and Job.from_header(Job(spec).to_header()).native == ()


@pytest.mark.parametrize("change, match", [
    ({"size": 0}, "0 bytes"),
    ({"size": "8"}, "'size' is str"),
    ({"functions": "relu_forward"}, "'functions' is str"),
    ({"kernels": [3]}, "other than names"),
    ({"key": "k" * 500}, "'key' of 500 characters"),
])
def test_a_malformed_build_is_a_violation(change, match):
    header = Job({"solution": "", "trials": []}, (native_build(SOLUTION, b"lib"),)).to_header()
    header["native"][0].update(change)
    with pytest.raises(ProtocolViolation, match=match):
        Job.from_header(header)


# -- the candidate's loader ------------------------------------------------------------------------

def test_the_loader_imports_the_build_of_the_calls_key_and_counts_its_calls(tmp_path, restore_load_inline):
    from torch.utils import cpp_extension

    good = stand_in(POINTERS, tmp_path)
    other = SOLUTION.replace("relu_forward(torch::Tensor x);", "relu_forward(torch::Tensor x) ;")
    builds = (native_build(other, b"not this one"), native_build(SOLUTION, good))
    paths = write_builds(str(tmp_path / "native"), builds, b"not this one" + good)
    calls = []

    def record(name, fn, args, kwargs):
        calls.append(name)
        return fn(*args, **kwargs)

    install(paths, "90", "tc", record)
    (module,) = check_cuda(SOLUTION).modules
    ext = cpp_extension.load_inline(module.name, module.cpp_sources, module.cuda_sources,
                                    functions=list(module.functions))
    x = torch.tensor([-1.0, 2.0, -3.0, 4.0])
    assert torch.equal(ext.relu_forward(x), torch.relu(x)) and calls == ["relu_ext.relu_forward"]
    assert ext.relu_forward.__module__ == "relu_ext"  # what the solution's globals show the guards
    with pytest.raises(ImportError, match="no build of these sources"):  # its arguments, not the source's
        cpp_extension.load_inline(module.name, module.cpp_sources, module.cuda_sources, functions=["other"])


def test_a_damaged_library_is_refused_before_it_is_written(tmp_path):
    build = native_build(SOLUTION, b"library bytes")
    with pytest.raises(ValueError, match="arrived damaged"):
        write_builds(str(tmp_path), (build,), b"library byteZ")
    with pytest.raises(ValueError, match="arrived damaged"):
        write_builds(str(tmp_path), (build,), b"library")  # cut short
    assert not list(tmp_path.rglob("*.so"))


def test_the_guards_accept_exactly_the_loader(restore_load_inline):
    from torch.utils import cpp_extension

    loader = install({}, "90", "tc")
    module = types.ModuleType("solution")
    module.load_inline = loader
    assert scan_module(module, accepted=(loader,)) == []
    assert [h.code for h in scan_module(module)] == [8]  # the same loader unaccepted: a harness function
    module.load = cpp_extension.load  # anything else native stays refused
    module.li = loader
    assert [h.code for h in scan_module(module, accepted=(loader,))] == [16]


def test_a_skipped_extension_call_leaves_its_arguments_and_returns_poison():
    watch = LaunchWatch("/nonexistent/solution.py")
    out_arg = torch.zeros(4)

    def writes(x, out):
        out.copy_(x)
        return x * 2

    x = torch.ones(4)
    with watch.skipping_own():
        result = watch.native("ext.writes", writes, (x, out_arg), {})
    assert torch.isnan(result).all() and torch.equal(out_arg, torch.zeros(4))
    assert torch.equal(watch.native("ext.writes", writes, (x, out_arg), {}), x * 2) and torch.equal(out_arg, x)
    assert watch.own_launches == 2 and watch.total[("ext.writes", True)] == 2


def test_a_report_may_claim_only_the_extensions_exported_functions():
    build = native_build(SOLUTION, b"lib")

    def done(*names):
        return {"reports": {"launches": {"kernels": [{"name": n, "own": True, "launches": 1} for n in names]}}}

    assert forged_claims(SOLUTION, done("relu_ext.relu_forward"), (build,)) is None
    assert "do not export" in forged_claims(SOLUTION, done("relu_ext.other"), (build,))
    assert "no triton.jit" in forged_claims(SOLUTION, done("relu_ext.relu_forward"))  # as a Triton job


def test_a_profiled_forward_without_own_kernels_is_a_decoy():
    kernels = [{"name": "void at::native::vectorized_elementwise_kernel<4>(int, float*)", "device_time_ms": 0.2}]
    own = [{"name": "void relu_kernel(float const*, float*, long long)", "device_time_ms": 0.1}]
    assert "relu_kernel" in native_decoy(kernels, ("relu_kernel",))
    assert native_decoy(kernels + own, ("relu_kernel", "never_launched")) is None
    assert native_decoy(kernels, ()) is None  # a Triton solution: the launch counts decide


# -- the words of a CUDA result --------------------------------------------------------------------

def test_a_cuda_result_names_its_language_and_never_triton():
    result = EvalResult(status=Status.CORRECT, op_coverage=0.3,
                        hacks=[make_hack(code, "seen") for code in CATALOGUE],
                        warnings=[LAZY_WARNING.format(share=0.3), "another note"]).finalize()
    relabel(result)
    assert result.language == "cuda" and [h.code for h in result.hacks] == list(CATALOGUE)
    assert not [h for h in result.hacks if "triton" in h.message.lower()]
    assert result.warnings[0].startswith("lazy_optimization: only 30%") and "Triton" not in result.warnings[0]
    assert result.warnings[1] == "another note" and set(MESSAGES) <= set(CATALOGUE)


# -- end to end, on CPU ----------------------------------------------------------------------------

def test_a_native_solution_runs_through_the_gym_and_its_calls_are_its_own(evaluator, tmp_path):
    data = stand_in(POINTERS, tmp_path)
    request = EvalRequest(problem=RELU, solution=SOLUTION, config=FAST, language="cuda")
    result = relabel(evaluator.evaluate(request, native=[(native_build(SOLUTION, data), data)]))
    assert result.status is Status.CORRECT and result.valid, (result.hacks, result.error)
    own = [k for k in result.kernels if k.own]
    assert [k.name for k in own] == ["relu_ext.relu_forward"] and own[0].launches >= 1
    assert result.op_coverage == pytest.approx(1.0) and result.language == "cuda"


def test_a_native_solution_that_asks_torch_is_a_passthrough_in_cuda_words(evaluator, tmp_path):
    data = stand_in(TORCH_DOES_IT, tmp_path)
    request = EvalRequest(problem=RELU, solution=SOLUTION, config=FAST, language="cuda")
    result = relabel(evaluator.evaluate(request, native=[(native_build(SOLUTION, data), data)]))
    assert result.status is Status.CORRECT and not result.valid
    assert {h.code for h in result.hacks} == {2} and not result.valid_lenient, result.hacks
    assert not [h for h in result.hacks if "Triton" in h.evidence + h.message]


def test_the_verdict_reads_a_cuda_solution_by_its_global_kernels():
    from drkernel.gym.verdict.checks import IntegrityVerdict

    req = EvalRequest(problem=RELU, solution=SOLUTION, config=FAST, language="cuda")
    judge = {"trials": [{"trial": i, "passed": True} for i in range(FAST.trials)], "extra": {}}
    no_launch = IntegrityVerdict().check(req, {"launches": {"kernels": []}, "integrity": {"own_launches": 0}}, judge)
    assert [h.code for h in no_launch] == [1] and "relu_kernel" in no_launch[0].evidence  # the decoy rule
    launched = {"launches": {"kernels": [{"name": "relu_ext.relu_forward", "own": True, "launches": 1}]},
                "integrity": {}}
    assert IntegrityVerdict().check(req, launched, judge) == []  # its Python, masked, holds no torch compute


def test_a_refused_loader_call_is_judged_by_the_cuda_contract_alone():
    source = SOLUTION.replace('functions=["relu_forward"]', 'functions=["relu_forward"], extra_ldflags=["-lfast"]')
    hacks = check_cuda(source).all_hacks
    assert [h.code for h in hacks] == [14] and "extra_ldflags" in hacks[0].evidence
    assert not [h for h in hacks if "Triton" in h.evidence]  # not also the Triton contract's foreign compiler
