"""The report: claims read against the seed spread (hand-worked), the table and a well-formed SVG."""

import xml.etree.ElementTree as ET

from drkernel.organism.report import curves_svg, table, verdicts


def _run(arm, seed, hack, lazy, reward=0.5):
    step = {"gym/org/hack_rate": hack, "gym/org/lazy_rate": lazy, "gym/org/reward_mean": reward,
            "gym/org/coverage": 1 - lazy, "gym/org/fast1": 0.0, "gym/org/fast1.2": 0.0}
    return {"arm": arm, "seed": seed, "steps": [step, step], "steps_done": 2, "heldout_after": {}}


def test_claims_are_separated_only_when_the_seed_ranges_do_not_overlap():
    runs = [_run("nocheck", 0, 0.8, 0.1), _run("nocheck", 1, 0.6, 0.1),     # hack range [0.6, 0.8]
            _run("full", 0, 0.1, 0.3), _run("full", 1, 0.2, 0.5),           # hack [0.1, 0.2], lazy [0.3, 0.5]
            _run("nopr", 0, 0.1, 0.6), _run("nopr", 1, 0.1, 0.4)]           # lazy [0.4, 0.6]: overlaps full
    text, values = table(runs, tail=2)
    assert values["nocheck"]["hack_rate"].low == 0.6 and values["full"]["hack_rate"].high == 0.2
    got = {c.metric + ":" + c.high_arm: v for c, v in verdicts(values)}
    assert got["hack_rate:nocheck"] == "SEPARATED"
    assert got["lazy_rate:nopr"].startswith("SAME-ORDER")  # means 0.5 > 0.4, ranges overlap
    assert got["coverage:full"].startswith("SAME-ORDER")
    assert got["reward_mean:full"] == "MISSING"  # no grpo arm
    assert "| nocheck | 2 | 2/2 |" in text


def test_reversed_claim_and_svg_parses():
    runs = [_run("nocheck", 0, 0.1, 0.0), _run("full", 0, 0.3, 0.0)]
    got = {c.metric + ":" + c.high_arm: v for c, v in verdicts(table(runs, 1)[1])}
    assert got["hack_rate:nocheck"] == "REVERSED"
    root = ET.fromstring(curves_svg(runs))
    assert root.tag.endswith("svg") and len(root.findall(".//{http://www.w3.org/2000/svg}polyline")) == 6 * 2


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


def test_one_seed_is_never_separated_and_runs_cut_short_are_named(tmp_path):
    import json

    from drkernel.organism.report import write_report

    runs = [_run("nocheck", 0, 0.8, 0.1), _run("full", 0, 0.1, 0.3)]
    got = {c.metric + ":" + c.high_arm: v for c, v in verdicts(table(runs, 1)[1])}
    assert got["hack_rate:nocheck"].startswith("SAME-ORDER (one seed")  # 0.8 > 0.1, but no spread
    four = [_run("nocheck", s, 0.6 + 0.05 * s, 0.1) for s in range(4)] + \
        [_run("full", s, 0.1 + 0.1 * s, 0.3) for s in range(4)]              # [0.6, 0.75] vs [0.1, 0.4]
    values = table(four, 1)[1]
    assert values["full"]["hack_rate"].seeds == 4
    assert {c.metric + ":" + c.high_arm: v for c, v in verdicts(values)}["hack_rate:nocheck"] == "SEPARATED"
    short = dict(four[0], scale={"name": "gpu", "steps": 12}, wall_seconds=1.0, heldout_before={})
    rest = [dict(r, scale={"name": "gpu", "steps": 2}, wall_seconds=1.0, heldout_before={}) for r in four[1:]]
    (tmp_path / "organism_suite.json").write_text(json.dumps({"schema": "organism-suite/1",
                                                              "runs": [short] + rest}))
    lines = write_report([tmp_path], tmp_path / "r")
    assert "SUMMARY organism cut short: nocheck s0 2/12" in lines, lines
    assert "nocheck s0 2/12" in (tmp_path / "r" / "organism_table.md").read_text()
