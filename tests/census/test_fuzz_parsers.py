"""Fuzzing the three readers of a kernel binary with mutated REAL inputs: the PTX parser, the SASS listing parser
and the cubin path (cuobjdump, then the SASS parser). Every input, however damaged, must end in a census or in a
MageError (one line, the file named) — never another exception — within a time bound per input, and the whole run
within a memory bound.

The inputs are compiled here through the library (NVRTC, ptxas, cuobjdump) from tests/fixtures/kernels/;
Hypothesis mutates
them (cut, delete, duplicate or overwrite spans, replace a line or a number, flip bytes). The parsers run in-process
(hundreds of inputs a second); the cubin path runs cuobjdump, so it gets fewer examples. Seeds are derandomized so a
CI failure replays exactly.
"""

from __future__ import annotations

import re
import resource
import time

import pytest
from conftest import KERNELS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mage_tune.arch import get_arch
from mage_tune.census import census_artifact
from mage_tune.census import ptx as ptx_view
from mage_tune.census import sass as sass_view
from mage_tune.compile import Artifact, build_from_cu, build_from_cubin
from mage_tune.errors import MageError

ARCH = get_arch("sm_89")
SECONDS_PER_INPUT = 30.0  # a hang, not a slow machine: a cubin input runs cuobjdump twice (0.4 s here)
RSS_GROWTH_MB = 600  # the whole fuzz run may not grow the test process by more than this
FAST = settings(
    max_examples=250,
    deadline=None,  # timed below, against SECONDS_PER_INPUT, so a slow CI machine does not flake on 200 ms
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
SLOW = settings(FAST, max_examples=30)


@pytest.fixture(scope="module")
def real() -> Artifact:
    """A real compile with cp.async, shared memory, shuffles and two kernels' worth of structure."""
    source = (KERNELS / "cp_async_double.cu").read_text() + "\n" + (KERNELS / "flight.cu").read_text()
    return build_from_cu(source, ARCH, "fuzz.cu")


@pytest.fixture(scope="module", autouse=True)
def memory_bound():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    yield
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < RSS_GROWTH_MB, f"the fuzzed parsers grew the process by {grown_mb:.0f} MB"


# --- mutations ----------------------------------------------------------------------------------------------------

NASTY_LINES = (
    "",
    ";",
    "/*0000*/ ;",
    "\t/*0010*/                   @!PT ;",
    "\tcp.async.wait_group 0x2;",
    "\tcp.async.wait_group 99999999999999999999999;",
    "\tld.global.v4.f32 \t{%f1, %f2}, [%rd1+-9223372036854775809];",
    ".reg .b32 \t%r<99999999999>;",
    ".visible .entry " + "k" * 5000 + "(",
    ".maxntid 0, 0, 0",
    ".reqntid 4294967296",
    "{{{{{{{{",
    "}}}}}}}}",
    "\x00\x01\x02",
    "Function : ",
    '\t.section .text.x,"ax",@progbits',
    "        /*0000*/                   MOV R1, c[0x0][0x28] ;",
    "code for sm_",
    "code for sm_99999999999999",
)


@st.composite
def mutated_text(draw, original: str) -> str:
    lines = original.splitlines()
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        kind = draw(st.sampled_from(["cut", "delete", "duplicate", "nasty", "text", "number", "truncate_line"]))
        if kind == "cut":
            lines = lines[:i]
        elif kind == "delete":
            j = draw(st.integers(i, min(len(lines), i + 20)))
            del lines[i:j]
        elif kind == "duplicate":
            j = draw(st.integers(i, min(len(lines), i + 20)))
            lines[j:j] = lines[i:j]
        elif kind == "nasty":
            lines[i] = draw(st.sampled_from(NASTY_LINES))
        elif kind == "text":
            lines[i] = draw(st.text(max_size=80))
        elif kind == "number":
            big = draw(st.sampled_from(["0", "-1", "4294967296", "99999999999999999999", "0x", "1e309", "NaN"]))
            lines[i] = re.sub(r"\d+", big, lines[i], count=1)
        else:
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
    return "\n".join(lines) + "\n"


@st.composite
def mutated_bytes(draw, original: bytes) -> bytes:
    data = bytearray(original)
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["flip", "cut", "zero", "splice"]))
        i = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip" and data:
            data[i] ^= draw(st.integers(1, 255))
        elif kind == "cut":
            del data[i:]
        elif kind == "zero":
            data[i : i + draw(st.integers(1, 256))] = bytes(min(256, len(data) - i))
        else:
            data[i:i] = draw(st.binary(max_size=64))
    return bytes(data)


def ends_cleanly(step) -> None:
    """`step()` returns or raises MageError, within SECONDS_PER_INPUT; anything else fails the test."""
    start = time.monotonic()
    try:
        step()
    except MageError as exc:
        assert str(exc).strip() and "\n" not in str(exc).strip(), f"not a one-line error: {exc!r}"
    elapsed = time.monotonic() - start
    assert elapsed < SECONDS_PER_INPUT, f"one input took {elapsed:.1f} s"


# --- the three readers ------------------------------------------------------------------------------------------


def test_fuzzed_ptx(real):
    """The PTX parser and everything the census derives from it (views, flight, resources from the real reports)."""

    @FAST
    @given(st.data())
    def run(data):
        text = data.draw(mutated_text(real.ptx))

        def step():
            module = ptx_view.parse(text, "fuzz.ptx")
            for kernel in module.kernels:
                ptx_view.view(kernel)
            art = Artifact("fuzz.ptx", ARCH.name, ptx=text, ptxas_log=real.ptxas_log, res_usage=real.res_usage)
            census_artifact(art)

        ends_cleanly(step)

    run()


def test_fuzzed_sass_listing(real):
    @FAST
    @given(st.data())
    def run(data):
        text = data.draw(mutated_text(real.sass))

        def step():
            for instrs in sass_view.parse(text, "fuzz.sass").values():
                sass_view.view(instrs)
            census_artifact(Artifact("fuzz.sass", ARCH.name, sass=text, res_usage=real.res_usage))

        ends_cleanly(step)

    run()


def test_fuzzed_cubin(real):
    """Damaged ELF through cuobjdump and the SASS parser: a census or a clean error, the user's name in it."""

    @SLOW
    @given(st.data())
    def run(data):
        blob = data.draw(mutated_bytes(real.cubin))

        def step():
            try:
                census_artifact(build_from_cubin(blob, "fuzz.cubin"))
            except MageError as exc:
                assert "fuzz.cubin" in str(exc) and "/tmp/" not in str(exc), str(exc)
                raise

        ends_cleanly(step)

    run()
