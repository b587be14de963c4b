"""The fastest passing variants' configs of one or more `mage-tune bench --out` records, as a JSON list for
`mage-tune bench --configs` (e.g. the winners at 2048³ re-measured at 4096³, or in a second run).

    python analysis/top_configs.py RECORD.json [RECORD.json ...] [--top 10] [--regime cold]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mage_tune.measure.saved import read_record, timed_results


def top_configs(paths: list[Path], top: int, regime: str) -> list[dict]:
    """Per record the `top` fastest passing variants, merged without repeats, in record order."""
    picked: list[dict] = []
    for path in paths:
        for result in timed_results(read_record(path, "mage-tune.bench/"), "variant", regime, None)[:top]:
            if result["config"] not in picked:
                picked.append(result["config"])
    return picked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--regime", default="cold")
    args = parser.parse_args()
    print(json.dumps(top_configs(args.records, args.top, args.regime), indent=0))


if __name__ == "__main__":
    main()
