"""The judge: one trusted, long-lived child per device (``python -m drkernel.gym.judge.main``).

It never imports solution code and never exports an allocation. It prepares problems (CPU
scale-down, the second size), builds reference models with the weight seed, draws each trial's
inputs from its seed on the device, computes reference outputs, copies the candidate's exported
outputs and post-run inputs (after the candidate synchronised) and compares, and times the
reference. Requests come one at a time from the orchestrator.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
import sys
import time
import traceback
from collections import OrderedDict
from typing import Any, ContextManager

import torch

from drkernel.devices import resolve
from drkernel.gym.harness import inputs as harness
from drkernel.gym.judge.compare import TF32_OPS, compare_outputs, inputs_changed, tf32_slack
from drkernel.gym.judge.tolerance import CHUNK, LeafTolerance, derive, leaves, to_double
from drkernel.gym.harness.recorder import OpProfile, record_ops
from drkernel.gym.verdict.coverage import base_name
from drkernel.gym.verdict.hacks import RAISED_ON_PERTURBED
from drkernel.gym.harness import vmm
from drkernel.gym.harness.vmm import VmmError
from drkernel.gym.ipc import Channel, ProtocolViolation, child_channel, close_fds, decode_tree
from drkernel.gym.messages import (CompareRequest, Error, Op, Prepare, Prepared, Ready, Release, Signal, Timed,
                                   TimeReference, Verdict, op_of)
from drkernel.gym.seeds import (TIMED_FIRST_STEP, VARIANTS, Distribution, distribution_of, perturbed, step_of_tag,
                                with_distribution)
from drkernel.problems.problem import Problem
from drkernel.problems.scaling import rewrite_constants, scale_for_cpu, second_size_candidates

MODEL_CACHE = 4
BOUND_CACHE = 256  # derived tolerances kept, per (code, input seed, weight seed, profile): a few floats each
FP64_MAX_BYTES = 8 << 30
"""Above this many bytes of float64 inputs and weights the judge skips the fp64 run (the profile's
atol stands); the trivial answers are still tried."""
PROBE_OFFSET = 0x5EED
"""The prepare probes draw inputs at the public seed XOR this: at the weight seed itself the inputs are
the generator's first draws after the weights' seeding, correlated with the weights (the logsumexp
of a GEMM of such inputs varies where that of independent ones is a constant)."""
SEEN_MARGIN = 4.0
"""How far past its bound a within-row swap must move an output to count as seen (`Judge.swaps_unseen`)."""
IDLE_CACHE = 1 << 30  # bytes of cached, unallocated device memory the judge keeps between requests


class Judge:
    def __init__(self, channel: Channel, device: torch.device) -> None:
        self.channel = channel
        self.device = device
        self.flags = harness.pin_backend_flags()
        self.models: OrderedDict[tuple[str, int], Any] = OrderedDict()
        self.refs: dict[str, OrderedDict[str, Any]] = {}
        self.current: dict[str, tuple[Any, ...]] = {}  # job -> ((trial, seed), outputs, post inputs, bounds)
        self.no_tf32: dict[str, bool] = {}  # reference code -> runs no op that TF32 changes (no slack)
        self.bounds: OrderedDict[tuple[str, int, int, str], list[LeafTolerance | None]] = OrderedDict()
        self.independent: OrderedDict[tuple[str, int, str, int], tuple[bool, ...]] = OrderedDict()
        self.model64: tuple[tuple[str, int], Any] | None = None  # the last fp64 copy of a reference
        self.flusher = None

    def hello(self) -> dict[str, Any]:
        if self.device.type == "cuda":
            props = torch.cuda.get_device_properties(self.device)
            name, total = props.name, int(props.total_memory)
        else:
            name, total = "cpu (triton interpreter)", 0
        return Ready(os.getpid(), str(self.device), name, total, harness.versions(), self.flags).to_header()

    def reference(self, code: str) -> Any:
        if code not in self.refs:
            self.refs[code] = harness.load_reference(code)
            while len(self.refs) > MODEL_CACHE:
                self.refs.pop(next(iter(self.refs)))
        return self.refs[code]

    def model(self, code: str, weight_seed: int) -> Any:
        key = (code, weight_seed)
        if key not in self.models:
            ref = self.reference(code)
            init = harness.init_inputs(ref, weight_seed, self.device)
            self.models[key] = harness.build_model(ref.Model, init, weight_seed, self.device)
            while len(self.models) > MODEL_CACHE:
                self.models.popitem(last=False)
        self.models.move_to_end(key)
        return self.models[key]

    # -- requests -----------------------------------------------------------------------------

    def prepare(self, h: Prepare) -> Prepared:
        problem = Problem.from_dict(h.problem)
        if self.device.type == "cpu" and h.cpu_scale:
            problem = scale_for_cpu(problem, h.budget)
        code = problem.code
        self.reference(code)
        second_code = None
        for overrides in second_size_candidates(code) if h.second_size else []:
            candidate_code = rewrite_constants(code, overrides)
            try:  # keep the first second size at which the reference runs
                self.run_reference(candidate_code, h.seed, h.seed)
            except Exception:  # noqa: BLE001 - the reference is not defined at that size
                continue
            second_code = candidate_code
            break
        input_bytes = self.input_bytes(code, h.seed)
        profile = self.op_profile(code, h.seed)
        if len(self.no_tf32) > 4096:
            self.no_tf32.clear()
        for c in filter(None, (code, second_code)):  # unknown (None) keeps the slack
            self.no_tf32[c] = profile is not None and not any(base_name(op) in TF32_OPS for op in profile.ops)
        distributions = self.defined_distributions(code, h.seed)
        return Prepared(code, second_code, input_bytes,
                        profile.to_dict() if profile is not None else None,
                        profile.cost * 1e3 if profile is not None else None,
                        distributions=distributions,
                        perturb_across=self.swaps_unseen(code, h.seed, distributions))

    def input_bytes(self, code: str, seed: int) -> int:
        """Bytes of a trial's inputs: drawn on meta (nothing allocated) or, where ``get_inputs`` reads
        values (``int(offsets[-1])`` cannot run on meta), on the device, as the reference's runs draw
        them anyway."""
        try:
            return harness.tensor_bytes(harness.draw_inputs(self.reference(code), seed, torch.device("meta")))
        except Exception:  # noqa: BLE001 - data-dependent input code
            return harness.tensor_bytes(harness.draw_inputs(self.reference(code), seed, self.device))

    def defined_distributions(self, code: str, seed: int) -> tuple[int, ...]:
        """The input distributions worth a trial or a timed call (plain among them), probed at the
        public seed (inputs at `PROBE_OFFSET` from it): the reference's outputs are all finite there (it does not overflow, divide by
        zero or fail) and no trivial answer meets them at the derived tolerance (relu of shifted
        inputs is the identity; the logsumexp of a GEMM of ``rand`` inputs is a constant)."""
        defined = []
        for dist in (Distribution.PLAIN, *VARIANTS):
            varied = with_distribution(seed ^ PROBE_OFFSET, dist)
            try:
                out, args = self.run_reference(code, varied, seed)
            except Exception:  # noqa: BLE001 - the reference is not defined there
                continue
            if all(_finite(t) for t in _float_leaves(out)) and not any(
                    b is not None and b.degenerate
                    for b in derive(out, self.run_reference64(code, varied, seed, harness.tensor_bytes(args)), args, "kernelgym")):
                defined.append(int(dist))
            del out, args
        return tuple(defined)

    def swaps_unseen(self, code: str, seed: int, distributions: tuple[int, ...]) -> bool:
        """Does a within-row perturbation step (`drkernel.gym.harness.perturb`) leave every output of the
        reference within its derived tolerance? Probed once per problem at the public seed, on the
        first defined distribution: a mean over the last dimension or a scalar loss cannot see such
        swaps, so a cache keyed on sampled values would never serve a wrong answer. Where this holds,
        the plan moves the problem's perturbations across rows (`drkernel.gym.seeds.ACROSS_BIT`). A
        move within `SEEN_MARGIN` times the bound counts as unseen: a summary's derived bound is tight,
        and a swap that moves a scalar loss just past it would leave a stale answer a draw away from
        passing."""
        base = with_distribution(seed ^ PROBE_OFFSET,
                                 Distribution(distributions[0]) if distributions else Distribution.PLAIN)
        try:
            out, args = self.run_reference(code, base, seed)
            bounds = derive(out, self.run_reference64(code, base, seed, harness.tensor_bytes(args)), args,
                            "kernelgym")
            del args
            moved, _ = self.run_reference(code, perturbed(base, 1), seed)
        except Exception:  # noqa: BLE001 - the reference is not defined there: keep the default
            return False
        pairs = [(o, r, b) for o, r, b in zip(leaves(moved), leaves(out), bounds)
                 if b is not None and isinstance(o, torch.Tensor) and isinstance(r, torch.Tensor)
                 and o.shape == r.shape and o.is_floating_point()]
        return bool(pairs) and all(_within(o, r, dataclasses.replace(b, atol=b.atol * SEEN_MARGIN,
                                                                     rtol=b.rtol * SEEN_MARGIN))
                                   for o, r, b in pairs)

    def op_profile(self, code: str, seed: int) -> OpProfile | None:
        """The reference's aten ops with roofline costs (the denominator of op coverage)."""
        try:
            args = harness.draw_inputs(self.reference(code), seed, self.device)
            _, profile = record_ops(self.model(code, seed), *args)
        except Exception:  # a reference the op recorder cannot follow: coverage stays unknown
            return None
        return profile

    def run_reference(self, code: str, seed: int, weight_seed: int) -> tuple[Any, list[Any]]:
        model = self.model(code, weight_seed)
        args = harness.draw_inputs(self.reference(code), seed, self.device)
        with torch.no_grad():
            out = model(*args)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return out, args

    def derived_bounds(self, h: CompareRequest, ref_out: Any, ref_inputs: list[Any]) -> list[LeafTolerance | None]:
        """The per-leaf tolerance derived from the reference (`drkernel.gym.judge.tolerance`), cached per
        problem, input seed and weight seed: one fp64 reference run per entry."""
        key = (h.code, h.seed, h.weight_seed, h.profile)
        if key not in self.bounds:
            ref64 = self.run_reference64(h.code, h.seed, h.weight_seed, harness.tensor_bytes(ref_inputs))
            bounds = derive(ref_out, ref64, ref_inputs, h.profile)
            del ref64
            self.bounds[key] = self.input_independent(h, ref_out, bounds)
            while len(self.bounds) > BOUND_CACHE:
                self.bounds.popitem(last=False)
        self.bounds.move_to_end(key)
        return self.bounds[key]

    def input_independent(self, h: CompareRequest, ref_out: Any, bounds: list[LeafTolerance | None]
                          ) -> list[LeafTolerance | None]:
        """``bounds`` with each leaf the reference computes the same (within its bound) on other inputs
        marked degenerate: an answer that ignores the inputs (a broadcast parameter, a bias) passes it,
        whatever trivial answers `derive` tried. Whether a leaf depends on its inputs is a property of
        the problem, its weights and the input distribution, not of one draw: it is decided once per
        (code, weight seed, profile, distribution) with one more reference run, on the inputs of the
        seed next to the trial's, and reused for every other seed of that key (trials of later
        evaluations, perturbed and timed-call seeds), so the judge does not pay a run per comparison."""
        if not any(b is not None and b.degenerate is None for b in bounds):
            return bounds
        key = (h.code, h.weight_seed, h.profile, int(distribution_of(h.seed)))
        if key not in self.independent:
            try:
                other, args = self.run_reference(h.code, h.seed ^ 1, h.weight_seed)
            except Exception:  # noqa: BLE001 - the reference fails elsewhere: its trials will say so
                return bounds
            del args
            self.independent[key] = tuple(
                b is not None and b.degenerate is None and isinstance(o, torch.Tensor) and o.shape == r.shape
                and _within(o, r, b) for b, r, o in zip(bounds, leaves(ref_out), leaves(other)))
            while len(self.independent) > BOUND_CACHE:
                self.independent.popitem(last=False)
        flags = self.independent[key]
        out = [dataclasses.replace(b, degenerate="the reference's output does not depend on its inputs")
               if same and b is not None and b.degenerate is None else b for b, same in zip(bounds, flags)]
        return out + bounds[len(out):]

    def run_reference64(self, code: str, seed: int, weight_seed: int, input_bytes: int) -> Any | None:
        """The reference in float64 on the same inputs and weights, or None where it cannot run so
        (too large, a module that is not an ``nn.Module``, an op without a float64 kernel).
        ``input_bytes``: the size of those inputs (as the caller drew them), checked before they are
        drawn again: at full size a draw alone is gigabytes, held beside the caller's."""
        model = self.model(code, weight_seed)
        weights = list(model.parameters()) + list(model.buffers()) if isinstance(model, torch.nn.Module) else []
        if not isinstance(model, torch.nn.Module) or 2 * (input_bytes + harness.tensor_bytes(weights)) > FP64_MAX_BYTES:
            return None
        args = to_double(harness.draw_inputs(self.reference(code), seed, self.device))  # the draw goes at once
        try:
            if self.model64 is None or self.model64[0] != (code, weight_seed):
                self.model64 = None  # the previous copy goes before the next is made
                self.model64 = ((code, weight_seed), copy.deepcopy(model).double())
            with torch.no_grad():
                out = self.model64[1](*args)
        except Exception:  # noqa: BLE001 - any failure leaves the profile's atol in place
            return None
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return out

    def slack(self, h: CompareRequest, ref_out: Any) -> list[float] | None:
        """TF32 slack (`drkernel.gym.judge.compare`) on every trial and timed call of a profile that allows
        TF32: the reference run again with TF32 on, against itself. None elsewhere (CPU, other profiles,
        references without matmuls or convolutions)."""
        if self.device.type != "cuda" or h.profile != "kernelgym":
            return None
        if self.no_tf32.get(h.code):
            return None
        flags = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        try:
            ref_tf32, _ = self.run_reference(h.code, h.seed, h.weight_seed)
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags
        slack = tf32_slack(ref_out, ref_tf32)
        del ref_tf32
        return slack

    def compare(self, h: CompareRequest, blob: bytes, fds: list[int]) -> Verdict:
        step = step_of_tag(h.tag)  # sparse_perturb's inputs (a few values swapped), a timed call's own draw
        base = h.seed
        if step:
            h = dataclasses.replace(h, seed=perturbed(h.seed, step))
        job, trial = h.job, (h.trial, h.seed)  # a trial's index (or "timing") and its seed
        cur = self.current.get(job)
        if cur is None or cur[0] != trial:
            # drop the previous trial's outputs before the next run: at full size each is gigabytes, and
            # holding both ran the judge out of device memory (24.8 GB allocated, H100, 2026-11-24)
            cur = None
            self.current.pop(job, None)
            try:
                out, post = self.run_reference(h.code, h.seed, h.weight_seed)
            except Exception as e:
                if not 0 < step < TIMED_FIRST_STEP or _resource_failure(e):
                    raise
                return self.perturbation_undefined(h, base, e)
            self.current[job] = cur = (trial, out, post, self.derived_bounds(h, out, post))
        if 0 < step < TIMED_FIRST_STEP and (error := raised_on_perturbed(h.tree)):
            return Verdict(False, f"{error} (the reference runs on these inputs)")  # else skipped above
        tree = h.tree
        post_tree = None
        if not h.tag:
            if not (isinstance(tree, dict) and tree.get("k") == "tuple" and len(tree.get("items") or ()) == 2):
                raise ProtocolViolation("outputs message is not (outputs, inputs)")
            tree, post_tree = tree["items"]
            if not (isinstance(post_tree, dict) and post_tree.get("k") in ("tuple", "list")):
                raise ProtocolViolation("the post-run inputs are not a list")
        try:
            with self.staging(h, fds) as staging:
                return self.compare_parts(h, tree, post_tree, blob, staging, cur[1], cur[2], cur[3])
        except VmmError as e:
            return Verdict(False, f"the staging buffer could not be mapped: {e}", retry_host=True)

    def perturbation_undefined(self, h: CompareRequest, base: int, error: Exception) -> Verdict:
        """The verdict of a ``sparse_perturb`` comparison whose reference raised on the perturbed inputs:
        the swaps broke a structure the problem's inputs need (sorted CSR offsets, a permutation's
        pairing), so the check cannot apply to this problem. It is skipped, with the reason recorded
        (``skipped``, a warning on the result), and the solution is not judged by it. Only when the
        reference runs on the same draw unperturbed: a reference that fails there too is the judge's
        failure, and so is a resource failure (`_resource_failure`), which a candidate holding device
        memory could provoke. Both draws are the judge's own, from the job's seeds: nothing the
        solution returns reaches them. The same verdict answers a perturbed call that raised in the
        candidate (`raised_on_perturbed`): on inputs where the reference is undefined, a solution's
        error is no fault of its own, and no reason to end its integrity runs (honest round 12, D1)."""
        self.run_reference(h.code, base, h.weight_seed)  # raises: the reference fails unperturbed too
        reason = (f"the reference itself fails on the perturbed inputs ({type(error).__name__}: "
                  f"{str(error)[:300]}); the swaps break a structure this problem's inputs need")
        return Verdict(True, f"not compared: {reason}", skipped=reason)

    def staging(self, h: CompareRequest, fds: list[int]) -> ContextManager[Any]:
        """The candidate's staging buffer mapped for one message (`drkernel.gym.harness.vmm`), or None."""
        if not fds or self.device.type != "cuda":
            return contextlib.nullcontext()
        return vmm.imported(fds[0], h.staging or 0, self.device)

    def compare_parts(self, h: CompareRequest, tree: Any, post_tree: Any, blob: bytes, staging: Any,
                      ref_out: Any, ref_post: Any, bounds: list[LeafTolerance | None]) -> Verdict:
        """One part at a time, each copy dropped before the next: with multi-GB tensors the judge holds
        the reference's outputs and post-run inputs plus a single copied value, not the whole tree."""
        try:
            cand_out = decode_tree(tree, blob, self.device, staging)
        except (ProtocolViolation, KeyError, TypeError, ValueError, RuntimeError) as e:
            return Verdict(False, f"the solution's outputs could not be read: {e}")
        c = compare_outputs(cand_out, ref_out, h.profile, self.slack(h, ref_out), bounds)
        del cand_out
        changed = None
        if post_tree is not None:
            try:
                changed = tuple(self.inputs_changed(post_tree["items"], blob, list(ref_post), staging))
            except (ProtocolViolation, KeyError, TypeError, ValueError, RuntimeError) as e:
                return Verdict(False, f"the solution's post-run inputs could not be read: {e}")
        degenerate = next((f"output leaf {i}: {b.degenerate}" if len(bounds) > 1 else b.degenerate
                           for i, b in enumerate(bounds) if b and b.degenerate), None)
        return Verdict(bool(c.passed), str(c.message), *(None if x is None else float(x) for x in
                                                        (c.max_abs_err, c.max_rel_err, c.atol, c.rtol)), changed,
                       degenerate=degenerate)

    def inputs_changed(self, nodes: list[Any], blob: bytes, ref_post: list[Any], staging: Any) -> list[str]:
        """`compare.inputs_changed`, copying one post-run input at a time."""
        if len(nodes) != len(ref_post):
            raise ProtocolViolation(f"{len(nodes)} post-run inputs, expected {len(ref_post)}")
        changed = []
        for i, (node, ref) in enumerate(zip(nodes, ref_post)):
            if not isinstance(ref, torch.Tensor):
                continue
            value = decode_tree(node, blob, self.device, staging)
            if inputs_changed([value], [ref]):
                changed.append(f"input[{i}]")
            del value
        return changed

    def time_reference(self, h: TimeReference) -> Timed:
        from drkernel.gym.harness.timing import L2Flusher, time_cuda, timing_options

        if self.device.type != "cuda":
            raise RuntimeError("reference timing needs a CUDA device")
        o = h.options
        model = self.model(h.code, h.weight_seed)
        if o["reference"] == "compile":
            model = torch.compile(model)
        args = harness.draw_inputs(self.reference(h.code), h.seed, self.device)
        if self.flusher is None:
            self.flusher = L2Flusher(self.device)
        stats = time_cuda(model, args, warmup=int(o["warmup_calls"]), calls=int(o["timed_calls"]),
                          l2_flush=bool(o["l2_flush"]), device=self.device, flusher=self.flusher,
                          **timing_options(o))
        return Timed(stats)

    def handle(self, h: dict[str, Any], blob: bytes, fds: list[int]) -> dict[str, Any]:
        """One request, parsed through its message class (`drkernel.gym.messages`); the reply's header."""
        op = op_of(h)
        if op is Op.PREPARE:
            return self.prepare(Prepare.from_header(h)).to_header()
        if op is Op.COMPARE:
            return self.compare(CompareRequest.from_header(h), blob, fds).to_header()
        if op is Op.TIME_REFERENCE:
            return self.time_reference(TimeReference.from_header(h)).to_header()
        if op is Op.RELEASE:
            self.current.pop(Release.from_header(h).job, None)
            return Signal(Op.RELEASED).to_header()
        raise ValueError(f"unknown request {op.value!r}")

    def return_cached_memory(self) -> None:
        """Give the allocator's cached blocks back to the device after a request that left more than
        `IDLE_CACHE` of them: the judge shares the device with the candidates, and a reference timing
        at full size (inputs, a clone per call, outputs) leaves tens of GB cached (measured: 18.7 GB
        held by an idle judge starved the next candidate on an H100, 2026-11-24)."""
        if self.device.type == "cuda" and \
                torch.cuda.memory_reserved(self.device) - torch.cuda.memory_allocated(self.device) > IDLE_CACHE:
            torch.cuda.empty_cache()

    def serve(self) -> None:
        self.channel.send(self.hello())
        while True:
            msg = self.channel.recv(max_fds=1)  # a compare carries the candidate's staging buffer
            if msg.op == Op.SHUTDOWN:
                return
            t = time.perf_counter()
            try:
                reply = self.handle(msg.header, msg.blob, msg.fds)
            except Exception as e:
                reply = Error("judge", type(e).__name__, str(e)[:4000],
                              "".join(traceback.format_exception(e))[-8000:]).to_header()
            finally:
                close_fds(msg.fds)
                self.return_cached_memory()
            reply["seconds"] = time.perf_counter() - t
            self.channel.send(reply)


def _within(out: torch.Tensor, ref: torch.Tensor, bound: LeafTolerance) -> bool:
    """Every value of ``out`` within ``bound`` of ``ref`` (compared in chunks: no full-size temporaries)."""
    a, b = out.reshape(-1), ref.reshape(-1)
    for i in range(0, a.numel(), CHUNK):
        x, y = a[i:i + CHUNK].double(), b[i:i + CHUNK].double()
        if not bool(((x - y).abs() <= bound.atol + bound.rtol * y.abs()).all()):
            return False
    return True


def raised_on_perturbed(tree: Any) -> str | None:
    """The candidate's report that a perturbed call raised (`drkernel.gym.verdict.hacks.RAISED_ON_PERTURBED`
    and the error, sent in place of the output), else None. Only ever read once the judge knows whether
    the reference runs on those inputs: it decides, from its own draw, what the error means."""
    value = tree.get("value") if isinstance(tree, dict) and tree.get("k") == "scalar" else None
    return value if isinstance(value, str) and value.startswith(RAISED_ON_PERTURBED) else None


def _resource_failure(error: BaseException) -> bool:
    """Did the device or the host run out of something (memory, a library's workspace), rather than the
    reference meet inputs it is not defined on? A candidate sharing the device can cause the former."""
    if isinstance(error, (torch.OutOfMemoryError, MemoryError)):
        return True
    text = str(error).lower()
    return any(s in text for s in ("out of memory", "alloc_failed", "cuda error", "cublas", "cudnn"))


def _finite(t: torch.Tensor) -> bool:
    """Every value finite (an fp8 tensor read as float32, exactly: torch has no fp8 ``isfinite``)."""
    return bool(torch.isfinite(t if t.element_size() > 1 else t.float()).all())


def _float_leaves(value: Any) -> list[torch.Tensor]:
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _float_leaves(v)]
    return [value] if isinstance(value, torch.Tensor) and value.is_floating_point() else []


def main() -> None:
    device = resolve(os.environ.get("DRKERNEL_DEVICE", "auto"), "DRKERNEL_DEVICE")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    Judge(child_channel(), device).serve()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
