"""The compile cache: what a candidate compiled is kept under its evaluation's scope (solution,
reference, device, versions) and seeded into later candidates of that scope only; the bytes a
candidate reports are untrusted and checked before anything is written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from drkernel.gym import CheckRegistry, InProcessEvaluator, Status
from drkernel.gym.compile_cache import CompileCache, pack, scope_key, unpack
from gym_cases import RELU_SOLUTION, request

HERE = os.path.dirname(__file__)
KEY = scope_key("solution", "reference", "NVIDIA H100", {"triton": "3.6"})


@pytest.mark.parametrize("name", ["../x", "/etc/passwd", "a/../../b", "a/b/c/d", "odd name", "", ".", "a//b"])
def test_names_that_could_leave_the_scope_are_refused(name):
    index, blob = pack({name: b"data"})
    with pytest.raises(ValueError):
        unpack(index, blob)


def test_an_index_that_does_not_add_up_to_the_blob_is_refused():
    index, blob = pack({"k/a.cubin": b"abc", "k/a.json": b"{}"})
    assert unpack(index, blob) == {"k/a.cubin": b"abc", "k/a.json": b"{}"}
    for bad in (blob + b"x", blob[:-1]):
        with pytest.raises(ValueError):
            unpack(index, bad)
    with pytest.raises(ValueError):
        unpack([["k/a.cubin", True]], b"a")  # a bool is no size
    with pytest.raises(ValueError):
        unpack(index, blob, max_bytes=4)


def test_each_part_of_the_scope_changes_the_key():
    base = ("solution", "reference", "NVIDIA H100", {"triton": "3.6"})
    keys = {scope_key(*base), scope_key("solution ", *base[1:]), scope_key(base[0], "reference2", *base[2:]),
            scope_key(*base[:2], "NVIDIA H200", base[3]), scope_key(*base[:3], {"triton": "3.5"})}
    assert len(keys) == 5


def test_stored_files_come_back_for_their_scope_only_and_first_writer_wins(tmp_path):
    cache = CompileCache(tmp_path)
    other = scope_key("another solution", "reference", "NVIDIA H100", {"triton": "3.6"})
    assert cache.store(KEY, *pack({"k/a.cubin": b"first"})) == 5
    assert cache.store(KEY, *pack({"k/a.cubin": b"planted", "k/b.cubin": b"new"})) == 3
    assert unpack(*cache.load(KEY)) == {"k/a.cubin": b"first", "k/b.cubin": b"new"}
    assert cache.load(other) == ([], b"")
    assert (tmp_path.stat().st_mode & 0o777) == 0o700


def test_a_scope_is_bounded_and_the_least_recently_used_scopes_go_first(tmp_path):
    cache = CompileCache(tmp_path, max_total_bytes=300, max_scope_bytes=100)
    assert cache.store(KEY, *pack({"k/a": b"x" * 80, "k/b": b"y" * 80})) == 80  # the second does not fit
    old, older = scope_key("old", "r", "d", {}), scope_key("older", "r", "d", {})
    for key in (old, older):
        assert cache.store(key, *pack({"k/a": b"z" * 90})) == 90
    for key, mtime in ((KEY, 1002), (old, 1000), (older, 999)):
        os.utime(tmp_path / key, (mtime, mtime))
    cache.load(older)  # used now: the most recent
    cache.store(scope_key("late", "r", "d", {}), *pack({"k/a": b"w" * 90}))  # 350 bytes: one scope goes
    left = {p.name for p in tmp_path.iterdir() if not p.name.startswith(".")}
    assert old not in left and {KEY, older} <= left
    assert sum(f.stat().st_size for f in tmp_path.rglob("*") if f.is_file()) <= 300


@pytest.fixture()
def probe_evaluator(tmp_path):
    old = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (HERE, old) if p)
    checks = CheckRegistry(candidate_hooks=("gym_hooks:CompileProbe",))
    try:
        with InProcessEvaluator(device="cpu", concurrency=1, pool_size=1, checks=checks,
                                compile_cache_dir=str(tmp_path / "cache")) as ev:
            yield ev, tmp_path / "cache"
    finally:
        os.environ["PYTHONPATH"] = old


def _scopes(root: Path) -> dict[str, set[str]]:
    return {d.name: {str(f.relative_to(d)) for f in d.rglob("*") if f.is_file()}
            for d in root.iterdir() if d.is_dir() and not d.name.startswith(".")}


def test_a_repeat_of_a_solution_is_seeded_with_what_its_first_evaluation_compiled(probe_evaluator):
    ev, root = probe_evaluator
    assert ev.evaluate(request(RELU_SOLUTION)).status is Status.CORRECT
    (first,) = _scopes(root).values()
    assert first == {"probe/first.bin"}  # neither the link out nor the odd name was kept
    assert ev.evaluate(request(RELU_SOLUTION)).status is Status.CORRECT
    assert _scopes(root) == {next(iter(_scopes(root))): {"probe/first.bin", "probe/seen.bin"}}
    other = RELU_SOLUTION + "\n# another solution\n"
    assert ev.evaluate(request(other)).status is Status.CORRECT
    scopes = _scopes(root)
    assert len(scopes) == 2 and {"probe/first.bin"} in scopes.values()  # not seeded from the first
    assert ev.device_info()["compile_cache"]["hits"] >= 1


def test_triton_s_group_records_are_pointed_at_the_new_cache():
    import json

    from drkernel.gym.compile_cache import relocate

    record = {"child_paths": {"k.cubin": "/old/cache/abc/k.cubin", "k.json": "/old/cache/abc/k.json"}}
    files = {"abc/__grp__k.json": json.dumps(record).encode(), "abc/k.cubin": b"bin", "abc/__grp__bad.json": b"{"}
    out = relocate(files, "/new")
    assert json.loads(out["abc/__grp__k.json"])["child_paths"] == {"k.cubin": "/new/abc/k.cubin",
                                                                   "k.json": "/new/abc/k.json"}
    assert out["abc/k.cubin"] == b"bin" and "abc/__grp__bad.json" not in out
