"""The module index the static check reads instead of importing torch, triton and numpy.

One index is built per module, by the real child process, into a temporary cache folder (never the
user's cache). Live answers come from a fresh interpreter that imports the modules itself, as the
check did before the index existed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from drkernel.gym.verdict import module_index
from drkernel.gym.verdict.module_index import STOP, ModuleIndex, cache_key, load_index
from drkernel.gym.verdict.static import canonical_in

ADVERSARIAL = Path(__file__).resolve().parents[1] / "adversarial"

# name -> what canonical gives on live modules (worked out by reading the modules' namespaces).
EXPECTED = {
    "torch.nn.functional.np": ("numpy", "numpy"),            # torch.nn.functional imports numpy as np
    "torch.nn.functional.np.random.seed": ("numpy.random.seed", "numpy"),
    "typing.sys.modules": ("sys.modules", "sys"),            # typing imports sys
    "dataclasses.sys": ("sys", "sys"),
    "torch.nn.functional.relu": ("torch.nn.functional.relu", None),
    "F.relu": ("F.relu", None),                                # not rooted in an allowed import
    "triton.language.extra.cuda.libdevice.exp": ("triton.language.extra.cuda.libdevice.exp", None),
    "torch.utils.file_baton.os.system": ("os.system", "os"),  # a submodule torch does not import itself
    "torch._dynamo.os": ("torch._dynamo.os", None),           # private: never imported by the check
    "torch.utils.cpp_extension.os": ("torch.utils.cpp_extension.os", None),  # forbidden: never imported
    "torch.no_such_module.os": ("torch.no_such_module.os", None),            # fails to import
}


@pytest.fixture(scope="module")
def cache_home(tmp_path_factory) -> Path:
    """An ``XDG_CACHE_HOME`` holding an index built by the child process for this interpreter."""
    home = tmp_path_factory.mktemp("xdg-cache")
    load_index(home / "drkernel" / "module-index")
    return home


@pytest.fixture(scope="module")
def index(cache_home) -> ModuleIndex:
    return load_index(cache_home / "drkernel" / "module-index")


def _run(code: str, cache_home: Path, timeout: int = 300) -> str:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_home)}
    code = f"import sys; sys.path.insert(0, {str(ADVERSARIAL)!r})\n" + textwrap.dedent(code)
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=timeout,
                         env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_index_follows_names_through_the_modules_they_pass(index, name):
    assert canonical_in(index, name) == EXPECTED[name]


def test_index_agrees_with_live_modules(index, cache_home):
    """Every attribute of the allowed modules most solutions use, and ``.os`` after each, as a fresh
    interpreter that imports them resolves it."""
    live = json.loads(_run("""
        import json, torch, triton.language, typing, dataclasses, functools, contextlib, collections
        from drkernel.gym.verdict.module_index import LiveModules
        from drkernel.gym.verdict.static import canonical_in
        names = list(EXPECTED)
        for root in ("torch", "torch.nn", "torch.nn.functional", "triton", "triton.language", "typing",
                     "dataclasses", "functools", "contextlib", "collections"):
            module = eval(root)
            names += [f"{root}.{a}" for a in sorted(vars(module)) if isinstance(a, str)]
            names += [f"{root}.{a}.os" for a in sorted(vars(module)) if isinstance(a, str)]
        print(json.dumps({n: canonical_in(LiveModules(), n) for n in names}))
    """.replace("EXPECTED", repr(list(EXPECTED))), cache_home))
    assert len(live) > 2000
    differ = {n: (tuple(v), canonical_in(index, n)) for n, v in live.items() if canonical_in(index, n) != tuple(v)}
    assert differ == {}


def test_an_evaluation_leaves_the_parent_torch_free(cache_home):
    """The orchestrator's static checks and verdict run without torch, triton or numpy in its process."""
    out = _run("""
        import asyncio, sys
        from corpus import cases, problem_source
        from drkernel.gym import EvalConfig, EvalRequest
        from drkernel.gym.orchestrator.evaluator import InProcessEvaluator
        from drkernel.problems.problem import Problem

        case = next(c for c in cases("honest") if c.id == "honest/relu_basic")
        problem = Problem(name=case.problem, level=1, code=problem_source(case.problem), source="file")
        request = EvalRequest(problem, case.source, EvalConfig(device="cpu", trials=1))
        with InProcessEvaluator(device="cpu", concurrency=1, pool_size=1) as ev:
            result = asyncio.run(ev.evaluate_batch([request]))[0]
        heavy = sorted({m.split(".")[0] for m in sys.modules} & {"torch", "triton", "numpy"})
        print(result.status.value, result.valid, ",".join(heavy) or "-")
    """, cache_home)
    assert out.split() == ["correct", "True", "-"], out


def test_cached_index_is_read_without_a_child(tmp_path, monkeypatch):
    """A cached file with this interpreter's key is the index; nothing is rebuilt."""
    tiny = ModuleIndex(names=("typing", "sys"), attributes=({"sys": 1}, {}), stops={0: frozenset({"cast"})},
                       modules={"typing": 0, "sys": 1, "typing.cast": 1})
    key = cache_key()
    monkeypatch.setattr(module_index, "_build_in_child", lambda key: pytest.fail("rebuilt a cached index"))
    module_index.cache_file(tmp_path, key).write_text(json.dumps(tiny.to_json(key)))
    loaded = load_index(tmp_path)
    assert loaded == tiny
    assert canonical_in(loaded, "typing.sys.modules") == ("sys.modules", "sys")
    assert loaded.attribute(0, "cast") is STOP            # shadows the module typing.cast: the walk stops
    assert canonical_in(loaded, "typing.cast.x") == ("typing.cast.x", None)


def test_index_of_another_environment_is_not_read(tmp_path):
    """A file whose key differs (another torch, another drkernel) is not trusted: it is rebuilt."""
    key = cache_key()
    path = module_index.cache_file(tmp_path, key)
    index = ModuleIndex(names=("typing",), attributes=({},), stops={}, modules={"typing": 0})
    path.write_text(json.dumps(index.to_json({**key, "torch": "0.0.0"})))
    assert module_index._read(path, key) is None
    path.write_text(json.dumps(index.to_json(key)))
    assert module_index._read(path, key) == index
    path.write_text(json.dumps({"key": key}))           # damaged: rebuilt, not read
    assert module_index._read(path, key) is None


def test_child_imports_this_drkernel_whatever_the_working_directory(tmp_path, monkeypatch):
    """The child runs in an empty folder: a relative ``PYTHONPATH=src`` (as `scripts/gpu_check.sh` sets)
    must still name the caller's folder, and the folder this drkernel comes from goes first."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src").mkdir()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["src", "", "/opt/x"]))
    entries = module_index._child_env()["PYTHONPATH"].split(os.pathsep)
    assert (Path(entries[0]) / "drkernel" / "gym" / "verdict" / "module_index.py").is_file()
    assert entries[1:] == [str(tmp_path / "src"), "/opt/x"]
    assert module_index.__file__.startswith(entries[0])
