"""The CUDA solution contract, read from sources without compiling anything (fast).

Every rule of `drkernel.gym.cuda.source_rules` and every loader-argument rule of
`drkernel.gym.cuda.contract` has a case here; the built-in CUDA golds pass the whole contract."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from drkernel.gym.config import EvalRequest
from drkernel.gym.cuda.attribution import attribute, base_name, decoy_evidence
from drkernel.gym.cuda.build import CompileCache, build_key, job_for, trim_errors
from drkernel.gym.cuda.contract import CudaModule, check_cuda, mask
from drkernel.gym.cuda.evaluate import static_status
from drkernel.gym.cuda.messages import CompileJob, CompileReply
from drkernel.gym.cuda.source_rules import blank, check_source, global_functions
from drkernel.gym.cuda.toolchain import render
from drkernel.gym.ipc import ProtocolViolation
from drkernel.gym.result import Status
from drkernel.problems.problem import Problem

GOLDS = sorted(Path(__file__).resolve().parents[2].glob("src/drkernel/problems/builtin_cuda/level*/*/gold.py"))

KERNEL = "__global__ void k(const float* x, float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = x[i]; }\n"


def solution(cuda: str = KERNEL, extra_args: str = "", head: str = "", body: str = "return ext.f(x)") -> str:
    """A CUDA solution around ``cuda`` (the .cu source) with one exported function ``f``."""
    wrapper = ("torch::Tensor f(torch::Tensor x) { auto y = torch::empty_like(x); "
               "k<<<1, 32>>>(x.data_ptr<float>(), y.data_ptr<float>(), (int)x.numel()); return y; }")
    return (f"import torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n{head}\n"
            f"SRC = r'''{cuda}{wrapper}'''\n"
            f"ext = load_inline(name='k_ext', cpp_sources='torch::Tensor f(torch::Tensor x);', cuda_sources=SRC,\n"
            f"                  functions=['f']{extra_args})\n\n"
            f"class ModelNew(nn.Module):\n    def forward(self, x):\n        {body}\n")


def codes(source: str) -> set[int]:
    return {h.code for h in check_cuda(source).all_hacks}


def test_the_golds_pass_the_whole_contract_and_name_their_kernels():
    assert len(GOLDS) >= 10
    for path in GOLDS:
        report = check_cuda(path.read_text())
        assert report.all_hacks == [], (path.parent.name, report.all_hacks)
        assert static_status(report) is None
        assert report.own_kernels, path.parent.name
    gemm = check_cuda((GOLDS[0].parents[1] / "matmul_square" / "gold.py").read_text())
    assert gemm.own_kernels == ("sgemm_tiled",)  # __launch_bounds__ between void and the name


def test_a_plain_solution_passes_and_its_module_is_resolved():
    report = check_cuda(solution(extra_args=", extra_cuda_cflags=['-O3', '--use_fast_math']"))
    assert report.all_hacks == []
    (module,) = report.modules
    assert module.name == "k_ext" and module.functions == ("f",) and module.cuda_cflags == ("-O3", "--use_fast_math")
    assert module.kernels == ("k",)


@pytest.mark.parametrize("cuda, code", [
    ("cudaStream_t s; cudaStreamCreate(&s);\n", 7),
    ("cudaEvent_t e; cudaEventCreateWithFlags(&e, cudaEventDisableTiming);\n", 7),
    ("auto s = at::cuda::getStreamFromPool();\n", 7),
    ("void spin() { std::thread t([]{}); t.join(); }\n", 7),
    ("void g() { cudaLaunchHostFunc(0, 0, 0); }\n", 7),
    ("void g() { cudaGraph_t graph; cudaGraphCreate(&graph, 0); }\n", 7),
    ("void g() { nvtxRangePushA(); }\n", 8),
    ("static torch::Tensor cached;\n", 9),
    ("void* h = dlopen(0, 0);\n", 14),
    ("void g() { system(0); }\n", 14),
    ("const char* p = getenv(0);\n", 14),
    ("__device__ long long t() { return clock64(); }\n", 14),
    ('__device__ unsigned long long t() { unsigned long long v; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v)); return v; }\n', 14),
    ("void g() { float* p; cudaMallocManaged(&p, 4); }\n", 14),
    ("#include <dlfcn.h>\n", 14),
    ('#include "../harness.h"\n', 14),
    ("#include </etc/passwd>\n", 14),
    ("void g() { cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 1 << 20); }\n", 15),
    ("void g() { cudaStreamAttrValue a; a.accessPolicyWindow.num_bytes = 0; }\n", 15),
    ("void g() { cudaDeviceSetCacheConfig(cudaFuncCachePreferL1); }\n", 15),
    ("void g() { nvrtcProgram p; }\n", 16),
    ("void g() { void* f; cudaGetDriverEntryPoint(0, &f, 0); }\n", 16),
    ('void* lookup(const char*, int) __asm__("dlopen");\n', 14),     # an asm label: any symbol by name
    ('extern "C" int cudaEventElapsedTime(float* ms, void* a, void* b) { *ms = 1; return 0; }\n', 14),
    ("void g() { pybind11::exec(0); }\n", 14),
    ("void g() { PyRun_SimpleString(0); }\n", 14),
    ("void g() { signal(24, 0); }\n", 14),
    ("long g() { timespec t; clock_gettime(0, &t); return t.tv_nsec; }\n", 14),
    ("void g() { at::globalContext().setAllowTF32CuBLAS(true); }\n", 12),
    ("void g() { at::globalContext().setBenchmarkCuDNN(true); }\n", 15),
    ("void g() { CUmodule m; cuModuleLoadData(&m, 0); }\n", 16),
])
def test_each_cpp_rule_is_a_hack_of_its_family(cuda, code):
    assert code in codes(solution(cuda + KERNEL)), cuda
    assert static_status(check_cuda(solution(cuda + KERNEL)))[0] is Status.REJECTED


def test_statement_asm_is_not_an_asm_label():
    ok = ("__device__ float ld(const float* p) { float v;\n#pragma unroll\n"
          '    asm volatile("ld.global.nc.f32 %0, [%1];" : "=f"(v) : "l"(p)); return v; }\n')
    assert codes(solution(ok + KERNEL)) == set()


def test_words_in_comments_and_strings_are_not_findings_but_asm_templates_are_read():
    quiet = "// cudaStreamCreate, dlopen and clock64() in a comment\n/* std::thread */\n" \
            'const char* msg = "getenv(x) inside a string";\n'
    assert codes(solution(quiet + KERNEL)) == set()
    assert blank('a("x") // y\nb').count("\n") == 1  # lines are kept, so findings keep their numbers
    finding = check_source("int a;\n" + 'void g() { asm("mov.u32 %0, %%clock;" : "=r"(a)); }\n', "cuda_sources")
    assert [(f.code, f.line) for f in finding] == [(14, 2)]


def test_allowed_headers_compile_free():
    headers = ("#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n#include <c10/cuda/CUDAStream.h>\n"
               "#include <cooperative_groups.h>\n#include <mma.h>\n#include <cmath>\n#include <cub/block/block_reduce.cuh>\n")
    assert codes(solution(headers + KERNEL)) == set()


@pytest.mark.parametrize("extra_args, code", [
    (", extra_ldflags=['-lmylib']", 14),                  # a prebuilt library
    (", extra_include_paths=['/opt/x']", 14),
    (", build_directory='/tmp/x'", 14),
    (", extra_cuda_cflags=['-Xlinker', 'x.so']", 14),
    (", extra_cuda_cflags=['-arch=sm_80']", 14),
    (", extra_cflags=['-I/usr/include']", 14),
    (", keep_intermediates=True", 16),
    (", extra_cuda_cflags=['-DHIDE=dlopen']", 14),      # a macro's text would reach the sources unread
])
def test_loader_arguments_outside_the_contract(extra_args, code):
    assert code in codes(solution(extra_args=extra_args))


def test_arguments_must_be_known_before_the_file_runs():
    built_at_run_time = solution().replace("cuda_sources=SRC", "cuda_sources=''.join([SRC])")
    assert 14 in codes(built_at_run_time)
    rebound = solution().replace("ext = load_inline", "SRC = SRC + ''\next = load_inline")
    assert 14 in codes(rebound)  # SRC is bound twice: its value depends on the order the file runs in
    concatenated = solution().replace("cuda_sources=SRC", "cuda_sources=SRC + '\\n'")
    assert codes(concatenated) == set()


def test_names_written_into_the_generated_bindings_must_be_identifiers():
    injected = solution().replace("functions=['f']", "functions=['f', 'f); } void g() { system(0); //']")
    assert 14 in codes(injected)
    assert 14 in codes(solution().replace("name='k_ext'", "name='k-ext'"))


@pytest.mark.parametrize("cuda", [
    'auto s = R"abc(")abc"; void* h = dlopen(0, 0); //"\n',     # a raw string hiding code from a naive lexer
    "#define CAT(a, b) a##b\nvoid* h = CAT(dlo, pen)(0, 0);\n",  # token pasting
    "void* h = dl\\u006fpen(0, 0);\n",                          # a universal character name
    "void* h = dlo\\\npen(0, 0);\n",                           # a line splice
    "#define H <dlfcn.h>\n#include H\n",                        # an include through a macro
])
def test_names_spelled_past_the_rules_are_refused(cuda):
    assert 14 in codes(solution(cuda + KERNEL)), cuda


def test_line_splices_keep_the_other_lines_numbers():
    found = check_source("#define LOOP(n) \\\n  for (int i = 0; i < n; ++i)\nint a;\nvoid* h = dlopen(0, 0);\n", "cuda_sources")
    assert [(f.code, f.line) for f in found] == [(14, 4)]
    assert codes(solution('const char* s = R"(dlopen is only text here)";\n' + KERNEL)) == set()


def test_only_the_first_three_arguments_by_position():
    # torch's fourth positional parameter is sycl_sources, not functions
    positional = (solution().replace("name='k_ext', cpp_sources=", "'k_ext', ")
                  .replace("cuda_sources=SRC,", "SRC,").replace("functions=['f']", "['f']"))
    assert "['f'])" in positional and 14 in codes(positional)
    assert codes(solution().replace("name='k_ext', cpp_sources=", "'k_ext', ")) == set()


def test_other_loaders_and_missing_kernels():
    assert 16 in codes(solution().replace("load_inline(name=", "load(name=").replace(
        "import load_inline", "import load_inline, load"))
    no_global = solution(cuda="__device__ float twice(float v) { return 2 * v; }\n"
                              "__global__ void k(const float* x, float* y, int n) {}\n").replace("__global__", "")
    assert 16 in codes(no_global)
    assert 16 in codes("import torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n")


def test_the_python_around_the_calls_keeps_the_triton_contract():
    assert 14 in codes(solution(head="import os"))
    assert 2 in codes(solution(body="return torch.relu(x)", head="import torch"))  # strict-only passthrough
    assert 16 in codes(solution(head="import torch", body="return torch.compile(lambda v: v)(x)"))
    report = check_cuda(solution())
    assert static_status(report) is None and report.python.has_modelnew


@pytest.mark.parametrize("rebinding", ["ext = torch", "import torch as ext",
                                       "def g():\n    global ext\n    ext = torch"])
def test_an_extension_name_rebound_is_not_masked(rebinding):
    # ext.compile reads as the extension's function only while ext is bound once, to load_inline
    source = solution(head="import torch", body="return ext.compile(x)").replace(
        "functions=['f']", "functions=['f', 'compile']").replace("\nclass ModelNew", f"\n{rebinding}\nclass ModelNew")
    assert 16 in codes(source), rebinding
    once = solution(head="import torch", body="return ext.compile(x)").replace("functions=['f']",
                                                                              "functions=['f', 'compile']")
    assert codes(once) == set()


def test_syntax_errors_and_a_missing_modelnew_are_their_statuses():
    assert static_status(check_cuda("def f(:\n"))[0] is Status.SYNTAX_ERROR
    assert static_status(check_cuda(solution().replace("ModelNew", "Other")))[0] is Status.NO_MODELNEW


def test_masking_keeps_every_line_number():
    source = "a = f(1,\n      2)\nb = g(3)\n"
    tree = ast.parse(source)
    call = tree.body[0].value
    masked = mask(source, [(call, "None")])
    assert masked.count("\n") == source.count("\n") and "f(" not in masked
    assert ast.parse(masked).body[1].lineno == 3


def test_global_functions_and_profiler_names():
    src = "template <int B> __global__ void __launch_bounds__(256) tiled(float* x) {}\n" \
          "__global__ static void other(int n) {}\n__device__ void helper() {}\n"
    assert global_functions(src) == ("tiled", "other")
    assert base_name("void ns::tiled<128>(float*, float const*)") == "tiled"
    assert base_name("other(int)") == "other"
    assert base_name("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, ...)") \
        == "vectorized_elementwise_kernel"


def test_attribution_by_function_name_and_the_decoy_rule():
    # own: 2 ms of tiled; foreign: 3 ms of cuBLAS -> coverage 2 / 5
    records = [("void tiled<64>(float*)", 2.0), ("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", 3.0)]
    got = attribute(records, ("tiled", "decoy"))
    assert got.own_launched == ("tiled",) and got.time_coverage == pytest.approx(0.4)
    assert decoy_evidence(got, ("tiled", "decoy")) is None  # one own kernel ran: not a decoy
    torch_only = attribute([("void at::native::elementwise_kernel<128, 4>(int)", 1.0)], ("decoy",))
    assert torch_only.time_coverage == 0.0
    assert "decoy" in decoy_evidence(torch_only, ("decoy",))


def test_compile_errors_are_trimmed_to_the_lines_that_matter():
    log = ("In file included from /x/torch/include/torch/types.h:3,\n"
           "                 from cuda.cu:1:\n" + "/x/torch/include/c10/a.h:9:1: warning: noise\n" * 50
           + 'cuda_sources(4): error: identifier "v" is undefined\n    y[i] = v;\n           ^\n'
           "1 error detected in the compilation of \"cuda.cu\".\n")
    text = trim_errors(log)
    assert text.splitlines()[0] == 'cuda_sources(4): error: identifier "v" is undefined'
    assert "    y[i] = v;" in text and "warning" not in text and "In file included" not in text


def test_rendered_sources_name_the_solutions_lines():
    r = render("m", ("torch::Tensor f(torch::Tensor x);",), ("__global__ void k() {}",), ("f",))
    assert '#line 1 "cuda_sources"\n__global__ void k() {}' in r.cuda_cu
    assert 'm.def("f", torch::wrap_pybind_function(f), "f");' in r.main_cpp


def test_the_key_covers_sources_flags_architecture_toolchain_and_linking():
    module = CudaModule("m", ("a",), ("b",), ("f",))
    base = build_key(job_for(module, "90", False), "tc1")
    assert base == build_key(job_for(module, "90", False), "tc1")
    others = {build_key(job_for(module, "80", False), "tc1"), build_key(job_for(module, "90", True), "tc1"),
              build_key(job_for(module, "90", False), "tc2"),
              build_key(job_for(CudaModule("m", ("a",), ("b ",), ("f",)), "90", False), "tc1"),
              build_key(job_for(CudaModule("m", ("a",), ("b",), ("f",), cuda_cflags=("-O2",)), "90", False), "tc1")}
    assert base not in others and len(others) == 5


def test_cache_entries_are_written_once_and_read_only(tmp_path):
    cache = CompileCache(tmp_path)
    reply = CompileReply(ok=True, seconds=12.5, log="", linked=True)
    first = cache.put("k1", "m", reply, b"ELF...", None, False)
    assert not first.cached and first.library and Path(first.library).read_bytes() == b"ELF..."
    again = cache.get("k1")
    assert again.cached and again.seconds == 12.5 and again.library == first.library
    entry = tmp_path / "k1"
    assert not (entry.stat().st_mode & 0o222) and not (entry / "m.so").stat().st_mode & 0o222
    cache.put("k1", "m", CompileReply(ok=False, seconds=1.0, log="x", linked=False), b"", "x", False)
    assert cache.get("k1").ok  # the first writer's entry stays
    assert cache.get("missing") is None


def test_compile_messages_validate_their_types():
    job = CompileJob("m", ("a",), ("b",), ("f",), (), ("-O3",), "90", False)
    assert CompileJob.from_header(job.to_header()) == job
    with pytest.raises(ProtocolViolation):
        CompileJob.from_header({**job.to_header(), "link": "yes"})
    with pytest.raises(ProtocolViolation):
        CompileReply.from_header({"op": "compiled", "ok": True, "seconds": True, "log": "", "linked": False})


def test_the_request_carries_its_language():
    problem = Problem(name="p", level=1, code="x = 1\n")
    request = EvalRequest(problem=problem, solution="s", language="cuda")
    assert EvalRequest.from_dict(request.to_dict()).language == "cuda"
    assert EvalRequest.from_dict({"problem": problem.to_dict(), "solution": "s"}).language == "triton"
    assert request.content_hash() != EvalRequest(problem=problem, solution="s").content_hash()
    with pytest.raises(ValueError):
        EvalRequest(problem=problem, solution="s", language="hip")


def test_finding_the_kernels_of_a_source_is_linear_in_its_size():
    """100,000 ``__global__`` tokens without a ``void`` after them (inside ``#if 0``, 1.1 MB): every
    occurrence used to rescan the rest of the text (396 KB took minutes; this, the suite's time limit),
    while a bounded run of qualifiers finds the same kernels at once."""
    from drkernel.gym.cuda.source_rules import global_functions

    honest = "__global__ static void relu(float* x) {}\n__global__ __launch_bounds__(256) void gelu(float* x) {}\n"
    assert global_functions(honest) == ("relu", "gelu")
    flood = honest + "#if 0\n" + "__global__ " * 100_000 + "\n#endif\n"
    assert global_functions(flood) == ("relu", "gelu")


@pytest.mark.parametrize("source, blanked", [
    ('int a; // dlopen\nint b;', 'int a;          \nint b;'),
    ('x /* dlopen */ y', 'x              y'),
    ('f("dl\\"open"); g();', 'f(          ); g();'),
    ('R"xy(dlopen)" )xy" h();', '                   h();'),
    ("c = '\\'' ; d();", 'c =      ; d();'),
])
def test_comments_and_literals_are_blanked_line_numbers_kept(source, blanked):
    from drkernel.gym.cuda.source_rules import blank

    assert blank(source) == blanked


def test_blanking_is_linear_in_the_source():
    """100,000 unterminated raw strings and comments (a lazy ``.*?`` rescanned the rest of the text from
    each: quadratic, past the suite's time limit here): one pass now, the rest of the text blanked."""
    from drkernel.gym.cuda.source_rules import blank, include_findings

    for opener in ('R"(', "/*"):
        text = "__global__ void k() {}\n" + opener * 100_000
        out = blank(text)
        assert out.startswith("__global__ void k() {}\n") and not out.strip().endswith(opener)
        assert include_findings(text, "cuda_sources") == []


def test_a_source_built_from_constants_is_bounded():
    """A name added to itself level by level doubles: 8 levels of an 8 KB literal are 2 MiB of source to
    check in the worker (more levels, gigabytes). Past the request's own 1 MiB it is refused (hack 14)."""
    from drkernel.gym.cuda.contract import check_cuda

    lines = ['S0 = "' + "int " * 2048 + '"']
    lines += [f"S{i} = S{i - 1} + S{i - 1}" for i in range(1, 9)]
    src = "\n".join(lines) + textwrap.dedent('''
        from torch.utils.cpp_extension import load_inline
        mod = load_inline(name="m", cpp_sources=S8, cuda_sources="", functions=["f"])
    ''')
    report = check_cuda(src)
    assert any(h.code == 14 and "built past" in h.evidence for h in report.hacks), report.hacks
