"""Problem families of the organism, generated deterministically from a seed (nothing stored as files).

Three kinds, all with ``forward(self, x, y)`` so one signature fits every program:

* ``ew``: an elementwise chain of 2-5 ops over ``x`` (``add_y`` / ``mul_y`` read ``y``);
* ``row``: 0-2 elementwise ops, then one row reduction (softmax, logsumexp, rmsnorm, l2norm, layernorm);
* ``gemm``: ``x @ y`` followed by an epilogue of 1-3 unary ops.

A *family* groups instances by shape of the task (``ew3``, ``row-softmax``, ``gemm2``, ...). Three
families never appear in training and are kept for evaluation: ``ew5`` (a longer chain than any
trained one), ``row-logsumexp`` (an unseen reduction) and ``gemm3`` (a longer epilogue).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from enum import Enum
from typing import Any, Mapping, Sequence

from drkernel.errors import ConfigError
from drkernel.organism.ops import ELEMENTWISE, OPS, ROW, UNARY
from drkernel.problems.problem import Problem


class Kind(str, Enum):
    EW = "ew"
    ROW = "row"
    GEMM = "gemm"


class Split(str, Enum):
    TRAIN = "train"
    HELDOUT = "heldout"


HELDOUT_FAMILIES = frozenset({"ew5", "row-logsumexp", "gemm3"})
TRAIN_FAMILIES = ("ew2", "ew3", "ew4", "row-softmax", "row-rmsnorm", "row-l2norm", "row-layernorm",
                  "gemm1", "gemm2")
SIZES = {Kind.EW: {"ROWS": 4096, "COLS": 2048}, Kind.ROW: {"ROWS": 4096, "COLS": 1024},
         Kind.GEMM: {"M": 1024, "N": 1024, "K": 1024}}
"""GPU sizes (memory-bound chains large enough that launches do not dominate; a GEMM that does)."""
CPU_SIZES = {Kind.EW: {"ROWS": 8, "COLS": 64}, Kind.ROW: {"ROWS": 8, "COLS": 64},
             Kind.GEMM: {"M": 32, "N": 32, "K": 32}}
"""CPU sizes: the Triton interpreter runs every program instance in Python."""


@dataclass(frozen=True)
class Spec:
    """One problem instance: the op chain and each op's constant (None for ops without one)."""

    kind: Kind
    ops: tuple[str, ...]
    constants: tuple[float | None, ...]

    def __post_init__(self) -> None:
        if len(self.ops) != len(self.constants) or not self.ops:
            raise ConfigError(f"organism spec: {len(self.ops)} ops and {len(self.constants)} constants")
        unknown = [o for o in self.ops if o not in OPS]
        if unknown:
            raise ConfigError(f"organism spec: unknown ops {unknown}")

    @property
    def family(self) -> str:
        if self.kind is Kind.EW:
            return f"ew{len(self.ops)}"
        if self.kind is Kind.ROW:
            return f"row-{self.ops[-1]}"
        return f"gemm{len(self.ops) - 1}"

    @property
    def uid(self) -> str:
        text = repr((self.kind.value, self.ops, self.constants))
        return hashlib.sha256(text.encode()).hexdigest()[:8]

    @property
    def name(self) -> str:
        return f"org_{self.family}_{'-'.join(self.ops)}_{self.uid}"

    def prompt(self) -> str:
        """What the policy is shown: the task kind and the op chain (constants are bound by position)."""
        return f"task {self.kind.value} : {' '.join(self.ops)}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "ops": list(self.ops), "constants": list(self.constants)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Spec":
        return cls(Kind(d["kind"]), tuple(d["ops"]), tuple(d["constants"]))


def _pick_op(rng: random.Random, pool: tuple, previous: str | None) -> tuple[str, float | None]:
    choices = [op for op in pool if op.name != previous]  # no "neg neg" or "relu relu" identities
    op = rng.choice(choices)
    return op.name, (rng.choice(op.constants) if op.constants else None)


def _chain(rng: random.Random, pool: tuple, length: int) -> list[tuple[str, float | None]]:
    out: list[tuple[str, float | None]] = []
    for _ in range(length):
        out.append(_pick_op(rng, pool, out[-1][0] if out else None))
    return out


def sample_spec(rng: random.Random, family: str) -> Spec:
    """One random instance of ``family``."""
    if family.startswith("ew"):
        chain, kind = _chain(rng, ELEMENTWISE, int(family[2:])), Kind.EW
    elif family.startswith("row-"):
        reduction = family[4:]
        if reduction not in {op.name for op in ROW}:
            raise ConfigError(f"organism: unknown row family {family!r}")
        chain, kind = _chain(rng, ELEMENTWISE, rng.randrange(0, 3)) + [(reduction, None)], Kind.ROW
    elif family.startswith("gemm"):
        chain, kind = [("matmul", None)] + _chain(rng, UNARY, int(family[4:])), Kind.GEMM
    else:
        raise ConfigError(f"organism: unknown family {family!r}")
    return Spec(kind, tuple(n for n, _ in chain), tuple(c for _, c in chain))


def generate(split: Split | str, count: int, seed: int = 0, families: Sequence[str] = ()) -> list[Spec]:
    """``count`` distinct instances of the split's families (or of ``families``, which must belong to
    the split), the same for the same arguments."""
    split = Split(split)
    allowed = TRAIN_FAMILIES if split is Split.TRAIN else tuple(sorted(HELDOUT_FAMILIES))
    wrong = [f for f in families if f not in allowed]
    if wrong:
        raise ConfigError(f"organism: families {wrong} are not in the {split.value} split ({list(allowed)})")
    families = tuple(families) or allowed
    rng = random.Random(f"organism/{split.value}/{seed}")
    seen: dict[str, Spec] = {}
    for i in range(count * 50):  # round robin over families; a small family saturates, the others go on
        if len(seen) == count:
            break
        spec = sample_spec(rng, families[i % len(families)])
        seen.setdefault(spec.uid, spec)
    if len(seen) < count:
        raise ConfigError(f"organism: only {len(seen)} distinct {split.value} instances, {count} asked")
    return list(seen.values())


def with_constant(template: str, constant: float | None) -> str:
    """``template`` with its ``{c}`` placeholder filled (templates without one are returned as is)."""
    return template.replace("{c}", repr(float(constant))) if constant is not None else template


def torch_line(op: str, constant: float | None) -> str:
    """``h = <op applied to h>`` in PyTorch."""
    return f"h = {with_constant(OPS[op].torch, constant)}"


def input_variants(spec: Spec) -> bool:
    """Whether the gym may spread this problem's inputs (x8) or shift them (+100) in some trials.

    Not when ``sin`` follows another op: the ops before it can make its argument large (a GEMM of
    shifted inputs is ~1e7, where one fp32 ulp is 1), and the sine of a large value depends on the
    argument's last bits and on the device's range reduction, so no implementation, fused, per-op or
    the reference itself in another summation order, matches. Those variants exist to catch hidden
    terms and a softmax without the max subtraction; an organism program can express neither (each op's
    Triton template is fixed, the row reductions subtract the max), so opting out loses no check."""
    return "sin" not in spec.ops[1:]


def reference_code(spec: Spec) -> str:
    """The KernelBench-format reference: ``Model``, ``get_inputs``, ``get_init_inputs`` (and
    ``INPUT_VARIANTS = False`` where `input_variants` says so)."""
    sizes = SIZES[spec.kind]
    consts = "\n".join(f"{k} = {v}" for k, v in sizes.items())
    if not input_variants(spec):
        consts += "\nINPUT_VARIANTS = False  # sin of a large argument: see drkernel.organism.families"
    body = "\n".join(f"        {torch_line(o, c)}" for o, c in zip(spec.ops, spec.constants))
    if spec.kind is Kind.GEMM:
        inputs = "[torch.randn(M, K) * 0.1, torch.randn(K, N) * 0.1]"
        body = body.replace("h @ y", "x @ y", 1)
    else:
        inputs = "[torch.randn(ROWS, COLS), torch.randn(ROWS, COLS)]"
    return (f'"""Organism {spec.family}: {" -> ".join(spec.ops)}."""\n\n'
            "import torch\nimport torch.nn as nn\n\n"
            f"{consts}\n\n\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
            f"    def forward(self, x, y):\n        h = x\n{body}\n        return h\n\n\n"
            f"def get_inputs():\n    return {inputs}\n\n\ndef get_init_inputs():\n    return []\n")


def to_problem(spec: Spec) -> Problem:
    """The instance as a `Problem` (level 1 for a single-kernel chain, source ``organism``)."""
    return Problem(name=spec.name, level=2 if len(spec.ops) > 1 else 1, code=reference_code(spec),
                   problem_id=spec.uid, source="organism", cpu_overrides=dict(CPU_SIZES[spec.kind]),
                   metadata={"organism": spec.to_dict(), "family": spec.family,
                             "description": f"organism {spec.family}: {' -> '.join(spec.ops)}"})


def from_problem(problem: Problem) -> Spec:
    """The spec a generated problem was made from (ConfigError for any other problem)."""
    data = problem.metadata.get("organism")
    if not isinstance(data, Mapping):
        raise ConfigError(f"{problem.key} is not an organism problem")
    return Spec.from_dict(data)


def load_split(text: str, seed: int = 0) -> list[Problem]:
    """``"train:16"`` / ``"heldout:8"`` / ``"train:4:ew2,ew3"`` -> that many problems of the split
    (of those families)."""
    split, _, rest = text.partition(":")
    count, _, families = rest.partition(":")
    try:
        fams = tuple(f for f in families.split(",") if f)
        return [to_problem(s) for s in generate(split, int(count or 16), seed, fams)]
    except ValueError as e:
        raise ConfigError(f"organism problems {text!r}: expected '<train|heldout>:<count>' ({e})") from e
