"""Numeric edge values for every numeric flag of every command: NaN, infinities, negatives and
integers of thousands of digits are refused with exit 2 and one line naming the flag, before
any work is done.

The flags are found by walking each command's parser, so a new numeric flag is fuzzed as
soon as it exists; a flag without a check fails here.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from perfgate.cli import _command_parser, commands, main

HUGE = "9" * 5000  # past Python's 4,300-digit limit on converting text to int


def _numeric_flags() -> list[tuple[str, str, type]]:
    found: list[tuple[str, str, type]] = []

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{prefix} {name}")
            elif action.type in (int, float) and action.option_strings:
                if "deprecated" in (action.help or "").lower() or action.help == argparse.SUPPRESS:
                    continue
                found.append((prefix, action.option_strings[-1], action.type))

    for name in commands():
        parser, _module = _command_parser(name)
        walk(parser, name)
    return found


# what each command needs besides the flag to reach its checks ({run}, {store}: filled in)
BASE = {
    "bench": ["--model", "dqn", "--output", "{out}/run.json"],
    "check": ["--current", "{run}", "--baseline", "{run}"],
    "baseline update": ["--model", "dqn", "--store", "{store}"],
    "baseline export": ["--model", "dqn", "--store", "{store}", "--output", "{out}/b.json"],
    "history": ["--model", "dqn", "--store", "{store}"],
    "data inspect": ["{run}"],
    "data synth": ["--records", "10", "--output", "{out}/d.dbn"],
    "calibrate": ["--model", "dqn", "--store", "{store}", "--output", "{out}/noise.json"],
    "summary": ["{report}"],
    "export prometheus": ["--store", "{store}", "--textfile", "{out}/m.prom"],
    "report": ["--store", "{store}", "--html", "{out}/r.html"],
    "ab": ["--model", "dqn", "--baseline-ref", "HEAD", "--current-ref", "HEAD"],
    "explain": ["--model", "dqn", "--baseline-ref", "HEAD", "--current-ref", "HEAD"],
    "store compact": ["--store", "{store}"],
}
FLAGS = _numeric_flags()


def test_every_numeric_flag_has_a_base_command():
    assert FLAGS
    assert {command for command, _flag, _type in FLAGS} <= set(BASE)


@pytest.fixture
def files(tmp_path: Path, run_doc) -> dict[str, str]:
    run = tmp_path / "run.json"
    run.write_text(json.dumps(run_doc()))
    store = tmp_path / "s.db"
    assert main(["record", str(run), "--store", f"sqlite:///{store}"]) == 0
    report = tmp_path / "dqn.md"
    report.write_text("# Performance Regression Check\n")
    out = tmp_path / "out"
    out.mkdir()
    return {"{run}": str(run), "{store}": f"sqlite:///{store}", "{report}": str(report), "{out}": str(out)}


@pytest.mark.parametrize(("command", "flag", "kind"), FLAGS, ids=[f"{c}{f}" for c, f, _ in FLAGS])
def test_edge_values_are_one_line_errors_naming_the_flag(command, flag, kind, files, tmp_path, capsys):
    """Regression for ``bench --threads 0``, ``ab --time-budget inf`` and ``bench --time-budget nan``:
    tracebacks, or a benchmark that ran with a meaningless value."""
    base = [files.get(a, a.replace("{out}", files["{out}"])) for a in BASE[command]]
    values = ["-1", HUGE] + (["nan", "inf", "-inf", "1e999"] if kind is float else [])
    for value in values:
        code = main([*command.split(), *base, flag, value])
        err = capsys.readouterr().err
        assert code == 2, (flag, value, err)
        assert "Traceback" not in err and "internal error" not in err, err
        lines = [line for line in err.splitlines() if "error" in line]
        assert len(lines) == 1, err
        assert flag in lines[0], (flag, value, err)
    assert sorted(p.name for p in Path(files["{out}"]).iterdir()) == []
