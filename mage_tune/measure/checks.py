"""A kernel's outputs against the family's float64 reference, one output at a time, in the output's metric.

Pure numpy (the worker copies each output to the host first), so every metric is testable without a GPU.

  rel_l2   ||got - ref||₂ / ||ref||₂
  max_rel  max |got - ref| / max(|ref|, 1e-6 · max|ref|), elementwise: an error in any one element counts in full
  ulp      max |got - ref| / ulp(ref), the unit in the last place of the output's device dtype at |ref|: float32 and
           float16 np.spacing of |ref| rounded to that type; bfloat16 2^(floor(log2 |ref|) - 7), |ref| below the
           smallest normal taking the smallest normal's
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mage_tune.kernels.base import OUT
from mage_tune.measure.records import OutputCheck

BF16_SMALLEST_NORMAL = 2.0**-126
BF16_MANTISSA_BITS = 7
_SPACED = {"float32": np.float32, "float16": np.float16}


def rel_l2(got: np.ndarray, ref: np.ndarray) -> float:
    got, ref = _f64(got), _f64(ref)
    return float(np.linalg.norm(got - ref) / max(float(np.linalg.norm(ref)), 1e-300))


def max_rel(got: np.ndarray, ref: np.ndarray) -> float:
    got, ref = _f64(got), _f64(ref)
    if ref.size == 0:
        return 0.0
    size = np.abs(ref)
    scale = np.maximum(np.maximum(size, 1e-6 * float(size.max())), 1e-300)  # an all-zero reference: 1e-300
    return float(np.max(np.abs(got - ref) / scale))


def ulp_of(ref: np.ndarray, dtype: str) -> np.ndarray:
    """The unit in the last place of `dtype` at each |ref|, as float64."""
    size = np.abs(_f64(ref))
    if dtype in _SPACED:
        kind = _SPACED[dtype]
        below_max = np.nextafter(np.finfo(kind).max, kind(0))  # spacing of the largest finite value is inf
        return np.spacing(np.minimum(size, below_max).astype(kind)).astype(np.float64)
    if dtype == "bfloat16":
        _, exponent = np.frexp(np.maximum(size, BF16_SMALLEST_NORMAL))  # size = m · 2^exponent, m in [0.5, 1)
        return np.ldexp(1.0, exponent - 1 - BF16_MANTISSA_BITS)
    raise ValueError(f"device dtype {dtype!r} is not one of float32, float16, bfloat16")


def ulp(got: np.ndarray, ref: np.ndarray, dtype: str) -> float:
    got, ref = _f64(got), _f64(ref)
    if ref.size == 0:
        return 0.0
    return float(np.max(np.abs(got - ref) / ulp_of(ref, dtype)))


def error(metric: str, got: np.ndarray, ref: np.ndarray, dtype: str) -> float:
    if metric == "rel_l2":
        return rel_l2(got, ref)
    if metric == "max_rel":
        return max_rel(got, ref)
    if metric == "ulp":
        return ulp(got, ref, dtype)
    raise ValueError(f"metric {metric!r} is not one of rel_l2, max_rel, ulp")


_WORDS = {"rel_l2": "relative error", "max_rel": "largest relative error", "ulp": "error in ulps"}


@dataclass(frozen=True)
class Compared:
    """One output's check, with its relative L2 and largest absolute error (NaN where not finite) and, when it
    fails, why ("" when it passes)."""

    check: OutputCheck
    rel_l2: float
    max_abs: float
    why: str


def compare(name: str, metric: str, got: np.ndarray, ref: np.ndarray, tolerance: float, dtype: str) -> Compared:
    """Output `name` (`got`, as the device wrote it) against its reference. Any element not finite fails it, with a
    count (the harness poisons outputs with NaN, so an unwritten element shows here)."""
    prefix = "" if name == OUT else f"{name}: "
    got, ref = _f64(got), _f64(ref)
    if got.size != ref.size:
        why = f"{prefix}the buffer holds {got.size} elements, the reference {ref.size}"
        return Compared(OutputCheck(name, metric, math.nan, tolerance, False), math.nan, math.nan, why)
    got = got.reshape(ref.shape)
    bad = int(np.count_nonzero(~np.isfinite(got)))
    if bad:
        why = f"{prefix}{bad} of {got.size} outputs not written or not finite"
        return Compared(OutputCheck(name, metric, math.nan, tolerance, False), math.nan, math.nan, why)
    value = error(metric, got, ref, dtype)
    ok = value <= tolerance
    why = "" if ok else f"{prefix}{_WORDS[metric]} {value:.3g} over tolerance {tolerance:.3g}"
    max_abs = float(np.max(np.abs(got - ref))) if got.size else 0.0
    return Compared(OutputCheck(name, metric, value, float(tolerance), ok), rel_l2(got, ref), max_abs, why)


def _f64(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float64)
