"""The fastest passing variants' configs of one or more `mage-tune bench --out` records, as a JSON list for
`mage-tune bench --configs` (e.g. the winners at 2048³ re-measured at 4096³, or in a second run).

    python analysis/top_configs.py RECORD.json [RECORD.json ...] [--top 10] [--regime cold]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def top_configs(paths: list[Path], top: int, regime: str) -> list[dict]:
    """Per record the `top` fastest passing variants, merged without repeats, in record order."""
    picked: list[dict] = []
    for path in paths:
        record = json.loads(path.read_text())
        timed = []
        for r in record["results"]:
            t = next((t["median_us"] for t in r["timings"] if t["regime"] == regime), None)
            if r["kind"] == "variant" and r["ok"] and t is not None:
                timed.append((t, r["config"]))
        for _, config in sorted(timed, key=lambda pair: pair[0])[:top]:
            if config not in picked:
                picked.append(config)
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
