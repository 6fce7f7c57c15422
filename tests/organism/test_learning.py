"""The CPU organism: the 0.12 M-parameter policy, SFT'd on bad habits for one ew2 problem, trained
with the full method (TRLOO+MRS+PR+PRS) through the real trainer and the real gym (Triton
interpreter). Reward and the CPU Fast@1 proxy must rise from step 1; the policy must sample programs
its corpus does not hold; the report must be written from the run's own output."""

import json

from drkernel.organism.arms import ARMS, SCALES
from drkernel.organism.report import write_report
from drkernel.organism.run import run_suite


def _mean(xs):
    return sum(xs) / len(xs)


def test_cpu_organism_learns_on_the_honest_arm(tmp_path):
    scale = SCALES["cpu"]
    (run,) = run_suite([ARMS["full"]], [0], scale, tmp_path, "cpu")
    steps = run["steps"]
    assert len(steps) == scale.steps and not run["stopped_early"]
    reward = [s["gym/org/reward_mean"] for s in steps]
    fast1 = [s["gym/org/fast1"] for s in steps]
    # step 1 is sampled before any update: it is the SFT policy's level
    assert _mean(reward[-2:]) > reward[0] + 0.1, reward
    assert _mean(fast1[-2:]) > fast1[0] + 0.1, fast1
    # recombination: some sampled programs that parse are in no SFT example for that prompt
    assert sum(s["gym/org/novel_rate"] for s in steps) > 0
    assert run["sft"]["params"] < 200_000 and run["sft"]["loss_last"] < run["sft"]["loss_first"] / 4

    lines = write_report([tmp_path], tmp_path / "report")
    assert any(line.startswith("SUMMARY organism full: seeds=1") for line in lines), lines
    summary = json.loads((tmp_path / "report" / "organism_summary.json").read_text())
    assert summary["runs"][0]["arm"] == "full"
    assert (tmp_path / "report" / "organism_curves.svg").read_text().startswith("<svg")
