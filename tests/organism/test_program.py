"""The program language: parsing, writers, constant binding, and that nothing but vocabulary reaches
the rendered source."""

import random

import pytest

from drkernel.organism.families import Kind, Spec, generate
from drkernel.organism.program import HackStyle, Mode, ProgramError, SolutionKind, broken, hack, parse, write
from drkernel.organism.render import bind_constants, render


@pytest.mark.parametrize("text", [
    "", ";", "triton", "cuda relu", "triton softmax relu", "triton relu matmul", "decoy relu",
    "triton matmul add_y", "torch relu ; ; triton sin", "tiled relu", "tiled", "triton relu os.system", "triton relu;import os",
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
            if program is None:  # lazy: no elementwise op to hand to a kernel; tuned: no GEMM
                assert kind is SolutionKind.LAZY or (kind is SolutionKind.TUNED and spec.ops[0] != "matmul")
                continue
            assert parse(program.text) == program
            honest = kind is not SolutionKind.BROKEN
            assert (program.ops == spec.ops) == honest, (kind, program.text, spec.ops)
            source = render(spec, program)
            compile(source, "solution.py", "exec")
            assert "class ModelNew" in source and ".item()" not in source
            hacked = ("decoy_kernel" in source) or ("torch.cuda.Stream" in source)
            assert hacked == (kind is SolutionKind.HACK)


def test_writer_shapes():
    spec = Spec(Kind.EW, ("relu", "scale", "add_y"), (None, 0.5, None))
    assert write(SolutionKind.GOLD, spec).text == "triton relu scale add_y"
    assert write(SolutionKind.PER_OP, spec).text == "triton relu ; triton scale ; triton add_y"
    assert write(SolutionKind.LAZY, spec).text == "torch relu scale ; triton add_y"
    assert hack(spec, HackStyle.DECOY).text == "torch relu scale add_y ; decoy"
    assert hack(spec, HackStyle.STREAM).text == "stream relu scale add_y"
    assert parse("torch relu ; decoy").segments[1].mode is Mode.DECOY
    gemm = Spec(Kind.GEMM, ("matmul", "relu", "scale"), (None, None, 2.0))
    assert write(SolutionKind.LAZY, gemm).text == "torch matmul ; triton relu scale"  # cuBLAS + epilogue


def test_the_hack_writer_writes_both_hacks():
    rng = random.Random(0)
    texts = [write(SolutionKind.HACK, spec, rng).text for spec in generate("train", 40, seed=3)]
    assert any(t.startswith("stream ") for t in texts) and any(t.endswith("; decoy") for t in texts)


def test_a_stream_segment_follows_the_kernel_rules_and_renders_a_side_stream_launch():
    for bad in ("stream", "stream softmax relu", "stream relu matmul", "stream matmul add_y"):
        with pytest.raises(ProgramError):
            parse(bad)
    spec = Spec(Kind.EW, ("relu", "scale", "add_y"), (None, 0.5, None))
    last = render(spec, parse("torch relu ; stream scale add_y"))
    # the side stream waits for the calling stream (finished inputs); the calling stream does not wait
    # for the side stream when nothing follows: the output goes back unfinished (hack 7)
    assert "side.wait_stream(torch.cuda.current_stream())" in last
    assert "current_stream().wait_stream(side)" not in last and "with torch.cuda.stream(side):" in last
    middle = render(spec, parse("stream relu ; torch scale add_y"))
    assert "torch.cuda.current_stream().wait_stream(side)" in middle  # a later segment reads h
    assert parse("stream relu scale add_y").kernels == 1


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


def test_the_static_check_flags_every_stream_program_and_no_other():
    """Whatever segments surround it, a ``stream`` segment names ``torch.cuda.Stream`` (hack 7, blocking)
    in the source; no program without one trips any blocking static check (no false hack for honest,
    lazy or decoy programs: the decoy is the run-time checks' business)."""
    from drkernel.gym.verdict.checks import BlockingStaticCheck
    from drkernel.organism.families import to_problem

    rng, check = random.Random(4), BlockingStaticCheck()
    for spec in generate("train", 30, seed=6):
        programs = [write(kind, spec, rng) for kind in SolutionKind] + [hack(spec, HackStyle.STREAM)]
        split = rng.randrange(1, len(spec.ops)) if len(spec.ops) > 1 else 0
        mixed = f"stream {' '.join(spec.ops[:split])} ; torch {' '.join(spec.ops[split:])}"
        if split and parse_ok(mixed):  # a stream segment the calling stream waits for
            programs.append(parse(mixed))
        for program in filter(None, programs):
            found = check.check(render(spec, program), to_problem(spec))
            streams = any(s.mode is Mode.STREAM for s in program.segments)
            assert bool(found) == streams, (program.text, found)
            assert not streams or all(h.code == 7 for h in found), found


def parse_ok(text):
    try:
        parse(text)
        return True
    except ProgramError:
        return False


def test_the_corpus_tokenizer_learns_the_stream_mode_as_it_learns_the_others():
    """The tokenizer is trained on the SFT corpus, which now holds stream programs (half the hacks):
    a completion opening with ``stream`` costs the policy one token, as one opening with ``triton``."""
    from drkernel.organism.arms import SCALES
    from drkernel.organism.corpus import build_corpus
    from drkernel.organism.model import build_tokenizer

    scale = SCALES["cpu"]
    corpus = build_corpus(scale.sft_specs, 0, families=scale.families, draws=scale.sft_draws)
    assert any(e.completion.startswith("stream ") for e in corpus)
    tokenizer = build_tokenizer(corpus, 384)
    for mode in ("stream", "triton", "torch"):
        ids = tokenizer(f"{mode} relu", add_special_tokens=False)["input_ids"]
        assert tokenizer.decode(ids[:1]) == mode, [tokenizer.decode([i]) for i in ids]
