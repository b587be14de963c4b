"""The tuning tests' shared database: tests/tuning_data.py makes it."""

from __future__ import annotations

import pytest
from tuning_data import layernorm_configs, make_db, run


@pytest.fixture(scope="module")
def layernorm_db(tmp_path_factory) -> str:
    """Layer norm at three shapes on the test GPU, 14 configs each: enough for the learned model."""
    runs = [
        run("layernorm", shape, layernorm_configs(shape, 14, seed))
        for seed, shape in enumerate(({"m": 4096, "d": 768}, {"m": 4096, "d": 2048}, {"m": 1024, "d": 1024}))
    ]
    return make_db(tmp_path_factory.mktemp("layernorm-db") / "db.sqlite", runs)
