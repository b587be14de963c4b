"""mage-tune: generate, census, compare, measure and search GPU kernel variants."""

from mage_tune.errors import MageError

__version__ = "0.1.0"

__all__ = ["MageError", "__version__", "census", "compare", "load"]


def __getattr__(name: str):
    # `mage_tune.census` is the census subpackage, and calling it censuses a file (`mage_tune.census("k.cu")` ->
    # list of Census): imported on first use, so `import mage_tune` stays fast, and callable however often.
    if name == "census":
        import mage_tune.census as census

        return census
    if name == "compare":  # our variant beside a Triton kernel, offline: mage_tune.comparison.compare
        from mage_tune.comparison import compare

        return compare
    if name == "load":  # a family with its tuning data, choosing and launching a config per shape
        from mage_tune.runtime import load

        return load
    raise AttributeError(f"module 'mage_tune' has no attribute {name!r}")
