"""How well the warm start's time model ranks configs at a shape it never saw, from the committed records alone.

For every shape of a family with at least `--min-trials` configs measured on one GPU (each GPU's trials at a shape
held out apart: one GPU's times never rank another's), the model (mage_tune/tuning/learned.py, without census
features: bench records carry none) is trained on the records of every *other* shape and asked to rank the configs
measured at the held-out one. Reported per shape and GPU: Spearman's rho between predicted and measured
time, and the regret of the model's top 5 (the fastest measured among them over the fastest measured at all),
beside the expected regret of 5 configs drawn at random from the same measured set.

    python analysis/model_holdout.py [--family layernorm] [--runs RECORDS...] [--json out.json]
    python analysis/model_holdout.py --family matmul-bf16 --gpu "NVIDIA H100 80GB HBM3" --min-trials 20

With --gpu the held-out shapes are those measured on that GPU (its trials there), each ranked three times: by a model
trained on that GPU's other shapes, on the other GPUs' (every shape but the held-out one), and on both: whether
another GPU's records help a search on this one (the warm start trains on every GPU's, tuning/warm.py).

--runs names where the records are: campaign archives (ARCHIVE or ARCHIVE:FOLDER) or folders on disk; by default
every archive under records/ (analysis/archives.py).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

from tabulate import tabulate

from mage_tune.arch import get_arch
from mage_tune.census.features import spearman
from mage_tune.errors import MageError
from mage_tune.kernels.registry import load_family
from mage_tune.problem import Problem
from mage_tune.search import sources
from mage_tune.tuning import learned
from mage_tune.tuning.db import Entry

sys.path.insert(0, str(Path(__file__).resolve().parent))  # analysis/archives.py
from archives import RecordsError, campaigns, local_all

from mage_tune.outputs import refuse_existing

TOP = 5
HOPPER_TARGETS = ("sm_90", "sm_90a")  # the records' targets: sm_90a for the arch-specific Hopper families


def entries_from(folders: list[Path], family: str) -> list[Entry]:
    """Measured entries of `family` in every bench record and search run directory under `folders`."""
    out: list[Entry] = []
    loaded = []
    for path in sorted(p for runs in folders for p in runs.rglob("*.json")):
        text = path.read_text(errors="replace")
        if '"schema": "mage-tune.bench/' in text[:200]:
            loaded.append(sources.bench_record(path))
    for trials in sorted(p for runs in folders for p in runs.rglob("trials.jsonl")):
        try:
            loaded.append(sources.run_directory(trials.parent))
        except MageError as error:  # an unfinished run directory: said, then left out
            print(f"model_holdout.py: skipped {trials.parent}: {error}", file=sys.stderr)
    for run, rows in loaded:
        if run.family != family or run.arch not in HOPPER_TARGETS:
            continue
        for r in rows:
            e = Entry(run, r["number"], r["config"], r["outcome"], r["value"], r.get("census") or {}, "")
            if e.measured:
                out.append(e)
    return out


def _key(e: Entry) -> str:
    return json.dumps(e.run.shape, sort_keys=True)


def _ranking(family, arch, train: list[Entry], shape: dict, best_per_config: dict[str, float], seed: int):
    """Spearman's rho and top-5 regret of a model trained on `train` at `shape`; None where too few to fit."""
    model = learned.fit(learned.training_rows(family, arch, train), with_census=False, seed=seed)
    if model is None:
        return None
    configs = [json.loads(c) for c in best_per_config]
    times = list(best_per_config.values())
    predicted = model.predict([learned.features(Problem(family, shape, arch), c, None) for c in configs])
    top = sorted(range(len(configs)), key=lambda i: predicted[i])[:TOP]
    return spearman(predicted, times), min(times[i] for i in top) / min(times), model.runs


def holdout(
    family_name: str, entries: list[Entry], min_trials: int, seed: int = 0, gpu: str | None = None
) -> list[dict]:
    """Per held-out shape and GPU (its trials there; `gpu`'s alone where given), the ranking of a model trained on
    every other shape (or, with `gpu`, on its other shapes, the other GPUs' and both: the `trained_on` rows)."""
    family = load_family(family_name)
    knobs = {k.name for k in family.knobs}
    by_shape: dict[tuple[str, str], list[Entry]] = {}  # one GPU's trials at a shape: GPUs' times never mix
    for e in entries:
        if set(e.config) <= knobs and (gpu is None or e.run.gpu == gpu):
            by_shape.setdefault((_key(e), e.run.gpu), []).append(e)
    rows = []
    for (key, held_gpu), held in sorted(by_shape.items()):
        best_per_config: dict[str, float] = {}
        for e in held:  # one time per config at this shape: the fastest measurement of it (knobs added since at
            c = json.dumps(family.with_defaults(e.config), sort_keys=True)  # their defaults: one config, one time)
            best_per_config[c] = min(best_per_config.get(c, e.value), e.value)
        if len(best_per_config) < min_trials:
            continue
        others = [e for e in entries if _key(e) != key]
        trainings = {"every GPU": others}
        if gpu is not None:
            trainings = {
                "this GPU": [e for e in others if e.run.gpu == gpu],
                "other GPUs": [e for e in others if e.run.gpu != gpu],
                "both": others,
            }
        arch = get_arch(held[0].run.arch)
        shape = json.loads(key)
        times = list(best_per_config.values())
        rng = random.Random(f"{seed} {key} {held_gpu}")  # the same draws for a shape whatever else is held out
        random_regret = statistics.mean(
            min(times[i] for i in rng.sample(range(len(times)), TOP)) / min(times) for _ in range(2000)
        )
        for trained_on, train in trainings.items():
            ranking = _ranking(family, arch, train, shape, best_per_config, seed)
            if ranking is None:
                continue
            rho, regret, runs = ranking
            rows.append(
                {
                    "family": family_name,
                    "shape": shape,
                    "gpu": held_gpu,
                    "configs": len(best_per_config),
                    "trained_on": trained_on,
                    "trained_on_runs": runs,
                    "spearman": rho,
                    "top5_regret": regret,
                    "random5_regret": random_regret,
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", action="append", default=None, help="layernorm and matmul by default")
    parser.add_argument("--runs", nargs="+", default=None, help="archives or folders (default: every records/ archive)")
    parser.add_argument("--min-trials", type=int, default=20)
    parser.add_argument(
        "--gpu", default=None, help="hold out this GPU's shapes, trained on its other shapes, the other GPUs' and both"
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--force", action="store_true", help="replace an output file that exists")
    args = parser.parse_args()
    refuse_existing("model_holdout.py", args.json, force=args.force)
    if args.min_trials < TOP:
        parser.error(f"--min-trials must be at least {TOP}: the regrets compare {TOP} picks")
    rows = []
    try:
        folders = local_all(args.runs or campaigns())
        for family in args.family or ["layernorm", "matmul"]:
            rows += holdout(family, entries_from(folders, family), args.min_trials, gpu=args.gpu)
    except (MageError, RecordsError) as error:
        raise SystemExit(f"model_holdout.py: {error}") from None
    table = [
        [
            r["family"],
            ",".join(f"{k}={v}" for k, v in r["shape"].items()),
            r["gpu"].removeprefix("NVIDIA "),
            r["configs"],
            r["trained_on"],
            f"{r['spearman']:.2f}",
            f"{r['top5_regret']:.3f}",
            f"{r['random5_regret']:.3f}",
        ]
        for r in rows
    ]
    headers = ["family", "held-out shape", "GPU", "configs", "trained on", "rho", "top-5 regret", "random-5 regret"]
    print(tabulate(table, headers, tablefmt="github"))
    for family, trained_on in sorted({(r["family"], r["trained_on"]) for r in rows}):
        mine = [r for r in rows if (r["family"], r["trained_on"]) == (family, trained_on)]
        regrets = [r["top5_regret"] for r in mine]
        print(
            f"\n{family}, trained on {trained_on}: median rho {statistics.median(r['spearman'] for r in mine):.2f}, "
            f"top-5 regret median {statistics.median(regrets):.3f}, mean {statistics.mean(regrets):.3f} (random 5: "
            f"{statistics.median(r['random5_regret'] for r in mine):.3f}) over {len(mine)} held-out shapes"
            " (a shape on each GPU)"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
