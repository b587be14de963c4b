"""Each config of a JSON list, crossed with other values of some knobs; invalid combinations dropped.

    python benchmarks/gpu/expand_configs.py matmul LIST.json --m 2048 --n 2048 --k 2048 \
        --set k_unroll=0,4,8 --set stages=2,3,4
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

from mage_tune.arch import get_arch
from mage_tune.kernels import get_family


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("family")
    parser.add_argument("configs", type=Path)
    parser.add_argument("--set", dest="settings", action="append", default=[], help="knob=v1,v2,...")
    for dim in ("d", "m", "n", "k"):
        parser.add_argument(f"--{dim}", type=int)
    parser.add_argument("--arch", default="sm_90", type=get_arch)
    args = parser.parse_args()
    family = get_family(args.family)
    shape = family.shape_from(d=args.d, m=args.m, n=args.n, k=args.k)
    axes = [
        (k, [family.knob(k).parse(v) for v in vs.split(",")]) for k, _, vs in (s.partition("=") for s in args.settings)
    ]
    out: list[dict] = []
    for base in json.loads(args.configs.read_text()):
        for values in itertools.product(*(vs for _, vs in axes)):
            config = family.with_defaults({**base, **dict(zip((k for k, _ in axes), values, strict=True))})
            if not family.violations(config, shape, args.arch) and config not in out:
                out.append(config)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
