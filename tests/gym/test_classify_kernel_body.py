"""A kernel body that names something Triton lacks (``tl.gelu``) is a compile error on CPU as on GPU.

The tracebacks are real: one child process (TRITON_INTERPRET must be set before triton is imported)
runs each case's small kernel under the Triton interpreter and prints what it raised.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from drkernel.gym.verdict.classify import classify_error
from drkernel.gym.result import Status
from drkernel.problems import builtin_solution, load_builtin

# (name, the value the kernel stores, the nested helper's body, a line run before the launch, status)
CASES = [
    ("tl_gelu", "tl.gelu(h)", "h", "pass", Status.COMPILE_ERROR),  # no such tl function
    ("in_helper", "helper(h)", "tl.no_such_op(h)", "pass", Status.COMPILE_ERROR),  # in a nested jit helper
    ("undefined", "undefined_name * h", "h", "pass", Status.COMPILE_ERROR),  # an undefined name
    # Not a name or type error of the kernel body: left to the other rules.
    ("outside", "h", "h", "raise AttributeError('no attribute, outside the kernel')", Status.RUNTIME_ERROR),
    ("index", "h + [1.0, 2.0][5]", "h", "pass", Status.RUNTIME_ERROR),
]

_PROGRAM = '''
import json, os, sys, traceback
os.environ["TRITON_INTERPRET"] = "1"
import torch, triton, triton.language as tl
out = {{}}
'''
_CASE = '''
@triton.jit
def helper_{name}(h):
    return {helper_body}

@triton.jit
def kernel_{name}(x_ptr, y_ptr, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    h = tl.load(x_ptr + cols)
    helper = helper_{name}
    tl.store(y_ptr + cols, {store_value})

def forward_{name}(x):
    y = torch.empty_like(x)
    {before_launch}
    kernel_{name}[(1,)](x, y, BLOCK=16)

try:
    forward_{name}(torch.randn(16))
    out["{name}"] = None
except Exception as e:
    out["{name}"] = [type(e).__name__, "".join(traceback.format_exception(e))]
'''


@pytest.fixture(scope="module")
def tracebacks(tmp_path_factory) -> dict:
    src = _PROGRAM.format() + "".join(
        _CASE.format(name=n, store_value=v, helper_body=h, before_launch=b) for n, v, h, b, _ in CASES
    ) + "\nsys.stdout.write(json.dumps(out))\n"
    path = tmp_path_factory.mktemp("kernels") / "kernels.py"  # a file: triton.jit reads the source
    path.write_text(src)
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    return json.loads(done.stdout)


@pytest.mark.parametrize("name, expect", [(c[0], c[4]) for c in CASES])
def test_kernel_body_errors_under_the_interpreter(tracebacks, name, expect):
    assert tracebacks[name] is not None, f"{name}: the kernel did not fail"
    exc_type, tb = tracebacks[name]
    message = tb.strip().splitlines()[-1]
    assert classify_error("forward", exc_type, message, tb, cpu_mode=True) is expect, tb
    if expect is Status.COMPILE_ERROR:  # an interpreter-only rule: on GPU the compiler says so itself
        assert classify_error("forward", exc_type, message, tb, cpu_mode=False) is Status.RUNTIME_ERROR


def test_the_builtin_broken_compile_error_solution_is_a_compile_error_on_cpu():
    from drkernel.gym import EvalConfig, EvalRequest, InProcessEvaluator

    problem = next(p for p in load_builtin([2]) if p.name == "layernorm_gelu")
    request = EvalRequest(problem=problem, solution=builtin_solution(problem, "broken_compile_error.py"),
                          config=EvalConfig(device="cpu", trials=1, timing=False))
    with InProcessEvaluator(device="cpu", concurrency=1, pool_size=0) as ev:
        result = ev.evaluate(request)
    assert result.status is Status.COMPILE_ERROR, result.error
    assert "gelu" in (result.error or "")
