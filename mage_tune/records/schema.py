"""The declared shape of every record line mage-tune reads back: a run directory's trials and baselines, a
tuning-database row (a run's context, one trial) and an export line. Checked with jsonschema, so a row that would
break a later reader (a list for a knob value, a string for an error, a shape of floats) is refused or skipped with
the reason, instead of crashing the next search that meets it. docs/trust-model.md says why.

Unknown keys are allowed (a newer writer may add some); readers take only the keys they know.
"""

from __future__ import annotations

import math
from functools import cache

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

SCORED = ("measured", "modelled", "duplicate")
OUTCOMES = ("measured", "modelled", "pruned", "compile_error", "failed", "duplicate")  # how a recorded trial ended

_TEXT = {"type": "string", "maxLength": 4096}
# A name (GPU, arch, family, a knob's value): one line of printable text, for it is shown and written into the files
# an export makes (as literals only; tuning/exports.py), and a newline or control character in one is no name.
_NAME = {"type": "string", "maxLength": 1024, "pattern": "^[^\\x00-\\x1f\\x7f]*$"}
_SCALAR = {"type": ["string", "number", "boolean", "null"]}
_KNOB_VALUE = {"anyOf": [{"type": ["number", "boolean", "null"]}, _NAME]}
_COUNT = {"type": "integer", "minimum": 0}
_NUMBER_OR_NULL = {"type": ["number", "null"]}
_OUTCOME = {"enum": list(OUTCOMES)}
_TIME_OR_NULL = {"type": ["number", "null"], "exclusiveMinimum": 0}  # a trial's value: µs, modelled or measured

CONFIG = {"type": "object", "maxProperties": 512, "additionalProperties": _KNOB_VALUE}  # knob -> scalar value
CENSUS = {"type": "object", "maxProperties": 4096, "additionalProperties": _SCALAR}  # feature -> scalar
SHAPE = {
    "type": "object",
    "minProperties": 1,
    "maxProperties": 64,
    "additionalProperties": {"type": "integer", "minimum": 1},
}
_TIMING = {
    "type": "object",
    "required": ["regime", "median_us"],
    "properties": {"regime": _TEXT, "median_us": {"type": "number", "exclusiveMinimum": 0}},
}
_OUTPUT_CHECK = {  # one output of a measurement, checked on its own (records before outputs existed have none)
    "type": "object",
    "required": ["name", "ok"],
    "properties": {
        "name": _TEXT,
        "metric": _TEXT,
        "error": _NUMBER_OR_NULL,
        "tolerance": _NUMBER_OR_NULL,
        "ok": {"type": "boolean"},
    },
}
_OUTPUT_CHECKS = {"type": "array", "maxItems": 4096, "items": _OUTPUT_CHECK}
_MEASUREMENT = {
    "type": "object",
    "properties": {
        "label": _TEXT,
        "ok": {"type": "boolean"},
        "error": {"type": "string"},
        "rel_err": _NUMBER_OR_NULL,
        "max_abs_err": _NUMBER_OR_NULL,
        "timings": {"type": "array", "items": _TIMING},
        "config": CONFIG,
        "outputs": _OUTPUT_CHECKS,
        "launched_grid": {
            "type": ["array", "null"],
            "minItems": 3,
            "maxItems": 3,
            "items": {"type": "integer", "minimum": 1},
        },
        "resident_blocks": {"type": ["integer", "null"], "minimum": 0},
    },
}

TRIAL = {
    "type": "object",
    "required": ["number", "outcome"],
    "properties": {
        "number": _COUNT,
        "outcome": _OUTCOME,
        "value": _TIME_OR_NULL,
        "config": CONFIG,
        "census": CENSUS,
        "label": _TEXT,
        "source": _TEXT,
        "measurement": _MEASUREMENT,
    },
    "if": {"properties": {"outcome": {"enum": list(SCORED)}}},
    "then": {"required": ["value", "config"], "properties": {"value": {"type": "number"}}},
}

BASELINE = {
    "type": "object",
    "required": ["result", "session"],
    "properties": {
        "result": {
            "type": "object",
            "required": ["label", "ok", "timings"],
            "properties": {
                "label": _TEXT,
                "ok": {"type": "boolean"},
                "timings": {"type": "array", "items": _TIMING},
                "outputs": _OUTPUT_CHECKS,
            },
        },
        "session": {
            "type": "object",
            "required": ["copy_gbs", "control_us"],
            "properties": {"copy_gbs": {"type": "number"}, "control_us": {"type": "number"}},
        },
    },
}

RUN = {  # a run's context in the tuning database (a study's user attrs) and in every export line
    "type": "object",
    "required": ["name", "family", "shape"],
    "properties": {
        "name": {**_NAME, "pattern": "^run:[^\\x00-\\x1f\\x7f]*$"},
        "family": {**_NAME, "minLength": 1},
        "origin": _NAME,
        "shape": SHAPE,
        "arch": _NAME,
        "objective": _NAME,
        "gpu": _NAME,
        "toolchain": {"type": "object", "additionalProperties": _NAME},
        "baselines": {"type": "object", "additionalProperties": {"type": "number"}},
        "where": _TEXT,
        "run_id": _NAME,
        "family_digest": _NAME,
        "defaults": CONFIG,
    },
}

ENTRY = {  # one trial of a run in the tuning database
    "type": "object",
    "required": ["number", "config"],
    "properties": {"number": _COUNT, "config": CONFIG, "outcome": _OUTCOME, "census": CENSUS, "source": _TEXT},
}

EXPORT_LINE = {
    "type": "object",
    "required": ["schema", "run", "number", "config"],
    "properties": {
        "schema": {"enum": ["mage-tune.tuning-db/1", "mage-tune.tuning-db/2"]},
        "run": RUN,
        "number": _COUNT,
        "config": CONFIG,
        "outcome": _OUTCOME,
        "value": _TIME_OR_NULL,
        "census": CENSUS,
        "source": _TEXT,
    },
}

ENVIRONMENT = {  # a bench record's device and toolchain (measure/device.py): what its readers take from it
    "type": "object",
    "properties": {
        "gpu": _NAME,
        "toolchain": {"type": "object", "additionalProperties": _NAME},
        "sm_count": {"type": "integer", "minimum": 1},
        "compute_capability": _NAME,
    },
}

# A census record (mage_tune/census/model.py's to_json, docs/census-schema.md), as a bench record keeps one per variant
# and a run directory keeps its winner's (best/census.json): what census.model.census_from_json needs to rebuild it.
_INT = {"type": "integer"}
_INT_OR_NULL = {"type": ["integer", "null"]}
_TALLY = {"type": "object", "maxProperties": 4096, "additionalProperties": _INT}  # name -> count
_WIDTHS = {**_TALLY, "propertyNames": {"pattern": "^[0-9]{1,4}$"}}  # access width in bits -> count
_DEPTHS = {"type": "array", "maxItems": 65536, "items": _INT}
_VIEW_WIDTHS = (
    "global_loads",
    "global_stores",
    "shared_loads",
    "shared_stores",
    "local_loads",
    "local_stores",
    "generic_loads",
    "generic_stores",
    "cp_async",
)
_VIEW_TALLIES = ("global_load_hints", "predicated", "special", "matrix")
_VIEW_COUNTS = ("instructions", "cp_async_commits", "bulk_copies", "barriers", "shuffles", "atomics")
_VIEW_FLIGHT = ("loads_in_flight", "bytes_in_flight", "cp_async_groups_in_flight")
CENSUS_VIEW = {
    "type": ["object", "null"],
    "required": [*_VIEW_COUNTS, *_VIEW_WIDTHS, *_VIEW_TALLIES, "cp_async_wait", *_VIEW_FLIGHT],  # View's, no default
    "properties": {
        **{name: _WIDTHS for name in _VIEW_WIDTHS},
        **{name: _TALLY for name in _VIEW_TALLIES},
        **{name: _INT for name in (*_VIEW_COUNTS, *_VIEW_FLIGHT)},
        **{name: _DEPTHS for name in ("cp_async_wait", "bulk_waits", "wgmma_waits")},
        **{
            name: _TALLY
            for name in (
                "matrix_loads",
                "matrix_stores",
                "mbarrier",
                "bulk",
                "matrix_shapes",
                "global_store_hints",
                "cluster_barriers",
                "memory_fences",
                "grid_dependency",
                "tensor_memory",
                "global_ordering",
            )
        },
        **{
            name: _INT
            for name in (
                "shared_load_bytes",
                "shared_store_bytes",
                "bulk_commits",
                "elects",
                "wgmma_fences",
                "wgmma_commits",
            )
        },
        "wmma_loads": _INT_OR_NULL,
        "wmma_stores": _INT_OR_NULL,
        "setmaxnreg": {
            "type": "array",
            "maxItems": 4096,
            "items": {
                "type": "object",
                "required": ["action", "registers"],
                "properties": {"action": _NAME, "registers": _INT},
            },
        },
        "params": {
            "type": ["object", "null"],
            "maxProperties": 4096,
            "additionalProperties": {
                "type": "object",
                "required": ["loads", "stores", "load_bits", "store_bits"],
                "properties": {"loads": _INT, "stores": _INT, "load_bits": _WIDTHS, "store_bits": _WIDTHS},
            },
        },
        "registers_declared": {**_TALLY, "type": ["object", "null"]},
        "shared_declared": {**_TALLY, "type": ["object", "null"]},
    },
}
_RESOURCES = ("registers", "shared_bytes", "stack_bytes", "spill_store_bytes", "spill_load_bytes", "local_bytes")
CENSUS_RECORD = {
    "type": "object",
    "required": [
        "kernel",
        "demangled",
        "source",
        "arch",
        *_RESOURCES,
        "dynamic_shared_bytes",
        "barriers_used",
        "resource_sources",
        "occupancy",
        "launch_bounds",
        "tools",
        "ptx",
        "sass",
    ],
    "properties": {
        **{name: _TEXT for name in ("kernel", "demangled", "source")},
        "arch": _NAME,
        **{name: _INT_OR_NULL for name in (*_RESOURCES, "barriers_used")},
        "dynamic_shared_bytes": _INT,
        "resource_sources": {"type": "object", "maxProperties": 64, "additionalProperties": _TEXT},
        "occupancy": {
            "type": ["object", "null"],
            "required": ["block", "blocks_per_sm", "warps_per_sm", "fraction", "limiter", "limits"],
            "properties": {
                **{name: _INT for name in ("block", "blocks_per_sm", "warps_per_sm")},
                "fraction": {"type": "number"},
                "limiter": _NAME,
                "limits": _TALLY,
                "block_dims": {"type": "array", "minItems": 3, "maxItems": 3, "items": _INT},
            },
        },
        "launch_bounds": _TALLY,
        "tools": {"type": "object", "maxProperties": 64, "additionalProperties": _TEXT},
        "notes": {"type": "array", "maxItems": 4096, "items": _TEXT},
        "cluster": {
            "type": ["object", "null"],
            "required": ["dims", "explicit", "max_rank", "source"],
            "properties": {
                "dims": {"type": ["array", "null"], "minItems": 3, "maxItems": 3, "items": _INT},
                "explicit": {"type": "boolean"},
                "max_rank": _INT_OR_NULL,
                "source": _NAME,
            },
        },
        "ptx": CENSUS_VIEW,
        "sass": CENSUS_VIEW,
    },
}

SCHEMAS = {
    "trial": TRIAL,
    "baseline": BASELINE,
    "run": RUN,
    "entry": ENTRY,
    "export line": EXPORT_LINE,
    "environment": ENVIRONMENT,
    "census": CENSUS_RECORD,
}


@cache
def _validator(kind: str):
    return Draft202012Validator(SCHEMAS[kind])


def problem(kind: str, data: object) -> str:
    """What makes `data` not a sound `kind` record ("" when nothing does), said in one line."""
    try:
        error = best_match(_validator(kind).iter_errors(data))
    except RecursionError:
        return "nested too deeply"
    if error is None:
        return _not_finite(data)
    where = ".".join(str(p) for p in error.absolute_path)
    message = error.message if len(error.message) <= 160 else error.message[:157] + "..."
    if error.validator == "pattern" and "\\x00" in str(error.validator_value):
        message = f"{error.instance!r:.80} holds a newline or another control character: not a name"
    return f"{where}: {message}" if where else message


def _not_finite(data: object) -> str:
    """JSON as Python reads it admits NaN and Infinity; no time or error of ours is either."""
    if isinstance(data, dict) and data.get("outcome") in SCORED:
        value = data.get("value")
        if isinstance(value, float) and not math.isfinite(value):
            return f"value: {value!r} is not a finite number"
    return ""
