"""A test family with a planted crash: y = 2x, and `crash=1` stores to an illegal address. A search over it must
record the crashing configs as failed trials and go on measuring the others."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from mage_tune.families import CudaFamily, Knob, Launch


class PlantedCrash(CudaFamily):
    name = "planted_crash"
    template = "planted_crash.cu.j2"
    dims = ("n",)
    default_dims: ClassVar[dict[str, int]] = {"n": 1 << 20}
    knobs = (Knob("threads", (256, 128), "threads per block"), Knob("crash", (0, 1), "1: an illegal store"))
    kernel_name = "twice"
    param_names = ("x", "y")

    def violations(self, config, shape, arch) -> list[str]:
        return []

    def constraint_text(self) -> list[str]:
        return []

    def launch(self, config, shape, arch) -> Launch:
        return Launch((-(-shape["n"] // config["threads"]), 1, 1), config["threads"])

    def template_vars(self, config, shape) -> dict:
        return {**config, "label": f"planted_crash {config}"}

    def scalar_args(self, shape) -> tuple:
        return (np.int32(shape["n"]),)

    def make_inputs(self, shape, rng) -> dict[str, np.ndarray]:
        return {"x": rng.standard_normal(shape["n"]).astype(np.float32)}

    def reference(self, inputs, shape) -> np.ndarray:
        return 2.0 * inputs["x"].astype(np.float64)

    def output_shape(self, shape) -> tuple[int, ...]:
        return (shape["n"],)

    def bytes_moved(self, shape) -> int:
        return 8 * shape["n"]


FAMILY = PlantedCrash()
