import json

import pytest

from drkernel.errors import ProblemNotFoundError, ProblemSourceError
from drkernel.problems import find_problem, load_kernelbench, load_problems, load_rows


def test_all_200_shared_problems_load(kernelbench_rows):
    problems = load_rows(kernelbench_rows)
    assert len(problems) == 200
    assert {p.level for p in problems} == {1, 2}
    assert len(load_problems(f"{kernelbench_rows}:2")) == 100
    relu = find_problem(problems, "L1/19_ReLU")
    assert relu.problem_id == 19 and "torch.relu" in relu.code


def test_kernelbench_checkout_layout(tmp_path, kernelbench_rows):
    rows = [json.loads(line) for line in kernelbench_rows.read_text().splitlines()][:3]
    d = tmp_path / "KernelBench" / "level1"
    d.mkdir(parents=True)
    for r in rows:
        (d / f"{r['name']}.py").write_text(r["code"])
    (d / "notes.txt").write_text("not a problem")
    for root in (tmp_path, tmp_path / "KernelBench", d):
        problems = load_kernelbench(root)
        assert [p.problem_id for p in problems] == [1, 2, 3]
        assert problems[0].source == "kernelbench"


def test_parquet_rows(tmp_path, kernelbench_rows):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in kernelbench_rows.read_text().splitlines()][:5]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "rows.parquet")
    assert [p.name for p in load_rows(tmp_path / "rows.parquet")] == [r["name"] for r in rows]


def test_bad_sources_raise_classified_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"name": "x", "level": 1}\n')
    with pytest.raises(ProblemSourceError, match="lacks columns"):
        load_rows(bad)
    bad.write_text("{not json\n")
    with pytest.raises(ProblemSourceError, match="not JSON"):
        load_rows(bad)
    with pytest.raises(ProblemSourceError):
        load_problems(str(tmp_path / "missing"))
    with pytest.raises(ProblemNotFoundError):
        find_problem([], "nope")
