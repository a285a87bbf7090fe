"""Software names and versions come from run files like metric names do: the "Environment changed"
line shows hostile ones as text in Markdown and in the terminal."""

from __future__ import annotations

import json
from pathlib import Path

from perfgate.cli import main
from perfgate.report.markdown import render_markdown
from tests.safety.hostile import HOSTILE
from tests.safety.hostile import rendered as _render


def _doc(software: dict[str, str]) -> dict:
    return {
        "schema_version": 3,
        "model": "dqn",
        "machine": {"fingerprint": "same-hardware"},
        "software": software,
        "metrics": {"training_step_time_ms": {"unit": "ms", "direction": "lower_is_better", "samples": [1.0, 1.01]}},
    }


def _result(base: dict[str, str], cur: dict[str, str]):  # type: ignore[no-untyped-def]
    from perfgate.core.codec import run_from_dict
    from perfgate.core.compare import compare_runs
    from perfgate.core.policy import Policy

    return compare_runs(run_from_dict(_doc(base)), run_from_dict(_doc(cur)), Policy())


def test_hostile_software_names_and_versions_add_no_markdown_element():
    hostile = {name: f"1.0{name}" for name in HOSTILE}
    changed = render_markdown(_result({name: "0.9" for name in HOSTILE}, hostile))
    benign = render_markdown(
        _result({f"lib{i}": "0.9" for i in range(len(HOSTILE))}, {f"lib{i}": "1.0" for i in range(len(HOSTILE))})
    )
    assert "**Environment changed**" in changed
    hostile_elements, benign_elements = _render(changed), _render(benign)
    assert hostile_elements.tags == benign_elements.tags
    assert hostile_elements.comments == [] and hostile_elements.hrefs == []


def test_hostile_software_versions_are_inert_in_the_terminal(tmp_path: Path, capsys):
    base, cur = tmp_path / "base.json", tmp_path / "cur.json"
    base.write_text(json.dumps(_doc({"torch": "2.13.0"})))
    cur.write_text(json.dumps(_doc({"torch": "[bold red]2.14[/]\x1b[31m\n"})))
    assert main(["check", "--baseline", str(base), "--current", str(cur), "--output", str(tmp_path / "r.md")]) == 0
    err = capsys.readouterr().err
    (line,) = [ln for ln in err.splitlines() if ln.startswith("Environment changed")]
    assert "[bold red]2.14[/]" in line and "\x1b" not in err
