"""The fastest passing variants' configs of one or more `mage-tune bench --out` records or `mage-tune search` run
directories (their measured trials), as a JSON list for `mage-tune bench --configs` (e.g. the winners at 2048³
re-measured at 4096³, or in a second run). With --ignore, the knobs named are left out of each config first, so the
picks are distinct in the others (bases for a crossing that sets those knobs again).

    python analysis/top_configs.py RECORD.json|RUN_DIR [...] [--top 10] [--regime cold] [--ignore KNOB,...]

Each is a file or folder on disk, or a member of a campaign archive, ARCHIVE:MEMBER (analysis/archives.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mage_tune.errors import MageError
from mage_tune.measure.saved import read_record, timed_results
from mage_tune.search.summary import ranked_configs as search_ranked_configs

sys.path.insert(0, str(Path(__file__).resolve().parent))  # analysis/archives.py
from archives import RecordsError, local_all


def ranked_configs(path: Path, regime: str) -> list[dict]:
    """The configs of a record's passing variants, or a search run's measured trials, fastest first."""
    if path.is_dir():
        return search_ranked_configs(path, count=None)
    return [r["config"] for r in timed_results(read_record(path, "mage-tune.bench/"), "variant", regime, None)]


def top_configs(paths: list[Path], top: int, regime: str, ignore: frozenset[str] = frozenset()) -> list[dict]:
    """Per record the configs of its `top` fastest passing variants (distinct once `ignore`'s knobs are left out),
    merged without repeats, in record order."""
    picked: list[dict] = []
    for path in paths:
        mine: list[dict] = []
        for ranked in ranked_configs(path, regime):
            config = {k: v for k, v in ranked.items() if k not in ignore}
            if config not in mine:
                mine.append(config)
            if len(mine) == top:
                break
        picked += [c for c in mine if c not in picked]
    return picked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", help="bench records or run directories (or ARCHIVE:MEMBER)")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--regime", default="cold")
    parser.add_argument("--ignore", default="", help="knobs left out of each config, comma-separated")
    args = parser.parse_args()
    ignore = frozenset(filter(None, args.ignore.split(",")))
    try:
        print(json.dumps(top_configs(local_all(args.records), args.top, args.regime, ignore), indent=0))
    except (MageError, RecordsError) as error:
        raise SystemExit(f"top_configs.py: {error}") from None


if __name__ == "__main__":
    main()
