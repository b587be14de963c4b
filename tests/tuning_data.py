"""Small tuning databases made by the tests themselves (tests/tuning): runs of made-up times on a made-up GPU
("Test GPU"), so the shipped data (tuning/shipped.py) counts as another GPU's: a factor of two in one more dimension."""

from __future__ import annotations

import math
import random

from mage_tune.arch import get_arch
from mage_tune.kernels import get_family
from mage_tune.problem import Problem
from mage_tune.records.objectives import MEASURED_OBJECTIVE
from mage_tune.tuning.db import RunInfo, TuningDB, run_name
from mage_tune.tuning.warm import random_valid

GPU = "Test GPU"
ARCH = get_arch("sm_90")


def made_up_time(config: dict, shape: dict) -> float:
    """A deterministic time for a config at a shape: distinct per config, the same in every test."""
    text = ",".join(f"{k}={v}" for k, v in sorted(config.items())) + repr(sorted(shape.items()))
    return round(1.0 + math.prod(shape.values()) / 1e6 + random.Random(text).random(), 6)


def run(
    family: str, shape: dict, configs: list[dict], gpu: str = GPU, tag: str = "", origin: str = ""
) -> tuple[RunInfo, list[dict]]:
    """One measured run of `configs` at `shape`, each with its made-up time."""
    key = f"{family}-{'-'.join(f'{k}{v}' for k, v in shape.items())}-{gpu}{tag}"
    info = RunInfo(
        name=run_name(f"test {key}", key),
        family=family,
        origin=origin or family,
        shape=dict(shape),
        arch=ARCH.name,
        objective=MEASURED_OBJECTIVE,
        gpu=gpu,
        baselines={"copy": 1.0},
        where=f"made by a test: {key}",
        run_id=key,
    )
    rows = [
        {"number": i, "config": c, "outcome": "measured", "value": made_up_time(c, shape), "census": {}, "source": "t"}
        for i, c in enumerate(configs)
    ]
    return info, rows


def layernorm_configs(shape: dict, count: int, seed: int) -> list[dict]:
    """Valid layer-norm configs at `shape` with vec 8 or 16 only: none is valid at an odd width."""
    family = get_family("layernorm")
    pool = random_valid(Problem(family, shape, ARCH), count * 6, seed)
    return [c for c in pool if c["vec"] in (8, 16)][:count]


def make_db(path, runs: list[tuple[RunInfo, list[dict]]]) -> str:
    url = "sqlite:///" + str(path)
    TuningDB(url).add_runs(runs)
    return url
