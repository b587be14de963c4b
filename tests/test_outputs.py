"""mage_tune.outputs: a script's output file that exists is replaced only with --force."""

from __future__ import annotations

import pytest

from mage_tune.outputs import refuse_existing


def test_an_existing_output_is_refused_unless_forced(tmp_path):
    there, free = tmp_path / "a.json", tmp_path / "b.json"
    there.write_text("{}")
    refuse_existing("tool.py", free, None)  # nothing there, nothing named: fine
    with pytest.raises(SystemExit, match=f"tool.py: {there}: exists; give --force to replace it"):
        refuse_existing("tool.py", free, there)
    refuse_existing("tool.py", there, force=True)
    (tmp_path / "link").symlink_to(tmp_path / "gone")  # a dangling link is in the way too
    with pytest.raises(SystemExit):
        refuse_existing("tool.py", tmp_path / "link")
