"""How well the static model (mage_tune/search/model.py) ranks configs that were measured: for each bench record
or measured search run directory, every variant or trial that passes its family's check as it is today (the recorded
error within today's tolerance) and is still in the space is compiled again here, censused, and scored by the
model; the table gives, per record, Spearman's rank correlation between modelled and measured times, and where the
model's favourite ranks among the measured (1 = the measured best). No GPU needed: the records hold the
measurements, this machine compiles.

usage: python analysis/static_model_fidelity.py RECORD.json|RUN_DIR... [--markdown OUT.md] [--json OUT.json]

Each is a file or folder on disk, or a member of a campaign archive, ARCHIVE:MEMBER, globs allowed
('records/h200-2026-12-01-tensor-core.tar.xz:searches/matmul-3xtf32-m*[0-9]'; analysis/archives.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from scipy.stats import spearmanr
from tabulate import tabulate

from mage_tune.arch import get_arch
from mage_tune.census import census_variant
from mage_tune.errors import MageError
from mage_tune.kernels.registry import load_family
from mage_tune.search import record
from mage_tune.search.model import estimate_variant

sys.path.insert(0, str(Path(__file__).resolve().parent))  # analysis/archives.py
from archives import RecordsError, local_all, shown

from mage_tune.outputs import refuse_existing


def _bench_record(path: Path) -> tuple[str, dict, str, list[tuple[dict, float, float]]]:
    """family, shape, arch and (config, cold median µs, relative error) of each variant that passed when measured."""
    data = json.loads(path.read_text())
    if not (isinstance(data, dict) and str(data.get("schema", "")).startswith("mage-tune.bench/")):
        raise SystemExit(f"{path}: neither a search run directory nor a mage-tune bench record")
    arch = next(iter(data["census"].values()))["arch"]  # what the variants were compiled for
    rows = [
        (r["config"], r["timings"][0]["median_us"], r["rel_err"])
        for r in data["results"]
        if r["kind"] == "variant" and r["ok"] and r["timings"]
    ]
    return data["family"], data["shape"], arch, rows


def _search_run(path: Path) -> tuple[str, dict, str, list[tuple[dict, float, float]]]:
    """The same for a search run directory's measured trials (values: cold medians of the same run)."""
    meta = json.loads((path / "run.json").read_text())
    if meta["mode"] != "measured":
        raise SystemExit(f"{path}: a {meta['mode']} run holds no measurements")
    measured = [t for t in record.trials(path) if t["outcome"] == "measured"]
    rows = [(t["config"], t["value"], t["measurement"]["rel_err"]) for t in measured]
    return meta["family"], meta["shape"], meta["arch"], rows


def _spearman(modelled: list[float], measured: list[float]) -> float | None:
    """None where it is undefined: fewer than three variants, or a model that gives them all the same time."""
    if len(modelled) < 3 or len(set(modelled)) == 1:
        return None
    return float(spearmanr(modelled, measured).statistic)


def fidelity(path: Path) -> dict:
    family_name, shape, arch_name, rows = (_search_run if path.is_dir() else _bench_record)(path)
    family, arch = load_family(family_name), get_arch(arch_name)  # the record's arch name, as an Arch
    tolerance = family.tolerance_for(shape)
    pairs, skipped = [], 0
    for config, measured, rel_err in rows:
        if rel_err > tolerance:  # measured under a looser check of the time: a failed config today
            skipped += 1
            continue
        try:  # a config of a knob since removed, or a value no longer valid, is no longer in the space
            variant = family.build(family.with_defaults(config), shape, arch)
        except MageError:
            skipped += 1
            continue
        census = census_variant(variant)
        modelled, _ = estimate_variant(family, variant, census)
        pairs.append((modelled, measured))
    modelled = [m for m, _ in pairs]
    measured = [t for _, t in pairs]
    favourite = min(range(len(pairs)), key=modelled.__getitem__)
    rank_of_favourite = 1 + sum(t < measured[favourite] for t in measured)
    return {
        "record": shown(path),
        "family": family_name,
        "shape": shape,
        "variants": len(pairs),
        "skipped": skipped,
        "spearman": _spearman(modelled, measured),
        "model_pick_rank": rank_of_favourite,
        "model_pick_over_best": measured[favourite] / min(measured),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", nargs="+", help="bench records or run directories (or ARCHIVE:MEMBER)")
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--force", action="store_true", help="replace an output file that exists")
    args = parser.parse_args(argv)
    refuse_existing("static_model_fidelity.py", args.markdown, args.json, force=args.force)
    try:
        rows = [fidelity(p) for p in local_all(args.records)]
    except RecordsError as error:
        raise SystemExit(f"static_model_fidelity.py: {error}") from None
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
