"""The end of a search in its run directory: the best kernel's files, report.md, the fastest configs."""

from __future__ import annotations

from pathlib import Path

from mage_tune.census import census_variant
from mage_tune.kernels.base import Config, Family
from mage_tune.search import record, report
from mage_tune.search.spec import SearchSpec


def write_summary(spec: SearchSpec, family: Family) -> dict:
    """Best kernel's files and report.md in the run directory, from the study."""
    best = record.best_trial(spec.run_dir)
    if best is None:
        return {}
    variant = family.build(best["config"], spec.shape, spec.arch)
    census = census_variant(variant)
    record.write_best(spec.run_dir, variant, census, best, family.source_suffix)
    for name, text in family.best_files(ranked_configs(spec.run_dir)).items():  # e.g. a triton.Config list
        record.write_atomic(spec.run_dir / "best" / name, text)
    (spec.run_dir / "report.md").write_text(report.markdown(spec.run_dir))
    return best


def ranked_configs(run_dir: Path, count: int | None = 5) -> list[Config]:
    """The fastest distinct configs of the run, best first (every one with count=None)."""
    scored = sorted(
        (t for t in record.trials(run_dir) if t["outcome"] in ("measured", "modelled")), key=lambda t: t["value"]
    )
    out: list[Config] = []
    for t in scored:
        if t["config"] not in out:
            out.append(t["config"])
    return out[:count]
