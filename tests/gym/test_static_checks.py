"""Static analysis: names resolved through imports and aliases, certain hacks vs strict-only findings."""

from __future__ import annotations

import textwrap

import pytest

from drkernel.gym.verdict.static import analyze, generated_code_violations, static_check

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nimport triton\nimport triton.language as tl\n"
KERNEL = textwrap.dedent('''
    @triton.jit
    def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + o, tl.load(x_ptr + o, mask=o < n), mask=o < n)
''')


def codes(source: str) -> set[int]:
    return {h.code for h in analyze(HEADER + textwrap.dedent(source)).hacks}


@pytest.mark.parametrize("snippet, code", [
    ("import ctypes", 14),
    ("from subprocess import run as go", 14),
    ("import socket as s", 14),
    ("import sys\nf = sys._getframe(1)", 14),
    ("import inspect", 14),
    ("import gc\nobjs = gc.get_objects()", 14),
    ("import os\nos.system('true')", 14),
    ("x = open('/etc/hostname').read()", 14),
    ("mod = __import__('o' + 's')", 14),
    ("g = getattr(torch, 'com' + 'pile')", 14),
    ("exec('1')", 14),
    ("S = torch.cuda.__dict__['Str' + 'eam']", 14),
    ("def f(x):\n    return f.__globals__", 14),
    ("subs = object.__subclasses__()", 14),
    ("from . import harness", 14),
    ("import threading\nt = threading.Thread(target=print)", 7),
    ("from concurrent.futures import ThreadPoolExecutor", 7),
    ("s = torch.cuda.Stream()", 7),
    ("with torch.cuda.stream(None):\n    pass", 7),
    ("f = torch.compile(torch.relu)", 16),
    ("from torch.utils.cpp_extension import load_inline", 16),
    ("lib = torch.library.Library('x', 'DEF')", 16),
    ("import torch._inductor as ind", 16),
    ("g = getattr(torch, 'compile')", 16),
    ("torch.backends.cuda.matmul.allow_tf32 = True", 12),
    ("torch.set_float32_matmul_precision('medium')", 12),
    ("torch.set_num_threads(1)", 15),
    ("torch.backends.cudnn.benchmark = True", 15),
    ("torch.allclose = lambda *a, **k: True", 8),
    ("setattr(torch.Tensor, '__eq__', None)", 8),
    ("import time\ntime.perf_counter = lambda: 0.0", 8),
    ("from time import perf_counter\nimport time as t\nt.perf_counter = perf_counter", 8),
    ("import drkernel.gym.judge.compare", 8),
    ("class T(torch.Tensor):\n    pass", 11),
    ("class D:\n    def __torch_function__(self, *a):\n        return 0", 11),
])
def test_certain_hacks(snippet, code):
    assert code in codes(snippet)


@pytest.mark.parametrize("snippet", [
    "from threading import Lock\n_lock = Lock()\ndef build():\n    with _lock:\n        return 1",
    "import threading\n_lock = threading.RLock()\ndef build():\n    with _lock:\n        return 1",
    "import threading as th\nLOCKS = [th.Lock() for _ in range(2)]",
])
def test_a_lock_around_a_lazy_build_is_admitted(snippet):
    assert codes(snippet) == set(), snippet


@pytest.mark.parametrize("snippet, code", [
    ("import threading", 14),                                       # nothing admitted is used
    ("from threading import Lock, Thread", 7),
    ("import threading\n_lock = threading.Lock()\nthreading.Timer(1.0, print).start()", 7),
    ("import threading\n_lock = threading.Lock()\nthreading.settrace(print)", 7),
    ("import threading\n_lock = threading.Lock()\nthreading.excepthook = print", 14),
    ("import threading\n_lock = threading.Lock()\nmod = threading", 7),       # the module as a value
    ("import threading\n_lock = threading.Lock()\ndef f(n):\n    return getattr(threading, n)", 14),
    ("from _thread import allocate_lock", 7),                      # the same lock, through _thread
    ("import threading\n_lock = threading.Lock()\nstate = threading._shutdown", 14),
])
def test_threading_beyond_its_locks_is_refused(snippet, code):
    assert code in codes(snippet), snippet


SINGLETON = """
class Logger:
    _instance = None

    def __new__(cls, *args):
        if cls._instance is None:
            cls._instance = {made}
        return cls._instance
"""


def test_a_singleton_made_by_super_new_in_its_own_new_is_admitted():
    assert codes(SINGLETON.format(made="super().__new__(cls)")) == set()


@pytest.mark.parametrize("made, prefix", [
    ("super().__new__(torch.Tensor)", ""),                          # not the class's own cls
    ("super(Logger, cls).__new__(cls)", ""),                        # super with arguments
    ("object.__new__(cls)", ""),
    ("super().__new__(cls, 1)", ""),
    ("super().__new__", ""),                                        # read, not called with cls
    ("[super().__new__(cls) for cls in (int,)][0]", ""),            # cls of a comprehension's scope
    ("super().__new__(cls).__class__", ""),
    ("super().__new__(cls)", "super = lambda: torch.Tensor\n"),     # not the builtin super
])
def test_other_new_reads_stay_refused(made, prefix):
    assert 14 in codes(prefix + SINGLETON.format(made=made)), made


@pytest.mark.parametrize("snippet", [
    "class L:\n    def __init__(self):\n        self.x = super().__new__(L)",    # not in __new__
    "class L:\n    def __new__(cls):\n        cls = torch.Tensor\n        return super().__new__(cls)",
    "class L:\n    def __new__(cls):\n        def g(cls):\n            return super().__new__(cls)\n"
    "        return g(cls)",
])
def test_super_new_outside_its_own_new_or_with_cls_rebound_is_refused(snippet):
    assert 14 in codes(snippet), snippet


def test_alias_chains_resolve():
    # F is torch.nn.functional, c = torch.compile through a local alias of torch.
    assert codes("T = torch\nc = T.compile") == {16}
    assert codes("from torch import backends as bk\nbk.cudnn.allow_tf32 = True") == {12}


@pytest.mark.parametrize("snippet", [
    "import math\nfrom typing import Any\nimport functools",
    "x = torch.empty(4)\ny = x.view(2, 2).contiguous().float()",
    "torch.cuda.synchronize() if torch.cuda.is_available() else None",
    "w = nn.Parameter(torch.empty(3))\nnn.init.uniform_(w)",
    "def inspect_shapes(x):\n    return x.shape",
    "class Model2(nn.Module):\n    pass",
])
def test_honest_code_is_clean(snippet):
    assert codes(snippet) == set()


def inherits(src: str) -> set[int]:
    return codes(src)


def test_inheritance_bypass_variants():
    base = "class Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
    assert 4 in inherits(base + "class ModelNew(Model):\n    pass\n")
    assert 4 in inherits(base + "class B(Model):\n    pass\nclass ModelNew(B):\n    pass\n")
    assert 4 in inherits(base + "ModelNew = Model\n")
    assert 4 in inherits(base + "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                                "        self.m = Model()\n    def forward(self, x):\n        return self.m(x)\n")
    # Defining Model (a copy of the reference) without using it is not a hack.
    assert 4 not in inherits(base + "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n")


def test_torch_compute_reachable_through_helpers_submodules_and_fallbacks():
    src = HEADER + KERNEL + textwrap.dedent('''
        def helper(x):
            return F.gelu(x)

        class Sub(nn.Module):
            def forward(self, x):
                return x.sum()

        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 4)
                self.sub = Sub()
                self.act = nn.Identity()

            def forward(self, x):
                y = torch.empty_like(x)
                try:
                    k[(1,)](x, y, 4, BLOCK=4)
                except Exception:
                    y = helper(x)
                if self.training:
                    y = y @ y
                return self.sub(self.act(self.lin(y)))
    ''')
    report = analyze(src)
    assert report.hacks == []
    names = {c.name for c in report.torch_calls}
    assert names == {"torch.nn.functional.gelu", ".sum", "@ (matmul)", "torch.nn.Linear"}
    assert report.own_kernels == ("k",)
    assert [h.strict_only for h in report.strict_hacks] == [True]
    assert [h.code for h in static_check(src)] == [2]


def test_pure_triton_forward_has_no_torch_compute():
    src = HEADER + KERNEL + textwrap.dedent('''
        class ModelNew(nn.Module):
            def forward(self, x):
                y = torch.empty_like(x).view(-1)
                k[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
                return y.view_as(x)
    ''')
    report = analyze(src)
    assert report.torch_calls == () and report.all_hacks == []


def test_a_matmul_spelled_through_operator_is_torch_compute():
    # red team 15 ran cuBLAS in its unobserved calls as operator.matmul, which `x @ w` would have shown
    src = HEADER + "import operator\nfrom operator import matmul as mm\n" + textwrap.dedent('''
        class ModelNew(nn.Module):
            def forward(self, x, w):
                y = operator.matmul(x, w)
                return mm(y, w)
    ''')
    assert [(c.name, c.line) for c in analyze(src).torch_calls] == [("@ (matmul)", 11), ("@ (matmul)", 12)]


def test_a_kernel_launched_through_wrap_triton_is_no_torch_compute():
    # flash-attention's rotary launches its kernel through torch.library.wrap_triton (honest round 11:
    # the strict verdict read the wrapper as PyTorch compute)
    src = HEADER + "from torch.library import wrap_triton\n" + KERNEL + textwrap.dedent('''
        class ModelNew(nn.Module):
            def forward(self, x):
                y = torch.empty_like(x)
                wrap_triton(k)[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
                torch.library.wrap_triton(k)[(1,)](x, y, 4, BLOCK=64)
                return y
    ''')
    report = analyze(src)
    assert report.torch_calls == () and report.all_hacks == []


def test_syntax_error_is_reported_not_raised():
    report = analyze("def broken(:\n")
    assert report.parse_error and report.hacks == []


def test_every_hack_carries_evidence_and_an_actionable_message():
    for h in analyze(HEADER + "import ctypes\ntorch.allclose = None\n").hacks:
        assert h.evidence.startswith("line ") and h.message.endswith(".") and h.name


# --- the solution contract (deny by default) ---------------------------------------------------

FORWARD = "class ModelNew(nn.Module):\n    def forward(self, x):\n        {}\n"


@pytest.mark.parametrize("snippet", [
    "import numpy as np",                      # an import outside the allow-list
    "import operator\nf = operator.attrgetter('x')",
    "from os import path",
    "import builtins",
    "import triton.runtime.driver",
    "from torch import _C",                    # a private name imported from an allowed module
    "from torch.nn import *",
    "n = torch._C._len_torch_dispatch_stack()",  # a private attribute of torch
    "t = tl.core._constexpr",
    "s = getattr(object, '__subclasses__')()",  # dunder through a constant string
    "name = 'relu'\nf = getattr(torch, name)",   # a computed name (not only on library roots)
    "f = getattr(F, 'rel' + 'u')",
    "d = torch.nn.Module.__dict__",
    "c = ().__class__.__base__",
    "v = vars(torch)",
    "g = globals()['Model']",
    "k = dir(torch)",
    "T = type('T', (object,), {})",
    "s = '{0.__class__.__mro__}'.format(1)",
    "s = '{0._C}'.format(torch)",
    "t = torch.from_file('/etc/passwd', size=4)",
    "torch.save({}, 'x.pt')",
    "b = __builtins__",
    "def unused(open):\n    pass\nf = open('/etc/passwd')",  # binding a dangerous builtin's name elsewhere
    "f = getattr\nc = f(torch, '_' + 'C')",        # getattr as a value, called under another name
    "import functools\nc = functools.reduce(getattr, ['_C'], torch)",
    "t = torch\nc = getattr(t, '_C')",             # a literal private name through getattr
])
def test_contract_rejects(snippet):
    assert codes(snippet) & {11, 14}, snippet


@pytest.mark.parametrize("body", [
    "return x.numpy().clip(0)",
    "return torch.tensor(x.tolist())",
    "return x.cpu()",
    "return x.to('cpu')",
    "return x.to(device='cpu')",
])
def test_contract_rejects_host_round_trips_in_forward(body):
    assert 14 in codes(FORWARD.format(body))


def test_host_round_trips_through_a_helper_are_reached():
    src = "def helper(t):\n    return t.tolist()\n" + FORWARD.format("return helper(x)")
    assert 14 in codes(src)


@pytest.mark.parametrize("snippet", [
    "from __future__ import annotations\nfrom typing import Optional, Tuple\nimport functools, itertools, math",
    "from dataclasses import dataclass\nimport enum\nimport collections",
    "from triton.language.extra import libdevice",
    "class A(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.__name__ = 'a'",
    "def forward(input, dir=0):\n    return input",   # parameters that shadow builtins are the solution's own
    "if __name__ == '__main__':\n    pass",
    "s = getattr(torch, 'float16')",
    "x = torch.empty(3)\nn = x.shape[0]\nv = x.sum().item()",  # .item() is allowed by name
    "s = '{} of {}'.format(1, 2)",
])
def test_contract_allows_honest_code(snippet):
    assert codes(snippet) == set(), snippet


def test_contract_text_renders_every_rule_and_the_allowed_imports():
    from drkernel.gym.verdict.static import ALLOWED_IMPORTS, CONTRACT, contract_text

    text = contract_text()
    assert text.count("\n") == len(CONTRACT) - 1
    assert all(m in text for m in ALLOWED_IMPORTS if m != "__future__")


def test_one_analysis_per_source():
    src = HEADER + "x = 1\n"
    assert analyze(src) is analyze(src)


# --- Modules reached as attributes, private names, code in strings -------------------------------

@pytest.mark.parametrize("snippet", [
    "import typing\nm = typing.sys.modules",
    "import dataclasses\nos = dataclasses.sys.modules['os']",
    "import contextlib\ncontextlib.os.open('x', 0)",
    "f = torch.os.system",
    "data = F.np.load('weights.npy')",                      # torch.nn.functional's numpy
    "im = F.importlib.import_module('o' + 's')",
    "import logging\nw = logging.weakref.ref",                # logging imports weakref
    "from typing import sys",
    "import warnings\ns = warnings.sys.modules",
    "import packaging.version\nr = packaging.version.re",       # through a submodule too
])
def test_a_forbidden_module_reached_through_an_allowed_one_is_out_of_contract(snippet):
    report = analyze(HEADER + snippet)
    assert any(h.code == 14 and "reaches the module" in h.evidence for h in report.hacks), report.hacks


@pytest.mark.parametrize("snippet", [
    "import typing\ndef part(m):\n    return m.operator\nget = part(typing).attrgetter('x')",
    "def part(m):\n    return m.sys",
    "def walk(m):\n    return m().inspect",
    "def get(f, name):\n    return f(name)\ng = get(lambda n: n, 'x').methodcaller",
])
def test_a_module_or_dynamic_getter_read_from_any_object_is_out_of_contract(snippet):
    # The analysis cannot tell which module a parameter holds: the names are enough.
    report = analyze(HEADER + snippet)
    assert any(h.code == 14 and "solution contract" in h.evidence for h in report.hacks), report.hacks


def test_attributes_that_merely_share_no_module_name_are_fine():
    report = analyze(HEADER + "def f(cfg):\n    return cfg.types, cfg.io, cfg.operators, cfg.system")
    assert report.hacks == []


@pytest.mark.parametrize("snippet, why", [
    ("import dataclasses\nf = dataclasses._create_fn", "private"),          # compiles any body text
    ("import typing\nt = typing.get_type_hints", "evaluates strings"),
    ("import functools\nd = functools.singledispatch", "evaluates strings"),
    ("def f(x: \"__import__('os').system('true')\"):\n    return x", "a string holds code"),
    ("S = '(1).__class__.__base__.__subclasses__()'", "a string holds code"),
    ("from triton.runtime import cache", "Triton cache"),
    ("d = triton.knobs.cache.dir", "Triton cache"),
    ("from triton.runtime import driver\nb = driver.active.utils.load_binary", "foreign kernels"),
    ("from triton.tools.tensor_descriptor import TensorDescriptor\nimport triton.tools.disasm", "foreign"),
])
def test_string_evaluators_private_names_and_the_triton_cache_are_out_of_contract(snippet, why):
    report = analyze(HEADER + snippet)
    assert report.hacks and any(why in h.evidence for h in report.hacks), report.hacks


@pytest.mark.parametrize("snippet", [
    # The idioms of public Triton (tutorials, Liger-Kernel, Unsloth, FlagGems).
    "try:\n    from triton.language.extra.cuda import libdevice\nexcept ImportError:\n"
    "    from triton.language.extra import libdevice",
    "try:\n    from triton.language.extra.libdevice import tanh\nexcept ModuleNotFoundError:\n"
    "    from triton.language.extra.cuda.libdevice import tanh",
    "from triton.language.math import rsqrt",
    "DEVICE = triton.runtime.driver.active.get_active_torch_device()\n"
    "props = triton.runtime.driver.active.utils.get_device_properties(0)",
    "from triton.runtime import driver\ntarget = driver.active.get_current_target()\n"
    "is_cuda = target.backend == 'cuda'",
    "from triton.tools.tensor_descriptor import TensorDescriptor\n"
    "d = TensorDescriptor.from_tensor(torch.empty(4, 4), [4, 4])",
    "import contextlib\nctx = contextlib.nullcontext()",
    "@torch.compiler.disable\ndef host(x):\n    return x",
    "def kernel_impl(x_ptr):\n    pass\nkernel = triton.jit(kernel_impl)",
    "def f(x: 'torch.Tensor') -> 'torch.Tensor':\n    return x",
    "MSG = 'expected x.shape[0] == y.shape[0]'",
])
def test_public_triton_idioms_are_clean(snippet):
    assert analyze(HEADER + snippet).hacks == []


def spelled(source: str) -> set[int]:
    """Codes from the spelling rule alone (not the literal-name rules that may also catch a snippet)."""
    import ast

    from drkernel.gym.verdict.spelling import spelled_names

    return {h.code for h in spelled_names(ast.parse(textwrap.dedent(source)))}


@pytest.mark.parametrize("snippet, code", [
    ("def f(fr):\n    return fr.f_back", 14),                                   # attribute
    ("def f(g):\n    return getattr(g, 'gi_frame')", 14),                        # literal public name
    ("import functools\nNAMES = ('gi_frame',)", 14),                             # in a tuple
    ("D = {'cell_contents': 1}", 14),                                            # a dict key
    ("N = '__glob' + 'als__'", 14),                                              # + of constants
    ("N = 'emarf_ig'[::-1]", 14),                                                # reversal
    ("N = ''.join(['f_', 'lo', 'cals'])", 14),                                   # join of a constant list
    ("N = ''.join(chr(c) for c in (102, 95, 98, 97, 99, 107))", 14),             # chr of constants
    ("N = ''.join(map(chr, [99, 111, 95, 99, 111, 100, 101]))", 14),
    ("N = bytes([116, 98, 95, 110, 101, 120, 116]).decode()", 14),               # bytes.decode
    ("N = b'\\x66\\x5f\\x63\\x6f\\x64\\x65'.decode()", 14),
    ("N = '%s_%s' % ('f', 'globals')", 14),                                      # %-format
    ("N = '{}_{}'.format('tb', 'frame')", 14),                                   # .format
    ("a = 'f'\nN = f'{a}_builtins'", 14),                                        # f-string, a name bound once
    ("N = 'F_LASTI'.lower()", 14),                                               # a str method
    ("N = 'xx__subclasses__yy'[2:-2]", 14),                                      # a slice
    ("S = '{0.gi_frame.f_back}'", 14),                                           # a format field
    ("P = ['__gl', 'obals__']\ns = ''\nfor p in P:\n    s += p", 14),            # pieces joined by a loop
    ("def f(m):\n    return m.mro()", 14),
    ("def f(t, fn):\n    return t.apply_(fn)", 14),                              # per-element callbacks
    ("def f(t, u, fn):\n    return t.map_(u, fn)", 14),
    ("N = 'ma' + 'p2_'", 14),
    ("def f(m):\n    return m.import_module('x')", 14),
    ("def f(m):\n    return m.Thread(target=print)", 7),                         # thread starters
    ("def f(m):\n    return m.ThreadPoolExecutor(1)", 7),
    ("N = 'thr' + 'eading'", 7),
    ("N = '.'.join(('concurrent', 'futures'))", 7),
    ("def f(loop, fn):\n    return loop.run_in_executor(None, fn)", 7),
    ("def f(m):\n    return m._thread.start_new_thread(print, ())", 7),
])
def test_names_that_give_reach_are_refused_however_spelled(snippet, code):
    assert code in spelled(snippet), snippet
    assert code in codes(snippet), snippet


@pytest.mark.parametrize("snippet", [
    "import functools\ndef deco(fn):\n    return functools.update_wrapper(lambda: 0, fn, ('gi_frame',))",
    "import functools\ndef deco(fn, names):\n    return functools.update_wrapper(lambda: 0, fn, assigned=names)",
    "import functools\ndef deco(fn, names):\n    return functools.wraps(fn, names)",
    "import functools\ncopy = functools.partial(functools.update_wrapper, updated=())",
    "from functools import update_wrapper as uw\ndef deco(a, b, n):\n    return uw(a, b, updated=n)",
])
def test_wrapper_copiers_with_chosen_names_are_refused(snippet):
    assert 14 in codes(snippet), snippet


@pytest.mark.parametrize("snippet", [
    "from torch.nn.parallel import parallel_apply",
    "m = torch.nn.DataParallel(torch.nn.Linear(2, 2))",
])
def test_torch_parallel_helpers_that_start_threads_are_refused(snippet):
    assert 7 in codes(snippet), snippet


@pytest.mark.parametrize("snippet", [
    ("import functools\ndef deco(fn):\n    @functools.wraps(fn)\n    def inner(*a):\n        return fn(*a)\n"
     "    return inner"),
    "import functools\ndef deco(fn):\n    return functools.update_wrapper(lambda: 0, fn)",
    ("class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
     "        self.apply(lambda m: None)"),                                        # nn.Module.apply, no underscore
    "'''One thread block per row: each Thread of the Pool maps a tile.'''",     # words, not names
    "NAME = 'BLOCK_' + 'SIZE'\nKEY = '{}_{}'.format('row', 'major')",
    "modes = ('f_', 'ba')\nlabel = 'cuda'",                                      # pieces that join to no name
    "s = 'x' * 10**9",                                                           # not folded (too long)
])
def test_honest_code_is_not_refused_by_the_spelling_rule(snippet):
    assert codes(snippet) == set(), analyze(HEADER + textwrap.dedent(snippet)).hacks


@pytest.mark.parametrize("snippet, clean", [
    ("def show(fr, name):\n    return ('{0.' + name + '}').format(fr)", False),
    ("def show(fmt, fr):\n    return str.format(fmt, fr)", False),
    ("def show(fmt, d):\n    return fmt.format_map(d)", False),
    ("FMT = 'block {} of {}'\ndef show(i, n):\n    return FMT.format(i, n)", True),
    ("def show(i, n):\n    return 'block {} of {}'.format(i, n)", True),
])
def test_format_strings_must_be_readable_statically(snippet, clean):
    assert (codes(snippet) == set()) == clean, snippet


REAL_WORLD_HEADERS = """
import logging
import operator
from packaging.version import Version
import torch
import triton

logger = logging.getLogger(__name__)
NEW_TRITON = operator.ge(Version(triton.__version__), Version("3.0"))


class Fn(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=None)
    def forward(ctx, x):
        logger.debug("forward %s", x.shape)
        return x
"""


def test_what_real_kernels_import_for_logging_and_version_checks_is_clean():
    """FlagGems and xformers log through ``logging``; Liger compares ``triton.__version__`` with
    ``operator.ge``; xformers wraps forward in ``custom_fwd`` without a cast."""
    assert codes(REAL_WORLD_HEADERS) == set()


@pytest.mark.parametrize("line", [
    "import operator\nget = operator.attrgetter('_getframe')",
    "import operator\ncall = operator.methodcaller('__subclasses__')",
    "import logging.config\nlogging.config.dictConfig({})",
    "import logging\nlogging.FileHandler('/tmp/x')",
    "import logging\nlogging.basicConfig(filename='/tmp/x')",
    "import logging\nsys = logging.sys",
])
def test_the_reach_of_logging_and_operator_stays_closed(line):
    assert 14 in codes(line)


def test_reading_the_tf32_flag_is_allowed_writing_it_is_not():
    """Tutorials pick tl.dot's input precision from the TF32 flag: a read is fine (red team 8's false
    positive); an assignment, a setattr or an alias written through are still precision lowering."""
    from drkernel.gym.verdict.static import static_check

    read = 'import torch\nPREC = "tf32" if torch.backends.cuda.matmul.allow_tf32 else "ieee"\n'
    assert static_check(read) == []
    for write in ("torch.backends.cuda.matmul.allow_tf32 = True",
                  'setattr(torch.backends.cuda.matmul, "allow_tf32", True)',
                  "m = torch.backends.cuda.matmul\nm.allow_tf32 = True",
                  'torch.set_float32_matmul_precision("high")'):
        assert 12 in {h.code for h in static_check(f"import torch\n{write}\n")}, write


# --- Idioms of public Triton code admitted by mechanism, and the attacks beside each -------------

@pytest.mark.parametrize("snippet", [
    "import os\nDET = os.environ.get('MAMBA_DETERMINISTIC', '0') == '1'",   # an env knob, read only
    "import os as _o\nflag = _o.getenv('TRITON_DEBUG')",
    "from torch.cuda.amp import custom_fwd, custom_bwd",
    "from torch.amp import custom_fwd",
    "from torch.autograd.function import FunctionCtx\nfrom torch.autograd import Function",
    "import warnings\nwarnings.warn('falling back to the slow path')",
    "import heapq\nbest = heapq.nsmallest(2, [3, 1, 2])",
    "from collections.abc import Callable",
    "order = sorted(range(3), key=[4, 2, 9].__getitem__)",                  # an argsort idiom
    "ws = 1 if torch.distributed.is_initialized() is False else torch.distributed.get_world_size()",
    "props = triton.runtime.driver.utils.get_device_properties(0)",         # Triton 2's spelling
    "from torch.library import wrap_triton",
    "import logging\nlog = logging.getLogger(__name__)\nlog.warning('slow path for %s', 'x')",
    "label = 'block={}'.format(64) + str.format('{:d}', 3)",
    "from torch.utils._triton import has_triton\nok = has_triton()",       # torchao's gate on its kernels
    "if __name__ == '__main__':\n    torch.testing.assert_close(torch.ones(1), torch.ones(1))\n    import os\n    os.system('x')",
])
def test_honest_idioms_of_public_triton_code_are_admitted(snippet):
    assert codes(snippet) == set(), analyze(HEADER + snippet).hacks


@pytest.mark.parametrize("snippet, code", [
    ("import os\nos.system('true')", 14),                       # the module used beyond its reads
    ("import os\nenv = os.environ\nx = env.get('A')", 14),       # the module's parts passed on
    ("import os\ndef f(m):\n    return m\ng = f(os)", 14),      # the module itself passed on
    ("import os\nx = getattr(os.environ, 'get')('A')", 14),
    ("import os.path as p\nx = p.exists('/tmp')", 14),
    ("from torch.cuda.amp import autocast", 14),
    ("from torch.library import triton_op", 14),
    ("from torch.library import custom_op, wrap_triton", 14),
    # format fields read attributes by name: a .format out of sight, or one logging applies (red team 15)
    ("def f(fmt, o):\n    g = str.format\n    return g(fmt, o)", 14),
    ("import functools\ndef f(fmt, o):\n    return functools.partial(str.format, fmt)(o)", 14),
    ("def f(fmt, o):\n    return list(map(fmt.format_map, [o]))", 14),
    ("import logging\nh = logging.StreamHandler(None)\nh.setFormatter(logging.Formatter('{msg}', style='{'))", 14),
    ("from logging import StrFormatStyle as S\nx = S('{0}')", 14),
    ("from torch.utils._triton import has_triton, has_triton_package as p\nimport torch.utils._triton as t\nx = t.__dict__", 14),
    ("import torch.utils._triton\nx = torch.utils._triton.triton_backend", 14),
    ("import warnings\nwarnings.showwarning = print", 8),       # patching a library the harness calls
    ("x = torch.distributed.all_reduce", 7),
    ("pg = torch.distributed.ProcessGroupGloo", 7),
    ("x = [1].__getattribute__('copy')", 14),
    ("__name__ = '__main__'\nif __name__ == '__main__':\n    import os\n    os.system('x')", 14),
    ("def f(__name__):\n    return __name__\nif __name__ == '__main__':\n    pass", 14),
    ("if __name__ == '__main__':\n    pass\nelse:\n    import os\n    os.system('x')", 14),  # the else branch runs
    ("if __name__ == '__main__' or True:\n    import os\n    os.system('x')", 14),
])
def test_the_attacks_beside_those_idioms_are_still_refused(snippet, code):
    assert code in codes(snippet), analyze(HEADER + snippet).hacks


@pytest.mark.parametrize("snippet", [
    "def f(x):\n    match x:\n        case object(f_back=fr):\n            return fr",            # a frame's caller
    "def f(x):\n    match x:\n        case object(__closure__=c):\n            return c",
    "match torch.utils:\n    case object(_python_dispatch=pd):\n        mode = pd",              # a private module
    "def f(t):\n    match t:\n        case object(numpy=to_np):\n            return to_np()",    # a host read
    "def f(x, C):\n    match x:\n        case C(a, b):\n            return a",                   # __match_args__
    "import logging\nfr = logging.currentframe()",
    "@triton.jit\ndef k(x_ptr):\n    v = tl.load(x_ptr)\n    d = v.handle.data",                 # the interpreter's buffer
    "@triton.jit\ndef k(x_ptr):\n    v = tl.load(x_ptr)\n    d = getattr(v, 'handle')",
])
def test_attribute_reads_past_the_attribute_rules_are_refused(snippet):
    assert 14 in codes(snippet), analyze(HEADER + snippet).hacks


@pytest.mark.parametrize("snippet", [
    "def f(x):\n    match x:\n        case int(n):\n            return n\n        case Point():\n            return 0",
    "def f(mode):\n    match mode:\n        case 'fast':\n            return 1\n        case _:\n            return 0",
    "def f(h):\n    return h.handle",                                    # outside a kernel: any object's field
])
def test_match_statements_that_read_no_attributes_are_admitted(snippet):
    assert 14 not in codes(snippet), analyze(HEADER + snippet).hacks


@pytest.mark.parametrize("snippet", [
    "t = [torch][0]\nbase = t.cuda",                                    # a module through a container
    "def f(m=torch):\n    return m",                                     # a default
    "def f():\n    return triton.language",                              # a return
    "class A:\n    m = torch\nx = A.m.cuda",                             # a class attribute
    "import collections\ns = [collections][0]._sys",                     # a module's private module
    "def f(x):\n    return x._C",                                        # torch's C module from any object
    "x = (F, 1)",
])
def test_modules_used_as_values_are_refused(snippet):
    assert 14 in codes(snippet), analyze(HEADER + snippet).hacks


@pytest.mark.parametrize("snippet", [
    "libdevice = tl.math\ny = libdevice.exp",                          # an alias the resolver follows
    "ok = hasattr(tl, 'extra') and getattr(tl.math, 'rsqrt', None) is not None",
    "def f(x):\n    return x._cache, x._fields",                          # an object's own private fields
])
def test_module_aliases_and_literal_lookups_are_admitted(snippet):
    assert 14 not in codes(snippet), analyze(HEADER + snippet).hacks


def test_a_kernel_made_by_a_factory_from_an_alias_is_the_solutions_own():
    """stable-fast's kernel factories: ``kernel = f`` then ``triton.heuristics(...)(triton.jit(kernel))``;
    the profiler names the kernel after ``f``, which the source defines (a time coverage of 0 on the
    H100 before)."""
    src = HEADER + textwrap.dedent('''
        def norm_kernel(x_ptr, n, BLOCK: tl.constexpr):
            pass

        def make(act=None):
            kernel = norm_kernel
            return triton.heuristics({"BLOCK": lambda kw: 16})(triton.jit(kernel))
    ''')
    assert analyze(src).own_kernels == ("norm_kernel",)
    assert analyze(HEADER + "def f(x):\n    pass\nk = triton.jit(g)\n").own_kernels == ()  # not defined here


@pytest.mark.parametrize("snippet", [
    "try:\n    import triton.language.extra.libdevice as libdevice\nexcept ImportError:\n    libdevice = None\n"
    "HAVE = libdevice is not None",                                     # an optional import's guard
    "if triton:\n    pass",
    "__all__ = ['ModelNew']",
    "class Cfg:\n    block = 64\ndef f(c):\n    match c:\n        case Cfg(block=b):\n            return b",
    "class K:\n    def __init__(self):\n        self._time = 0\n    def f(self):\n        return self._time",
])
def test_honest_idioms_beside_the_new_rules_are_admitted(snippet):
    assert 14 not in codes(snippet), analyze(HEADER + snippet).hacks


@pytest.mark.parametrize("snippet", [
    "class Cfg:\n    pass\ndef f(c):\n    match c:\n        case Cfg(_secret=b):\n            return b",
    "class Cfg:\n    pass\ndef f(c):\n    match c:\n        case Cfg(f_back=b):\n            return b",
    "def f(x):\n    return x._sys",
    "m = torch if True else triton\nc = m._C",                            # a union's chains: each member's
])
def test_the_new_rules_still_hold_beside_those_idioms(snippet):
    assert 14 in codes(snippet), analyze(HEADER + snippet).hacks


@pytest.mark.parametrize("snippet", [
    # an if-expression between backends
    "libdevice = tl.extra.hip.libdevice if torch.version.hip else tl.extra.cuda.libdevice\nerf = libdevice.erf",
    # a probe loop over a literal tuple of namespaces
    ("from triton.language.extra import libdevice\nlog1p = None\nfor _mod in (libdevice, tl.math):\n"
     "    if hasattr(_mod, 'log1p'):\n        log1p = _mod.log1p\n        break"),
    # a getter whose every return is a module, its result bound to a name
    ("def _get_libdevice():\n    try:\n        from triton.language.extra import libdevice\n        return libdevice\n"
     "    except ImportError:\n        return tl.math\nlibdevice = _get_libdevice()\nerf = libdevice.erf"),
    "def pick(hip):\n    return tl.extra.hip.libdevice if hip else tl.extra.cuda.libdevice\nlib = pick(False)\ne = lib.exp",
    # a parameter defaulting to a module, its call sites passing a module or nothing
    "def to_tl(dtype, lang=tl):\n    return {torch.float32: lang.float32}[dtype]\nacc = to_tl(torch.float32)",
    "def to_tl(dtype, *, lang=tl):\n    return lang.float32\nacc = to_tl(torch.float32, lang=tl.core)",
    "import functools\ndef launch(x, lang=tl):\n    return lang.float32\nrun = functools.partial(launch, lang=tl)\ny = run(1)",
    "lib = tl.math if triton else None",                                   # a module as the test: a truth test
])
def test_modules_chosen_at_run_time_among_modules_are_admitted(snippet):
    assert codes(snippet) == set(), analyze(HEADER + snippet).hacks


@pytest.mark.parametrize("snippet, code", [
    # every member's chains are checked, whichever branch or element it is
    ("m = torch if c else tl\nx = m._C", 14),
    ("m = tl if c else torch.cuda\nm.memory.empty_cache()", 15),
    ("m = torch.cuda if c else tl\nm.memory.empty_cache()", 15),
    ("for m in (tl, torch):\n    m.cuda.memory.empty_cache()", 15),
    ("import typing\ndef f(x, lang=tl):\n    return lang.sys\nf(1, typing)", 14),     # a call site's module
    ("def g(m=tl):\n    return m\nlib = g(torch)\nlib.cuda.memory.empty_cache()", 15),
    # a choice that is not among modules only
    ("def g():\n    if c:\n        return tl.math\n    return obj\nlib = g()", 14),
    ("def f(x, lang=tl):\n    return lang.float32\nf(1, obj)", 14),
    ("lib = tl.math if c else None\nlib = 3", 14),
    # the name bound again, anywhere and however
    ("lib = tl.math if c else tl.extra.cuda.libdevice\nlib = obj", 14),
    ("lib = tl.math if c else tl\ndef f(o):\n    global lib\n    lib = o", 14),
    ("def outer():\n    m = tl.math if c else tl\n    def inner(o):\n        nonlocal m\n        m = o\n    return inner", 14),
    ("lib = tl.math if c else tl\nif (lib := obj):\n    pass", 14),
    ("lib = tl.math if c else tl\nlib += obj", 14),
    ("lib: object = tl if c else tl.math", 14),
    ("for m in (tl, tl.math):\n    pass\ndel m", 14),
    ("lib = tl if c else tl.math\ntry:\n    pass\nexcept Exception as lib:\n    pass", 14),
    ("lib = tl if c else tl.math\nwith ctx() as lib:\n    pass", 14),
    # loops over what is not a literal of modules
    ("mods = (tl, torch)\nfor m in mods:\n    pass", 14),
    ("for m in list((tl, tl.math)):\n    pass", 14),
    ("for m in [*(tl, tl.math)]:\n    pass", 14),
    ("for m, n in ((tl, tl.math),):\n    pass", 14),
    ("*ms, = (tl, torch)", 14),
    ("ok = [hasattr(m, 'erf') for m in (tl, tl.math)]", 14),
    # a function whose callers are not all seen, or whose call is not plain
    ("def f(x, lang=tl):\n    return lang.float32\nf(*args)", 14),
    ("def f(x, lang=tl):\n    return lang.float32\nf(1, **kw)", 14),
    ("def f(x, lang=tl):\n    return lang.float32\ng = f", 14),
    ("class A:\n    def f(self, lang=tl):\n        return lang.float32", 14),
    ("import functools\n@functools.lru_cache\ndef f(lang=tl):\n    return lang.float32", 14),
    ("f = lambda lang=tl: lang.float32", 14),
    ("def g():\n    return tl\nlib = g()\nx = [g()]", 14),
    ("def g():\n    return tl\ndef h(f):\n    return f\nlib = h(g)()", 14),
    ("def g():\n    return tl\ng = other\nlib = g()", 14),
    ("def g():\n    yield tl\n    return torch\nlib = g()", 14),
    ("async def g():\n    return torch\nlib = g()", 14),
    ("def g():\n    return g() if c else torch\nlib = g()", 14),
    ("lib = tl if c else tl.math\ndef f():\n    return lib\nx = [f()]", 14),
    ("lib = tl if c else tl.math\nprint(lib)", 14),
    # later callers of a partial may pass anything: the parameter is an object there too
    ("import functools\ndef launch(x, lang=tl):\n    return lang.os\nrun = functools.partial(launch, lang=tl)", 14),
    (("import functools\ndef launch(x, lang=tl):\n    return lang.float32\nrun = functools.partial(launch, lang=tl)\n"
      "run(1, lang=torch)"), 14),
    # class bodies bind attributes, not names; aliases rebound through their own attributes are unbounded
    ("class A:\n    for m in (tl, torch):\n        pass\nx = A.m.cuda", 14),
    ("class A:\n    m = tl if c else torch", 14),
    ("class A:\n    if True:\n        m = torch\nx = A.m.cuda", 14),
    ("m = torch\nm = m.cuda", 14),
    # plain aliases: every binding is followed (one was, the first), and one to an object is an object too
    (("def outer():\n    m = tl.math\n    def inner():\n        nonlocal m\n        m = torch.cuda\n    inner()\n"
      "    m.memory.empty_cache()"), 15),
    ("lib = tl if c else tl.math\nlib2 = lib\nlib2 = obj\ny = lib2.os", 14),
    ("x = [getattr(torch, 'cuda')][0]", 14),                                 # a module by a literal getattr
    ("class A:\n    import torch\nx = A.torch.cuda.memory.empty_cache()", 14),  # a module as a class attribute
    ("class A:\n    from torch import cuda\nA().cuda.memory.empty_cache()", 14),
])
def test_modules_chosen_at_run_time_are_refused_past_what_is_followed(snippet, code):
    assert code in codes(snippet), analyze(HEADER + snippet).hacks


def test_compute_through_a_union_is_reached_in_each_member():
    src = HEADER + KERNEL + FORWARD.format("ops = torch if x.is_cuda else tl\n        return ops.relu(x)")
    report = analyze(src)
    assert "torch.relu" in {c.name for c in report.torch_calls}
    assert report.own_kernels == ("k",) and not report.hacks


SUPER_OK = {
    "zero_args": "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n",
    "old_spelling": "class ModelNew(nn.Module):\n    def __init__(self):\n        super(ModelNew, self).__init__()\n",
}
SUPER_REFUSED = {
    "another_class": "def f(x):\n    return super(torch.Tensor, x).tolist()\n",
    "another_class_in_a_method": ("class ModelNew(nn.Module):\n    def forward(self, x):\n"
                                  "        return super(torch.Tensor, x).tolist()\n"),
    "another_object": "class ModelNew(nn.Module):\n    def forward(self, x):\n        return super(ModelNew, x)\n",
    "as_a_value": "class ModelNew(nn.Module):\n    def forward(self, x):\n        s = super\n        return s\n",
    "nested_function": ("class ModelNew(nn.Module):\n    def forward(self, x):\n        def g(y):\n"
                        "            return super(ModelNew, y)\n        return g(x)\n"),
    "keyword": "class ModelNew(nn.Module):\n    def forward(self, x):\n        return super(ModelNew, obj=self)\n",
}


@pytest.mark.parametrize("name", sorted(SUPER_OK))
def test_super_as_the_plain_call_is_allowed(name):
    report = analyze("import torch\nimport torch.nn as nn\n" + SUPER_OK[name])
    assert not [h for h in report.hacks if "super used" in h.evidence], report.hacks


@pytest.mark.parametrize("name", sorted(SUPER_REFUSED))
def test_super_naming_another_class_or_object_is_hack_14(name):
    """``super(torch.Tensor, t).tolist()`` is the C method beneath the wrapped ``Tensor.tolist``."""
    report = analyze("import torch\nimport torch.nn as nn\n" + SUPER_REFUSED[name])
    assert any(h.code == 14 and "super used" in h.evidence for h in report.hacks), report.hacks


@pytest.mark.parametrize("snippet, flagged", [
    # a real-world launcher's signature names a process group it never uses: only evaluated
    ("from typing import Optional\ndef launch(x, group: Optional[torch.distributed.ProcessGroup] = None)"
     " -> torch.cuda.Stream | None:\n    return None", False),
    # the same annotation read back as an object: the reference counts
    ("import typing\ndef launch(x, s: torch.cuda.Stream = None):\n    return None\n"
     "S = typing.get_type_hints(launch)['s']", True),
    ("import functools\n@functools.singledispatch\ndef f(x):\n    return x\n"
     "@f.register\ndef _(x: torch.cuda.Stream):\n    return x", True),
    ("from typing import Optional\ndef launch(x, s: Optional[torch.cuda.Stream()] = None):\n    return None", True),
    ("class Cfg:\n    s: torch.cuda.Stream = None", True),  # a class body's annotations: dataclasses read them
])
def test_a_signatures_type_hints_are_no_reference_unless_read_back(snippet, flagged):
    assert (7 in codes(snippet)) is flagged


@pytest.mark.parametrize("snippet", [
    "import logging\nlogging.basicConfig(level=logging.INFO, format='%(asctime)s - %(levelname)s - %(message)s')",
    "import logging\nlogging.basicConfig(level=logging.INFO)",
    "import logging\nlogging.basicConfig(format='%(message)s', datefmt='%H:%M', style='%', force=True)",
    "from logging import basicConfig\nbasicConfig(level=10)",
])
def test_logging_set_up_to_write_to_stderr_is_admitted(snippet):
    """honest round 12 (torchtitan): a module-level basicConfig with no file, stream or handlers only
    attaches a stderr handler; a %-style format reads a record's fields by key, never attributes."""
    assert codes(snippet) == set(), analyze(HEADER + snippet).hacks


@pytest.mark.parametrize("snippet", [
    "import logging\nlogging.basicConfig(filename='/tmp/x', level=10)",
    "import logging\nlogging.basicConfig(stream=None)",
    "import logging\nlogging.basicConfig(handlers=[])",
    "import logging\nlogging.basicConfig(format='{message}', style='{')",
    "import logging\nlogging.basicConfig(format='$message', style='$')",
    "import logging\nkw = dict(filename='/tmp/x')\nlogging.basicConfig(**kw)",
    "import logging\nconfigure = logging.basicConfig\nconfigure(filename='/tmp/x')",
    "from logging import basicConfig\nbasicConfig(level=10)\nf = basicConfig",
])
def test_logging_set_up_for_files_streams_or_brace_formats_stays_refused(snippet):
    assert 14 in codes(snippet), snippet


@pytest.mark.parametrize("snippet", [
    "ex = torch.package.PackageExporter(None)",
    "imp = torch.package.PackageImporter(None).load_pickle('res', 'obj.pkl')",
    "from torch import package\nimp = package.PackageImporter",
    "tp = getattr(torch, 'package')",
    "tp = torch.package",
    "t = torch.utils.benchmark.Timer('x')",
])
def test_code_loaders_are_out_of_contract(snippet):
    """red team 16: torch.package imports a module source stored as bytes the check never read."""
    assert 14 in codes(snippet), snippet


def test_triton_driver_helpers_are_not_called_a_compiler():
    """honest round 12 (D2): TMA descriptor fillers are refused as native driver helpers, not as a compiler."""
    hacks = analyze(HEADER + "f = triton.runtime.driver.active.utils.fill_1d_tma_descriptor").hacks
    assert hacks and all("compiler" not in h.evidence for h in hacks), hacks
    assert codes("n = triton.runtime.driver.active.utils.get_device_properties(0)") == set()


def test_generated_code_takes_soft_builtins_as_parameters():
    """Triton's launch binder for a kernel with an ``input`` parameter, a dataclass field ``input``."""
    assert generated_code_violations("def dynamic_func(input, out, **options):\n    return {'input': input}") == []
    assert generated_code_violations("def f(x):\n    return input(x)")
    assert generated_code_violations("def f(input):\n    return open(input)")


def test_generated_code_for_a_library_class_may_read_plain_dunders_only():
    """A dataclass of Triton's has fields ``__self__``/``__func__``; object-graph names stay refused."""
    source = "def __repr__(self):\n    return repr(self.__self__) + repr(self.__func__)"
    assert generated_code_violations(source)
    assert generated_code_violations(source, dunders=False) == []
    assert generated_code_violations("def f(self):\n    return self.__globals__", dunders=False)
    assert generated_code_violations("import sys", dunders=False)


def test_a_name_bound_somewhere_does_not_exempt_the_builtin_elsewhere():
    """Red team 20: one unused ``def _p(getattr=None)`` or ``def _q(dir=None)`` made ``_ga = getattr`` and
    ``dir(x)`` pass everywhere in the file, and a class body inside a function with a ``compile``
    parameter reads the builtin, not the parameter. Only ``input`` stays exempt where bound."""
    assert 14 in codes("def _p(getattr=None):\n    pass\n_ga = getattr")
    assert 14 in codes("def _q(dir=None):\n    pass\nnames = dir(torch)")
    assert 14 in codes("def launch(x, compile=False):\n    class K:\n        c = compile\n    return K")
    assert 14 in codes("def launch(x, compile=False):\n    return x if compile else x")
    assert codes("class M(nn.Module):\n    def forward(self, input):\n        return input") == set()


def test_exit_in_an_import_guard_is_allowed():
    """lion-pytorch's guard: ``exit()`` raises SystemExit, which is the solution's own failure."""
    guard = "try:\n    import triton\nexcept ImportError as e:\n    print('triton is not installed')\n    exit()\n"
    assert codes(guard) == set()
