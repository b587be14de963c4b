"""`mage-tune db export --format triton|header`, without a GPU: the Triton module imports (triton alone) and its
configs per key are the database's best, as `db query` ranks them; the C++ header compiles with NVRTC and nvcc
through mage_tune.compile, and compiled as host C++ (where a host compiler is present) its dispatch returns the
launch parameters `choice()` gives; jsonl stays the default; an existing file is refused without --force."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tuning_data import ARCH, GPU, make_db, run

from mage_tune.compile import SourceOptions, build_from_cu
from mage_tune.kernels import get_family
from mage_tune.runtime import load
from mage_tune.tuning import choice as choice_module

ROOT = Path(__file__).resolve().parents[2]
TRITON_FAMILY = str(ROOT / "tests/fixtures/data/triton_scale_family.py")
TRITON_SHAPES = ({"m": 64, "n": 1000}, {"m": 64, "n": 3000})


def cli(*args: str, db: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mage_tune", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "MAGE_TUNE_DB": db},
        timeout=600,
    )


@pytest.fixture(autouse=True)
def no_device(monkeypatch):
    monkeypatch.setattr(choice_module.device, "has_gpu", lambda: False)


@pytest.fixture(scope="module")
def triton_db(tmp_path_factory) -> str:
    family = get_family(TRITON_FAMILY)
    runs = [run(family.name, s, list(family.configs(s, ARCH)), origin=TRITON_FAMILY) for s in TRITON_SHAPES]
    return make_db(tmp_path_factory.mktemp("triton-db") / "db.sqlite", runs)


def test_triton_module_imports_alone_and_holds_the_best_configs(triton_db, tmp_path):
    out = tmp_path / "configs.py"
    done = cli("db", "export", str(out), "--format", "triton", "--family", TRITON_FAMILY, db=triton_db)
    assert done.returncode == 0, done.stderr
    assert f"exported 2 shape(s) of scale_rows on {GPU} ({ARCH})" in done.stderr
    probe = (
        "import importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('exported', {str(out)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "flat = lambda c: {**c.kwargs, 'num_warps': c.num_warps, 'num_stages': c.num_stages}\n"
        "print(json.dumps({'configs': {repr(k): [flat(c) for c in v] for k, v in m.CONFIGS.items()},\n"
        "                  'near': [flat(c) for c in m.configs_for(64, 1100)], 'key': m.KEY, 'gpu': m.GPU,\n"
        "                  'mage_tune': sorted(n for n in sys.modules if n.startswith('mage_tune'))}))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["mage_tune"] == [] and got["key"] == ["m", "n"] and got["gpu"] == GPU

    best = json.loads(cli("db", "query", TRITON_FAMILY, "--top", "3", "--json", db=triton_db).stdout)
    expect: dict[str, list[dict]] = {}
    for row in best:
        expect.setdefault(repr((row["shape"]["m"], row["shape"]["n"])), []).append(row["config"])
    assert got["configs"] == expect and len(expect) == 2 and all(len(v) == 3 for v in expect.values())
    assert got["near"] == expect[repr((64, 1000))]  # n = 1100 is nearer 1000 than 3000 on log2


def _host_compiler() -> str | None:
    return shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")


def _host_probe(family, shapes: list[dict]) -> str:
    """A C++ program printing, per shape, dispatch's entry as one JSON line."""
    knobs = []
    for k in family.knobs:
        ctype = "s" if not all(isinstance(v, int) for v in k.domain) else "d"
        knobs.append((k.name, ctype))
    fields = ", ".join(
        f'\\"{n}\\": \\"%s\\"' if t == "s" else f'\\"{n}\\": %lld' for n, t in knobs
    )  # knob names here are C identifiers
    args = ", ".join(f"e.config.{n}" for n, _ in knobs)
    lines = ["#include <cstdio>", '#include "layernorm.h"', "int main() {", "  namespace t = mage_tune_layernorm;"]
    for s in shapes:
        m, d = s["m"], s["d"]
        lines += [
            "  {",
            f"    const t::Entry& e = t::dispatch({m}, {d});",
            '    std::printf("{\\"shape\\": {\\"m\\": %lld, \\"d\\": %lld}, \\"exact\\": %d, "'
            '"\\"grid\\": [%u, %u, %u], \\"block\\": [%u, %u, %u], \\"smem\\": %u, "'
            '"\\"config\\": {' + fields + '}}\\n",',
            f"                e.shape.m, e.shape.d, (int)t::is_exact(e, {m}, {d}), e.grid[0], e.grid[1], e.grid[2],",
            f"                e.block[0], e.block[1], e.block[2], e.dynamic_shared, {args});",
            "  }",
        ]
    return "\n".join([*lines, "}"]) + "\n"


def test_header_compiles_and_dispatch_agrees_with_choice(layernorm_db, tmp_path):
    folder = tmp_path / "include"
    folder.mkdir()
    header = folder / "layernorm.h"
    done = cli("db", "export", str(header), "--format", "header", "--family", "layernorm", db=layernorm_db)
    assert done.returncode == 0, done.stderr
    text = header.read_text()
    assert "inline constexpr int COUNT = 3;" in text and f'GPU = "{GPU}"' in text

    # NVRTC and nvcc, through the repo's compile machinery: the table in a constant expression of a kernel
    probe = tmp_path / "probe.cu"
    probe.write_text(
        '#include "layernorm.h"\n'
        'extern "C" __global__ void probe(unsigned* out) {\n'
        "  constexpr unsigned threads = mage_tune_layernorm::ENTRIES[0].block[0];\n"
        "  out[threadIdx.x] = threads * 1000u + mage_tune_layernorm::COUNT;\n"
        "}\n"
    )
    kernel = load("layernorm", db=layernorm_db, use_shipped=False)
    shapes = kernel.measured_shapes(GPU, ARCH)
    first = kernel.choice({"m": shapes[0]["m"], "d": shapes[0]["d"]}, GPU, ARCH)
    for compiler in ("nvrtc", "nvcc"):
        if compiler == "nvcc" and not shutil.which("nvcc"):
            continue
        options = SourceOptions(includes=(str(folder),), compiler=compiler)
        art = build_from_cu(probe.read_text(), ARCH, str(probe), source_options=options)
        assert art.cubin and str(first.launch.block[0] * 1000 + 3) in art.ptx

    # The dispatch's answer, as host C++, against choice()
    compiler = _host_compiler()
    if compiler is None:
        pytest.skip("no host C++ compiler (c++, g++, clang++): the dispatch's answer is not evaluated")
    family = get_family("layernorm")
    asked = [{"m": s["m"], "d": s["d"]} for s in shapes] + [
        {"m": 4096, "d": 800},
        {"m": 8192, "d": 1536},
        {"m": 2048, "d": 1024},
        {"m": 300, "d": 64},
        {"m": 4096, "d": 767},
    ]
    main = tmp_path / "main.cpp"
    main.write_text(_host_probe(family, asked))
    binary = tmp_path / "main"
    built = subprocess.run(
        [compiler, "-std=c++17", "-Wall", "-Werror", "-I", str(folder), str(main), "-o", str(binary)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    answers = [
        json.loads(x) for x in subprocess.run([str(binary)], capture_output=True, text=True).stdout.split("\n") if x
    ]
    assert len(answers) == len(asked)
    for shape, got in zip(asked, answers, strict=True):
        picked = kernel.choice(shape, GPU, ARCH)
        if got["exact"]:
            assert picked.source == "measured here" and got["shape"] == shape
            assert got["config"] == picked.config
            assert got["grid"] == list(picked.launch.grid) and got["block"] == list(picked.launch.block)
            assert got["smem"] == picked.launch.dynamic_shared
            continue
        # Elsewhere: the same nearest shape, whose best config the choice takes where it is valid at this shape
        best = kernel.ranked(got["shape"], GPU, ARCH)[0].config
        assert got["config"] == best
        if picked.source == "model":
            assert all(family.violations(kernel.ranked(s, GPU, ARCH)[0].config, shape, ARCH) for s in shapes)
            continue
        assert picked.measured_shape == got["shape"], (shape, picked)
        assert picked.config == best or family.violations(best, shape, ARCH)


def test_formats_refuse_what_they_cannot_write(layernorm_db, triton_db, tmp_path):
    out = tmp_path / "layernorm.h"
    out.write_text("mine\n")
    args = ("db", "export", str(out), "--format", "header", "--family", "layernorm")
    done = cli(*args, db=layernorm_db)
    assert done.returncode == 2 and "exists" in done.stderr and out.read_text() == "mine\n"
    assert cli(*args, "--force", db=layernorm_db).returncode == 0 and "ENTRIES" in out.read_text()
    own = layernorm_db.removeprefix("sqlite:///")
    done = cli("db", "export", own, "--format", "header", "--family", "layernorm", "--force", db=layernorm_db)
    assert done.returncode == 2 and "own file" in done.stderr

    done = cli("db", "export", str(tmp_path / "x.py"), "--format", "triton", db=triton_db)
    assert done.returncode == 2 and "needs --family" in done.stderr
    done = cli("db", "export", str(tmp_path / "x.py"), "--format", "triton", "--family", "layernorm", db=layernorm_db)
    assert done.returncode == 2 and "not a Triton family" in done.stderr
    done = cli("db", "export", str(tmp_path / "x.h"), "--format", "header", "--family", TRITON_FAMILY, db=triton_db)
    assert done.returncode == 2 and "not a CUDA family" in done.stderr
    done = cli(
        "db", "export", str(tmp_path / "x.h"), "--format", "header", "--family", "matmul", "--no-shipped",
        db=layernorm_db,
    )  # fmt: skip
    assert done.returncode == 2 and "nothing measured of matmul" in done.stderr
    assert not (tmp_path / "x.py").exists() and not (tmp_path / "x.h").exists()

    # jsonl is still the default: every trial
    done = cli("db", "export", str(tmp_path / "all.jsonl"), db=layernorm_db)
    assert done.returncode == 0 and "exported 42 trial(s)" in done.stderr
