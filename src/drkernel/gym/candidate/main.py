"""The candidate: a fresh child per solution, used once (``python -m drkernel.gym.candidate.main``).

It starts warm (torch and triton imported, CUDA initialised, or the Triton interpreter patched on
CPU), reports ``ready`` and waits for one job. For that job it

1. loads the reference with harness code and draws every trial's inputs from their seeds on the
   device, as far as a memory budget allows, *before* the solution is imported;
2. installs the candidate hooks (launch recording, guards), pins the backend flags and installs the
   seccomp filter (`drkernel.gym.candidate.seccomp`);
3. imports the solution from a file in a private temp dir, builds ``ModelNew`` with the weight seed,
   checks that constructor and forward accept the reference's arguments;
4. runs each trial, synchronises, and exports outputs and post-run inputs (CUDA IPC handles or
   host bytes) for the judge to copy and compare; stops at the first failing trial;
5. runs the hooks' extra runs, then (GPU) draws the first timed calls' inputs (``timed_predraw``)
   and times the solution inside the exclusive region the orchestrator grants, and reports.

Everything it sends is a claim; the orchestrator decides the status from the judge's comparisons.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
from typing import Any

if os.environ.get("DRKERNEL_DEVICE", "cpu") == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"  # must precede the first triton import

import importlib.util  # noqa: E402
import inspect  # noqa: E402

import torch  # noqa: E402
import triton  # noqa: E402,F401

from drkernel.gym.harness import inputs as harness# noqa: E402
from drkernel.gym import compile_cache  # noqa: E402
from drkernel.gym.candidate import seccomp  # noqa: E402
from drkernel.gym.checks import load_hook  # noqa: E402
from drkernel.gym.ipc import Channel, StagingBuffer, child_channel, encode_tree, staged_fds  # noqa: E402
from drkernel.gym.messages import (SECOND_SIZE_NOTE, Compare, Done, Error, Extra, Job, NativeBuild,  # noqa: E402
                                   Op, Outputs, Ready, Signal, SolutionPath, Timing)
from drkernel.gym.seeds import TIMED_TAG_PREFIX  # noqa: E402

SOLUTION_MODULE = "drkernel_solution"


class Failure(Exception):
    """A stage of the solution failed; carries the stage name and the original exception."""

    def __init__(self, stage: str, exc: BaseException | None, message: str = "") -> None:
        super().__init__(message or repr(exc))
        self.stage, self.exc, self.message = stage, exc, message


AHEAD_FREE_FRACTION = 0.02
"""The most of the device's free memory the timed calls' inputs drawn before the exclusive region may
take. A candidate holds them while it waits for the region, and several may wait at once: eight take
at most 15 % of what was free (1 - 0.98 ** 8). Inputs of a few megabytes, whose draws cost the region
the most host time per byte, fit many times over."""
CACHED_KEEP = 1 << 30
"""Bytes of cached, unallocated device memory a candidate keeps while the judge works on an export."""


def release_cached(device: torch.device) -> None:
    """Give the allocator's cached blocks back to the device before the judge runs on an export, where
    they exceed `CACHED_KEEP`: at full size the judge needs gigabytes at that moment (a reference run,
    a post-run input copied), and blocks this process freed but keeps cached would leave it out of
    memory (a level-1 problem with 8.6 GB of inputs: the candidate held 52 GB, mostly cached)."""
    if torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device) > CACHED_KEEP:
        torch.cuda.empty_cache()


class Context:
    """What hooks see (`drkernel.gym.checks.HookContext`)."""

    def __init__(self, channel: Channel, device: torch.device, job: dict[str, Any], solution_path: str,
                 reference: Any) -> None:
        self.channel = channel
        self.device = device
        self.cpu_mode = device.type == "cpu"
        self.solution_path = solution_path
        self.reference = reference
        self.config = job["config"]
        self.seeds = [t["seed"] for t in job["trials"]]
        self.integrity_plan = dict(job.get("integrity") or {})  # order of the integrity runs, coverage seed
        rate = job.get("contraction_rate")  # no op of the solution is priced faster (`OpRecorder`)
        self.contraction_rate = float(rate) if isinstance(rate, (int, float)) and rate > 0 else None
        self.hooks: list[Any] = []
        self.staging = StagingBuffer(device) if self.device.type == "cuda" else None  # None: host bytes
        self.native_loader: Any = None  # a CUDA solution's load_inline (`install_native`), else None
        self.native_kernels: tuple[str, ...] = ()  # its __global__ functions: its own device kernels

    def export(self, msg: Outputs | Compare, value: Any) -> dict[str, Any]:
        """Send ``value`` for the judge to copy (``msg`` without its tree) and wait for its verdict."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            release_cached(self.device)
        try:
            tree, blob = encode_tree(value, self.staging)
        except RuntimeError:  # no VMM export here (`vmm.VmmError`): host copies from now on
            self.staging = None
            tree, blob = encode_tree(value)
        extra, fds = staged_fds(self.staging)
        self.channel.send(msg.with_tree(tree, extra.get("staging")).to_header(), blob, fds=fds)
        reply = self.channel.recv()
        if reply.op == Op.RETRY_HOST:  # the judge could not map our staging buffer
            self.staging = None
            return self.export(msg, value)
        return reply.header

    def observed(self) -> contextlib.ExitStack:
        """Every hook's ``observe()`` around one trial call, so trials look like integrity runs."""
        stack = contextlib.ExitStack()
        for hook in self.hooks:
            observe = getattr(type(hook), "observe", None)  # the class's: an instance attribute would shadow it
            if observe is not None:
                stack.enter_context(observe(hook))
        return stack

    def setting_up(self) -> contextlib.ExitStack:
        """Every hook's ``setting_up()`` around the solution's import and its model's construction."""
        stack = contextlib.ExitStack()
        for hook in self.hooks:
            setting_up = getattr(type(hook), "setting_up", None)  # the class's, as in `observed`
            if setting_up is not None:
                stack.enter_context(setting_up(hook))
        return stack

    def compare(self, outputs: Any, trial: int | str, tag: str) -> dict[str, Any]:
        """``trial``: a correctness trial's index, or ``"timing"`` for the timed calls' inputs."""
        return self.export(Compare(trial if trial == "timing" else int(trial), str(tag), None), outputs)


class Candidate:
    def __init__(self, channel: Channel, device: torch.device) -> None:
        self.channel = channel
        self.device = device
        self.stages: dict[str, float] = {}
        self.hooks: list[Any] = []
        self.out_bytes = 0
        self.cache_before: set[str] | None = None  # the compile cache's files before the solution ran

    def seed_compile_cache(self, job: dict[str, Any], blob: bytes) -> None:
        """Write the kernels earlier candidates of this evaluation's scope compiled into our private
        Triton cache (`drkernel.gym.compile_cache`), and note what the cache holds, so
        that what this candidate adds can be reported. Only when the job asks for it."""
        root = os.environ.get("TRITON_CACHE_DIR")
        if not root or not job.get("compile_cache"):
            return
        files = compile_cache.unpack(job.get("compile_seed") or [], blob)
        compile_cache.write_files(root, compile_cache.relocate(files, root))
        self.cache_before = compile_cache.list_files(root)

    def compiled_files(self) -> tuple[list[list[Any]], bytes]:
        """What this candidate's kernels added to its Triton cache, packed for `Done` (none unless the
        job asked)."""
        root = os.environ.get("TRITON_CACHE_DIR")
        if not root or self.cache_before is None:
            return [], b""
        index, blob = compile_cache.pack(compile_cache.new_files(root, self.cache_before))
        return [list(e) for e in index], blob

    def stage(self, name: str, started: float) -> float:
        now = time.perf_counter()
        self.stages[name] = self.stages.get(name, 0.0) + now - started
        return now

    def run(self, job: dict[str, Any], native: tuple[NativeBuild, ...] = (), libraries: bytes = b"") -> None:
        """``native``: a CUDA solution's builds, their libraries in ``libraries`` (none for Triton)."""
        t = time.perf_counter()
        if self.device.type == "cuda":
            torch.cuda.set_per_process_memory_fraction(float(job["config"]["memory_fraction"]), self.device)
        refs: dict[str, Any] = {}
        trials = job["trials"]
        for spec in trials:
            if spec["code"] not in refs:
                refs[spec["code"]] = harness.load_reference(spec["code"])
        primary = refs[trials[0]["code"]]
        drawn = self.predraw(job, refs)
        t = self.stage("inputs", t)

        os.makedirs(job["workdir"], exist_ok=True)
        path = os.path.join(job["workdir"], job["solution_name"])
        with open(path, "w") as f:
            f.write(job["solution"])
        ctx = Context(self.channel, self.device, job, path, primary)
        self.channel.send(SolutionPath(path).to_header())
        if native:
            install_native(ctx, os.path.join(os.path.dirname(job["workdir"]), "native"), native, libraries)
        self.hooks = ctx.hooks = [load_hook(p) for p in job["hooks"]]
        for hook in self.hooks:
            hook.before_import(ctx)
        harness.pin_backend_flags()
        eager_wrap_triton()
        if os.environ.get(seccomp.SECCOMP_ENV, "1") != "0":  # the kernel refuses what no kernel needs
            try:
                seccomp.install()
            except seccomp.SeccompUnavailable as e:
                raise Failure("harness", e, f"the seccomp filter could not be installed: {e}") from e
        with ctx.setting_up():
            module = self.import_solution(path)
        for hook in self.hooks:
            hook.after_import(ctx, module)
        model_cls = getattr(module, "ModelNew", None)
        if not isinstance(model_cls, type):
            raise Failure("no_modelnew", None, "the solution defines no class ModelNew")
        models: dict[str, Any] = {}
        t = self.stage("import", t)

        passed = self.trials(job, ctx, refs, models, model_cls, drawn)
        if not passed:
            return
        model = models[trials[0]["code"]]

        def make_inputs(trial: int) -> list[Any]:
            spec = trials[trial]
            return harness.draw_inputs(refs[spec["code"]], spec["seed"], self.device)

        t = time.perf_counter()
        for hook in self.hooks:
            try:
                extra = hook.extra_runs(ctx, model, make_inputs)
            except Exception as e:  # a hook failing is recorded, the evaluation goes on
                extra = {"error": f"{type(e).__name__}: {e}"}
            self.channel.send(Extra(hook.name, extra).to_header())
        self.stage("extra_runs", t)
        if job["timing"] and self.device.type == "cuda":
            self.time_solution(job, ctx, model, primary, drawn.pop("timing", None))

    def predraw(self, job: dict[str, Any], refs: dict[str, Any]) -> dict[Any, list[Any]]:
        """Draw inputs before the solution exists, in trial order, while within the byte budget."""
        drawn: dict[Any, list[Any]] = {}
        budget = int(job["input_budget_bytes"])
        used = 0
        keys: list[tuple[Any, str, int]] = [(i, s["code"], s["seed"]) for i, s in enumerate(job["trials"])]
        if job["timing"] and self.device.type == "cuda":
            keys.append(("timing", job["trials"][0]["code"], int(job["timing_seed"])))
        for key, code, seed in keys:
            values = harness.draw_inputs(refs[code], seed, self.device)
            used += harness.tensor_bytes(values)
            if used > budget and drawn:
                break  # the rest are drawn when needed
            drawn[key] = values
        return drawn

    def import_solution(self, path: str) -> Any:
        # The process started as ``python -c``: its working directory (the private /tmp) heads the import
        # path, so importing any library would list it, a read the audit hook pins on the solution.
        sys.path[:] = [p for p in sys.path if p not in ("", ".", os.getcwd())]
        try:
            with open(path) as f:
                compile(f.read(), path, "exec")
        except SyntaxError as e:
            raise Failure("syntax", e) from e
        spec = importlib.util.spec_from_file_location(SOLUTION_MODULE, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[SOLUTION_MODULE] = module
        try:
            spec.loader.exec_module(module)
        except BaseException as e:  # SystemExit and KeyboardInterrupt from the solution included
            raise Failure("import", e) from e
        return module

    def build(self, model_cls: type, ref: Any, seed: int) -> Any:
        init_args = harness.init_inputs(ref, seed, self.device)
        try:
            inspect.signature(model_cls).bind(*init_args)
        except TypeError as e:
            raise Failure("signature", e, f"ModelNew({_arglist(init_args)}): {e}") from e
        except ValueError:
            pass  # no introspectable signature: let the call decide
        try:
            return harness.build_model(model_cls, init_args, seed, self.device)
        except BaseException as e:
            raise Failure("construct", e) from e

    def trials(self, job: dict[str, Any], ctx: Context, refs: dict[str, Any], models: dict[str, Any],
               model_cls: type, drawn: dict[Any, list[Any]]) -> bool:
        weight_seed = int(job["weight_seed"])
        for i, spec in enumerate(job["trials"]):
            t = time.perf_counter()
            ref = refs[spec["code"]]
            if spec["code"] not in models:
                with ctx.setting_up():
                    models[spec["code"]] = self.build(model_cls, ref, weight_seed)
            model = models[spec["code"]]
            args = drawn.pop(i, None)
            if args is None:
                args = harness.draw_inputs(ref, spec["seed"], self.device)
            forward = getattr(model, "forward", model)
            try:
                inspect.signature(forward).bind(*args)
            except TypeError as e:
                raise Failure("signature", e, f"ModelNew.forward({_arglist(args)}): {e}") from e
            except ValueError:
                pass
            with harness.collector_held():  # no finaliser of the solution's between its call and the export
                verdict, t = self.trial_call(ctx, job, i, model, args, t)
            del args
            self.stage("correctness", t)
            if not verdict.get("passed"):
                return False
        return True

    def trial_call(self, ctx: Context, job: dict[str, Any], i: int, model: Any, args: list[Any],
                   t: float) -> tuple[dict[str, Any], float]:
        """Trial ``i``'s call, observed, its hooks' checks and its export: the judge's verdict, and the
        stage clock after the call."""
        try:
            with torch.no_grad(), ctx.observed():
                out = model(*args)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
        except BaseException as e:
            raise Failure("forward", e, _second_size_note(job, i, args, e)) from e
        for hook in self.hooks:
            hook.after_trial(ctx, i, args, out)
        if i == 0:
            self.out_bytes = harness.tensor_bytes(out)
        t = self.stage("compile" if i == 0 else "correctness", t)
        try:
            return ctx.export(Outputs(i, None), (out, list(args))), t
        except TypeError as e:  # an output that is not a tensor, scalar, tuple or list
            raise Failure("output", e) from e

    def time_solution(self, job: dict[str, Any], ctx: Context, model: Any, ref: Any,
                      inputs: list[Any] | None) -> None:
        """Time inside the exclusive region; re-measure with device-wide synchronisation when the
        orchestrator finds the time implausible; then send the sampled timed outputs to the judge."""
        from drkernel.gym.harness.timing import time_synchronized

        t = time.perf_counter()
        if inputs is None:
            inputs = harness.draw_inputs(ref, int(job["timing_seed"]), self.device)
        cfg, plan = job["config"], job["timing_plan"]
        draw = self.timed_draws(job, ref, inputs)
        keep = set(plan["keep"])
        if 2 * self.out_bytes > int(job["input_budget_bytes"]):
            keep = {max(keep)}  # large outputs: only the last call's, which costs no memory to keep
        torch.cuda.synchronize(self.device)  # nothing queued here runs on into another candidate's region
        self.stage("timed_inputs", t)
        self.channel.send(Signal(Op.LOCK).to_header())
        self.channel.recv()
        t = time.perf_counter()
        try:
            with harness.collector_held():  # no finaliser of the solution's between a call and its snapshot
                stats, kept = self.timed_calls(ctx, job, model, inputs, draw, keep)
            self.channel.send(Timing(Op.TIMING, stats).to_header())
            if self.channel.recv().op == Op.REMEASURE:
                stats = time_synchronized(model, inputs, calls=int(plan["remeasure_calls"]),
                                          l2_flush=bool(cfg["l2_flush"]), device=self.device, draw=draw)
                self.channel.send(Timing(Op.TIMING_SYNC, stats).to_header())
                self.channel.recv()  # continue: the orchestrator holds the device shared again
        except BaseException as e:
            self.channel.send(Signal(Op.UNLOCK).to_header())
            raise Failure("timing", e) from e
        t = self.stage("timing", t)
        draw.clear()
        del inputs
        for index in sorted(kept):
            ctx.compare(kept.pop(index), "timing", f"{TIMED_TAG_PREFIX}{index}")  # judged on its own draw
        self.stage("timing_samples", t)

    def timed_calls(self, ctx: Context, job: dict[str, Any], model: Any, inputs: list[Any], draw: Any,
                    keep: set[int]) -> tuple[dict[str, Any], dict[int, Any]]:
        """The timed calls and the profiled ones after them (`profile_timed`): their stats, and the kept
        outputs by call index (snapshots taken at each call's end)."""
        from drkernel.gym.harness.timing import time_cuda, timing_options

        cfg, plan = job["config"], job["timing_plan"]
        kept: dict[int, Any] = {}
        stats = time_cuda(model, inputs, warmup=int(cfg["warmup_calls"]) + int(plan["extra_warmup"]),
                          calls=int(cfg["timed_calls"]), l2_flush=bool(cfg["l2_flush"]), device=self.device,
                          keep=keep, kept=kept, draw=draw, **timing_options(cfg))
        kept.update(self.profile_timed(ctx, model, draw, stats, int(job["input_budget_bytes"]),
                                       keep_last=3 * self.out_bytes <= int(job["input_budget_bytes"])))
        return stats, kept

    def timed_draws(self, job: dict[str, Any], ref: Any, inputs: list[Any]) -> harness.TimedDraws:
        """Each timed call's own inputs; with ``timed_predraw``, the first calls' (`ahead_calls`) drawn
        now, before the exclusive region, within the job's input budget less ``inputs`` and within
        `AHEAD_FREE_FRACTION` of the device's free memory (``inputs``, a draw of the same reference,
        tells how many fit, so no draw is made only to be dropped)."""
        from drkernel.gym.harness.timing import ahead_calls, timing_options

        cfg = job["config"]
        draw = harness.TimedDraws(ref, int(job["timing_seed"]), self.device)
        if cfg.get("timed_predraw", False):
            free, _ = torch.cuda.mem_get_info(self.device)
            size = harness.tensor_bytes(inputs)
            budget = min(int(job["input_budget_bytes"]) - size, int(free * AHEAD_FREE_FRACTION))
            calls = ahead_calls(int(cfg["timed_calls"]), timing_options(cfg))
            draw.ahead(min(calls, max(0, budget) // size) if size else calls, budget)
        return draw

    def profile_timed(self, ctx: Context, model: Any, draw: Any, stats: dict[str, Any], budget: int,
                      keep_last: bool) -> dict[int, Any]:
        """With the integrity hook on: a few more timed calls under the profiler, still in the exclusive
        region (`drkernel.gym.candidate.profiling.profiled_timing`); their least time joins the timing
        stats, their kernels the hook's report (time coverage is read from them). Returns the last
        one's output by its call index (``keep_last``), judged like a sampled timed call's."""
        from drkernel.gym.candidate.profiling import profiled_timing

        hook = next((h for h in self.hooks if h.name == "integrity" and getattr(h, "watch", None)), None)
        if hook is None:
            return {}
        profile = profiled_timing(model, draw, int(stats["n"]), self.device, set(hook.watch.own_names),
                                  tuple(getattr(ctx, "native_kernels", ())), budget_bytes=budget,
                                  own_counts=hook.watch.own_by_name, keep_last=keep_last)
        for key in ("profiled_ms", "profiled_span_ms", "profiled_calls"):
            stats[key] = profile.pop(key)
        kept = profile.pop("kept")
        hook.timed_profile = profile
        return kept

    def report(self) -> dict[str, Any]:
        reports = {}
        for hook in self.hooks:
            try:
                reports[hook.name] = type(hook).report(hook)  # the class's method, not an instance attribute
            except Exception as e:
                reports[hook.name] = {"error": f"{type(e).__name__}: {e}"}
        return reports


def install_native(ctx: Context, root: str, native: tuple[NativeBuild, ...], libraries: bytes) -> None:
    """A CUDA solution's builds: written under ``root`` (outside the solution's folder, which it may
    write), ``load_inline`` made their loader (`drkernel.gym.cuda.loader`), each call of their
    functions an own launch of the process's launch watch. Before any hook's ``before_import``, so
    the modules and functions they snapshot include the loader."""
    from drkernel.gym.candidate.launches import launch_watch
    from drkernel.gym.cuda import loader

    paths = loader.write_builds(root, native, libraries)
    watch = launch_watch(ctx.solution_path, ctx.cpu_mode)
    ctx.native_loader = loader.install(paths, native[0].arch, native[0].toolchain, watch.native)
    ctx.native_kernels = tuple(dict.fromkeys(k for b in native for k in b.kernels))


def _arglist(args: list[Any]) -> str:
    def show(a: Any) -> str:
        if isinstance(a, torch.Tensor):
            return f"Tensor{tuple(a.shape)}"
        return repr(a)[:40]

    return ", ".join(show(a) for a in args)


def _second_size_note(job: dict[str, Any], trial: int, args: list[Any], exc: BaseException) -> str:
    """For a forward that failed at the hidden second problem size: the sizes it failed at, before the
    error (a kernel that assumes full tiles or power-of-two sizes fails only there). Else empty."""
    if trial < int(job["config"]["trials"]):
        return ""
    shapes = ", ".join(str(tuple(a.shape)) for a in args if isinstance(a, torch.Tensor))
    return f"{SECOND_SIZE_NOTE} (inputs {shapes}): {type(exc).__name__}: {exc}"


def _error_header(f: Failure) -> dict[str, Any]:
    exc = f.exc
    tb = "".join(traceback.format_exception(exc)) if exc is not None else ""
    return Error(f.stage, type(exc).__name__ if exc is not None else "",
                 (f.message or (str(exc) if exc is not None else ""))[:4000], tb[-20000:]).to_header()


def eager_wrap_triton() -> None:
    """`torch.library.wrap_triton` launches the kernel it wraps directly, not through its higher-order
    op: in eager mode the op adds only time (PyTorch's own note: about 1 ms a call), and under the
    observers' dispatch modes it has no rule (honest round 11, flash-attention's rotary on an H100:
    NotImplementedError). Set for this thread, the one that calls ``forward``; the switch lives in a
    private module the solution contract refuses."""
    try:
        from torch._library import triton as library_triton

        library_triton.wrap_triton_enabled.value = False
    except (ImportError, AttributeError):  # a PyTorch without it has no such op either
        pass


def warm_up(device: torch.device) -> torch.device:
    """Pay the start-up costs before a job arrives: CUDA context and Triton's launcher (driver helpers
    built and loaded, cache opened) through one tiny kernel; on CPU, the interpreter patches. Returns
    the device with its index: ``cuda`` names the current device, and calls such as
    ``set_per_process_memory_fraction`` refuse a device without one (every candidate of a ``cuda``
    evaluator failed that way on an H100, 2026-11-24)."""
    if device.type == "cuda":
        from drkernel.gym.harness.timing import warm_kernel

        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
        x = torch.zeros(16, device=device)
        warm_kernel[(1,)](x, 16, BLOCK=16)
        torch.cuda.synchronize(device)
    else:
        from drkernel.gym.candidate import interpreter

        interpreter.install()
    return device


def serve(channel: Channel, pidfd: int | None = None) -> None:
    """One candidate's life on ``channel``: init, warm up, ready, one job, done; never returns.
    ``pidfd``: a forked candidate's descriptor of itself, sent with ``init`` so the orchestrator can
    name and kill it from outside its pid namespace (`drkernel.gym.candidate.zygote`)."""
    device = torch.device(os.environ.get("DRKERNEL_DEVICE", "cpu"))
    # the orchestrator lets us touch the device outside timed regions
    channel.send(Signal(Op.INIT).to_header(), fds=[pidfd] if pidfd is not None else ())
    if pidfd is not None:
        os.close(pidfd)
    channel.recv()
    device = warm_up(device)
    channel.send(Ready(os.getpid()).to_header())
    msg = channel.recv()
    job = msg.header
    candidate = Candidate(channel, device)
    try:
        parsed = Job.from_header(job)  # the native builds typed and checked; their libraries head the blob
        cut = parsed.native_bytes
        candidate.seed_compile_cache(job, msg.blob[cut:])
        candidate.run(job, parsed.native, msg.blob[:cut])
    except Failure as f:
        channel.send(_error_header(f))
    except BaseException as e:  # a failure of the harness itself, or an escape from the solution
        channel.send(_error_header(Failure("harness", e)))
    try:
        files, blob = candidate.compiled_files()
    except (OSError, ValueError) as e:  # the cache is an optimisation: never a failed evaluation
        print(f"compile cache not reported: {e}", file=sys.stderr)
        files, blob = [], b""
    channel.send(Done(candidate.stages, candidate.report(), harness.backend_flags(), files).to_header(), blob)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown: the solution may have left threads or atexit hooks


def main() -> None:
    serve(child_channel())


if __name__ == "__main__":
    main()
