"""Rebuild the tuning data shipped with the package (mage_tune/data/tuning.jsonl.gz) from the committed records.

    python analysis/shipped_data.py                 # every records/*.tar.xz -> mage_tune/data/tuning.jsonl.gz
    python analysis/shipped_data.py --check         # exit 1 where the committed file is not what the records give
    python analysis/shipped_data.py ARCHIVE... --out FILE

What it keeps, from every bench record and search run directory of the archives (read as `mage-tune db import`
reads them, so a variant over today's tolerance is a failed trial): the measured trials of the built-in families
(layernorm, matmul, matmul-3xtf32 on sm_90; matmul-bf16 and matmul-3xtf32-sm90 on sm_90a) on the H200 and the
H100, but not of a family tuned as another (matmul-f16 and matmul-bf16-f32out as matmul-bf16, the fused layer
norms as layernorm): the warm start and the run-time choice read the other family's trials where it has none, and a
few trials of its own would hide them. Of those only

  * per GPU and shape, the trials of its TOP_PER_SHAPE fastest distinct configs (each config's fastest measurement):
    what the choice of a config (mage_tune/tuning/choice.py) and the warm start's nearest seeds read;
  * per run of at least learned.MIN_RUN_TRIALS measured trials, PER_RUN of them evenly spread over its time ranks
    (fastest and slowest included): what the learned model needs, the spread of each run against its baselines.

Trained on these alone, the model ranks a held-out shape's measured configs nearly as well as trained on every
trial (analysis/model_holdout.py's measure, each shape of the records held out in turn; median Spearman's rho and
top-5 regret): layer norm 0.76 / 1.010 against 0.78 / 1.008 over 24 shapes, matmul 0.69 / 1.017 against
0.71 / 1.013 over 16; with 16 trials a run matmul fell to 0.67 / 1.029, hence 32 (136 KB in all).

Census features are left out (the model without them ranks configs before any compile; a search adds its own),
a run's baselines are cut to the fastest of each kind (the model's target is over the fastest) and its toolchain
to the compilers; `where` names the archive member. Each line is a tuning-database export line
(mage-tune.tuning-db/2, so `mage-tune db import` takes the file too), sorted by family, run and trial; the gzip
stream has no name or time in it, so the same archives give the same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import math
import sys
from dataclasses import asdict, replace
from pathlib import Path

from mage_tune.errors import MageError
from mage_tune.kernels import get_family
from mage_tune.kernels.registry import BUILTINS, builtin_named
from mage_tune.records.objectives import MEASURED_OBJECTIVE
from mage_tune.search import sources
from mage_tune.tuning import learned, shipped
from mage_tune.tuning.db import EXPORT_SCHEMA, RunInfo

sys.path.insert(0, str(Path(__file__).resolve().parent))  # analysis/archives.py
from archives import RecordsError, campaigns, local

GPUS = ("NVIDIA H200", "NVIDIA H100 80GB HBM3")  # the records' GPUs
ARCHES = ("sm_90", "sm_90a")  # the Hopper families compile for sm_90a (wgmma, setmaxnreg)
TOP_PER_SHAPE = 8
PER_RUN = 32
COMPILERS = ("nvrtc", "nvcc", "ptxas")


def _record_paths(root: Path) -> list[Path]:
    """Bench records (JSON naming a mage-tune.bench schema) and search run directories (holding trials.jsonl)."""
    found = []
    for path in sorted(root.rglob("*.json")):
        with open(path, "rb") as f:
            if b'"schema": "mage-tune.bench/' in f.read(4096):
                found.append(path)
    found += sorted(p.parent for p in root.rglob("trials.jsonl"))
    return found


def _as_builtin(run: RunInfo) -> RunInfo:
    """A run of a built-in family searched by its module's path (mage_tune/kernels/matmul_bf16.py, as the Hopper
    families were before they had names) as a run of that name: the same code, found the way it is found now."""
    name = builtin_named(run.origin)
    return replace(run, family=name, origin=name) if name and name == run.family else run


def _fastest_of_each_kind(baselines: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for label, value in baselines.items():
        kind = label.split("[", 1)[0].split(" (", 1)[0]
        out[kind] = min(out.get(kind, value), value)
    return dict(sorted(out.items()))


def load(archives: list[Path]) -> dict[str, tuple[RunInfo, dict[int, dict]]]:
    """Every served run by name (a run in two archives once, its trials merged by number, the first kept)."""
    runs: dict[str, tuple[RunInfo, dict[int, dict]]] = {}
    for archive in archives:
        root = local(archive)[0]
        for path in _record_paths(root):
            try:
                loaded = sources.load_path(path)
            except MageError as error:  # an unfinished run directory: said, then left out
                print(f"shipped_data.py: skipped {archive.name}:{path.relative_to(root)}: {error}", file=sys.stderr)
                continue
            for run, rows in loaded:
                run = _as_builtin(run)
                if (
                    run.family not in BUILTINS
                    or run.origin != run.family
                    or run.gpu not in GPUS
                    or run.arch not in ARCHES
                ):
                    continue
                if get_family(run.family).tuned_as:  # served by the other family's trials (module docstring)
                    continue
                if run.objective != MEASURED_OBJECTIVE:
                    continue
                run = replace(
                    run,
                    where=f"records/{archive.name}:{path.relative_to(root).as_posix()}",
                    baselines=_fastest_of_each_kind(run.baselines),
                    toolchain={k: v for k, v in run.toolchain.items() if k in COMPILERS},
                )
                held = runs.setdefault(run.name, (run, {}))[1]
                for r in rows:
                    value = r.get("value")
                    measured = r["outcome"] == "measured" and isinstance(value, int | float)
                    if measured and math.isfinite(value) and value > 0:
                        held.setdefault(r["number"], r)
    return runs


def select(runs: dict[str, tuple[RunInfo, dict[int, dict]]]) -> list[tuple[RunInfo, dict]]:
    """The trials kept (module docstring), sorted by family, run name and trial number."""
    kept: set[tuple[str, int]] = set()
    by_shape: dict[tuple[str, str, str], list[tuple[float, str, int, str]]] = {}
    for name, (run, rows) in runs.items():
        shape = json.dumps(run.shape, sort_keys=True)
        for number, r in rows.items():
            config = json.dumps(r["config"], sort_keys=True)
            by_shape.setdefault((run.family, run.gpu, shape), []).append((r["value"], name, number, config))
        ranked = sorted(rows.values(), key=lambda r: (r["value"], r["number"]))
        if len(ranked) >= learned.MIN_RUN_TRIALS:
            n = len(ranked)
            picks = range(n) if n <= PER_RUN else {round(i * (n - 1) / (PER_RUN - 1)) for i in range(PER_RUN)}
            kept.update((name, ranked[i]["number"]) for i in picks)
    for trials in by_shape.values():
        seen: set[str] = set()
        for _, name, number, config in sorted(trials):
            if config not in seen:
                seen.add(config)
                kept.add((name, number))
            if len(seen) == TOP_PER_SHAPE:
                break
    out = [(runs[name][0], runs[name][1][number]) for name, number in kept]
    return sorted(out, key=lambda p: (p[0].family, p[0].name, p[1]["number"]))


def lines(selected: list[tuple[RunInfo, dict]]) -> list[str]:
    out = []
    for run, r in selected:
        row = {
            "schema": EXPORT_SCHEMA,
            "run": asdict(run),
            "number": r["number"],
            "config": r["config"],
            "outcome": "measured",
            "value": r["value"],
            "census": {},
            "source": r.get("source", ""),
        }
        out.append(json.dumps(row, sort_keys=True, separators=(",", ":")))
    return out


def build(archives: list[Path]) -> bytes:
    """The shipped file's bytes: a gzip stream without a name or a time, compressed at level 9."""
    text = "".join(line + "\n" for line in lines(select(load(archives))))
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as f:
        f.write(text.encode())
    return buffer.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archives", nargs="*", type=Path, help="campaign archives (default: every records/*.tar.xz)")
    parser.add_argument("--out", type=Path, default=shipped.PATH)
    parser.add_argument("--check", action="store_true", help="compare with OUT instead of writing it")
    args = parser.parse_args(argv)
    try:
        data = build(args.archives or campaigns())
    except (RecordsError, MageError, OSError) as error:
        print(f"shipped_data.py: {error}", file=sys.stderr)
        return 2
    count = gzip.decompress(data).count(b"\n")
    if args.check:
        same = args.out.is_file() and args.out.read_bytes() == data
        print(f"{args.out}: {'as' if same else 'not what'} the records give ({count} trials, {len(data)} bytes)")
        return 0 if same else 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    print(f"{args.out}: {count} trials, {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
