"""The end of a search in its run directory: the best kernel's files, report.md, the fastest configs."""

from __future__ import annotations

import sys
from pathlib import Path

from mage_tune.census import census_variant
from mage_tune.kernels.base import Config, Family
from mage_tune.search import record, report
from mage_tune.search.spec import SearchSpec


def write_summary(spec: SearchSpec, family: Family) -> dict:
    """Best kernel's files and report.md in the run directory, from its trials. A trial line is data: one whose config
    the family does not offer (a knob it lacks, a value outside a knob's domain, as only an edited line has) is left
    out, said on stderr, so that no recorded value is written into a kernel's source or a best/ file."""
    ranked = _scored(spec.run_dir)
    usable = [t for t in ranked if not family.config_problems(t["config"])]
    if len(usable) < len(ranked):
        sys.stderr.write(
            f"mage-tune: warning: {spec.run_dir / 'trials.jsonl'}: {len(ranked) - len(usable)} trial(s) whose config "
            f"{family.name} does not offer left out of best/ and report.md's winner\n"
        )
    if not usable:
        return {}
    best = usable[0]
    variant = family.build(best["config"], spec.shape, spec.arch)
    census = census_variant(variant)
    record.write_best(spec.run_dir, variant, census, best, family.source_suffix)
    for name, text in family.best_files(_distinct([t["config"] for t in usable])[:5]).items():  # a triton.Config list
        record.write_atomic(spec.run_dir / "best" / name, text)
    record.write_atomic(spec.run_dir / "report.md", report.markdown(spec.run_dir))
    return best


def _scored(run_dir: Path) -> list[dict]:
    """The scored trials, fastest first."""
    return sorted(
        (t for t in record.trials(run_dir) if t["outcome"] in ("measured", "modelled")), key=lambda t: t["value"]
    )


def _distinct(configs: list[Config]) -> list[Config]:
    out: list[Config] = []
    for config in configs:
        if config not in out:
            out.append(config)
    return out


def ranked_configs(run_dir: Path, count: int | None = 5) -> list[Config]:
    """The fastest distinct configs of the run, best first (every one with count=None)."""
    return _distinct([t["config"] for t in _scored(run_dir)])[:count]
