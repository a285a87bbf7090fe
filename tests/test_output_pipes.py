"""Output when stdout and stderr are pipes (CI logs, tests): nothing wrapped or cut, NO_COLOR honoured.

Regression for rich's 80-column default off a terminal: it cut metric names in piped
``perfgate baseline show`` (``dbn_lo…``) and broke lines at a width that depended on the
length of a temporary path. Each command runs as a real subprocess with ``COLUMNS`` unset.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PERFGATE = Path(sys.executable).parent / "perfgate"
LONG = ("very_long_metric_name_" * 10)[:192] + "_time_ms"  # 200 characters
# a colour in an SGR sequence: 30-37, 90-97 (foreground), 40-47, 100-107 (background), 38;…/48;… (extended)
COLOUR = re.compile(r"\x1b\[(?:[\d;]*;)?(?:3[0-8]|4[0-8]|9[0-7]|10[0-7])(?:;[\d;]*)?m")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TERM")}
    return {**env, **extra}


def _perfgate(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PERFGATE), *args], cwd=cwd, env=_env(**env), capture_output=True, text=True, timeout=300, check=False
    )


def _run(tmp_path: Path, name: str, factor: float, run_id: str) -> Path:
    samples = [factor * (10.0 + 0.01 * (i % 7)) for i in range(30)]
    doc = {
        "schema_version": 1,
        "run_id": run_id,
        "suite": "mine",
        "model": "tokenizer",
        "created_at": "2026-11-29T18:00:00Z",
        "git": {"commit": run_id, "branch": "main"},
        "machine": {"fingerprint": "machine-a"},
        "metrics": {
            LONG: {"unit": "ms", "direction": "lower_is_better", "samples": samples},
            "dbn_load_time_ms": {"samples": [2.0 + 0.01 * (i % 5) for i in range(30)]},
        },
    }
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_the_long_name_is_whole_in_the_check_verdict_and_the_report(tmp_path):
    assert len(LONG) == 200
    base, cur = _run(tmp_path, "base.json", 1.0, "a1"), _run(tmp_path, "cur.json", 3.0, "b2")
    done = _perfgate(tmp_path, "check", "--baseline", str(base), "--current", str(cur), "--output", "report.md")
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if LONG in line]
    assert lines and all(len(line) >= 200 for line in lines)  # on one line, not broken at 80 columns
    assert "…" not in done.stderr
    assert LONG in (tmp_path / "report.md").read_text()


def test_the_long_name_is_whole_in_a_piped_baseline_show(tmp_path):
    deep = tmp_path / ("a_long_folder_name_" * 4) / ("another_one_" * 4)  # the path's length moves nothing
    deep.mkdir(parents=True)
    store = f"sqlite:///{deep}/perfgate.db"
    for i, name in enumerate(("r0.json", "r1.json")):
        done = _perfgate(tmp_path, "record", str(_run(tmp_path, name, 1.0, f"run{i}")), "--store", store)
        assert done.returncode == 0, done.stderr
    assert _perfgate(tmp_path, "baseline", "update", "--store", store).returncode == 0
    shown = _perfgate(tmp_path, "baseline", "show", "--store", store)
    assert shown.returncode == 0, shown.stderr
    assert LONG in shown.stdout and "dbn_load_time_ms" in shown.stdout
    assert "…" not in shown.stdout
    (row,) = [line for line in shown.stdout.splitlines() if LONG in line]
    assert "ms" in row.split(LONG, 1)[1]  # the rest of the row follows on the same line
    saved = _perfgate(tmp_path, "baseline", "save", str(tmp_path / "r1.json"), "--dir", str(deep))
    assert saved.returncode == 0, saved.stderr
    file_show = _perfgate(tmp_path, "baseline", "show", "--model", "tokenizer", "--dir", str(deep))
    assert file_show.returncode == 0, file_show.stderr
    assert LONG in file_show.stdout and str(deep) in file_show.stdout


def test_the_long_name_is_whole_in_the_bench_summary_line(tmp_path):
    (tmp_path / "longstages.py").write_text(
        "from perfgate.bench import stage\n\n"
        f"@stage('long', metric={LONG!r}, unit='ms', suite='mine')\n"
        "def long(ctx):\n"
        "    return lambda: sum(range(100))\n"
    )
    args = ["bench", "--suite", "mine", "--stages-module", "longstages", "--model", "m", "--output", "run.json"]
    done = _perfgate(tmp_path, *args, "--rounds", "2", "--repeat", "3", "--warmup", "1")
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("m → ")]
    assert f"{LONG} " in line and "run.json" in line


@pytest.mark.parametrize(("no_color", "coloured"), [(None, True), ("1", False)])
def test_no_color_is_honoured(tmp_path, no_color, coloured):
    """FORCE_COLOR stands in for a terminal; NO_COLOR then takes the colours away (https://no-color.org)."""
    base, cur = _run(tmp_path, "base.json", 1.0, "a1"), _run(tmp_path, "cur.json", 3.0, "b2")
    env = {"FORCE_COLOR": "1", **({"NO_COLOR": no_color} if no_color else {})}
    done = _perfgate(tmp_path, "check", "--baseline", str(base), "--current", str(cur), **env)
    assert done.returncode == 1
    assert "regression" in done.stderr
    assert bool(COLOUR.search(done.stderr)) is coloured


def test_json_on_standard_output_is_the_only_thing_there(tmp_path):
    """``--json -`` writes the JSON report on stdout, and the Markdown that would be printed
    there is left out, so ``perfgate check … --json - | jq`` reads one JSON document."""
    base, cur = _run(tmp_path, "base.json", 1.0, "a1"), _run(tmp_path, "cur.json", 3.0, "b2")
    done = _perfgate(tmp_path, "check", "--baseline", str(base), "--current", str(cur), "--json", "-")
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert LONG in doc["regressions"]
    assert "regression" in done.stderr.lower()  # the verdict lines stay on stderr
    assert not list(tmp_path.glob("-*"))  # no file named "-"


def test_the_markdown_may_go_to_standard_output_beside_a_json_file(tmp_path):
    base, cur = _run(tmp_path, "base.json", 1.0, "a1"), _run(tmp_path, "cur.json", 1.0, "b2")
    args = ["--baseline", str(base), "--current", str(cur), "--output", "-", "--json", "r.json", "--quiet"]
    done = _perfgate(tmp_path, "check", *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# Performance Regression Check")
    assert json.loads((tmp_path / "r.json").read_text())["regressions"] == []


def test_two_reports_on_standard_output_are_refused_before_any_work(tmp_path):
    base, cur = _run(tmp_path, "base.json", 1.0, "a1"), _run(tmp_path, "cur.json", 1.0, "b2")
    done = _perfgate(
        tmp_path, "check", "--baseline", str(base), "--current", str(cur), "--json", "-", "--comment", "-",
        "--output", "report.md",
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stdout == "" and "Traceback" not in done.stderr
    assert "--comment and --json both write to standard output" in done.stderr
    assert not (tmp_path / "report.md").exists()
