"""Families found by path and by entry point, run through the CLI as a user runs it (subprocesses), from a copy of
an example outside the repository; broken family files are one-line errors naming file and line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def mage(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:

    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    environ = {**os.environ, "PYTHONPATH": path, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "mage_tune", *args], capture_output=True, text=True, timeout=600, cwd=cwd, env=environ
    )


@pytest.fixture(scope="module")
def outside(tmp_path_factory) -> Path:
    """examples/rmsnorm copied to a folder that is not the repository."""
    folder = tmp_path_factory.mktemp("user") / "rmsnorm"
    shutil.copytree(ROOT / "examples" / "rmsnorm", folder)
    return folder


def _ok(run: subprocess.CompletedProcess) -> str:
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    return run.stdout


def _space(out: str) -> dict:
    """`space --json`'s lines (a header, {"config": ...} per config, {"valid": ...} last) as one dict."""
    header, *configs, last = (json.loads(line) for line in out.splitlines())
    return {**header, **last, "configs": [line["config"] for line in configs]}


def test_cuda_family_by_path_space_render_census_search_report(outside, tmp_path):
    fam = str(outside / "family.py") + ":BF16"
    out = _ok(mage("space", fam, "--shape", "m=1024,d=4096", "--json", "--limit", "0", cwd=tmp_path))
    space = _space(out)
    assert space["family"] == "rmsnorm_bf16" and space["shape"] == {"m": 1024, "d": 4096} and space["valid"] > 0
    source = _ok(mage("render", fam, "--d", "4096", "--set", "vec=16", cwd=tmp_path))
    assert "rmsnorm(" in source and "unsigned short" in source  # bf16 in and out
    census = json.loads(_ok(mage("census", fam, "--d", "4096", "--set", "threads=128", "--json", cwd=tmp_path)))
    assert census["sass"]["global_loads"] and census["kernel"] == "rmsnorm"
    run_dir = tmp_path / "run"
    _ok(mage("search", fam, "--d", "4096", "--trials", "6", "--static", "--run-dir", str(run_dir), cwd=tmp_path))
    assert json.loads((run_dir / "search.json").read_text())["origin"].endswith("family.py:BF16")
    report = _ok(mage("report", str(run_dir), cwd=tmp_path))
    assert "rmsnorm_bf16" in report


def test_triton_family_by_path_ends_with_a_triton_config_list(outside, tmp_path):
    fam = str(outside / "triton_family.py")
    run_dir = tmp_path / "run"
    _ok(mage("search", fam, "--d", "2048", "--trials", "5", "--static", "--run-dir", str(run_dir), cwd=tmp_path))
    text = (run_dir / "best" / "triton_configs.py").read_text()
    assert text.startswith("import triton") and "triton.Config({'BLOCK': " in text
    listed = json.loads((run_dir / "best" / "triton_configs.json").read_text())
    best = json.loads((run_dir / "best" / "best.json").read_text())
    assert listed[0] == best["config"]  # best first
    assert "def rmsnorm_kernel(" in (run_dir / "best" / "kernel.py").read_text()  # its source, as Python
    assert not (run_dir / "best" / "kernel.cu").exists()


def test_autotuned_kernel_brings_its_configs(tmp_path):
    out = _ok(mage("space", str(ROOT / "examples/softmax_autotuned/family.py"), "--n", "2048", "--json"))
    space = _space(out)
    assert space["valid"] == 3  # of the 5 configs of @triton.autotune, those whose BLOCK covers n = 2048
    assert {c["BLOCK"] for c in space["configs"]} == {2048, 4096}


def _one_line_error(run: subprocess.CompletedProcess) -> str:
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    return lines[0]


def test_a_family_file_that_fails_to_import_names_file_and_line(tmp_path):
    bad = tmp_path / "family.py"
    bad.write_text("from mage_tune.families import CudaFamily\n\n\nraise RuntimeError('no GPU budget')\n")
    line = _one_line_error(mage("space", str(bad)))
    assert f"{bad}:4:" in line and "RuntimeError: no GPU budget" in line
    bad.write_text("def broken(:\n")
    line = _one_line_error(mage("space", str(bad)))
    assert f"{bad}:1:" in line and "syntax" in line


def test_missing_contract_members_are_named(tmp_path):
    partial = tmp_path / "family.py"
    partial.write_text(
        "from mage_tune.families import CudaFamily\n\n\n"
        "class Half(CudaFamily):\n"
        "    name = 'half'\n"
        "    def violations(self, config, shape, arch):\n        return []\n\n\n"
        "FAMILY = Half()\n"
    )
    line = _one_line_error(mage("space", str(partial)))
    assert str(partial) in line
    for member in ("constraint_text", "launch", "make_inputs", "reference", "template_vars"):
        assert member in line


def test_a_template_that_fails_to_render_names_its_line(tmp_path, outside):
    folder = tmp_path / "broken"
    shutil.copytree(outside, folder)
    template = folder / "rmsnorm.cu.j2"
    lines = template.read_text().splitlines()
    lines[20] = "{{ no_such_variable }}"
    template.write_text("\n".join(lines) + "\n")
    line = _one_line_error(mage("render", str(folder / "family.py"), "--d", "1024"))
    assert f"{template}:21:" in line and "no_such_variable" in line
    lines[20] = "{% if %}"
    template.write_text("\n".join(lines) + "\n")
    line = _one_line_error(mage("render", str(folder / "family.py"), "--d", "1024"))
    assert f"{template}:21:" in line and "syntax" in line


def test_only_a_python_file_is_read_as_a_family(tmp_path):
    """A kernel or any other file given where a family goes is refused before it could be imported as code (the
    one below would run as Python, and write a file, were it imported)."""
    planted = tmp_path / "ran"
    for name, hint in (("kernel.cu", "mage-tune census"), ("family", None), ("record.json", None)):
        path = tmp_path / name
        path.write_text(f"open({str(planted)!r}, 'w').write('ran')\n")
        line = _one_line_error(mage("space", str(path), "--d", "768"))
        assert f"{path}: a family file is Python" in line and (hint is None or hint in line)
    assert not planted.exists()


def test_unknown_names_say_what_is_known(tmp_path):
    line = _one_line_error(mage("space", "layernrom"))
    assert "did you mean layernorm" in line and "matmul" in line
    line = _one_line_error(mage("space", str(tmp_path / "famly.py")))
    assert "no such family file" in line


def test_installed_plugin_found_by_entry_point(tmp_path):
    """A package that declares an entry point in the group mage_tune.families is found by its name."""
    package = tmp_path / "site"
    (package / "my_norms").mkdir(parents=True)
    shutil.copytree(ROOT / "examples" / "rmsnorm", package / "my_norms" / "rmsnorm")
    (package / "my_norms" / "__init__.py").write_text(
        "from pathlib import Path\n\n"
        "from mage_tune.families import import_file\n\n"
        "FAMILY = import_file(Path(__file__).parent / 'rmsnorm' / 'family.py').FAMILY\n"
    )
    dist = package / "my_norms-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-norms\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[mage_tune.families]\nrms = my_norms:FAMILY\n")
    env = {"PYTHONPATH": f"{ROOT}:{package}"}
    space = _space(_ok(mage("space", "rms", "--d", "1024", "--json", "--limit", "0", env=env)))
    assert space["family"] == "rmsnorm" and space["origin"] == "rms"
