"""Launchers for the baselines timed beside the variants: Triton's reference kernels, torch (cuBLAS FP32) and, for
layer norm, plain copies of x into y: the same bytes moved by kernels that do nothing else, timed exactly like the
variants, so the floor at a small shape (launch, ramp-up and tail included) is measured rather than extrapolated.

Each launcher takes one buffer set (names as the family's inputs, output under "__out__") and launches on torch's
current stream, so graph capture sees it.
"""

from __future__ import annotations

from collections.abc import Callable

from mage_tune.measure.records import Job


def triton_jobs(family: str, shape: dict) -> list[Job]:
    """Triton's reference kernel at each of its configs."""
    if family == "layernorm":
        block = 1 << max(0, (shape["d"] - 1).bit_length())
        return [
            Job(f"triton[num_warps={w}]", "triton", {"num_warps": w, "BLOCK": block})
            for w in (1, 2, 4, 8, 16)
            if 32 * w <= max(32, block)
        ]
    from mage_tune.triton_ref import MATMUL_CONFIGS, MATMUL_KEYS

    configs = [dict(zip(MATMUL_KEYS, c, strict=True)) for c in MATMUL_CONFIGS]
    return [Job(f"triton[{_cfg_label(c)}]", "triton", c) for c in configs]


def _cfg_label(config: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in config.items())


def torch_jobs(family: str) -> list[Job]:
    return [Job("torch.layer_norm" if family == "layernorm" else "torch.matmul (cuBLAS FP32)", "torch")]


def copy_jobs(family: str, shape: dict) -> list[Job]:
    """x -> y by each copy kernel of the session's ceilings; layer norm only (a matmul is bound by FMAs)."""
    from mage_tune.measure.ceilings import SHAPE_COPY_KERNELS

    if family != "layernorm" or (shape["m"] * shape["d"]) % 4:
        return []
    return [Job(f"copy[{name}]", "copy", {"kernel": name}) for name in SHAPE_COPY_KERNELS]


def launcher(job: Job, family, shape: dict) -> Callable[[dict], None]:
    if job.kind == "copy":
        return _copy_launcher(shape, job.config["kernel"])
    if job.kind == "torch":
        return _torch_launcher(family.name, shape)
    if job.kind == "triton":
        return _triton_launcher(family.name, shape, job.config)
    raise ValueError(f"no launcher for job kind {job.kind!r}")


def _torch_launcher(family: str, shape: dict):
    import torch
    import torch.nn.functional as F

    if family == "layernorm":
        d = shape["d"]

        def launch(bufs):
            # torch has no out= layer norm; return the fresh tensor instead of paying for a copy into __out__.
            return F.layer_norm(bufs["x"], (d,), bufs["scale"], bufs["bias"], 1e-5)

        return launch

    def launch_mm(bufs):
        torch.matmul(bufs["A"], bufs["B"], out=bufs["__out__"])

    return launch_mm


def _triton_launcher(family: str, shape: dict, config: dict):
    import triton

    from mage_tune import triton_kernels

    if family == "layernorm":
        m, d = shape["m"], shape["d"]

        def launch(bufs):
            triton_kernels.norm_kernel[(m,)](
                bufs["x"],
                bufs["__out__"],
                bufs["scale"],
                bufs["bias"],
                d,
                d,
                1e-5,
                BLOCK=config["BLOCK"],
                num_warps=config["num_warps"],
            )

        return launch
    m, n, k = shape["m"], shape["n"], shape["k"]
    consts = {key: config[key] for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")}
    grid = (triton.cdiv(m, consts["BLOCK_M"]) * triton.cdiv(n, consts["BLOCK_N"]),)

    def launch_mm(bufs):
        triton_kernels.matmul_kernel[grid](
            bufs["A"],
            bufs["B"],
            bufs["__out__"],
            m,
            n,
            k,
            k,
            1,
            n,
            1,
            n,
            1,
            **consts,
            num_warps=config["num_warps"],
            num_stages=config["num_stages"],
        )

    return launch_mm


def _copy_launcher(shape: dict, kernel: str):
    import cupy
    import numpy as np

    from mage_tune.measure.ceilings import COPY_SOURCE, SHAPE_COPY_KERNELS
    from mage_tune.measure.harness import _stream_ctx

    fn = cupy.RawModule(code=COPY_SOURCE, options=("-std=c++17",)).get_function(kernel)
    n4 = shape["m"] * shape["d"] // 4
    per_block = SHAPE_COPY_KERNELS[kernel]
    grid = ((n4 + per_block - 1) // per_block, 1, 1)

    def launch(bufs):
        with _stream_ctx():
            fn(
                grid,
                (256, 1, 1),
                (np.uint64(bufs["x"].data_ptr()), np.uint64(bufs["__out__"].data_ptr()), np.int64(n4)),
            )

    return launch
