"""`perfgate check` as the original specification runs it: exit codes 0/1/2, messages naming file and field."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from perfgate.cli import main
from tests.conftest import SEED_BASELINE, SEED_CURRENT


def check(*args: str | Path) -> int:
    return main(["check", *map(str, args)])


def test_original_worked_example_exit_1_names_both_metrics(seed_files, tmp_path, capsys):
    base, cur = seed_files
    report = tmp_path / "report.md"
    code = check("--baseline", base, "--current", cur, "--output", report, "--threshold", "10.0")
    assert code == 1
    text = report.read_text()
    assert "degraded by >10%: dbn_load_time_ms, training_step_time_ms" in text
    assert "| dbn_load_time_ms | 0.70 | 0.81 | +15.7% |" in text
    assert "| training_step_time_ms | 100.00 | 120.00 | +20.0% |" in text
    assert "- DBN data loading time increased by 15.7% (0.70 → 0.81)" in text
    assert "- Training step time increased by 20.0% (100.00 → 120.00)" in text
    assert "**Baseline**: 2025-10-15 10:00:00 (commit: abc123)" in text
    assert "**Current**: 2025-10-15 10:05:00 (commit: def456)" in text
    assert "only the threshold applies" in text
    regression_table = text.split("### Regressions")[1].split("### Details")[0]
    assert regression_table.count("\n| ") == 3  # header + exactly the two regressed metrics


def test_unchanged_exit_0(seed_files, tmp_path):
    base, _ = seed_files
    assert check("--baseline", base, "--current", base, "--output", tmp_path / "r.md") == 0
    assert "No Regression Detected" in (tmp_path / "r.md").read_text()


def test_threshold_flag_changes_the_decision(seed_files, tmp_path):
    base, cur = seed_files
    assert check("--baseline", base, "--current", cur, "--threshold", "25", "--output", tmp_path / "r.md") == 0


def test_json_report(seed_files, tmp_path):
    base, cur = seed_files
    out = tmp_path / "r.json"
    assert check("--baseline", base, "--current", cur, "--json", out, "--quiet") == 1
    doc = json.loads(out.read_text())
    assert doc["verdict"] == "fail" and doc["exit_code"] == 1
    assert sorted(doc["regressions"]) == ["dbn_load_time_ms", "training_step_time_ms"]


def _bad(tmp_path: Path, name: str, content: str) -> Path:
    path = tmp_path / name
    path.write_text(content)
    return path


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        ("{not json", ["invalid JSON at line 1"]),
        ("[1, 2]", ["expected a JSON object"]),
        (json.dumps({**SEED_CURRENT, "dbn_load_time_ms": "fast"}), ["dbn_load_time_ms", "expected a number"]),
        (json.dumps({**SEED_CURRENT, "dbn_load_time_ms": -1.0}), ["dbn_load_time_ms", "negative"]),
        (
            '{"schema_version": 1, "model": "dqn", "metrics": {"training_step_time_ms": {"samples": [1.0, NaN]}}}',
            ["metrics.training_step_time_ms.samples[1]", "finite"],
        ),
        (
            '{"schema_version": 1, "model": "dqn", "metrics": {"training_step_time_ms": {"samples": [Infinity]}}}',
            ["samples[0]", "finite"],
        ),
        (
            json.dumps({"schema_version": 1, "model": "dqn", "metrics": {"training_step_time_ms": {"samples": []}}}),
            ["metrics.training_step_time_ms.samples", "no samples"],
        ),
        (
            json.dumps({"schema_version": 1, "model": "dqn", "metrics": {"tokens_ms": {"samples": [1.0]}}}),
            ["metrics.tokens_ms", "unknown metric"],
        ),
        (json.dumps({"schema_version": 99, "model": "dqn", "metrics": {}}), ["schema_version", "newer"]),
        (json.dumps({"schema_version": 1, "metrics": {"training_step_time_ms": {"samples": [1.0]}}}), ["'model'"]),
        (json.dumps({"schema_version": 1, "model": "dqn", "metrics": {}}), ["'metrics'"]),
        (json.dumps({"schema_version": "one", "model": "dqn", "metrics": {}}), ["schema_version"]),
        (
            json.dumps(
                {
                    "schema_version": 1,
                    "model": "dqn",
                    "metrics": {"training_step_time_ms": {"samples": [1.0], "direction": "up"}},
                }
            ),
            ["direction"],
        ),
    ],
)
def test_bad_current_file_exit_2_with_one_line_message(seed_files, tmp_path, capsys, content, fragments):
    base, _ = seed_files
    bad = _bad(tmp_path, "bad.json", content)
    report = tmp_path / "r.md"
    code = check("--baseline", base, "--current", bad, "--output", report)
    err = capsys.readouterr().err
    assert code == 2
    assert str(bad) in err
    for fragment in fragments:
        assert fragment in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not report.exists()  # nothing half-written


def test_missing_baseline_file(seed_files, tmp_path, capsys):
    _, cur = seed_files
    missing = tmp_path / "nope.json"
    assert check("--baseline", missing, "--current", cur) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "not found" in err


def test_model_mismatch(seed_files, tmp_path, capsys):
    base, _ = seed_files
    other = _bad(tmp_path, "ppo.json", json.dumps({**SEED_CURRENT, "model_type": "PPO"}))
    assert check("--baseline", base, "--current", other) == 2
    assert "model" in capsys.readouterr().err


def test_machine_mismatch_needs_the_flag(run_doc, write_json, tmp_path, capsys):
    base = write_json("b.json", run_doc(fingerprint="aaaa"))
    cur = write_json("c.json", run_doc(fingerprint="bbbb", seed=1))
    assert check("--baseline", base, "--current", cur) == 2
    err = capsys.readouterr().err
    assert "aaaa" in err and "bbbb" in err and "--allow-machine-mismatch" in err
    report = tmp_path / "r.md"
    assert check("--baseline", base, "--current", cur, "--allow-machine-mismatch", "--output", report) == 0
    assert "Cross-machine comparison" in report.read_text()


def test_flat_model_names_match_across_formats(run_doc, write_json, seed_files):
    """'MAMBA-2' in a flat file and 'mamba2' in a run file are the same model."""
    flat = write_json("flat.json", {**SEED_BASELINE, "model_type": "MAMBA-2"})
    measured = {k: v for k, v in SEED_BASELINE.items() if k.endswith(("_ms", "_us", "_sec", "_mb"))}
    doc = run_doc(measured, model="mamba2", n=1, cv=0.0, fingerprint=None)  # all six: none missing
    cur = write_json("cur.json", doc)
    assert check("--baseline", flat, "--current", cur, "--quiet") == 0


def test_bad_threshold_is_a_config_error(seed_files, capsys):
    base, cur = seed_files
    assert check("--baseline", base, "--current", cur, "--threshold", "-5") == 2
    assert "threshold" in capsys.readouterr().err


def test_no_baseline_source(seed_files, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PERFGATE_STORE", raising=False)
    _, cur = seed_files
    assert check("--current", cur) == 2
    assert "--baseline" in capsys.readouterr().err


def test_config_file_thresholds_and_budgets(seed_files, tmp_path):
    base, cur = seed_files
    config = tmp_path / "perfgate.toml"
    config.write_text(
        "threshold = 10.0\n[thresholds]\ndbn_load_time_ms = 20.0\ntraining_step_time_ms = 25.0\n"
        "[budgets.dqn]\ninference_latency_us = { p99 = 50.0 }\n"
    )
    report = tmp_path / "r.md"
    assert check("--baseline", base, "--current", cur, "--config", config, "--output", report) == 0
    config.write_text(
        "[budgets.dqn]\ninference_latency_us = { p99 = 40.0 }\n[thresholds]\n"
        "dbn_load_time_ms = 20.0\ntraining_step_time_ms = 25.0\n"
    )
    assert check("--baseline", base, "--current", cur, "--config", config, "--output", report) == 1
    assert "Budget Exceeded" in report.read_text()


def test_bad_config_exit_2(seed_files, tmp_path, capsys):
    base, cur = seed_files
    config = tmp_path / "perfgate.toml"
    config.write_text("[budgets.dqn]\ninference_latency_us = { p42 = 50.0 }\n")
    assert check("--baseline", base, "--current", cur, "--config", config) == 2
    err = capsys.readouterr().err
    assert str(config) in err and "budgets.dqn.inference_latency_us.p42" in err


def test_crash_is_exit_2_not_0_or_1(seed_files, monkeypatch, capsys):
    """Regression guard: an unexpected exception must never read as pass (0) or regression (1)."""
    import perfgate.app.check as check_module

    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(check_module, "compare_runs", boom)
    base, cur = seed_files
    assert check("--baseline", base, "--current", cur) == 2
    assert "internal error" in capsys.readouterr().err


def test_real_subprocess(seed_files, tmp_path):
    base, cur = seed_files
    report = tmp_path / "report.md"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfgate",
            "check",
            "--baseline",
            str(base),
            "--current",
            str(cur),
            "--output",
            str(report),
            "--threshold",
            "10.0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert "dbn_load_time_ms" in report.read_text()
    missing = subprocess.run(
        [sys.executable, "-m", "perfgate", "check", "--baseline", str(tmp_path / "x.json"), "--current", str(cur)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 2
    assert "Traceback" not in missing.stderr and "x.json" in missing.stderr


def test_budgets_hold_without_a_baseline(seed_files, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PERFGATE_STORE", raising=False)
    _, cur = seed_files
    config = tmp_path / "perfgate.toml"
    config.write_text("[budgets.dqn]\ninference_latency_us = { p99 = 40.0 }\n")
    report = tmp_path / "r.md"
    assert check("--current", cur, "--config", config, "--output", report) == 1
    text = report.read_text()
    assert "Budget Exceeded" in text and "only the budgets were checked" in text
    config.write_text("[budgets.dqn]\ninference_latency_us = { p99 = 50.0 }\n")
    assert check("--current", cur, "--config", config, "--output", report) == 0


def _indexed_doc(level: float, reference: float, *, index: bool = True) -> dict:
    """A version-2 run of 60 training steps at ``level`` ms, each timed after a reference kernel of ``reference`` s."""
    samples = [level * (1 + 0.01 * ((i % 5) - 2)) for i in range(60)]
    metric: dict = {"unit": "ms", "direction": "lower_is_better", "samples": samples}
    doc: dict = {"schema_version": 2, "model": "dqn", "metrics": {"training_step_time_ms": metric}}
    if index:
        metric["reference"] = {"kernel": "interpreter", "seconds": [reference], "counts": [60]}
        doc["machine_index"] = {"interpreter": reference}
    return doc


def test_a_slow_machine_is_not_a_slow_stage(tmp_path):
    """+25 % raw on a machine whose reference kernel also took 25 % longer: normalised, nothing changed."""
    base = tmp_path / "base.json"
    cur = tmp_path / "cur.json"
    base.write_text(json.dumps(_indexed_doc(10.0, 4e-4)))
    cur.write_text(json.dumps(_indexed_doc(12.5, 5e-4)))
    report = tmp_path / "r.md"
    assert check("--baseline", base, "--current", cur, "--output", report, "--quiet") == 0
    text = report.read_text()
    assert "+0.0% (raw +25.0%)" in text
    assert "interpreter 0.4 → 0.5 ms (+25.0%)" in text
    assert "in units of a reference kernel" in text


def test_index_on_one_side_only_compares_raw_times_and_says_so(tmp_path):
    """A version-1 baseline (no index) against an indexed run: raw times, and the report names the missing side."""
    base = tmp_path / "base.json"
    old = _indexed_doc(10.0, 4e-4, index=False)
    old["schema_version"] = 1
    base.write_text(json.dumps(old))
    cur = tmp_path / "cur.json"
    cur.write_text(json.dumps(_indexed_doc(30.0, 4e-4)))
    out = tmp_path / "r.json"
    report = tmp_path / "r.md"
    assert check("--baseline", base, "--current", cur, "--json", out, "--output", report, "--quiet") == 1
    (c,) = json.loads(out.read_text())["comparisons"]
    assert c["reference"] is None and c["change"] == pytest.approx(2.0) and c["noise_assumed"]
    assert "The baseline has no machine-speed index: raw times were compared." in report.read_text()


def _run_doc(torch: str, *, level: float = 10.0) -> dict:
    """A run as `perfgate bench` writes it now: hardware fingerprint, software apart."""
    from perfgate.core.machine import hardware_fingerprint

    machine = {"cpu": "AMD EPYC", "cores": 2, "memory_gib": 24, "arch": "x86_64", "gpu": None}
    samples = [level * (1 + 0.01 * ((i % 5) - 2)) for i in range(30)]
    return {
        "schema_version": 3,
        "model": "dqn",
        "machine": {**machine, "fingerprint": hardware_fingerprint(machine)},
        "software": {"python": "3.11.7", "torch": torch, "numpy": "2.1.0"},
        "metrics": {"training_step_time_ms": {"unit": "ms", "direction": "lower_is_better", "samples": samples}},
    }


@pytest.mark.parametrize(("level", "expected"), [(10.0, 0), (30.0, 1)])
def test_a_torch_upgrade_is_compared_and_reported_not_a_machine_mismatch(tmp_path, capsys, level, expected):
    """Regression for a torch upgrade reading as another machine (exit 2): same hardware, new torch."""
    base, cur = tmp_path / "base.json", tmp_path / "cur.json"
    base.write_text(json.dumps(_run_doc("2.13.0")))
    cur.write_text(json.dumps(_run_doc("2.14.0", level=level)))
    report, out = tmp_path / "r.md", tmp_path / "r.json"
    assert check("--baseline", base, "--current", cur, "--output", report, "--json", out) == expected
    assert "**Environment changed** (baseline → current): torch 2.13.0 → 2.14.0." in report.read_text()
    assert "Environment changed: torch 2.13.0 → 2.14.0" in capsys.readouterr().err
    doc = json.loads(out.read_text())
    assert doc["machine_mismatch"] is False
    assert doc["environment_changes"] == [{"name": "torch", "baseline": "2.13.0", "current": "2.14.0"}]


def test_version_2_files_that_differ_only_in_torch_match_after_the_upgrade(tmp_path, capsys):
    """Files written before software left the fingerprint: their fingerprints differ (torch was
    hashed); read now, both are recomputed from the hardware and the check runs."""
    from perfgate.core.machine import v2_fingerprint

    docs = []
    for torch in ("2.13.0", "2.14.0"):
        doc = _run_doc(torch)
        doc["schema_version"] = 2
        machine = {**doc["machine"], "os": "Debian GNU/Linux 12 (bookworm)", "python": "3.11.7", "torch": torch}
        machine["gpu_driver"] = None
        machine["fingerprint"] = v2_fingerprint(machine)
        doc["machine"] = machine
        del doc["software"]
        docs.append(doc)
    assert docs[0]["machine"]["fingerprint"] != docs[1]["machine"]["fingerprint"]
    base, cur = tmp_path / "base.json", tmp_path / "cur.json"
    base.write_text(json.dumps(docs[0]))
    cur.write_text(json.dumps(docs[1]))
    assert check("--baseline", base, "--current", cur, "--output", tmp_path / "r.md") == 0
    assert "Environment changed: torch 2.13.0 → 2.14.0" in capsys.readouterr().err


def test_different_hardware_is_still_a_machine_mismatch(tmp_path, capsys):
    from perfgate.core.machine import hardware_fingerprint

    other = _run_doc("2.13.0")
    other["machine"] = {**other["machine"], "cores": 64}
    other["machine"]["fingerprint"] = hardware_fingerprint(other["machine"])
    base, cur = tmp_path / "base.json", tmp_path / "cur.json"
    base.write_text(json.dumps(_run_doc("2.13.0")))
    cur.write_text(json.dumps(other))
    assert check("--baseline", base, "--current", cur, "--output", tmp_path / "r.md") == 2
    assert "machine" in capsys.readouterr().err


def test_the_html_report_names_the_environment_change(tmp_path):
    base, cur = tmp_path / "base.json", tmp_path / "cur.json"
    base.write_text(json.dumps(_run_doc("2.13.0")))
    cur.write_text(json.dumps(_run_doc("2.14.0")))
    html = tmp_path / "r.html"
    assert check("--baseline", base, "--current", cur, "--html", html, "--output", tmp_path / "r.md", "--quiet") == 0
    assert "Environment changed</strong> (baseline → current): torch 2.13.0 → 2.14.0" in html.read_text()
