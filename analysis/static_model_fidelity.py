"""How well the static model (mage_tune/search/model.py) ranks configs that were measured: for each bench record,
every variant that passed its check is compiled again here, censused, and scored by the model; the table gives, per
record, Spearman's rank correlation between modelled and measured times, and where the model's favourite ranks among
the measured (1 = the measured best). No GPU needed: the records hold the measurements, this machine compiles.

usage: python analysis/static_model_fidelity.py RECORD.json... [--markdown OUT.md] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from scipy.stats import spearmanr
from tabulate import tabulate

from mage_tune.census import census_artifact
from mage_tune.errors import MageError
from mage_tune.kernels.registry import load_family
from mage_tune.search.model import estimate_us


def _measured(record: dict) -> list[tuple[dict, float]]:
    out = []
    for r in record["results"]:
        if r["kind"] == "variant" and r["ok"] and r["timings"]:
            out.append((r["config"], r["timings"][0]["median_us"]))
    return out


def _spearman(modelled: list[float], measured: list[float]) -> float | None:
    """None where it is undefined: fewer than three variants, or a model that gives them all the same time."""
    if len(modelled) < 3 or len(set(modelled)) == 1:
        return None
    return float(spearmanr(modelled, measured).statistic)


def fidelity(path: Path) -> dict:
    record = json.loads(path.read_text())
    family = load_family(record["family"])
    shape = record["shape"]
    arch = next(iter(record["census"].values()))["arch"]  # what the variants were compiled for
    pairs, skipped = [], 0
    for config, measured in _measured(record):
        try:  # a config of a knob since removed, or a value no longer valid, is no longer in the space
            variant = family.build(family.with_defaults(config), shape, arch)
        except MageError:
            skipped += 1
            continue
        census = census_artifact(
            variant.artifact, kernel=variant.kernel_name, block=variant.block, param_names=list(variant.param_names)
        )[0]
        modelled, _ = estimate_us(
            census, variant.launch.grid, family.bytes_moved(shape), family.flops(shape), family.mma_passes
        )
        pairs.append((modelled, measured))
    modelled = [m for m, _ in pairs]
    measured = [t for _, t in pairs]
    favourite = min(range(len(pairs)), key=modelled.__getitem__)
    rank_of_favourite = 1 + sum(t < measured[favourite] for t in measured)
    return {
        "record": str(path),
        "family": record["family"],
        "shape": shape,
        "variants": len(pairs),
        "skipped": skipped,
        "spearman": _spearman(modelled, measured),
        "model_pick_rank": rank_of_favourite,
        "model_pick_over_best": measured[favourite] / min(measured),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", nargs="+", type=Path)
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = [fidelity(p) for p in args.records]
    table = tabulate(
        [
            [
                r["family"],
                ",".join(f"{k}={v}" for k, v in r["shape"].items()),
                r["variants"],
                None if r["spearman"] is None else round(r["spearman"], 2),
                r["model_pick_rank"],
                round(r["model_pick_over_best"], 3),
            ]
            for r in rows
        ],
        headers=["family", "shape", "variants", "spearman", "model's pick: rank", "its time / best"],
        tablefmt="github",
    )
    print(table)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
