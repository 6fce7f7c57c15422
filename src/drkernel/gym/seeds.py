"""Seeds of one evaluation, drawn by the orchestrator (torch-free).

A solution that can predict its inputs can replay ``get_inputs`` on its first call and look the
answers up later (mechanism 6 of issue 12), and one that can predict which calls are integrity runs
can behave honestly only there (mechanism 3). So every input seed of an evaluation -- each trial,
the timed calls, the coverage run -- and the order of the integrity runs are drawn per evaluation
from a CSPRNG (`secrets`), never ``seed + k``. The weight seed stays public: ``ModelNew`` is built
with it, so the solution holds its weights anyway, and a public one keeps the judge's reference
models cached across evaluations.

Reproducible mode: a caller that passes an explicit ``EvalConfig.seed`` (debugging, determinism
tests) gets the same plan every time, derived from that seed by a keyed hash; training and the
service leave ``seed`` unset and get fresh secret seeds.

The reference's timing is keyed by a *public* seed (`PUBLIC_SEED`, or the explicit seed) carrying the
timed calls' distribution (`SeedPlan.reference_timing`): the reference is timed on inputs of the same
shapes and distribution, never on the candidate's secret timing inputs, so the reference-timing cache
keeps hitting across evaluations (one entry per distribution) and the speedup compares like with like.

Input distributions (mechanism 7): bits 60-62 of a trial seed name the distribution its inputs are
drawn at (`Distribution`); `drkernel.gym.harness.inputs.draw_inputs` decodes them, so judge and candidate
agree without a protocol change. Trial 0 and the second-size trial are plain; every other trial
draws a variant, which one is secret. A shortcut taken only when inputs look like ``randn``, a term
that hides below the tolerance at scale 1, a formula unstable outside the trial distribution: each
shows on some variant. The judge probes which distributions the reference is defined on and not
degenerate on (finite outputs, no trivial answer within tolerance:
`drkernel.gym.judge.main.Judge.defined_distributions`) and the plan draws only those.

The timed calls and the coverage run draw their distribution too, at random among the defined ones
(plain included when it is defined): a solution that tests its inputs' statistics and takes a
shortcut (a constant, low precision) only on ``randn``-looking inputs cannot tell which calls are
paid. Where plain inputs admit a trivial answer and some variant does not, no call is plain at all
-- trial 0 and the second-size trial draw a variant as well -- so no timed call, coverage run or integrity run (they draw the
trials' inputs) lands on inputs where a trivial answer passes.

Sparse perturbations (caching by content): bits 48-59 of a seed name a perturbation step
(`perturbed`). Its inputs are the seed's inputs with a few secret pairs of positions per tensor
swapped (`drkernel.gym.harness.perturb`): new tensors equal to an earlier input except at a few
positions, with values from the same draw. The candidate's ``sparse_perturb`` run calls on a trial's
inputs and then on such a perturbation of them; the judge reads the step from the comparison's tag
(`PERTURB_TAGS`), so the perturbation, like every seed, comes from the job, never from the candidate.
Bit 59 (`ACROSS_BIT`) is the perturbation mode: set where the judge found, at prepare, that swaps
within a row move no reference output past its tolerance (a mean over the last dimension, a scalar
loss); its perturbations then move values across rows, more densely (`drkernel.gym.harness.perturb`).
The plan sets it on every seed, so both sides derive the same pairs from the seed alone.
"""

from __future__ import annotations

from collections.abc import Iterable

import hashlib
import random
import secrets
from dataclasses import dataclass
from enum import IntEnum

PUBLIC_SEED = 0
"""Seed of everything that must be shared across evaluations: the reference's timing (cache key),
the reference's op profile and the second-size probe."""
SEED_BITS = 48
DIST_SHIFT = 60
DIST_MASK = 0x7
PERTURB_SHIFT = 48
PERTURB_MASK = 0x7FF
ACROSS_BIT = 59


class Distribution(IntEnum):
    """How a trial's floating-point inputs are transformed after ``get_inputs()``."""

    PLAIN = 0
    WIDE = 1
    """Scaled (`drkernel.gym.harness.inputs.VARIANTS`): a term that hides below atol at scale 1 shows."""
    SHIFTED = 2
    """Offset: ``exp`` overflows, so a formula without the max subtraction fails."""
    TINY = 3
    """Scaled down: every output shrinks next to a fixed atol, and terms that a scale-1 input hides grow
    relative to the rest (``softmax`` flattens toward ``1/n``)."""
    HEAVY = 4
    """Heavy-tailed (``x / sqrt(E)``, E exponential): a few values tens of times the rest, as no
    ``randn`` draw has them."""
    SPARSE = 5
    """About half the values zero: a statistic taken on part of a row, or a test on the first
    element, shows."""
    SIGNED = 6
    """Random signs: inputs that ``get_inputs`` draws non-negative (``rand``) turn mixed."""


VARIANTS = (Distribution.WIDE, Distribution.SHIFTED, Distribution.TINY, Distribution.HEAVY,
            Distribution.SPARSE, Distribution.SIGNED)
"""Every distribution but plain, the ones a plan draws for trials after the first."""


def distribution_of(seed: int) -> Distribution:
    value = (int(seed) >> DIST_SHIFT) & DIST_MASK
    return Distribution(value) if value in Distribution._value2member_map_ else Distribution.PLAIN


def with_distribution(seed: int, dist: Distribution) -> int:
    return (int(seed) & ((1 << SEED_BITS) - 1)) | (int(dist) << DIST_SHIFT)


def torch_seed(seed: int) -> int:
    """The seed handed to the generators (`drkernel.gym.harness.inputs.seed_generators`), the
    distribution and perturbation bits removed."""
    return int(seed) & ((1 << SEED_BITS) - 1)


def drawing_seed(seed: int) -> int:
    """The seed a draw of inputs hands to the generators: `torch_seed`, except at a timed
    call's step (`TIMED_FIRST_STEP` on), where the step gives the call a draw of its own."""
    step = perturbation_of(seed)
    if step < TIMED_FIRST_STEP:
        return torch_seed(seed)
    digest = hashlib.sha256(f"drkernel-timed-draw:{torch_seed(seed)}:{step}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << SEED_BITS) - 1)


def perturbed(seed: int, step: int) -> int:
    """The seed of ``seed``'s inputs with perturbation ``step`` (1 to 2047) applied; 0 removes it."""
    if not 0 <= int(step) <= PERTURB_MASK:
        raise ValueError(f"perturbation step {step} outside 0..{PERTURB_MASK}")
    return (int(seed) & ~(PERTURB_MASK << PERTURB_SHIFT)) | (int(step) << PERTURB_SHIFT)


def perturbation_of(seed: int) -> int:
    """The perturbation step a seed names (0: none)."""
    return (int(seed) >> PERTURB_SHIFT) & PERTURB_MASK


def across_rows(seed: int) -> bool:
    """Do ``seed``'s perturbations move values across rows (`ACROSS_BIT`)?"""
    return bool((int(seed) >> ACROSS_BIT) & 1)


def with_across(seed: int, across: bool) -> int:
    """``seed`` with its perturbation mode set (``across``) or cleared."""
    return (int(seed) & ~(1 << ACROSS_BIT)) | (int(bool(across)) << ACROSS_BIT)


INTEGRITY_RUNS = ("coverage", "skip_own", "poisoned", "recall_same", "call_count_last", "sparse_perturb")
"""The integrity runs of `drkernel.gym.candidate.integrity`, run in the plan's order."""
PERTURB_TAGS = ("sparse_perturb", "sparse_perturb_2")
"""The judged calls of the ``sparse_perturb`` run: the tag at index i compares against the reference on
the trial's inputs at perturbation step i + 1. Two independent steps: a fingerprint of s sampled
positions sees one step's change with probability about ``s * changed / n``, both only with its square."""

TIMED_FIRST_STEP = 16
"""Perturbation steps from here on are the timed calls': timed call i gets a fresh draw of its own at
`timed_step` (i) (`drawing_seed`; `drkernel.gym.harness.inputs.TimedDraws`). Nothing of one timed
call's inputs is in the next, so neither a cache keyed by their content nor an incremental update
from the last call's (a few swapped values are a low-rank change of a GEMM) saves work."""
TIMED_TAG_PREFIX = "timed_call_"
"""A sampled timed call's comparison is tagged with this prefix and the call's index."""


def timed_step(call: int) -> int:
    """The perturbation step of timed call ``call`` (cycling after 2032 calls)."""
    return TIMED_FIRST_STEP + int(call) % (PERTURB_MASK + 1 - TIMED_FIRST_STEP)


def step_of_tag(tag: str | None) -> int:
    """The perturbation step the judge applies for a comparison tagged ``tag`` (0: none)."""
    if tag in PERTURB_TAGS:
        return PERTURB_TAGS.index(tag) + 1
    if tag and tag.startswith(TIMED_TAG_PREFIX) and tag[len(TIMED_TAG_PREFIX):].isdigit():
        return timed_step(int(tag[len(TIMED_TAG_PREFIX):]))
    return 0


@dataclass(frozen=True)
class SeedPlan:
    """Every seed of one evaluation, and where the integrity runs fall."""

    weight: int                       # public (the solution holds its weights anyway)
    trials: tuple[int, ...]           # primary trials, then the second size's (if any)
    timing: int                       # the candidate's timed calls (secret, distribution too)
    coverage: int                     # the coverage run: an input no other call sees
    reference: int                    # public: op profile, second-size probe
    integrity_order: tuple[str, ...]  # a permutation of INTEGRITY_RUNS
    decoys: tuple[int, ...]           # ordinary calls before each integrity run, same length

    @property
    def reference_timing(self) -> int:
        """The public seed the reference is timed at: the timed calls' distribution, public values."""
        return with_distribution(self.reference, distribution_of(self.timing))

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> "SeedPlan":
        """A plan as `dataclasses.asdict` wrote it (a result's ``provenance.seeds``)."""
        try:
            return cls(weight=int(d["weight"]), trials=tuple(int(t) for t in d["trials"]),  # type: ignore[union-attr]
                       timing=int(d["timing"]), coverage=int(d["coverage"]), reference=int(d["reference"]),
                       integrity_order=tuple(str(r) for r in d["integrity_order"]),  # type: ignore[union-attr]
                       decoys=tuple(int(x) for x in d["decoys"]))  # type: ignore[union-attr]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a seed plan: {e}") from e

    def to_job(self) -> dict[str, object]:
        return {"coverage_seed": self.coverage, "order": list(self.integrity_order),
                "decoys": list(self.decoys)}


def _rng(explicit: int | None) -> random.Random:
    if explicit is None:
        return secrets.SystemRandom()
    digest = hashlib.sha256(f"drkernel-seed-plan:{int(explicit)}".encode()).digest()
    return random.Random(int.from_bytes(digest[:16], "big"))


def call_pool(allowed: Iterable[int] | None) -> list[Distribution]:
    """The distributions a timed call or the coverage run may draw: every one the judge found defined
    and not degenerate (``allowed``; plain counts only when listed), plain where none is (the result
    is degenerate then anyway). None (not probed): all of them."""
    if allowed is None:
        return [Distribution.PLAIN, *VARIANTS]
    ok = {int(a) for a in allowed}
    return [d for d in (Distribution.PLAIN, *VARIANTS) if int(d) in ok] or [Distribution.PLAIN]


def plan_seeds(explicit: int | None, trials: int, second: bool,
               allowed: Iterable[int] | None = None, across: bool = False) -> SeedPlan:
    """Draw the plan: fresh and secret when ``explicit`` is None, reproducible from it otherwise.

    Every primary trial after the first draws a variant distribution from ``allowed`` (default: all
    of `VARIANTS`; the judge passes those the reference is defined and not degenerate on), all
    distinct while they last (then again in a new order). `Distribution.WIDE` and
    `Distribution.SHIFTED` come first in the draw where allowed, at random trials: a dropped term and
    an unstable formula fail every evaluation of three trials or more, not only some; the rest fill
    the other trials at random. Trial 0 and the second-size trial are plain unless ``allowed`` leaves
    plain out while listing a variant; then they draw one too. The timed calls and the coverage run each draw one of `call_pool`.
    ``across``: the perturbation mode every seed carries (`ACROSS_BIT`)."""
    rng = _rng(explicit)
    draw = lambda: rng.getrandbits(SEED_BITS)  # noqa: E731
    primary = [draw() for _ in range(trials)]
    ok = None if allowed is None else {int(a) for a in allowed}
    pool = [d for d in VARIANTS if ok is None or int(d) in ok]
    plain_ok = ok is None or int(Distribution.PLAIN) in ok or not pool
    dists = _variant_order(rng, pool, trials - (1 if plain_ok else 0))
    first = 1 if plain_ok else 0
    positions = rng.sample(range(first, trials), k=len(dists)) if trials > first else []
    by_trial = dict(zip(positions, dists))
    primary = [with_distribution(s, by_trial.get(i, Distribution.PLAIN)) for i, s in enumerate(primary)]
    extra = [with_distribution(draw(), Distribution.PLAIN if plain_ok else rng.choice(pool))] if second else []
    order = list(INTEGRITY_RUNS)
    rng.shuffle(order)
    calls = call_pool(allowed)
    timing, coverage = (with_distribution(draw(), rng.choice(calls)) for _ in range(2))
    mark = lambda s: with_across(s, across)  # noqa: E731
    return SeedPlan(weight=public_seed(explicit), trials=tuple(map(mark, primary + extra)), timing=mark(timing),
                    coverage=mark(coverage), reference=public_seed(explicit),
                    integrity_order=tuple(order), decoys=tuple(rng.randrange(0, 3) for _ in order))


def replayed_plan(plan: SeedPlan, trials: int, second: bool, allowed: Iterable[int] | None = None,
                  across: bool = False) -> SeedPlan:
    """``plan`` (a result's revealed seeds, `drkernel.gym.replay`) if it is one `plan_seeds` could have
    drawn for this evaluation, else `ValueError`: as many trials, trial 0 plain where plain is allowed
    and every other a variant of ``allowed``, distinct while they last, WIDE and SHIFTED among them
    where allowed; timed calls and coverage run on distributions of `call_pool`; every integrity run
    once; every seed in ``across``'s perturbation mode. So a supplied plan weakens no check: like an
    explicit seed, it only makes the inputs known in advance to whoever supplied it."""
    ok = None if allowed is None else {int(a) for a in allowed}
    pool = [d for d in VARIANTS if ok is None or int(d) in ok]
    plain_ok = ok is None or int(Distribution.PLAIN) in ok or not pool
    first = 1 if plain_ok else 0
    primary = [distribution_of(t) for t in plan.trials[:trials]]
    variants = primary[first:]
    problems = []
    if len(plan.trials) != trials + (1 if second else 0):
        problems.append(f"{len(plan.trials)} trial seeds for {trials} trials{' and a second size' if second else ''}")
    if first and primary[:1] != [Distribution.PLAIN]:
        problems.append("trial 0 is not plain")
    if second and plan.trials and distribution_of(plan.trials[-1]) not in ([Distribution.PLAIN] if plain_ok else pool):
        problems.append("the second size's trial is not on a distribution the judge allows")
    if not _drawable(variants, pool):
        problems.append(f"trial distributions {[d.name for d in variants]} are not a draw from {[d.name for d in pool]}")
    calls = call_pool(allowed)
    if distribution_of(plan.timing) not in calls or distribution_of(plan.coverage) not in calls:
        problems.append("the timed or coverage distribution is not one the judge allows")
    if sorted(plan.integrity_order) != sorted(INTEGRITY_RUNS) or len(plan.decoys) != len(plan.integrity_order) \
            or any(not 0 <= int(d) < 3 for d in plan.decoys):
        problems.append("the integrity runs are not each planned once")
    if any(across_rows(x) != across for x in (*plan.trials, plan.timing, plan.coverage)):
        problems.append("a seed's perturbation mode differs from the judge's")
    if problems:
        raise ValueError("the supplied seed plan is not one the judge could draw: " + "; ".join(problems))
    return plan


def _drawable(variants: list[Distribution], pool: list[Distribution]) -> bool:
    """Could `_variant_order` have given ``variants`` (in some order)? Every one of ``pool``, each
    q or q + 1 times for ``divmod(n, len(pool)) = (q, r)``, the r extra ones WIDE and SHIFTED first."""
    if not pool:  # nothing to vary: every trial plain
        return all(d is Distribution.PLAIN for d in variants)
    q, r = divmod(len(variants), len(pool))
    counts = {d: variants.count(d) for d in pool}
    if sum(counts.values()) != len(variants) or any(c not in (q, q + 1) for c in counts.values()):
        return False
    extra = {d for d, c in counts.items() if c == q + 1}
    front = {d for d in pool if d in (Distribution.WIDE, Distribution.SHIFTED)}
    return len(extra) == r and (extra <= front if r <= len(front) else front <= extra)


def _variant_order(rng: random.Random, pool: list[Distribution], n: int) -> list[Distribution]:
    """``n`` variants from ``pool``: WIDE and SHIFTED first (shuffled), then the others shuffled, cycling."""
    if not pool or n <= 0:
        return []
    first = [d for d in pool if d in (Distribution.WIDE, Distribution.SHIFTED)]
    rest = [d for d in pool if d not in first]
    rng.shuffle(first)
    rng.shuffle(rest)
    order = first + rest
    return [order[i % len(order)] for i in range(n)]


def public_seed(explicit: int | None) -> int:
    """The seed of what is shared across evaluations (see `PUBLIC_SEED`)."""
    return PUBLIC_SEED if explicit is None else int(explicit)


def kept_timed_calls(keep: Iterable[int], planned: int, n: int) -> set[int]:
    """The timed calls whose outputs go to the judge when ``n`` calls were timed of the ``planned`` ones
    whose indices ``keep`` the orchestrator drew (`evaluator.timing_plan`: one at random and the last).
    Unchanged when ``n >= planned``; when the timing budget cut the calls, the planned last is the new
    last and any other index wraps into range. The candidate keeps these and the verdict expects the
    last of them, so the two cannot disagree."""
    if n >= planned:
        return set(keep)
    return {n - 1 if k >= planned - 1 else k % n for k in keep}
