"""Kernel families: each declares a parameter space, renders a template and knows its reference and baselines."""

from __future__ import annotations

FAMILIES = ("layernorm", "matmul")


def get_family(name: str):
    from mage_tune.errors import ConfigError

    if name == "layernorm":
        from mage_tune.kernels.layernorm import FAMILY
    elif name == "matmul":
        from mage_tune.kernels.matmul import FAMILY
    else:
        raise ConfigError(f"unknown kernel family {name!r}; known: {', '.join(FAMILIES)}")
    return FAMILY
