#!/usr/bin/env bash
# Makes .venv and installs mage-tune in it (editable) with the test tools (the `dev` extra).
#
# Where this machine has an NVIDIA GPU (nvidia-smi lists one, or /dev/nvidia0 exists), the GPU path too:
#   - torch and cupy already import in $PYTHON (default python3; a prepared GPU image): the venv sees the system's
#     packages (--system-site-packages) and uses them as they are;
#   - otherwise the `gpu` extra is installed (cupy, torch).
# Where no package registry answers (checked only on a GPU machine), pip installs from the system's packages and
# from wheels in ./.whl, if that folder exists; what is still missing, pip names.
# MAGE_TUNE_GPU=0 or =1 overrides the detection. Without a GPU this is the plain CPU set-up (CI's).
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
say() { echo "setup.sh: $*" >&2; }

gpu=${MAGE_TUNE_GPU:-}
if [ -z "$gpu" ]; then
  gpu=0
  if { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; } || [ -e /dev/nvidia0 ]; then
    gpu=1
  fi
fi

venv_args=()
extras=dev
if [ "$gpu" = 1 ]; then
  if "$PY" -c "import torch, cupy" >/dev/null 2>&1; then
    say "NVIDIA GPU found; torch and cupy import in $PY: the venv uses them (--system-site-packages)"
    venv_args=(--system-site-packages)
  else
    say "NVIDIA GPU found: installing the gpu extra (cupy, torch)"
    extras=dev,gpu
  fi
fi
"$PY" -m venv ${venv_args[@]+"${venv_args[@]}"} .venv
if [ ${#venv_args[@]} -gt 0 ]; then
  # $PY may itself run in a virtual environment (the GPU image's torch lives in one): --system-site-packages reaches
  # only the base interpreter's packages, so point the new venv at that environment's too.
  parent=$("$PY" -c "import sys, sysconfig; print(sysconfig.get_paths()['purelib'] if sys.prefix != sys.base_prefix else '')")
  if [ -n "$parent" ]; then
    site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    echo "$parent" > "$site/gpu_image_packages.pth"
  fi
fi
pip=(.venv/bin/python -m pip install -q)

online=1
if [ "$gpu" = 1 ]; then  # a prepared GPU image may have no registry: find out in seconds, not after pip's retries
  probe=$(mktemp -d)
  .venv/bin/python -m pip download -q --no-deps --timeout 5 --retries 0 -d "$probe" pip >/dev/null 2>&1 || online=0
  rm -rf "$probe"
fi

if [ "$online" = 1 ]; then
  "${pip[@]}" --upgrade pip
  "${pip[@]}" -e ".[$extras]"
else
  find=()
  [ -d .whl ] && find=(--find-links .whl)
  say "no package registry answers: installing from the system's packages${find[*]:+ and .whl/}"
  offline=("${pip[@]}" --no-index --no-build-isolation ${find[@]+"${find[@]}"})
  if ! "${offline[@]}" -e ".[$extras]" 2>/dev/null; then
    say "the $extras extra cannot be installed offline (ruff, psycopg2?): installing mage-tune alone"
    "${offline[@]}" -e .
  fi
fi
if [ "$gpu" = 1 ]; then
  .venv/bin/mage-tune doctor | sed -n '/^mode:/,$p' >&2 || true  # says which mode search and bench will run in, and why
fi
