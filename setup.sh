#!/usr/bin/env bash
# Creates .venv and installs mage-tune with its CPU dependencies (no torch, no cupy: those are the `gpu` extra).
set -euo pipefail
cd "$(dirname "$0")"
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[dev]'
