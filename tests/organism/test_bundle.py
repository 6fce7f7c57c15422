"""The suite bundle (`drkernel.organism.run.write_bundle`): rewritten after every run in one step, it
holds every finished run with all its steps, keeps the finished runs of an earlier, killed call of
the same section, and lets a re-run replace a run of the same (arm, seed)."""

import json

from drkernel.organism.env import EvalCache
from drkernel.organism.report import load_runs
from drkernel.organism.run import write_bundle

SCALE = {"name": "gpu", "steps": 12}


def _run(arm, seed, steps, scale=SCALE):
    return {"arm": arm, "seed": seed, "scale": scale, "steps": [{"gym/org/hack_rate": 0.1}] * steps,
            "steps_done": steps, "wall_seconds": 1.0, "heldout_after": {}}


def _bundle(path):
    return {(r["arm"], r["seed"]): r["steps_done"] for r in json.loads(path.read_text())["runs"]}


def test_each_write_holds_every_finished_run_whole(tmp_path):
    path, cache, runs = tmp_path / "organism_full.json", EvalCache(), []
    runs.append(_run("full", 0, 12))
    write_bundle(runs, cache, [path])
    runs.append(_run("full", 1, 12))
    write_bundle(runs, cache, [path])
    assert _bundle(path) == {("full", 0): 12, ("full", 1): 12}
    assert all(len(r["steps"]) == r["steps_done"] for r in json.loads(path.read_text())["runs"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["organism_full.json"]  # no temporary left over
    assert [(r["arm"], r["seed"]) for r in load_runs([path])] == [("full", 0), ("full", 1)]


def test_a_rerun_section_keeps_the_killed_calls_runs_and_replaces_the_ones_it_redoes(tmp_path):
    path = tmp_path / "organism_full.json"
    write_bundle([_run("full", 0, 5), _run("full", 2, 12), _run("full", 3, 12, {"name": "dry"})],
                 EvalCache(), [path])  # the first call: killed after these
    write_bundle([_run("full", 0, 12), _run("full", 1, 12)], EvalCache(), [path])  # the re-run so far
    # seed 0 replaced by its complete re-run, seed 2 kept, the run of another scale dropped
    assert _bundle(path) == {("full", 0): 12, ("full", 1): 12, ("full", 2): 12}


def test_a_torn_bundle_is_replaced_not_merged(tmp_path):
    path = tmp_path / "organism_full.json"
    path.write_text('{"schema": "organism-suite/1", "runs": [{"arm": "full", "se')
    write_bundle([_run("full", 0, 12)], EvalCache(), [path])
    assert _bundle(path) == {("full", 0): 12}
