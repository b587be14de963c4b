"""Kernel families: each declares a parameter space, builds any config and knows its reference and baselines.
Found by name, path or entry point through registry.py."""

from __future__ import annotations

from mage_tune.kernels.registry import builtin_names, known_names, load_family

FAMILIES = builtin_names()
get_family = load_family

__all__ = ["FAMILIES", "builtin_names", "get_family", "known_names", "load_family"]
