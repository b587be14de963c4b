"""What this GPU's driver answers for matmul-bf16's kernels in clusters: the blocks resident at once
(cuOccupancyMaxActiveClusters × the cluster's size), the SMs, the grid the variant plans on the arch's part
(Arch.resident_blocks) and the grid its launcher launches. One JSON object on stdout; nothing is timed.

    python benchmarks/gpu/cluster_residency.py [--shape 4096x4096x4096] > residency.json

Arch.cluster_sms holds these counts for the arch's part: a GPU whose answers differ says so here.
"""

from __future__ import annotations

import argparse
import json

from mage_tune import gpu
from mage_tune.arch import get_arch
from mage_tune.kernels.registry import load_family
from mage_tune.measure import variant_job

SETTINGS = (
    {"cluster": 2},
    {"cluster": 2, "multicast": 1},
    {"cluster": 4, "multicast": 1},
    {"cluster": 4, "multicast": 1, "bm": 128, "bn": 128, "stages": 3},
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="4096x4096x4096", help="MxNxK")
    args = parser.parse_args()
    m, n, k = (int(v) for v in args.shape.split("x"))
    shape, arch = {"m": m, "n": n, "k": k}, get_arch("sm_90a")
    family = load_family("matmul-bf16")
    torch = gpu.torch()
    props = torch.cuda.get_device_properties(0)
    rows = []
    for settings in SETTINGS:
        config = family.complete(settings, shape, arch)
        variant = family.build(config, shape, arch)
        launcher = family.launcher(variant_job(variant), shape)
        rows.append(
            {
                "settings": settings,
                "cluster": config["cluster"],
                "dynamic_shared": variant.launch.dynamic_shared,
                "planned_grid": variant.launch.grid[0],
                "part_resident_blocks": arch.resident_blocks(config["cluster"]),
                "driver_resident_blocks": launcher.resident_blocks,
                "launched_grid": launcher.grid[0],
            }
        )
    found = {"gpu": props.name, "sms": props.multi_processor_count, "shape": shape, "kernels": rows}
    print(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
