"""Run-time guards. The audit hook is permanent once installed, so each scenario runs in a fresh
interpreter (with Triton's interpreter, as the CPU candidate does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from drkernel.gym.candidate.guards import FileRoots, GlobalState, IntegritySnapshot, check_outputs, scan_module

SOLUTION = textwrap.dedent('''
    import os, warnings
    import torch, triton, triton.language as tl

    @triton.jit
    def relu_k(x, y, n, B: tl.constexpr):
        o = tl.program_id(0) * B + tl.arange(0, B)
        tl.store(y + o, tl.maximum(tl.load(x + o, mask=o < n), 0.0), mask=o < n)

    def honest():
        warnings.warn("a solution may warn")
        with open(os.path.join(os.path.dirname(__file__), "notes.txt"), "w") as f:
            f.write("own directory")
        x = torch.randn(100)
        y = torch.empty_like(x)
        relu_k[(1,)](x, y, 100, B=128)
        return bool(torch.equal(y, torch.relu(x)))

    def read_etc():
        return open("/etc/hostname").read()

    def write_tmp():
        with open("/tmp/drkernel_guard_probe.txt", "w") as f:
            f.write("x")

    def getframe():
        return getattr(__import__("s" + "ys"), "_get" + "frame")(1)

    def gc_scan():
        return len(getattr(__import__("g" + "c"), "get_" + "objects")())

    def thread():
        t = __import__("thr" + "eading").Thread(target=lambda: None)
        t.start()
        t.join()

    def process():
        __import__("sub" + "process").run(["true"])

    def native():
        return __import__("ctyp" + "es").CDLL(None)

    def listdir_home():
        return os.listdir(os.path.expanduser("~"))

    def annotation_eval():  # a string evaluated by a standard-library helper
        import typing
        def f(x: "__imp" + "ort__('o' + 's').getcwd()"):
            return x
        return getattr(typing, "get_type" + "_hints")(f)

    def import_a_library_without_byte_code():  # the import system compiles its source: not generated code
        import uncompiled_lib
        return uncompiled_lib.VALUE == 3

    def gc_through_a_decorator():  # torch's decorator frame between the solution and the audited call
        import gc
        return len(torch.no_grad()(gc.get_objects)())

    def triton_wraps_a_torch_function():  # its capture scope would be torch's module globals
        import triton.runtime.jit as jit
        return jit.JITFunction(torch.is_tensor)

    def dataclass_at_run_time():  # the standard library generates honest code for it
        import dataclasses
        return dataclasses.make_dataclass("Cfg", [("block", int, dataclasses.field(default=64))])().block == 64

    def open_dir_fd():
        fd = os.open("/etc", os.O_RDONLY)
        return os.read(os.open("hostname", os.O_RDONLY, dir_fd=fd), 10)

    def _module_of(m):  # a module reached as an attribute of a parameter
        return m.operator

    def attrgetter_built_name():
        import typing
        u = chr(95)
        return _module_of(typing).attrgetter(u + "C." + u + "DisableTorchDispatch")(torch)

    def attrgetter_literal_public():  # a literal, public name: an ordinary getattr
        import typing
        return _module_of(typing).attrgetter("shape")(torch.ones(3)) == (3,)

    def disable_dispatch_computed_getattr():
        with getattr(torch._C, "_Dis" + "ableTorchDispatch")():
            return torch.softmax(torch.ones(4), 0)

    def disable_dispatch_vars():
        with vars(torch._C)["_Disable" + "TorchDispatch"]():
            return torch.softmax(torch.ones(4), 0)

    def exclude_python_key_dict():
        key = torch._C.DispatchKey.Python
        with torch._C.__dict__["_Exclude" + "DispatchKeyGuard"](torch._C.DispatchKeySet(key)):
            return torch.softmax(torch.ones(4), 0)

    def torch_internals_keep_their_guards():  # torch's own Python code uses the guards for itself
        from torch.utils._python_dispatch import _disable_current_modes
        with _disable_current_modes():
            return bool(torch.relu(torch.ones(2)).sum() == 2)

    def _package(name, source, attr):  # torch.package imports a module source held as a string
        import io
        buf = io.BytesIO()
        ex = torch.package.PackageExporter(buf)
        ex.extern(["*"])
        ex.save_source_string(name, source)
        ex.save_binary("res", "obj.pkl", b"\\x80\\x02c" + name.encode() + b"\\n" + attr.encode() + b"\\nq\\x00.")
        ex.close()
        buf.seek(0)
        return torch.package.PackageImporter(buf).load_pickle("res", "obj.pkl")

    def package_runs_a_module_source():  # a library compiles the string: still held to the contract
        return _package("payload_a", "import math\\ndef f():\\n    return math.pi\\n", "f")() > 3

    def package_code_calls_for_the_solution():  # contract-clean source; its frame makes the call
        import gc
        call = _package("payload_b", "def call(g):\\n    return g()\\n", "call")
        return len(call(gc.get_objects)) > 0

    def generated_init_calls_for_the_solution():  # a dataclass __init__ (no file) calls the factory
        import dataclasses, gc
        C = dataclasses.make_dataclass("C", [("x", list, dataclasses.field(default_factory=gc.get_objects))])
        return len(C().x) > 0

    def pickle_names_a_global():
        import pickle
        return pickle.loads(b"\\x80\\x02cmath\\npi\\nq\\x00.") > 3

    def marshal_loads_bytes():
        import marshal
        return marshal.loads(marshal.dumps(3)) == 3

    def code_object_rebuilt():
        f = lambda: 1
        return f.__code__.replace(co_consts=(None, 2)) is not None

    def linecache_reads_proc_environ():  # a standard-library helper reads for the solution
        return "=" in warnings.formatwarning("", UserWarning, "/proc/self/environ", 1)

    def linecache_reads_the_harness_source():
        import drkernel.gym.candidate.guards as g  # noqa: the file only, as its path
        return "import" in warnings.formatwarning("", UserWarning, g.__file__, 3)

    def library_reads_proc():  # a library acting for the solution keeps its /proc reads
        import uncompiled_lib
        return uncompiled_lib.read_proc()

    def library_generates_code_as_it_is_imported():  # mpmath, imported by sympy, builds methods with exec
        import codegen_lib
        return codegen_lib.Num() == codegen_lib.Num()

    def kernel_with_an_input_parameter():  # Triton's launch binder compiles a string naming `input`
        @triton.jit
        def k(input, output, n, B: tl.constexpr):
            o = tl.program_id(0) * B + tl.arange(0, B)
            tl.store(output + o, tl.load(input + o, mask=o < n), mask=o < n)
        x = torch.randn(10)
        y = torch.empty_like(x)
        k[(1,)](x, y, 10, B=16)
        return bool(torch.equal(x, y))
''')

DRIVER = textwrap.dedent('''
    import importlib.util, json, os, sys
    os.environ["TRITON_INTERPRET"] = "1"
    import torch, triton
    from drkernel.gym.candidate.guards import AuditGuard
    path = sys.argv[1]
    sys.dont_write_bytecode = True  # a library installed without byte code (pip --no-compile)
    sys.path.append(os.path.join(os.path.dirname(os.path.dirname(path)), "lib"))
    guard = AuditGuard(os.path.dirname(path), [path]).install()
    guard.arm()
    spec = importlib.util.spec_from_file_location("solution", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    results = {}
    for name in sys.argv[2:]:
        before = len(guard.violations)
        try:
            value = getattr(mod, name)()
            outcome = "ok" if value is not False else "wrong"
        except PermissionError:
            outcome = "blocked"
        except Exception as e:
            outcome = type(e).__name__
        results[name] = [outcome, [h.code for h in guard.violations[before:]]]
    # The harness itself (no solution frame on the stack) is never blocked.
    with open("/proc/version") as f:
        f.read()
    results["harness_read"] = ["ok", [h.code for h in guard.violations if "proc/version" in h.evidence]]
    print(json.dumps(results))
''')


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    folder = tmp_path_factory.mktemp("solution")
    path = folder / "solution_x.py"
    path.write_text(SOLUTION)
    (folder.parent / "lib").mkdir()
    (folder.parent / "lib" / "uncompiled_lib.py").write_text(  # any library code
        "import sys\nVALUE = (1).__add__(2)\n\ndef read_proc():\n    with open('/proc/self/status') as f:\n"
        "        return bool(f.read())\n")
    (folder.parent / "lib" / "codegen_lib.py").write_text(
        "ns = {}\nexec('def __eq__(self, other):\\n    return hasattr(other, \"__eq__\")\\n', ns)\n"
        "class Num:\n    __eq__ = ns['__eq__']\n")
    names = ["honest", "read_etc", "write_tmp", "getframe", "gc_scan", "thread", "process", "native",
             "listdir_home", "annotation_eval", "dataclass_at_run_time", "import_a_library_without_byte_code",
             "open_dir_fd", "attrgetter_built_name", "triton_wraps_a_torch_function", "gc_through_a_decorator",
             "attrgetter_literal_public", "disable_dispatch_computed_getattr", "disable_dispatch_vars",
             "exclude_python_key_dict", "torch_internals_keep_their_guards", "package_runs_a_module_source",
             "package_code_calls_for_the_solution", "generated_init_calls_for_the_solution", "pickle_names_a_global",
             "marshal_loads_bytes", "code_object_rebuilt", "linecache_reads_proc_environ",
             "linecache_reads_the_harness_source", "library_reads_proc", "kernel_with_an_input_parameter",
             "library_generates_code_as_it_is_imported"]
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", DRIVER, str(path), *names], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_honest_solution_runs_triton_warns_and_writes_its_own_directory(scenario):
    assert scenario["honest"] == ["ok", []]
    assert scenario["dataclass_at_run_time"] == ["ok", []]
    assert scenario["import_a_library_without_byte_code"] == ["ok", []]
    assert scenario["attrgetter_literal_public"] == ["ok", []]
    assert scenario["torch_internals_keep_their_guards"] == ["ok", []]
    assert scenario["library_reads_proc"] == ["ok", []]
    assert scenario["kernel_with_an_input_parameter"] == ["ok", []]
    assert scenario["library_generates_code_as_it_is_imported"] == ["ok", []]


@pytest.mark.parametrize("name, code", [
    ("read_etc", 14), ("write_tmp", 14), ("getframe", 14), ("gc_scan", 14), ("thread", 7), ("process", 14),
    ("native", 14), ("listdir_home", 14), ("annotation_eval", 14), ("open_dir_fd", 14),
    ("attrgetter_built_name", 14), ("triton_wraps_a_torch_function", 14), ("gc_through_a_decorator", 14),
    ("disable_dispatch_computed_getattr", 11), ("disable_dispatch_vars", 11),
    ("exclude_python_key_dict", 11),
    # code loaders (red team 16): a string a library compiles for the solution, the frames of code with
    # no file, pickle / marshal / code objects
    ("package_runs_a_module_source", 14), ("package_code_calls_for_the_solution", 14),
    ("generated_init_calls_for_the_solution", 14), ("pickle_names_a_global", 14), ("marshal_loads_bytes", 14),
    ("code_object_rebuilt", 14),
])
def test_out_of_contract_actions_are_blocked_and_recorded(scenario, name, code):
    outcome, codes = scenario[name]
    # a library may wrap the refusal in its own error (torch.package: PackagingError)
    assert outcome not in ("ok", "wrong") and code in codes, scenario[name]


@pytest.mark.parametrize("name", ["linecache_reads_proc_environ", "linecache_reads_the_harness_source"])
def test_reads_of_proc_and_the_harness_source_for_the_solution_are_recorded(scenario, name):
    """linecache swallows the refusal (it returns no line), the violation stays recorded (red team 16)."""
    outcome, codes = scenario[name]
    assert outcome in ("blocked", "wrong") and 14 in codes, scenario[name]


def test_harness_code_is_never_blocked(scenario):
    assert scenario["harness_read"] == ["ok", []]


def test_file_roots_resolve_symlinks(tmp_path):
    (tmp_path / "sol").mkdir()
    link = tmp_path / "sol" / "escape"
    link.symlink_to("/etc")
    roots = FileRoots(read=[str(tmp_path / "sol")], write=[str(tmp_path / "sol")])
    assert roots.allows(str(tmp_path / "sol" / "a.txt"), write=True)
    assert not roots.allows(str(link / "hostname"), write=False)


def test_integrity_snapshot_detects_replaced_functions():
    snap = IntegritySnapshot().take()
    original = torch.allclose
    try:
        torch.allclose = lambda *a, **k: True
        assert [h.code for h in snap.changed()] == [8]
        assert "torch.allclose" in snap.changed()[0].evidence
    finally:
        torch.allclose = original
    assert snap.changed() == []


def test_global_state_detects_precision_and_thread_changes():
    state = GlobalState().take()
    threads = torch.get_num_threads()
    try:
        torch.backends.cuda.matmul.allow_tf32 = not torch.backends.cuda.matmul.allow_tf32
        torch.set_num_threads(max(1, threads - 1) if threads > 1 else 2)
        assert sorted({h.code for h in state.changed()}) == [12, 15]
    finally:
        state.restore()
    assert state.changed() == []


def test_global_state_detects_hooks_every_later_thread_runs():
    import threading

    state = GlobalState().take()
    try:
        threading.settrace(print)
        assert [h.code for h in state.changed()] == [15]
    finally:
        threading.settrace(None)
    assert state.changed() == []


def test_output_checks_flag_subclasses_and_aliasing():
    class Lazy(torch.Tensor):
        pass

    x = torch.randn(4)
    assert [h.code for h in check_outputs(torch.empty(4).as_subclass(Lazy), [x])] == [11]
    assert [h.code for h in check_outputs((x.view(2, 2),), [x])] == [6]
    assert check_outputs((torch.relu(x), x.clone()), [x]) == []


def test_scan_module_finds_forbidden_objects_held_by_the_solution():
    import types

    module = types.ModuleType("solution")
    module.frame_getter = sys._getframe
    module.gc_module = __import__("gc")
    module.fine = torch.relu
    assert sorted(h.code for h in scan_module(module)) == [14, 14]


def test_scan_module_admits_locks_but_not_what_starts_threads():
    import _thread
    import threading
    import types

    module = types.ModuleType("solution")
    module.Lock, module.RLock, module.threading = threading.Lock, threading.RLock, threading
    module.lock, module.rlock = threading.Lock(), threading.RLock()
    assert scan_module(module) == []
    module.Thread, module.Timer, module.settrace = threading.Thread, threading.Timer, threading.settrace
    module.raw = _thread
    assert sorted(h.code for h in scan_module(module)) == [7, 7, 7, 7]


def test_host_reads_counts_multi_element_reads_from_solution_code_only(tmp_path):
    """`HostReads`: ``x.numpy()`` / ``x.tolist()`` from solution code is compute outside PyTorch;
    the same calls from the harness, or on one element, are not."""
    import torch

    from drkernel.gym.candidate.guards import HostReads

    path = str(tmp_path / "solution_hostreads.py")
    reads = HostReads(lambda f: f == path).install()
    code = compile("def run(x):\n    return x.tolist(), x.numpy().sum(), x[:1].tolist()\n", path, "exec")
    ns: dict = {}
    exec(code, ns)
    x = torch.arange(6.0)
    before = list(reads.reads)
    x.tolist()  # the harness's own read: no solution frame on the stack
    assert reads.reads == before
    ns["run"](x)
    assert reads.reads[len(before):] == [("tolist", 6), ("numpy", 6)]
    assert reads.hacks() and reads.hacks()[0].code == 14


def _observed(body):
    """Run ``body`` as an observed call runs (the op recorder's mode inside the dispatcher watch)."""
    from drkernel.gym.candidate.integrity import Observed
    from drkernel.gym.harness.recorder import DispatcherWatch, OpRecorder, unseen_hacks

    recorder, watch = OpRecorder(), DispatcherWatch()
    with torch.no_grad(), watch.watching(), Observed(recorder):
        body(torch.randn(16, 16))
    return recorder, unseen_hacks(watch.result, recorder.handled)


def test_dispatcher_watch_sees_compute_run_past_the_dispatch_mode():
    # The guards are those torch._C held at import (the audit guard, once installed, refuses them to
    # solutions): the observer must not depend on that refusal.
    guards = {"disable": torch._C._DisableTorchDispatch,
              "exclude": lambda: torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Python))}
    for make in guards.values():
        def hidden(x, make=make):
            with make():
                torch.softmax(x, 1)
            x.add(1)  # seen by the mode
        recorder, hacks = _observed(hidden)
        assert [h.code for h in hacks] == [2] and "aten::_softmax" in hacks[0].evidence
        assert "aten::softmax" not in recorder.profile.to_dict() and recorder.handled >= 1


def test_dispatcher_watch_passes_honest_calls_and_catches_it_switched_off():
    def honest(x):
        torch.tensor([1.0, 2.0])  # torch builds it below the mode (Python key excluded): no compute
        torch.softmax(x @ x, 1).sum().item()
    recorder, hacks = _observed(honest)
    assert hacks == [] and recorder.handled >= 4

    def switch_off(x):
        torch.softmax(x, 1)
        torch._C._autograd._disable_profiler()
    _, hacks = _observed(switch_off)
    assert [h.code for h in hacks] == [8]


def test_unseen_ops_reads_nesting_by_thread_and_span():
    from drkernel.gym.harness.recorder import _MARK, unseen_ops

    # thread 1: softmax (0-10) holds a mark (2-8) -> seen; mm (20-30) inside a mark (19-31) -> seen;
    # add (40-50) with no mark near it -> hidden; copy_ (60-61) is bookkeeping -> never hidden.
    # thread 2: a mark on another thread does not cover thread 1's add.
    events = [("aten::softmax", 1, 0, 10), (_MARK, 1, 2, 8), (_MARK, 1, 19, 31), ("aten::mm", 1, 20, 30),
              ("aten::add", 1, 40, 50), ("aten::copy_", 1, 60, 61), (_MARK, 2, 39, 51)]
    found = unseen_ops(events)
    assert found.hidden == ("aten::add",) and found.marks == 3 and found.intact


def test_hidden_compute_is_caught_at_run_time_with_no_static_analysis():
    """Through the real evaluator (candidate process, Triton's interpreter) with the static check left
    out: torch's own mode-popping helper, reached by a name built at run time, hides torch.softmax
    from the dispatch mode; only the dispatcher observer sees it."""
    import asyncio
    from pathlib import Path

    from drkernel.gym import EvalConfig, EvalRequest
    from drkernel.gym.checks import CheckRegistry, core_checks
    from drkernel.gym.orchestrator.evaluator import InProcessEvaluator
    from drkernel.gym.verdict.checks import INTEGRITY_HOOK, IntegrityVerdict
    from drkernel.problems.problem import Problem

    corpus = Path(__file__).resolve().parents[1] / "adversarial"
    problem = Problem(name="softmax", level=1, code=(corpus / "problems" / "softmax.py").read_text(), source="file")
    source = (corpus / "hacked" / "11_disable_current_modes_internal.py").read_text()
    checks = core_checks().plus(CheckRegistry(candidate_hooks=(INTEGRITY_HOOK,), verdict=(IntegrityVerdict(),)))
    with InProcessEvaluator(device="cpu", concurrency=1, pool_size=1, checks=checks) as ev:
        [result] = asyncio.run(ev.evaluate_batch([EvalRequest(problem, source, EvalConfig(device="cpu", trials=2))]))
    hidden = [h for h in result.hacks if "could not see" in h.evidence]
    assert hidden and hidden[0].code == 2 and "aten::_softmax" in hidden[0].evidence, result.hacks
    assert not result.valid


def test_outputs_with_attributes_of_their_own_or_container_subclasses_are_hack_11():
    plain = torch.ones(3)
    assert check_outputs(plain) == [] and check_outputs((plain, torch.zeros(2))) == []
    shadowed = torch.ones(3)
    shadowed.detach = lambda: torch.zeros(3)
    assert [h.code for h in check_outputs(shadowed)] == [11]
    assert "detach" in check_outputs(shadowed)[0].evidence

    class Pair(tuple):
        pass

    assert [h.code for h in check_outputs(Pair((plain, plain)))] == [11]


def test_a_method_shadowed_on_a_harness_instance_is_hack_8():
    from drkernel.gym.candidate.guards import AuditGuard, shadowed_methods

    guard = AuditGuard("/tmp/solution-dir")
    assert shadowed_methods(guard, None) == []
    guard.arm = lambda: None  # what a solution that reached the guard would do
    assert [h.code for h in shadowed_methods(guard)] == [8]
    guard.armed = False  # data, not a method: the detectors' own state (not this check's)
    assert len(shadowed_methods(guard)) == 1


def test_code_in_a_file_the_candidate_may_write_is_the_solutions(tmp_path):
    """Red team 20: a module the solution wrote to /dev/shm and imported counted as library code, free to
    start threads and install audit hooks. A file under a root the candidate may write (not an import path
    the environment gave, not a library cache) is the solution's; the standard library and drkernel are not."""
    import tempfile

    from drkernel.gym.candidate.guards import AuditGuard

    guard = AuditGuard(str(tmp_path / "solution"))
    assert guard.is_solution_file("/dev/shm/laundered.py")
    assert guard.is_solution_file(os.path.join(tempfile.gettempdir(), "elsewhere", "m.py"))
    assert not guard.is_solution_file(os.__file__)
    assert not guard.is_solution_file(torch.__file__)
