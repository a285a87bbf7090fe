"""callgrind's output file read by function: a hand-written file whose own costs are computed by hand, and
a real one whose functions' own instructions add up to callgrind's own total."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfgate.profile.callgrind_functions import INSTRUMENT, NOTE_PYTHON, UNIT, read_functions

needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")

# positions "instr line"; events "Ir Dr" (Ir first); names compressed "(id) name" then "(id)"
HAND = """\
# callgrind format
version: 1
creator: by hand
cmd: python -c x=1
positions: instr line
events: Ir Dr
summary: 178 40

ob=(1) /usr/lib/libdemo.so
fl=(1) /src/demo.c
fn=(1) main
0x10 3 5 1
+2 4 7
# main calls helper twice: the next cost line is helper's inclusive cost, not main's own
cfl=(2) /src/util.c
cfn=(2) helper
calls=2 0x40 10
+1 5 100 20
* 6 2
jump=3 +2 9
# an inlined file: still main's own cost
fi=(3) /src/inline.h
+4 20 3
fe=(1)
+1 7 1

fl=(2)
fn=(2)
0x40 10 30 6
cfn=(3) leaf
calls=4 0x80
+8 11 70 14
+1 12 0

fn=(3)
0x80 1 70

ob=(2) /usr/lib/libother.so
fl=(4) /src/other.c
fn=(4) helper
0x500 1 9
# a callee named first in cfn=, referred to by its id in fn= later
cfn=(5) named_in_cfn
calls=1 0x600
0x500 2 40
fn=(6) rec
0x700 4 5
fn=(7) rec'2
0x700 4 6

fn=(5)
0x600 3 40
totals: 178 40
"""


def test_a_hand_written_file_s_own_costs(tmp_path: Path):
    path = tmp_path / "callgrind.out.1"
    path.write_text(HAND)
    profile = read_functions(path, calls=2)
    assert profile.instrument == INSTRUMENT == "callgrind (Ir)" and profile.unit == UNIT == "instructions"
    assert profile.calls == 2 and profile.resolution == 0
    # main: 5 + 7 + 2 + 3 (inlined) + 1; never the 100 of the call to helper
    # helper in libdemo: 30 + 0; never the 70 of its calls to leaf; helper in libother: 9 (not the 40 it called)
    # rec and its recursion level rec'2: one function
    assert dict(profile.stacks) == {
        "main": 18,
        "helper (libdemo.so)": 30,
        "helper (libother.so)": 9,
        "leaf": 70,
        "named_in_cfn": 40,
        "rec": 11,
    }
    assert sum(profile.stacks.values()) == 178  # the file's own total
    assert profile.where == {
        "main": "demo.c",
        "helper (libdemo.so)": "util.c",
        "helper (libother.so)": "other.c",
        "leaf": "util.c",
        "named_in_cfn": "other.c",
        "rec": "other.c",
    }
    assert profile.own()["leaf"] == 35  # per stage call


def test_a_name_used_before_it_is_given_is_an_error(tmp_path: Path):
    path = tmp_path / "bad.out"
    path.write_text("events: Ir\nfn=(9)\n0 5\n")
    with pytest.raises(ValueError, match=r"\(9\) used before it was named"):
        read_functions(path, calls=1)


def test_a_file_without_events_is_no_callgrind_file(tmp_path: Path):
    path = tmp_path / "notes.txt"
    path.write_text("hello\n")
    with pytest.raises(ValueError, match="not a callgrind output file"):
        read_functions(path, calls=1)


def _summary(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise AssertionError("no summary: line")


@needs_valgrind
def test_a_real_callgrind_file_adds_up_to_callgrind_s_total(tmp_path: Path):
    out = tmp_path / "callgrind.out"
    script = "def f(n):\n    s = 0\n    for i in range(n):\n        s += i\n    return s\nf(20000)\n"
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    profile = read_functions(out, calls=1)
    assert sum(profile.stacks.values()) == _summary(out)  # calls= lines' costs not counted twice
    own = profile.own()
    assert "_PyEval_EvalFrameDefault" in own  # its recursion levels (…'2) folded into it
    assert not any(name.endswith("'2") for name in own)
    top = sorted(own, key=lambda name: -own[name])[:10]
    assert "_PyEval_EvalFrameDefault" in top
    assert "f" not in own  # the Python function is invisible to valgrind: the note says so
    assert "_PyEval_EvalFrameDefault" in NOTE_PYTHON and "\n" not in NOTE_PYTHON
