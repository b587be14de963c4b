"""Shared fixtures: a private compile cache, the `gpu` marker, real compiles of tests/fixtures/kernels/*.cu, and
NVIDIA's own tools run independently of the census so every count a test asserts is checked against ptxas,
cuobjdump or a grep.

The parsing here is deliberately simple and separate from mage_tune.census: a line grep over `cuobjdump -sass`
and over PTX, and a clause-by-clause read of `ptxas -v` and `cuobjdump -res-usage`.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from mage_tune.arch import Arch

TESTS = Path(__file__).parent
KERNELS = TESTS / "fixtures" / "kernels"
ARCHS = ("sm_80", "sm_89", "sm_90")
# cuobjdump -res-usage counts the driver's 1 KB per-block shared-memory reservation in SHARED on sm_90 only, and
# only for a kernel with static shared memory (one without shows SHARED:0).
RES_USAGE_RESERVED = {"sm_80": 0, "sm_86": 0, "sm_89": 0, "sm_90": 1024}


# --- the gpu marker ---------------------------------------------------------------------------------------------


def has_gpu() -> bool:
    """True only where cupy imports and sees at least one CUDA device (the library's own check, in one place)."""
    from mage_tune.measure.device import has_gpu as device_present

    return device_present()


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items or has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (cupy with at least one device)")
    for item in gpu_items:
        item.add_marker(skip)


# --- a private compile cache -------------------------------------------------------------------------------------


@pytest.fixture(scope="session", autouse=True)
def compile_cache(tmp_path_factory):
    """Point MAGE_TUNE_CACHE at a fresh folder so every test session compiles for real (subprocesses inherit it)."""
    folder = tmp_path_factory.mktemp("mage-tune-cache")
    before = os.environ.get("MAGE_TUNE_CACHE")
    os.environ["MAGE_TUNE_CACHE"] = str(folder)
    yield folder
    if before is None:
        os.environ.pop("MAGE_TUNE_CACHE", None)
    else:
        os.environ["MAGE_TUNE_CACHE"] = before


# --- NVIDIA's tools, run and read independently of the census ---------------------------------------------------


def tool(name: str) -> str:
    """Path of the program the census itself would run (same binary, so the numbers are comparable)."""
    from mage_tune import toolchain

    return toolchain.find(name).path


def triton_tool(name: str) -> str:
    from mage_tune import toolchain

    folder = toolchain.triton_bin_dir()
    if folder is None or not (folder / name).is_file():
        pytest.skip(f"Triton's bundled {name} not found")
    return str(folder / name)


def run_tool(*args: str) -> str:
    run = subprocess.run(list(args), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"{args[0]} failed: {run.stderr or run.stdout}"
    return run.stdout + run.stderr


def nvrtc_compile(source: str, arch: str, name: str = "kernel.cu") -> str:
    """PTX from NVRTC, for making test input files (the counts are then checked against ptxas and cuobjdump)."""
    from mage_tune.arch import get_arch
    from mage_tune.compile import nvrtc_ptx

    return nvrtc_ptx(source, get_arch(arch), name)


def compile_job(family: str, arch: str | Arch, job: tuple[dict, dict]) -> str | None:
    """Render and compile one config to a cubin (NVRTC, ptxas); None when it compiles, else the error naming the
    config. The disassembly a full build adds (cuobjdump, most of its time) is left to the census tests."""
    from mage_tune.arch import get_arch
    from mage_tune.compile import nvrtc_ptx, ptxas
    from mage_tune.errors import MageError
    from mage_tune.kernels import get_family
    from mage_tune.kernels.base import config_label

    arch = get_arch(arch)
    fam = get_family(family)
    config, shape = job
    label = config_label(fam.name, config) + f" at {shape}"
    try:
        ptxas(nvrtc_ptx(fam.render(config, shape), arch, label), arch, label)
    except MageError as exc:
        return str(exc) if label in str(exc) else f"{label}: {exc}"
    return None


_PTXAS_CLAUSES = {
    "registers": r"Used (\d+) registers",
    "barriers": r"used (\d+) barriers",
    "smem": r"(\d+) bytes smem",
    "stack": r"(\d+) bytes stack frame",
    "spill_stores": r"(\d+) bytes spill stores",
    "spill_loads": r"(\d+) bytes spill loads",
}


def read_ptxas_v(log: str) -> dict[str, dict[str, int]]:
    """Kernel -> every number `ptxas -v` printed for it (absent clauses are absent keys)."""
    found: dict[str, dict[str, int]] = {}
    numbers: dict[str, int] = {}
    for line in log.splitlines():
        entry = re.search(r"Compiling entry function '([^']+)'", line)
        if entry:
            numbers = found.setdefault(entry.group(1), {})
            continue
        for key, pattern in _PTXAS_CLAUSES.items():
            m = re.search(pattern, line)
            if m:
                numbers[key] = int(m.group(1))
    return found


def read_res_usage(text: str) -> dict[str, dict[str, int]]:
    """Kernel -> {REG, STACK, SHARED, LOCAL, ...} from `cuobjdump -res-usage`."""
    found: dict[str, dict[str, int]] = {}
    name = None
    for line in text.splitlines():
        head = re.match(r"\s*Function (\S+?):\s*$", line)
        if head:
            name = head.group(1)
        elif name and "REG:" in line:
            found[name] = {k: int(v) for k, v in re.findall(r"(\w+(?:\[\d+\])?):(\d+)", line)}
            name = None
    return found


def sass_functions(listing: str) -> dict[str, list[str]]:
    """Kernel -> its instruction lines from `cuobjdump -sass`, never-executed `@!PT` lines dropped."""
    found: dict[str, list[str]] = {}
    lines: list[str] | None = None
    for line in listing.splitlines():
        head = re.match(r"\s*Function : (\S+)", line)
        if head:
            lines = found.setdefault(head.group(1), [])
        elif lines is not None and re.match(r"\s*/\*[0-9a-f]{4}\*/", line) and "@!PT" not in line:
            lines.append(line)
    return found


def ptx_functions(ptx: str) -> dict[str, list[str]]:
    """Kernel -> the code lines of its .entry, `//` comments removed."""
    heads = list(re.finditer(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([\w$]+)", ptx, re.M))
    found = {}
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(ptx)
        found[head.group(1)] = [line.split("//")[0] for line in ptx[head.start() : end].splitlines()]
    return found


def count(lines: list[str], pattern: str) -> int:
    rx = re.compile(pattern)
    return sum(1 for line in lines if rx.search(line))


def opcodes(lines: list[str], pattern: str) -> Counter:
    """Full opcodes matching `pattern` (which matches an opcode's start) -> how many lines hold one."""
    rx = re.compile(pattern + r"[\w.:]*")
    return Counter(m.group(0) for line in lines for m in [rx.search(line)] if m)


PTX_FENCES = r"(?<![\w.])(membar|fence)\."  # wgmma.fence is no memory fence
SASS_FENCES = r"\b(MEMBAR|FENCE)\."


@dataclass
class Built:
    """One .cu compiled by the census, plus what NVIDIA's tools say about the census's own PTX and cubin."""

    file: str
    arch: str
    art: object  # mage_tune.compile.Artifact
    ptxas_log: str  # our own `ptxas -v` run on art.ptx
    ptxas: dict[str, dict[str, int]]
    res_usage: dict[str, dict[str, int]]  # our own `cuobjdump -res-usage` on the cubin of our ptxas run
    sass: dict[str, list[str]]  # our grep of the `cuobjdump -sass` listing (test_every_input_form re-runs it)
    ptx: dict[str, list[str]]
    cubin: bytes = field(repr=False, default=b"")

    def census(self, kernel: str | None = None, block: int | None = None):
        """Census records by kernel name (a fresh census of the same artifact: no recompile)."""
        from mage_tune.census import census_artifact

        return {c.kernel: c for c in census_artifact(self.art, kernel=kernel, block=block)}

    def only(self, block: int | None = None):
        (record,) = self.census(block=block).values()
        return record


def nvidia_view(ptx: str, arch: str, label: str, ptxas_path: str | None = None) -> dict:
    """Assemble PTX with `ptxas -v` ourselves and read the cubin's resources with `cuobjdump -res-usage`."""
    with tempfile.TemporaryDirectory(prefix="mage-test-") as tmp:
        src, out = Path(tmp) / f"{label}.ptx", Path(tmp) / f"{label}.cubin"
        src.write_text(ptx)
        log = run_tool(ptxas_path or tool("ptxas"), "-v", f"-arch={arch}", str(src), "-o", str(out))
        usage = run_tool(tool("cuobjdump"), "-res-usage", str(out))
        cubin = out.read_bytes()
    return {"ptxas_log": log, "ptxas": read_ptxas_v(log), "res_usage": read_res_usage(usage), "cubin": cubin}


@pytest.fixture(scope="session")
def build():
    """build(file, arch) -> Built: tests/fixtures/kernels/<file> through the census's compile, checked with our own
    runs.

    `cuobjdump -sass` costs about a second a call (nvdisasm's start-up), so the listing grepped is the one the
    compile already made; test_every_input_form checks it against a listing of our own cubin.
    """
    from mage_tune.census import load

    done: dict[tuple[str, str], Built] = {}

    def _build(file: str, arch: str) -> Built:
        if (file, arch) not in done:
            art = load(KERNELS / file, arch)
            ref = nvidia_view(art.ptx, arch, Path(file).stem)
            sass = sass_functions(art.sass)
            done[file, arch] = Built(file, arch, art, sass=sass, ptx=ptx_functions(art.ptx), **ref)
        return done[file, arch]

    return _build


@pytest.fixture(scope="session")
def triton_norm():
    """Triton's norm_kernel compiled offline for sm_89 (see tests/triton_norm.py): (CompiledKernel, Artifact)."""
    pytest.importorskip("triton")
    import triton_norm as norm

    from mage_tune.compile import Artifact, disassemble, ptxas

    compiled = norm.compile_norm(89)
    ptx, cubin = compiled.asm["ptx"], compiled.asm["cubin"]
    from mage_tune import toolchain

    bundled = tuple(t for t in toolchain.candidates("ptxas") if t.origin == "triton")
    if not bundled:
        pytest.skip("Triton's bundled ptxas not found")
    _, report, _ = ptxas(ptx, norm.ARCH, "norm_kernel", ptxas_tools=bundled)
    sass, res_usage, _ = disassemble(cubin, "norm_kernel")
    art = Artifact(
        "norm_kernel",
        norm.ARCH.name,
        ptx=ptx,
        cubin=cubin,
        sass=sass,
        res_usage=res_usage,
        ptxas_log=report,
        dynamic_shared=compiled.metadata.shared,
    )
    return compiled, art


# the tuning tests' shared database (tests/tuning_data.py makes it); here, the one conftest: a second one would
# take the module name `conftest` that pickled test helpers are found by
@pytest.fixture(scope="module")
def layernorm_db(tmp_path_factory) -> str:
    """Layer norm at three shapes on the test GPU, 14 configs each: enough for the learned model."""
    from tuning_data import layernorm_configs, make_db, run  # the tuning tests' helpers; they import mage_tune

    runs = [
        run("layernorm", shape, layernorm_configs(shape, 14, seed))
        for seed, shape in enumerate(({"m": 4096, "d": 768}, {"m": 4096, "d": 2048}, {"m": 1024, "d": 1024}))
    ]
    return make_db(tmp_path_factory.mktemp("layernorm-db") / "db.sqlite", runs)


@pytest.fixture(scope="module")
def torch():
    """torch on a GPU, FP32 matmuls in FP32 (the PyTorch operator tests, tests/torch)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    return torch


@pytest.fixture(scope="module")
def mt(torch):
    """mage_tune.torch, its operators choosing from the shipped data and the family defaults (no database)."""
    import mage_tune.torch as mt

    mt.configure(db="off")
    return mt


def cubin_file(art, folder: Path) -> str:
    """The census's cubin of an artifact as a file of its own, for NVIDIA's tools."""
    path = folder / f"{Path(art.label).stem}-{art.arch}.cubin"
    path.write_bytes(art.cubin)
    return str(path)


def cubin_listing(art, folder: Path) -> dict[str, list[str]]:
    """cuobjdump's own listing of the census's cubin, by kernel."""
    return sass_functions(run_tool(tool("cuobjdump"), "-sass", cubin_file(art, folder)))


def one_kernel(folder: Path, name: str, source: str, arch: str) -> tuple:
    """(artifact, census, cuobjdump's listing lines) of a source of one kernel compiled by the census for `arch`."""
    from mage_tune.census import census_artifact, load

    path = folder / name
    path.write_text(source)
    art = load(path, arch)
    (c,) = census_artifact(art)
    (sass,) = cubin_listing(art, folder).values()
    return art, c, sass
