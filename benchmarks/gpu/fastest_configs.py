"""The configs of a bench record's fastest correct variants, distinct once some knobs are set aside, as a JSON list.

python benchmarks/gpu/fastest_configs.py RECORD.json [--count 4] [--ignore affine,full_occupancy]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mage_tune.measure.saved import result_time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("record", type=Path)
    parser.add_argument("--count", type=int, default=4)
    parser.add_argument("--ignore", default="", help="knobs left out of each config (the crossing sets them again)")
    args = parser.parse_args()
    ignored = set(filter(None, args.ignore.split(",")))
    results = json.loads(args.record.read_text())["results"]
    timed = sorted((r for r in results if r["kind"] == "variant" and r["ok"] and result_time(r)), key=result_time)
    configs: list[dict] = []
    for r in timed:
        config = {k: v for k, v in r["config"].items() if k not in ignored}
        if config not in configs:
            configs.append(config)
    print(json.dumps(configs[: args.count]))


if __name__ == "__main__":
    main()
