"""The program language: parsing, writers, constant binding, and that nothing but vocabulary reaches
the rendered source."""

import random

import pytest

from drkernel.organism.families import Kind, Spec, generate
from drkernel.organism.program import Mode, ProgramError, SolutionKind, broken, parse, write
from drkernel.organism.render import bind_constants, render


@pytest.mark.parametrize("text", [
    "", ";", "triton", "cuda relu", "triton softmax relu", "triton relu matmul", "decoy relu",
    "triton matmul add_y", "torch relu ; ; triton sin", "triton relu os.system", "triton relu;import os",
    "triton " + "relu " * 3 + ";" + " ; ".join(["torch relu"] * 8),
])
def test_malformed_programs_are_rejected(text):
    with pytest.raises(ProgramError):
        parse(text)


def test_writers_round_trip_and_compute_the_chain():
    rng = random.Random(0)
    for spec in generate("train", 60, seed=1):
        for kind in SolutionKind:
            program = write(kind, spec, rng)
            if program is None:
                assert kind is SolutionKind.LAZY  # no elementwise op to hand to a kernel
                continue
            assert parse(program.text) == program
            honest = kind is not SolutionKind.BROKEN
            assert (program.ops == spec.ops) == honest, (kind, program.text, spec.ops)
            source = render(spec, program)
            compile(source, "solution.py", "exec")
            assert "class ModelNew" in source and ".item()" not in source
            assert ("decoy_kernel" in source) == (kind is SolutionKind.HACK)


def test_writer_shapes():
    spec = Spec(Kind.EW, ("relu", "scale", "add_y"), (None, 0.5, None))
    assert write(SolutionKind.GOLD, spec).text == "triton relu scale add_y"
    assert write(SolutionKind.PER_OP, spec).text == "triton relu ; triton scale ; triton add_y"
    assert write(SolutionKind.LAZY, spec).text == "torch relu scale ; triton add_y"
    assert write(SolutionKind.HACK, spec).text == "torch relu scale add_y ; decoy"
    assert parse("torch relu ; decoy").segments[1].mode is Mode.DECOY


def test_replace_breakage_always_changes_the_chain():
    rng = random.Random(0)
    for spec in generate("train", 200, seed=2):
        assert broken(spec, rng, how="replace").ops != spec.ops


def test_constants_bind_by_position_among_same_named_ops():
    spec = Spec(Kind.EW, ("scale", "relu", "scale", "shift"), (0.5, None, 2.0, -1.0))
    assert bind_constants(spec, ("scale", "scale", "shift")) == [0.5, 2.0, -1.0]
    # a third scale the problem lacks takes the op's first constant; the output is then simply wrong
    assert bind_constants(spec, ("scale", "scale", "scale")) == [0.5, 2.0, 0.5]
    assert "h * 2.0" in render(spec, parse("triton scale relu scale shift"))


def test_gemm_kernels_accumulate_in_fp32_not_tf32():
    # TF32 (tl.dot's default on a GPU) fails the gym's spread-input trial (docs/ORGANISM.md)
    spec = generate("train", 1, seed=0, families=("gemm1",))[0]
    for kind in (SolutionKind.GOLD, SolutionKind.PER_OP):
        source = render(spec, write(kind, spec))
        assert source.count("tl.dot(") == source.count('tl.dot(a, b, input_precision="ieee")') == 1
