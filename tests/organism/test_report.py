"""The report: claims decided by the registered permutation test on per-seed values (hand-worked),
the table, the advantage-bias section and a well-formed SVG."""

import xml.etree.ElementTree as ET

from drkernel.organism.claims import Verdict
from drkernel.organism.report import curves_svg, decisions, table


def _run(arm, seed, hack, lazy, reward=0.5):
    step = {"gym/org/hack_rate": hack, "gym/org/lazy_rate": lazy, "gym/org/reward_mean": reward,
            "gym/org/coverage": 1 - lazy, "gym/org/fast1": 0.0, "gym/org/fast1.2": 0.0,
            "gym/org/adv/n_t1": 8.0, "gym/org/adv/grpo_slope_t1": 0.875, "gym/org/adv/grpo_expected_t1": 0.875,
            "gym/org/adv/n_t2": 5.0, "gym/org/adv/grpo_slope_t2": 0.79, "gym/org/adv/grpo_expected_t2": 0.8}
    return {"arm": arm, "seed": seed, "steps": [step, step], "steps_done": 2, "heldout_after": {}}


def _verdicts(runs, tail=2):
    return {d.claim.key: d.verdict for d in decisions(runs, tail)}


def test_claims_follow_the_permutation_test_over_eight_seeds():
    # hack: nocheck 0.60..0.74 against full 0.10..0.24, every nocheck seed above every full one ->
    # the exact one-sided p is 1/C(16, 8) = 1/12870: SEPARATED
    runs = [_run("nocheck", s, 0.6 + 0.02 * s, 0.1) for s in range(8)] + \
        [_run("full", s, 0.1 + 0.02 * s, 0.3) for s in range(8)] + \
        [_run("nopr", s, 0.1, 0.3 + (0.02 if s % 2 else -0.02)) for s in range(8)]  # lazy 0.28/0.32 vs 0.3
    got = _verdicts(runs)
    assert got["hack"] is Verdict.SEPARATED
    assert got["lazy"] is Verdict.NOT_SEPARATED  # means equal: p = 0.5-ish both ways
    assert got["fast"] is Verdict.NOT_SEPARATED  # every fast1.2 is 0: all splits tie, p = 1
    hack = decisions(runs, 2)[0]
    assert hack.test.p_value == 1 / 12870 and [s for s, _ in hack.high] == list(range(8))
    text, values = table(runs, tail=2)
    assert values["nocheck"]["hack_rate"].low == 0.6 and "| nocheck | 8 | " in text


def test_reversed_and_undecided_claims_and_svg_parses():
    runs = [_run("nocheck", s, 0.1, 0.0) for s in range(8)] + [_run("full", s, 0.3, 0.0) for s in range(8)]
    assert _verdicts(runs, 1)["hack"] is Verdict.REVERSED
    two = [_run("nocheck", s, 0.9, 0.0) for s in range(2)] + [_run("full", s, 0.1, 0.0) for s in range(2)]
    assert _verdicts(two, 1)["hack"] is Verdict.UNDECIDED  # ordered, but not the registered 8 seeds
    assert _verdicts(two, 1)["lazy"] is Verdict.MISSING  # no nopr arm
    root = ET.fromstring(curves_svg(two))
    assert root.tag.endswith("svg") and len(root.findall(".//{http://www.w3.org/2000/svg}polyline")) == 6 * 4


def test_missing_or_corrupt_inputs_are_config_errors(tmp_path):
    import pytest

    from drkernel.errors import ConfigError
    from drkernel.organism.report import write_report

    with pytest.raises(ConfigError):
        write_report([tmp_path / "absent"], tmp_path / "r")
    (tmp_path / "organism_suite.json").write_text("{not json")
    with pytest.raises(ConfigError):
        write_report([tmp_path], tmp_path / "r")
    (tmp_path / "organism_suite.json").write_text('{"runs": []}')
    with pytest.raises(ConfigError):  # nothing to report is an error, not an empty table
        write_report([tmp_path], tmp_path / "r")


EXTRA = {"scale": {"name": "dry"}, "wall_seconds": 1.0, "heldout_before": {}}


def test_the_report_can_be_rewritten_into_the_folder_it_reads(tmp_path):
    import json

    import pytest

    from drkernel.errors import ConfigError
    from drkernel.organism.report import write_report

    runs = [_run("nocheck", 0, 0.8, 0.1) | EXTRA, _run("full", 0, 0.1, 0.3) | EXTRA]
    (tmp_path / "organism_full.json").write_text(json.dumps({"schema": "organism-suite/1", "runs": runs}))
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "organism_sft.json").write_text('{"params": 1}')  # an SFT policy's info: skipped
    first = write_report([tmp_path], tmp_path / "organism_report")
    # the second pass finds organism_report/organism_summary.json too; it holds no runs to read
    assert write_report([tmp_path], tmp_path / "organism_report") == first
    nocheck = [line for line in first if line.startswith("SUMMARY organism nocheck")]
    assert len(nocheck) == 1 and "hack_rate=0.80" in nocheck[0], first
    with pytest.raises(ConfigError):  # named on its own, a file must be a run or a suite
        write_report([tmp_path / "organism_report" / "organism_summary.json"], tmp_path / "again")
    bad = {"schema": "organism-suite/1", "runs": [{"arm": 1}]}  # a run without seed and steps
    (tmp_path / "organism_full.json").write_text(json.dumps(bad))
    with pytest.raises(ConfigError):
        write_report([tmp_path], tmp_path / "organism_report")


def test_report_names_runs_cut_short_and_shows_seeds_and_the_advantage_bias(tmp_path):
    import json

    from drkernel.organism.report import write_report

    runs = [_run("nocheck", 11 + s, 0.6 + 0.05 * s, 0.1) for s in range(4)] + \
        [_run("full", 11 + s, 0.1 + 0.1 * s, 0.3) for s in range(4)]
    short = dict(runs[0], scale={"name": "gpu", "steps": 12}, wall_seconds=1.0, heldout_before={})
    rest = [dict(r, scale={"name": "gpu", "steps": 2}, wall_seconds=1.0, heldout_before={}) for r in runs[1:]]
    (tmp_path / "organism_suite.json").write_text(json.dumps({"schema": "organism-suite/1",
                                                              "runs": [short] + rest}))
    lines = write_report([tmp_path], tmp_path / "r")
    assert "SUMMARY organism cut short: nocheck s11 2/12" in lines, lines
    md = (tmp_path / "r" / "organism_table.md").read_text()
    assert "nocheck s11 2/12" in md and "nocheck: 11, 12, 13, 14" in md
    assert "| full | 2 | 5.00 | 0.790 | 0.800 | 0.931 |" in md  # measured, expected, the toy's slope
    claim = next(line for line in lines if line.startswith("SUMMARY organism claim: without hack checks"))
    assert "UNDECIDED" in claim and "p = 0.0143" in claim  # 4 vs 4 all above: 1/C(8, 4) = 1/70
    summary = json.loads((tmp_path / "r" / "organism_summary.json").read_text())
    assert summary["claims"][0]["high"][0] == {"seed": 11, "value": 0.6}
