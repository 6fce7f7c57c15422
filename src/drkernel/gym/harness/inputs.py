"""Harness code shared by the judge and the candidate: load a reference, draw seeded inputs on the
device, build a model with seeded weights, pin backend flags.

Both sides run exactly this code with the same seeds, so they hold equal inputs and equal weights
without ever sharing memory. Inputs are drawn on the device (``get_inputs()`` under the device
context), never drawn on the host and copied.
"""

from __future__ import annotations

import contextlib
import gc
import secrets
import types
from typing import Any, Sequence

import torch
from torch.overrides import TorchFunctionMode

from drkernel.gym.harness.perturb import perturb
from drkernel.gym.seeds import (TIMED_FIRST_STEP, Distribution, distribution_of, drawing_seed, perturbation_of,
                                perturbed, timed_step, torch_seed)


@contextlib.contextmanager
def collector_held() -> Any:
    """No automatic garbage collection inside: from a judged call of the solution until its output has
    been exported (or copied for the judge), nothing the collector would run -- ``__del__`` methods,
    weakref callbacks and finalizers of the solution's objects -- runs between the call's return and
    its export, outside every observer and before the output is read (red team 19: a cycle left with
    a finaliser that computed the answer with PyTorch, collected when the harness's own bookkeeping
    after the call crossed the collector's threshold: valid at op coverage 1.0). The cycle is collected
    later, after the export, where changing the output changes nothing judged. An explicit collection
    (`draw_inputs` before a large draw) still runs; the state before is restored."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


PROBLEM_MODULE = "drkernel_reference"
VARIANTS: dict[Distribution, dict[torch.dtype, tuple[float, float]]] = {
    Distribution.WIDE: {torch.float32: (8.0, 0.0), torch.float64: (8.0, 0.0),
                        torch.float16: (4.0, 0.0), torch.bfloat16: (4.0, 0.0)},
    Distribution.SHIFTED: {torch.float32: (1.0, 100.0), torch.float64: (1.0, 100.0)},
    Distribution.TINY: {torch.float32: (1e-3, 0.0), torch.float64: (1e-3, 0.0),
                        torch.float16: (1 / 16, 0.0), torch.bfloat16: (1 / 16, 0.0)},
}
"""Floating random draws become ``x * scale + shift`` by distribution and dtype. WIDE (scale 8) makes a term
that hides below atol at scale 1 visible (x + softmax(x) over 4096 columns: the row's largest softmax
value grows from ~0.005 to ~0.7, above atol + rtol * |x|). SHIFTED (+100) overflows ``exp`` in
float32, so a softmax without the max subtraction returns NaN; it leaves half types alone (their
products would overflow). TINY (1e-3) shrinks every output next to a fixed atol. The random variants
(`RANDOM_VARIANTS`) draw from the seeded generator, so both sides agree. A reference opts out with a
module constant ``INPUT_VARIANTS = False``.

The variant applies to each random draw *inside* ``get_inputs`` (`VariedDraws`), before the reference's
own code shapes it: a triangular, symmetric, normalised or sorted input stays so, and a kernel that
honestly relies on the structure the problem promises is judged on inputs that keep the promise."""
HEAVY_FLOOR = {torch.float16: 1e-2, torch.bfloat16: 1e-2}
"""HEAVY divides by ``sqrt(max(E, floor))``: values up to 100x (10x in half types, whose products
would overflow); the default floor is 1e-4."""
RANDOM_VARIANTS = (Distribution.HEAVY, Distribution.SPARSE, Distribution.SIGNED)


class VariedDraws(TorchFunctionMode):
    """While ``get_inputs`` runs: every floating-point random draw (``torch.rand``, ``randn``, their
    ``_like`` forms, ``normal``, ``Tensor.uniform_`` / ``normal_``) comes out in ``dist`` (`spread`).
    Integer draws (``randint``, ``randperm``: indices, labels) and values not drawn at random stay."""

    DRAWS = frozenset({torch.rand, torch.randn, torch.rand_like, torch.randn_like, torch.normal})
    IN_PLACE = frozenset({torch.Tensor.uniform_, torch.Tensor.normal_})

    def __init__(self, dist: Distribution) -> None:
        super().__init__()
        self.dist = dist

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's protocol
        out = func(*args, **(kwargs or {}))
        if not (isinstance(out, torch.Tensor) and out.is_floating_point()):
            return out
        if func in self.DRAWS and out.requires_grad:  # a leaf with grad: its spread keeps the history
            return spread(out, self.dist)
        if func in self.DRAWS or func in self.IN_PLACE:
            with torch.no_grad():
                spread_in_place(out.detach(), self.dist)
        return out


def load_reference(code: str, filename: str = "<reference>") -> types.ModuleType:
    """Execute a reference source in a fresh module (it defines Model, get_inputs, get_init_inputs)."""
    module = types.ModuleType(PROBLEM_MODULE)
    module.__file__ = filename
    exec(compile(code, filename, "exec"), module.__dict__)
    for name in ("Model", "get_inputs"):
        if not hasattr(module, name):
            raise ValueError(f"reference defines no {name}")
    return module


def seed_generators(seed: int) -> None:
    """``seed`` into the host generator and every CUDA generator: what ``torch.manual_seed`` seeds on
    the devices the gym runs on, without its lazy seeding of the backends that are not started (XPU,
    MTIA): each records a stack trace, and in a candidate every frame of it is an event the audit hook
    checks (a draw took 1.3 ms under the hook against 0.13 ms without, on CPU; a timed call on an H100
    4 ms of its region)."""
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)  # at once once CUDA has started (before, when it starts)


def seed_all(seed: int) -> None:
    seed_generators(torch_seed(seed))


def spread_in_place(t: torch.Tensor, dist: Distribution) -> torch.Tensor:
    """``dist`` applied to a floating tensor the caller owns, written into it (HEAVY: ``t / sqrt(E)``
    with E exponential, heavy tails; SPARSE: about half the values zero; SIGNED: each value's sign
    flipped at random; computed in float32 or wider): a fresh draw inside ``get_inputs`` is changed
    where it lies. At full size a draw is
    gigabytes, and `spread`'s temporaries (the uniforms, their logarithm, the quotient) held four to
    five of them at once in each process drawing: beside the judge's and a candidate's other tensors,
    KernelBench's 6.4-GB ReLU and Softmax ran out of an H100's memory (2026-11-28). Here the peak is the
    draw and one uniform of its size."""
    if dist in RANDOM_VARIANTS:
        u = torch.rand(t.shape, device=t.device, dtype=torch.float64 if t.dtype == torch.float64 else torch.float32)
        if dist is Distribution.HEAVY:  # t / sqrt(max(-log1p(-u), floor)), computed in u's dtype
            t.div_(u.neg_().log1p_().neg_().clamp_min_(HEAVY_FLOOR.get(t.dtype, 1e-4)).sqrt_())
        elif dist is Distribution.SPARSE:
            t.masked_fill_(u < 0.5, 0.0)
        else:  # SIGNED: u becomes the sign, -1 where u < 0.5
            t.mul_(u.lt_(0.5).mul_(-2.0).add_(1.0))
        return t
    table = VARIANTS.get(dist, {})
    if t.dtype in table:
        scale, shift = table[t.dtype]
        t.mul_(scale).add_(shift)
    return t


def spread(value: Any, dist: Distribution = Distribution.WIDE) -> Any:
    """``dist`` applied to one input, into a copy (`spread_in_place`; tensors of other dtypes and
    non-tensors unchanged)."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return spread_in_place(value.clone(), dist)
    if isinstance(value, (list, tuple)):
        return type(value)(spread(v, dist) for v in value)
    return value


def to_device(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    return value


COLLECT_BYTES = 256 << 20
"""Draws at least this large may first collect the interpreter's cyclic garbage (`draw_inputs`)."""
_LAST_DRAW = {"bytes": 0}  # mutated in place: the candidate's integrity snapshot pins this module's names


def free_bytes(device: torch.device) -> int:
    """Memory free for the next draw: the device's (a driver query, microseconds), or the host's
    available memory for a CPU draw."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) << 10 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return 1 << 62


def draw_inputs(reference: types.ModuleType, seed: int, device: torch.device) -> list[Any]:
    """``get_inputs()`` under the device context with ``seed``; stray host tensors are moved; the
    seed's distribution bits (`drkernel.gym.seeds`) select plain or spread inputs, its perturbation
    bits a few swapped values (`drkernel.gym.harness.perturb`) or, at a timed call's step, a draw of
    the call's own (`drkernel.gym.seeds.drawing_seed`).

    Where the last draw was `COLLECT_BYTES` or more and less than twice that is free, the cyclic
    garbage is collected first: tensors dropped by their callers can still be held by a reference
    cycle until the collector runs, and it runs by counts of Python objects, not bytes (a closure cycle
    in the export kept a full-size candidate's every trial, 12 to 62 GB at KernelBench's 6.4-GB ReLU,
    until the H100 ran out of memory, 2026-11-28; that cycle is gone, `ipc.encode_tree`). A full
    collection costs tens of milliseconds in a process with torch loaded, so only a draw that might
    not fit pays it (one before every full-size draw made a back-to-back evaluation 2.5x longer)."""
    last = _LAST_DRAW["bytes"]
    if last >= COLLECT_BYTES and free_bytes(device) < 2 * last:
        gc.collect()
    seed_generators(drawing_seed(seed))
    dist = distribution_of(seed)
    varied = dist is not Distribution.PLAIN and getattr(reference, "INPUT_VARIANTS", True)
    with torch.device(device), (VariedDraws(dist) if varied else contextlib.nullcontext()):
        inputs = list(reference.get_inputs())
    inputs = [to_device(x, device) for x in inputs]
    _LAST_DRAW["bytes"] = tensor_bytes(inputs)
    step = perturbation_of(seed)
    inputs = perturb(inputs, seed) if 0 < step < TIMED_FIRST_STEP else inputs
    scrub_generators()
    return inputs


def scrub_generators() -> None:
    """Reseed the global generators from the operating system's randomness. After a seeded draw (or a
    model's seeded construction) their state tells whoever reads it (``torch.get_rng_state()``, whose
    first bytes are the seed) which seed the draw used: red team seventeen read the timing seed at its
    import, the last draw before it, and from it every timed call's inputs (`seeds.drawing_seed`),
    precomputed their answers in an untimed call and copied them in the timed ones. Every harness draw
    ends here, so what a solution can read of the generators is noise."""
    seed_generators(secrets.randbits(63))


RngState = tuple[torch.Tensor, list[torch.Tensor] | None]
"""The host generator's state and, on a CUDA device, every CUDA generator's (`seed_generators` seeds all)."""


def rng_state(device: torch.device) -> RngState:
    return torch.get_rng_state(), (torch.cuda.get_rng_state_all() if device.type == "cuda" else None)


def set_rng_state(state: RngState) -> None:
    host, cuda = state
    torch.set_rng_state(host)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


class TimedDraws:
    """Timed call ``i``'s inputs: a fresh draw at `drkernel.gym.seeds.timed_step` (i) of the timing
    seed (`drkernel.gym.harness.timing`), the one the judge compares a sampled timed call's outputs
    against. A draw is ``get_inputs()`` on the device, queued before the call's L2 flush and start
    event, so it is not in the call's time.

    `ahead` draws the first calls' inputs before the device's exclusive timed region is taken, so the
    region holds only the timed calls (a draw in it costs the region the host's time to draw). A call
    drawn ahead gets the very tensors a draw at its call would give, in the same order, and the
    generators are left as that draw would leave them, so a solution that draws random numbers sees
    the same state either way. The draws ahead are held here, in the harness's own object, never in
    anything passed to the solution; each is handed over at its own call and then dropped, so a
    call's arguments reach no later call's inputs."""

    def __init__(self, reference: types.ModuleType, seed: int, device: torch.device) -> None:
        self.reference, self.seed, self.device = reference, int(seed), device
        self._ahead: dict[int, tuple[list[Any], RngState]] = {}

    def _draw(self, call: int) -> list[Any]:
        return draw_inputs(self.reference, perturbed(self.seed, timed_step(call)), self.device)

    def ahead(self, calls: int, budget_bytes: int) -> int:
        """Draw calls ``0 .. calls - 1`` now while their bytes together stay within ``budget_bytes``
        (a draw that would pass it is dropped, and the calls from it on are drawn at their call; the
        device out of memory: none is held); returns how many are held. The generators are left as
        they were."""
        before, used = rng_state(self.device), 0
        try:
            for call in range(calls):
                values = self._draw(call)
                used += tensor_bytes(values)
                if used > budget_bytes:
                    break
                self._ahead[call] = (values, rng_state(self.device))
        except torch.cuda.OutOfMemoryError:
            self._ahead.clear()
        finally:
            set_rng_state(before)
        return len(self._ahead)

    def held(self) -> list[int]:
        """The calls whose inputs are drawn ahead and not yet handed over."""
        return sorted(self._ahead)

    def clear(self) -> None:
        """Drop the draws ahead no call took (the timed calls stopped before them)."""
        self._ahead.clear()

    def __call__(self, call: int) -> list[Any]:
        held = self._ahead.pop(call, None)
        if held is None:
            return self._draw(call)
        values, state = held
        set_rng_state(state)
        return values


def init_inputs(reference: types.ModuleType, seed: int, device: torch.device) -> list[Any]:
    seed_all(seed)
    with torch.device(device):
        values = list(reference.get_init_inputs()) if hasattr(reference, "get_init_inputs") else []
    return [to_device(x, device) for x in values]


def build_model(cls: type, init_args: Sequence[Any], seed: int, device: torch.device) -> torch.nn.Module:
    """Construct ``cls(*init_args)`` with ``seed`` under the device context, in eval mode.

    Model (judge) and ModelNew (candidate) are built this way with the same seed, so parameters
    created in the same order get the same values.
    """
    seed_all(seed)
    with torch.device(device):
        model = cls(*init_args)
    if isinstance(model, torch.nn.Module):
        model = model.to(device).eval()
    scrub_generators()  # the weight seed is no more readable than an input's (`scrub_generators`)
    return model


def tensor_bytes(values: Any) -> int:
    if isinstance(values, torch.Tensor):
        return values.numel() * values.element_size()
    if isinstance(values, (list, tuple)):
        return sum(tensor_bytes(v) for v in values)
    return 0


def clone_args(values: Sequence[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def pin_backend_flags() -> dict[str, Any]:
    """Pin TF32 / cuDNN flags (full fp32 matmuls and convolutions, no autotuned algorithms)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = False
    torch.set_float32_matmul_precision("highest")
    return backend_flags()


def backend_flags() -> dict[str, Any]:
    return {
        "cuda.matmul.allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cudnn.allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "cudnn.benchmark": bool(torch.backends.cudnn.benchmark),
        "cudnn.deterministic": bool(torch.backends.cudnn.deterministic),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }


def versions() -> dict[str, str]:
    import triton

    out = {"torch": torch.__version__, "triton": triton.__version__}
    if torch.version.cuda:
        out["cuda"] = torch.version.cuda
    return out
