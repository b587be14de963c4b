"""mage-tune: generate, census, compare, measure and search GPU kernel variants."""

from mage_tune.errors import MageError

__version__ = "0.1.0"

__all__ = ["MageError", "__version__", "census"]


def census(*args, **kwargs):
    """Census every kernel of a file (see `mage_tune.census.census_path`)."""
    from mage_tune.census import census_path

    return census_path(*args, **kwargs)
