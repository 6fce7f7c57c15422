"""Claims runs in parallel: seeds drawn at run time and recorded, the process pool, the GPU's turns
(probed with non-blocking locks, no sleeps) and the verdict file shared between runs."""

import asyncio
import fcntl
import json
import random
import sys
import threading

import pytest

from drkernel.gym import EvalConfig
from drkernel.gym.config import EvalRequest
from drkernel.gym.orchestrator.runtime import RWLock
from drkernel.gym.result import EvalResult, Status
from drkernel.organism.arms import SCALES
from drkernel.organism.families import generate, to_problem
from drkernel.organism.parallel import (
    Deadline,
    Job,
    arm_jobs,
    draw_seeds,
    finished,
    place,
    placement,
    plan,
    run_per_gpu,
    run_pool,
    seeds_for,
    set_aside,
    sft_jobs,
)
from drkernel.organism.run import sft_folder, stage_breakdown
from drkernel.organism.turns import DeviceTurns
from drkernel.organism.verdicts import EvalCache, _Claims


def test_seeds_are_drawn_once_recorded_and_extended(tmp_path):
    assert draw_seeds(5, random.Random(1)) == draw_seeds(5, random.Random(1))
    assert len(set(draw_seeds(50))) == 50
    first = seeds_for(tmp_path, 3)
    record = json.loads((tmp_path / "seeds.json").read_text())
    assert record["seeds"] == first and "SystemRandom" in record["source"] and len(record["draws"]) == 1
    assert seeds_for(tmp_path, 3) == first  # a resumed call reads them back
    more = seeds_for(tmp_path, 5)
    assert more[:3] == first and len(set(more)) == 5
    assert len(json.loads((tmp_path / "seeds.json").read_text())["draws"]) == 2


def test_the_pool_runs_jobs_skips_finished_ones_and_keeps_failures(tmp_path):
    done = tmp_path / "done.json"
    done.write_text("{}")
    jobs = [Job("ok", (sys.executable, "-c", "import os; print(os.environ['OMP_NUM_THREADS'])")),
            Job("bad", (sys.executable, "-c", "raise SystemExit(3)")),
            Job("old", (sys.executable, "-c", "raise SystemExit(9)"), done)]
    got = {r.label: r for r in run_pool(jobs, 2, tmp_path / "logs", threads=3)}
    assert got["ok"].returncode == 0 and (tmp_path / "logs" / "ok.log").read_text().strip() == "3"
    assert got["bad"].returncode == 3 and got["old"].skipped and got["old"].returncode == 0


def test_a_deadline_postpones_jobs_that_would_not_finish_in_time(tmp_path):
    import time

    jobs = [Job(f"j{i}", (sys.executable, "-c", "pass")) for i in range(3)]
    past = Deadline(time.monotonic() - 1.0, 0.0)  # already over: nothing may start
    got = run_pool(jobs, 2, tmp_path / "logs", 1, past)
    assert all(r.postponed for r in got) and "call again" in got[0].text()
    far = Deadline(time.monotonic() + 3600.0, 4000.0)
    assert not far.allows()  # before any job finished, the first guess (longer than the time left)
    far.record(60.0)  # then the longest finished job
    assert far.allows()
    assert not any(r.postponed for r in run_pool(jobs, 2, tmp_path / "logs", 1, far))
    far.record(4000.0)  # a job longer than the time left: the next one is postponed
    assert not far.allows() and far.longest == 4000.0


def test_arm_jobs_share_the_cache_and_the_turns_and_name_their_run_file(tmp_path):
    jobs = arm_jobs(["nopr", "full"], [7, 9], "gpu", "cuda", tmp_path, 90.0)
    assert [j.label for j in jobs] == ["nopr-s7", "full-s7", "nopr-s9", "full-s9"]
    argv = jobs[1].argv
    assert argv[argv.index("--turns") + 1] == str(tmp_path / "cache" / "device.lock")
    assert argv[argv.index("--budget-s") + 1] == "90.0"
    assert argv[argv.index("--gym-concurrency") + 1] == "2"
    assert jobs[1].done == tmp_path / "runs" / "full-s7" / "full-s7" / "organism_run.json"
    (sft,) = sft_jobs([7], "dry", "cpu", tmp_path)  # done when the policy's info exists
    assert sft.done == sft_folder(SCALES["dry"], 7, tmp_path / "cache") / "organism_sft.json"


def test_several_gpus_get_whole_seeds_balanced_and_kept_where_their_sft_is(tmp_path):
    work = {1: 1, 2: 3, 3: 2, 4: 1, 5: 3, 6: 1, 7: 1}  # runs left per seed (12, as after a cut call)
    where = place(work, 4)
    load = [sum(n for s, n in work.items() if where[s] == g) for g in range(4)]
    assert sorted(where) == sorted(work) and load == [3, 3, 3, 3]
    kept = place(work, 4, kept={1: 3, 2: 3})
    assert kept[1] == kept[2] == 3
    assert place(work, 4, kept={9: 0, 1: 7}).keys() == work.keys()  # stale or impossible entries dropped
    # the jobs of a seed: its GPU, that GPU's cache (SFT, verdicts, reference timings, turns' locks)
    jobs = arm_jobs(["nocheck", "full"], [2, 5], "gpu", "cuda", tmp_path, None, 2, {2: 1, 5: 0})
    assert [j.gpu for j in jobs] == [1, 1, 0, 0]
    argv = jobs[0].argv
    assert argv[argv.index("--cache") + 1] == str(tmp_path / "cache" / "gpu1")
    assert argv[argv.index("--turns") + 1] == str(tmp_path / "cache" / "gpu1" / "device.lock")
    (sft,) = sft_jobs([2], "gpu", "cuda", tmp_path, {2: 1})
    assert sft.gpu == 1 and sft.done == sft_folder(SCALES["gpu"], 2, tmp_path / "cache" / "gpu1") / "organism_sft.json"
    # recorded, so the runs after an SFT-only call (or a postponed run) find the seed where its SFT is
    todo = arm_jobs(["nocheck"], [1, 2, 3], "gpu", "cuda", tmp_path, None)
    first = placement(tmp_path, todo, 2)
    assert placement(tmp_path, todo[1:], 2) == {s: g for s, g in first.items() if s != 1}
    assert placement(tmp_path, todo, 1) is None


def test_jobs_on_several_gpus_run_side_by_side_each_seeing_only_its_gpu(tmp_path):
    show = (sys.executable, "-c", "import os; print(os.environ.get('CUDA_VISIBLE_DEVICES', 'all'))")
    jobs = [Job("a", show, gpu=0), Job("b", show, gpu=1), Job("c", show, gpu=1)]
    got = run_per_gpu(jobs, 2, tmp_path / "logs", threads=1)
    assert [r.label for r in got] == ["a", "b", "c"] and all(r.returncode == 0 for r in got)
    assert [(tmp_path / "logs" / f"{j}.log").read_text().strip() for j in "abc"] == ["0", "1", "1"]
    one = run_per_gpu([Job("d", show)], 2, tmp_path / "logs", threads=1)
    assert one[0].returncode == 0 and (tmp_path / "logs" / "d.log").read_text().strip() == "all"


def _record(job, **fields):
    """A run's record as `run.run_arm` writes it (the fields a later call reads), plus its trainer files."""
    job.done.parent.mkdir(parents=True)
    (job.done.parent / "episodes.jsonl").write_text('{"step": 1}\n')
    job.done.write_text(json.dumps({"schema": "organism-run/1", "arm": job.label.split("-")[0],
                                    "seed": job.seed, "steps_done": 12, "stopped_early": False} | fields))


def test_a_carried_runs_folder_keeps_finished_runs_and_reruns_cut_and_missing_ones(tmp_path):
    # seed 7: nocheck finished, nopr cut by the RL guard at 2/12; seed 9: nocheck killed before its
    # record (trainer files only), nopr never started; no SFT cache, no checkpoints (a fresh machine)
    jobs = arm_jobs(["nocheck", "nopr"], [7, 9], "gpu", "cuda", tmp_path, 420.0)
    kept, cut, killed, absent = jobs
    _record(kept)
    _record(cut, steps_done=2, stopped_early=True)
    killed.done.parent.mkdir(parents=True)
    (killed.done.parent / "metrics.jsonl").write_text("{}\n")
    p = plan(jobs)
    assert p.kept == (kept,) and p.cut == (cut, killed) and p.todo == (cut, killed, absent)
    assert p.sft_seeds == (7, 9)  # both seeds have runs to do; a seed with all runs finished has none
    assert finished(kept.done) and not finished(cut.done) and not finished(absent.done)
    assert "1 runs finished (kept): nocheck-s7" in p.lines()[0]
    assert "2 cut short or killed" in p.lines()[1] and "SFT for 2 seeds: 7,9" in p.lines()[3]
    where = set_aside(cut, tmp_path / "cut")
    assert where == tmp_path / "cut" / "nopr-s7-1" and not (tmp_path / "runs" / "nopr-s7").exists()
    assert json.loads((where / "nopr-s7" / "organism_run.json").read_text())["steps_done"] == 2
    _record(cut, steps_done=3, stopped_early=True)  # cut again: kept beside the first
    assert set_aside(cut, tmp_path / "cut") == tmp_path / "cut" / "nopr-s7-2"
    assert plan(arm_jobs(["nocheck"], [7], "gpu", "cuda", tmp_path, 420.0)).sft_seeds == ()


def _blocked(turns, mode):
    """Whether another holder's lock would block ``mode`` on ``turns``'s main file right now."""
    with turns.path.open("a") as probe:
        try:
            fcntl.flock(probe, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(probe, fcntl.LOCK_UN)
        return False


def test_exclusive_turns_shut_out_everyone_and_shared_turns_only_the_exclusive(tmp_path):
    a = DeviceTurns(tmp_path / "device.lock")
    with a.shared():
        assert not _blocked(a, fcntl.LOCK_SH) and _blocked(a, fcntl.LOCK_EX)
        with a.exclusive():
            assert _blocked(a, fcntl.LOCK_SH)
        assert not _blocked(a, fcntl.LOCK_SH) and _blocked(a, fcntl.LOCK_EX)  # shared again
    assert not _blocked(a, fcntl.LOCK_EX)
    a.close()


def test_a_gyms_timed_regions_take_the_runs_turn_exclusively_and_give_it_back(tmp_path):
    """The gym's own lock with the runs' turns as its outer lock: sessions change nothing, a timed region
    (a member's, or a reference timing's drain) shuts every other run out and then the run's shared hold
    is back."""
    turns = DeviceTurns(tmp_path / "device.lock")
    rw = RWLock(outer=turns)
    with turns.shared():  # the run's batch of evaluations
        rw.join()  # a candidate session: compile, correctness, integrity runs
        assert not _blocked(turns, fcntl.LOCK_SH) and _blocked(turns, fcntl.LOCK_EX)
        rw.enter_region()
        assert _blocked(turns, fcntl.LOCK_SH)
        rw.leave_region()
        assert not _blocked(turns, fcntl.LOCK_SH) and _blocked(turns, fcntl.LOCK_EX)
        rw.leave()
        with rw.exclusive(drain=True):  # a reference timing
            assert _blocked(turns, fcntl.LOCK_SH)
        assert not _blocked(turns, fcntl.LOCK_SH) and _blocked(turns, fcntl.LOCK_EX)
        with turns.released():  # waiting for another run: nothing held
            assert not _blocked(turns, fcntl.LOCK_EX)
        assert _blocked(turns, fcntl.LOCK_EX)
    assert not _blocked(turns, fcntl.LOCK_EX)
    assert turns.stats.exclusive_turns == 2
    turns.close()


class _Judge:
    def __init__(self):
        self.requests = 0

    async def evaluate_batch(self, requests):
        self.requests += len(requests)
        return [EvalResult(status=Status.CORRECT, op_coverage=1.0).finalize() for _ in requests]


class _Incorrect(_Judge):
    async def evaluate_batch(self, requests):
        self.requests += len(requests)
        return [EvalResult(status=Status.INCORRECT).finalize() for _ in requests]


def _request(source):
    problem = to_problem(generate("train", 1, seed=2, families=("ew2",))[0])
    config = EvalConfig(device="cpu", trials=1, second_size=False, timing=False)
    request = EvalRequest(problem, source, config)
    return problem, config, request, request.content_hash()


def test_the_first_verdict_written_wins(tmp_path):
    """Two runs that judged one program at once both use the verdict written first; the file keeps one."""
    path = tmp_path / "verdicts.jsonl"
    first, second = EvalCache(path), EvalCache(path)
    problem, config, request, key = _request("source a")
    asyncio.run(first.judge(_Judge(), config, [(problem, "source a")]))
    asyncio.run(second._evaluate(_Incorrect(), {key: request}))  # judged before it read the first's line
    assert second.results[key].correct and second.evaluations == 1
    assert len(path.read_text().splitlines()) == 1


def test_a_program_another_run_claimed_is_waited_for_and_read_not_judged_again(tmp_path):
    path = tmp_path / "verdicts.jsonl"
    problem, config, request, key = _request("source a")
    other = _Claims(path.with_name(path.name + ".claims"))
    assert other.take([key]) == set()  # another run is judging it
    assert _Claims(other.folder).take([key]) == {key}
    waiter = EvalCache(path, DeviceTurns(tmp_path / "device.lock"))
    judge, got = _Judge(), []
    thread = threading.Thread(target=lambda: got.extend(
        asyncio.run(waiter.judge(judge, config, [(problem, "source a")]))))
    thread.start()
    asyncio.run(EvalCache(path)._evaluate(_Judge(), {key: request}))  # the other run writes its verdict
    other.drop()  # then drops its claim (and its file)
    thread.join(timeout=120)
    assert not thread.is_alive() and judge.requests == 0 and got[0].correct
    assert not (other.folder / key).exists()


def test_a_runs_stage_breakdown_sums_its_steps_and_differences_its_counters():
    steps = [{"perf/step_s": 10.0, "gym/org/sample_s": 2.0, "gym/org/eval_s": 5.0, "gym/org/eval_wait_s": 1.0,
              "perf/score_s": 0.5, "perf/update_s": 1.5}] * 2
    before = {"evaluations_n": 4.0, "turns/exclusive_wait_s": 1.0, "gym/exclusive": 0.5, "gym/other": 9.0}
    after = {"evaluations_n": 10.0, "turns/exclusive_wait_s": 4.0, "gym/exclusive": 2.0, "gym/other": 20.0}
    st = stage_breakdown({"seconds": 100.0}, 7.0, {"heldout_before": 3.0}, steps, before, after, 40.0)
    assert st == {"sft": 100.0, "gym_start": 7.0, "heldout_before": 3.0, "rl": 20.0, "sampling": 4.0,
                  "evaluations": 10.0, "wait_others": 2.0, "training": 4.0, "wall": 40.0,
                  "evaluations_n": 6.0, "turns/exclusive_wait_s": 3.0, "gym/exclusive": 1.5}


def test_two_runs_judge_a_program_once_through_the_shared_file(tmp_path):
    path = tmp_path / "verdicts.jsonl"
    problem = to_problem(generate("train", 1, seed=2, families=("ew2",))[0])
    config = EvalConfig(device="cpu", trials=1, second_size=False, timing=False)
    first = EvalCache(path, DeviceTurns(tmp_path / "device.lock"))
    second = EvalCache(path, DeviceTurns(tmp_path / "device.lock"))  # opened before the first judged
    judge1, judge2 = _Judge(), _Judge()
    asyncio.run(first.judge(judge1, config, [(problem, "source a")]))
    (got,) = asyncio.run(second.judge(judge2, config, [(problem, "source a")]))
    assert judge1.requests == 1 and judge2.requests == 0 and got.correct  # read from the first's lines
    asyncio.run(second.judge(judge2, config, [(problem, "source b")]))
    asyncio.run(first.judge(judge1, config, [(problem, "source b")]))
    assert judge1.requests == 1 and judge2.requests == 1
    assert len(path.read_text().splitlines()) == 2
    with path.open("a") as f:
        f.write('{"key": "torn')  # a killed run's half line: skipped until it is complete
    third = EvalCache(path, DeviceTurns(tmp_path / "device.lock"))
    assert len(third.results) == 2


@pytest.mark.slow
def test_the_claims_command_runs_fresh_seeds_in_parallel_on_cpu(tmp_path):
    """End to end at the dry scale: 2 fresh seeds x 2 arms as 4 processes, 2 at once, and the report."""
    from drkernel.organism.parallel import claims

    lines = claims(["nopr", "full"], 2, "dry", "cpu", tmp_path, parallel=2, cpus=2)
    seeds = json.loads((tmp_path / "seeds.json").read_text())["seeds"]
    assert not any("FAILED" in line for line in lines), "\n".join(lines)
    summary = json.loads((tmp_path / "report" / "organism_summary.json").read_text())
    assert sorted(summary["seeds"]["full"]) == sorted(seeds)
    assert summary["claims"][2]["verdict"] == "UNDECIDED"  # 2 seeds: never the registered protocol
    stages = [line for line in lines if line.startswith("SUMMARY organism stages")]
    assert len(stages) == 4 and all("sampling" in line and "evaluations" in line for line in stages)
    run = json.loads(next((tmp_path / "runs").glob("*/*/organism_run.json")).read_text())
    assert run["stages"]["evaluations_n"] >= 0 and run["stages"]["wall"] > run["stages"]["sampling"]


@pytest.mark.slow
def test_a_claims_call_on_a_carried_folder_runs_only_what_is_left_on_cpu(tmp_path):
    """The folder a fresh machine gets: run records without the SFT cache, the verdicts or the
    checkpoints; one run cut short by the RL guard. Only that run (and its seed's SFT) is done again."""
    import shutil

    from drkernel.organism.parallel import claims

    first = claims(["nopr", "full"], 1, "dry", "cpu", tmp_path, parallel=2, cpus=2)
    assert not any("FAILED" in line for line in first), "\n".join(first)
    seed = json.loads((tmp_path / "seeds.json").read_text())["seeds"][0]
    shutil.rmtree(tmp_path / "cache")
    for folder in (tmp_path / "runs").glob("*/*/checkpoints"):
        shutil.rmtree(folder)
    kept, cut = (tmp_path / "runs" / f"{a}-s{seed}" / f"{a}-s{seed}" / "organism_run.json" for a in ("full", "nopr"))
    kept_text = kept.read_text()
    cut.write_text(json.dumps(json.loads(cut.read_text()) | {"stopped_early": True}))
    lines = claims(["nopr", "full"], 1, "dry", "cpu", tmp_path, parallel=2, cpus=2)
    assert not any("FAILED" in line for line in lines), "\n".join(lines)
    assert f"SUMMARY organism plan: 1 runs finished (kept): full-s{seed}" in lines
    assert f"SUMMARY organism plan: SFT for 1 seeds: {seed}" in lines
    assert kept.read_text() == kept_text  # not run again
    assert not json.loads(cut.read_text())["stopped_early"]  # run again to its last step
    assert (tmp_path / "cut" / f"nopr-s{seed}-1" / f"nopr-s{seed}" / "organism_run.json").exists()
    stages = [line for line in lines if "organism stages" in line]
    assert len(stages) == 1 and stages[0].startswith(f"SUMMARY organism stages nopr-s{seed}")
    summary = json.loads((tmp_path / "report" / "organism_summary.json").read_text())
    assert summary["seeds"]["full"] == summary["seeds"]["nopr"] == [seed]
