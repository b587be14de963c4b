"""How fast does the search find a good config? Replays samplers against an exhaustive measured table.

Input: a `mage-tune bench FAMILY --all --out FILE` record in which every valid config of the space was checked
and timed (cold) in one run. Each replayed trial looks its config's time up in that table, so the samplers are
compared on exactly the same numbers, with no GPU: a config outside the space's constraints is a pruned trial
(it costs a trial, as in a real search). The replay draws the knobs the record's configs set, over the values they
took: the space as it was when the record was made (a knob added since stays at its default, as the record reads it).
For each sampler and seed we report after how many trials the best found is within 3% of the exhaustive best.

    python analysis/search_efficiency.py RECORD --seeds 10 --budget 200 [--out OUT.json]

RECORD is a file or a member of a campaign archive (analysis/archives.py), e.g. the exhaustive layer-norm table
records/h200-2026-11-29.tar.xz:ln_d768_all.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import optuna
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # analysis/archives.py
from archives import RecordsError, local_one

from mage_tune.kernels import get_family
from mage_tune.outputs import refuse_existing
from mage_tune.search.samplers import SAMPLERS, make_sampler
from mage_tune.search.valid_draws import ValidDraws


def load_table(path: Path) -> tuple[dict, dict[tuple, float]]:
    record = json.loads(path.read_text())
    table = {}
    for r in record["results"]:
        if r["kind"] != "variant" or not r["ok"]:
            continue
        cold = next((t["median_us"] for t in r["timings"] if t["regime"] == "cold"), None)
        if cold is not None:
            table[tuple(sorted(r["config"].items()))] = cold
    return record, table


def recorded_space(family, table: dict[tuple, float]) -> list[tuple[str, list]]:
    """The knobs the record's configs set, each over the values they took (in the family's order): the space as it was
    when the record was made. A knob added to the family since is left at its default, as the record read it."""
    taken: dict[str, set] = {}
    for key in table:
        for name, value in key:
            taken.setdefault(name, set()).add(value)
    space = []
    for knob in family.knobs:
        if knob.name in taken:
            values = [v for v in knob.domain if v in taken[knob.name]]
            space.append((knob.name, values + sorted(taken[knob.name] - set(values), key=str)))  # then removed ones
    return space


def replay(
    family, table: dict[tuple, float], sampler: str, seed: int, budget: int, target: float, settled: bool = True
) -> int | None:
    """Trials until the best found is within `target` (absolute µs); None if the budget runs out first. settled: as
    the search draws, a draw outside the table drawn again (valid_draws.py) before it is pruned."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    space = recorded_space(family, table)
    drawing = make_sampler(sampler, family, seed)
    if settled and SAMPLERS[sampler].settled:

        def measured(config: dict) -> bool:
            return tuple(sorted(config.items())) in table

        drawing = ValidDraws(drawing, dict(space), lambda number, config: config, measured)
    study = optuna.create_study(direction="minimize", sampler=drawing)
    best = float("inf")
    for n in range(1, budget + 1):
        trial = study.ask()
        config = {name: trial.suggest_categorical(name, domain) for name, domain in space}
        value = table.get(tuple(sorted(config.items())))
        if value is None:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            continue
        study.tell(trial, value)
        best = min(best, value)
        if best <= target:
            return n
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("record", help="an exhaustive bench record: a file, or ARCHIVE:MEMBER")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--within", type=float, default=0.03)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--force", action="store_true", help="replace an output file that exists")
    parser.add_argument(
        "--as-drawn", action="store_true", help="each draw told as drawn, none drawn again (searches before ValidDraws)"
    )
    args = parser.parse_args()
    refuse_existing("search_efficiency.py", args.out, force=args.force)
    try:
        record, table = load_table(local_one(args.record))
    except RecordsError as error:
        raise SystemExit(f"search_efficiency.py: {error}") from None
    family = get_family(record["family"])
    best = min(table.values())
    target = best * (1 + args.within)
    within = sum(1 for v in table.values() if v <= target)
    results = {}
    rows = []
    for sampler in ("tpe", "random"):
        hits = [
            replay(family, table, sampler, seed, args.budget, target, not args.as_drawn) for seed in range(args.seeds)
        ]
        found = [h for h in hits if h is not None]
        results[sampler] = hits
        rows.append(
            [
                sampler,
                f"{len(found)}/{len(hits)}",
                statistics.median(found) if found else "-",
                min(found) if found else "-",
                max(found) if found else "-",
            ]
        )
    print(
        f"{record['family']} {record['shape']}: {len(table)} configs measured, best {best:.2f} µs; "
        f"{within} configs within {args.within:.0%} of it"
    )
    print(tabulate(rows, headers=["sampler", "reached", "median trials", "min", "max"], tablefmt="github"))
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "source": str(args.record),
                    "configs": len(table),
                    "best_us": best,
                    "within": args.within,
                    "configs_within": within,
                    "budget": args.budget,
                    "trials_to_within": results,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
