#!/usr/bin/env bash
# KernelBench's own evaluator, copied into .kernelbench/ (git-ignored) for benchmarks/kernelbench_yardstick.py:
#   ./scripts/kernelbench_vendor.sh [SOURCE] [DEST]
# SOURCE: a clone of github.com/ScalingIntelligence/KernelBench (a work tree, or a bare git dir whose HEAD
# is read with `git show`); default $KERNELBENCH_SRC, else /work/.mirror/ScalingIntelligence+KernelBench/repo.
# DEST: default .kernelbench at the repository root (carried to the GPU machine; about 100 KB).
#
# Copied unchanged: LICENSE (MIT) and the modules `kernelbench.eval.eval_kernel_against_ref` imports,
#   src/kernelbench/__init__.py  imports .utils (torch.rand_mix aliases)
#   src/kernelbench/eval.py      eval_kernel_against_ref, KernelExecResult (pydantic); `from . import timing, dataset`
#   src/kernelbench/timing.py    the cuda_event timer (L2 flushed before each trial)
#   src/kernelbench/dataset.py   imported by eval.py (the `datasets` package only when a dataset is loaded)
#   src/kernelbench/utils.py     get_gpu_vendor; imports dotenv, openai and litellm at the top (its LLM clients)
# Not copied: kernelbench.profile (only timing_method="nsight_python_time" imports it) and the problem
# files (the yardstick takes the reference source from our rows, which match KernelBench's files).
# SOURCE.txt records where the copy came from (commit, files, sha256). Fails if a module that the copied
# ones import at the top is missing from the copy.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC="${1:-${KERNELBENCH_SRC:-/work/.mirror/ScalingIntelligence+KernelBench/repo}}"
DEST="${2:-.kernelbench}"
FILES=(LICENSE src/kernelbench/__init__.py src/kernelbench/eval.py src/kernelbench/timing.py
       src/kernelbench/dataset.py src/kernelbench/utils.py)

if [ -f "$SRC/src/kernelbench/eval.py" ]; then
    read_src() { cat "$SRC/$1"; }
    commit=$(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo "unknown (not a git work tree)")
elif git --git-dir="$SRC" rev-parse --verify -q HEAD >/dev/null 2>&1; then
    read_src() { git --git-dir="$SRC" show "HEAD:$1"; }
    commit=$(git --git-dir="$SRC" rev-parse HEAD)
else
    echo "kernelbench_vendor: $SRC is neither a KernelBench work tree (src/kernelbench/eval.py) nor a git dir" >&2
    exit 2
fi

rm -rf "$DEST"
mkdir -p "$DEST/src/kernelbench"
for f in "${FILES[@]}"; do
    out="$DEST/$f"
    [ "$f" = LICENSE ] && out="$DEST/LICENSE"
    read_src "$f" >"$out" || { echo "kernelbench_vendor: $f missing in $SRC" >&2; exit 2; }
done
grep -q "MIT License" "$DEST/LICENSE" || { echo "kernelbench_vendor: LICENSE is not MIT; check before use" >&2; exit 2; }

# Every top-level `from . import X` / `from .X import` / `from kernelbench.X import` names a copied module.
missing=$(grep -hoE "^(from \. import [a-z_, ]+|from \.[a-z_]+ import|from kernelbench\.[a-z_]+ import)" \
              "$DEST"/src/kernelbench/*.py \
          | sed -E 's/^from \. import //; s/^from \.//; s/^from kernelbench\.//; s/ import$//' \
          | tr ',' '\n' | tr -d ' ' | sort -u \
          | while read -r m; do [ -f "$DEST/src/kernelbench/$m.py" ] || echo "$m"; done)
[ -z "$missing" ] || { echo "kernelbench_vendor: copied modules import missing ones: $missing" >&2; exit 2; }

{
    echo "source: https://github.com/ScalingIntelligence/KernelBench (MIT, LICENSE beside this file)"
    echo "commit: $commit"
    echo "copied: $(date -u +%Y-%m-%dT%H:%M:%SZ) by scripts/kernelbench_vendor.sh"
    (cd "$DEST" && sha256sum LICENSE src/kernelbench/*.py)
} >"$DEST/SOURCE.txt"
echo "kernelbench_vendor: $DEST from $commit ($(du -sh "$DEST" | cut -f1))"
