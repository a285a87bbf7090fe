"""The Prometheus exposition: golden bytes, promtool's lint, units, labels, and the three ways out."""

from __future__ import annotations

import math
import re
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from perfgate.cli import main
from perfgate.core.codec import run_from_dict
from perfgate.core.compare import compare_runs
from perfgate.core.policy import Policy
from perfgate.errors import InputError
from perfgate.export.latest import RunState, fresh_states, latest_states
from perfgate.export.outlets import parse_listen_address, push_states
from perfgate.export.prometheus import (
    VERDICTS,
    PerfgateCollector,
    exposition,
    make_registry,
    metric_families,
    run_verdict,
    unit_family,
)
from tests.export.conftest import PromStack, http_get, need
from tests.export.sample_store import LAPTOP, MACHINE, sample_policy, sample_runs, sample_store

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "export_sample.prom"
ROOT = Path(__file__).resolve().parent.parent.parent


def sample_exposition() -> str:
    states = latest_states(sample_store(), sample_policy())
    return exposition(make_registry(PerfgateCollector(lambda: states)))


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every sample line of a text exposition."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)", line)
        assert match, line
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(2) or ""))
        out.append((match.group(1), labels, float(match.group(3))))
    return out


def value(text: str, name: str, **labels: str) -> float:
    found = [v for n, lab, v in samples(text) if n == name and all(lab.get(k) == x for k, x in labels.items())]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def test_exposition_matches_the_golden_file():
    # regenerate with: python -c "from tests.export.test_prometheus import *; GOLDEN.write_text(sample_exposition())"
    assert sample_exposition() == GOLDEN.read_text()


def test_promtool_finds_nothing_to_report():
    promtool = need("promtool", "prometheus")
    proc = subprocess.run(
        [promtool, "check", "metrics"], input=sample_exposition(), capture_output=True, text=True, timeout=60
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_values_are_in_base_units():
    text = sample_exposition()
    dqn = {"model": "dqn", "machine": MACHINE}
    # samples are median * (1 + 0.03 sin(1.3 i + run)); the sample store's medians are 0.7 ms, 125 ms, 45 us, 120 MB
    assert value(text, "perfgate_duration_seconds", metric="dbn_load_time_ms", statistic="median", **dqn) == (
        pytest.approx(0.7e-3, rel=0.01)
    )
    assert value(text, "perfgate_duration_seconds", metric="training_step_time_ms", statistic="median", **dqn) == (
        pytest.approx(0.125, rel=0.01)
    )
    for stat in ("median", "p95", "p99"):
        latency = value(text, "perfgate_duration_seconds", metric="inference_latency_us", statistic=stat, **dqn)
        assert 43e-6 < latency < 47e-6
    assert value(text, "perfgate_memory_bytes", metric="memory_usage_mb", statistic="median", **dqn) == (
        pytest.approx(120 * 2**20, rel=0.1)
    )
    assert value(text, "perfgate_throughput_per_second", metric="throughput_samples_per_sec", **dqn) == (
        pytest.approx(1000, rel=0.01)
    )
    assert value(text, "perfgate_budget_duration_seconds", metric="inference_latency_us", statistic="p99", **dqn) == (
        pytest.approx(50e-6)
    )
    assert value(text, "perfgate_budget_memory_bytes", metric="memory_usage_mb", statistic="max", **dqn) == 150 * 2**20


def test_the_check_of_the_newest_run_is_exported():
    text = sample_exposition()
    dqn = {"model": "dqn", "machine": MACHINE}
    assert value(text, "perfgate_check_regressions", **dqn) == 1
    assert value(text, "perfgate_check_verdict", verdict="regressed", **dqn) == 1
    for other in set(VERDICTS) - {"regressed"}:
        assert value(text, "perfgate_check_verdict", verdict=other, **dqn) == 0
    # every compared statistic carries its threshold, on the degradation's scale
    assert value(text, "perfgate_check_threshold_ratio", metric="training_step_time_ms", **dqn) == 0.10
    assert value(text, "perfgate_change_ratio", metric="training_step_time_ms", statistic="median", **dqn) == (
        pytest.approx(0.25, abs=0.02)
    )
    # throughput is higher-is-better: the degradation is the sign-adjusted change
    change = value(text, "perfgate_change_ratio", metric="throughput_samples_per_sec", **dqn)
    worse = value(text, "perfgate_degradation_ratio", metric="throughput_samples_per_sec", **dqn)
    assert worse == pytest.approx(-change)  # a throughput drop of x counts as x worse
    tft = {"model": "tft", "machine": MACHINE}
    assert value(text, "perfgate_check_budgets_broken", **tft) == 1
    assert value(text, "perfgate_check_verdict", verdict="over_budget", **tft) == 1
    # no run on laptop-b to compare with: the budgets still hold, and nothing is "changed"
    laptop = {"model": "dqn", "machine": LAPTOP}
    assert value(text, "perfgate_check_verdict", verdict="passed", **laptop) == 1
    assert not [s for s in samples(text) if s[0] == "perfgate_change_ratio" and s[1]["machine"] == LAPTOP]


def test_run_id_and_commit_only_in_the_info_metric():
    text = sample_exposition()
    info = value(text, "perfgate_run_info", model="dqn", machine=MACHINE, run_id=f"dqn-{MACHINE}-09", commit="c0ffee09")
    assert info == 1
    bounded = {"model", "machine", "suite", "metric", "statistic", "verdict", "unit", "kernel"}
    for name, labels, _ in samples(text):
        assert not name.endswith("_total"), name  # nothing here is a counter
        if name != "perfgate_run_info":
            assert set(labels) <= bounded, (name, labels)
    stamp = datetime(2026, 11, 29, 17, 0, tzinfo=UTC).timestamp()  # the newest run's created_at
    assert value(text, "perfgate_run_timestamp_seconds", model="dqn", machine=MACHINE) == stamp


def _step_run(run_id: str, median: float, n: int, metric: str = "training_step_time_ms"):
    samples_ = [median * (1 + 0.03 * math.sin(1.3 * i)) for i in range(n)]
    doc = {"schema_version": 2, "run_id": run_id, "model": "dqn", "metrics": {metric: {"samples": samples_}}}
    return run_from_dict(doc)


def _verdicts(state: RunState) -> dict[str, float]:
    text = exposition(make_registry(PerfgateCollector(lambda: [state])))
    return {lab["verdict"]: v for n, lab, v in samples(text) if n == "perfgate_check_verdict"}


@pytest.mark.parametrize(
    ("current", "n", "verdict"),
    [
        (100.0, 1, "passed"),  # one sample per side: the threshold alone decides
        (30.0, 40, "improved"),  # 70 % faster, beyond any assumed noise
        (100.0, 40, "inconclusive"),  # one run per side: the assumed run-to-run noise reaches past 10 %
        (112.0, 3, "inconclusive"),  # over the threshold, too few samples to confirm it
        (300.0, 40, "regressed"),
    ],
)
def test_the_verdict_of_a_check(current, n, verdict):
    result = compare_runs(_step_run("b", 100.0, n), _step_run("c", current, n), Policy())
    state = RunState(run=result.current, result=result)
    assert run_verdict(state) == verdict
    assert _verdicts(state) == {v: float(v == verdict) for v in VERDICTS}


def test_a_check_that_could_not_be_made_is_could_not_decide():
    run = _step_run("c", 100.0, 10)
    state = RunState(run=run, result=None, note="training_step_time_ms: unit ms in the baseline, s now")
    assert _verdicts(state) == {v: float(v == "could_not_decide") for v in VERDICTS}
    assert run_verdict(RunState(run=run, result=None)) is None  # never compared: no verdict at all


def test_a_gated_metric_that_went_missing_has_its_own_verdict():
    base = _step_run("b", 100.0, 10)
    cur = _step_run("c", 100.0, 10, metric="dbn_load_time_ms")
    result = compare_runs(base, cur, Policy())
    assert result.missing == ("training_step_time_ms",)
    assert _verdicts(RunState(run=cur, result=result)) == {v: float(v == "metric_missing") for v in VERDICTS}
    refused = compare_runs(base, cur, Policy(missing_metric="refuse"))
    assert run_verdict(RunState(run=cur, result=refused)) == "could_not_decide"


def test_per_metric_thresholds_are_exported():
    policy = Policy(thresholds_pct={"training_step_time_ms": 30.0})
    result = compare_runs(_step_run("b", 100.0, 40), _step_run("c", 125.0, 40), policy)
    text = exposition(make_registry(PerfgateCollector(lambda: [RunState(run=result.current, result=result)])))
    assert value(text, "perfgate_check_threshold_ratio", metric="training_step_time_ms") == pytest.approx(0.30)
    assert value(text, "perfgate_degradation_ratio", metric="training_step_time_ms") == pytest.approx(0.25, abs=0.02)
    assert run_verdict(RunState(run=result.current, result=result)) != "regressed"  # 25 % is within its 30 %


@pytest.mark.parametrize(
    ("unit", "family", "raw", "base"),
    [
        ("ms", "duration_seconds", 1500.0, 1.5),
        ("us", "duration_seconds", 50.0, 50e-6),
        ("ns", "duration_seconds", 2.0, 2e-9),
        ("s", "duration_seconds", 3.0, 3.0),
        ("MB", "memory_bytes", 2.0, 2 * 2**20),
        ("B", "memory_bytes", 10.0, 10.0),
        ("%", "utilization_ratio", 85.0, 0.85),
        ("samples/s", "throughput_per_second", 10.0, 10.0),
        ("ops/sec", "throughput_per_second", 10.0, 10.0),
        ("tokens", "value", 7.0, 7.0),
        ("instructions", "instructions", 4.2e6, 4.2e6),
        ("cycles", "estimated_cycles", 8.1e6, 8.1e6),
    ],
)
def test_unit_families(unit, family, raw, base):
    fam = unit_family(unit)
    assert fam.suffix == family
    assert fam.convert(raw) == pytest.approx(base)


def test_a_counts_run_exports_its_counts_as_counts():
    metric = {"direction": "lower_is_better", "samples": [4.0e6, 4.0e6, 4.2e6, 4.2e6], "groups": [2, 2]}
    run = run_from_dict(
        {
            "schema_version": 4,
            "measure": "counts",
            "run_id": "c1",
            "model": "dqn",
            "metrics": {
                "dbn_load_instructions": {**metric, "unit": "instructions"},
                "dbn_load_est_cycles": {**metric, "unit": "cycles"},
            },
        }
    )
    text = exposition(make_registry(PerfgateCollector(lambda: fresh_states([run], Policy()))))
    assert value(text, "perfgate_instructions", metric="dbn_load_instructions", machine="unknown") == 4.1e6
    assert value(text, "perfgate_estimated_cycles", metric="dbn_load_est_cycles", machine="unknown") == 4.1e6
    assert "counts, not times" in text and "perfgate_duration_seconds{" not in text


def test_a_metric_of_another_unit_keeps_its_unit_label():
    run = run_from_dict(
        {
            "schema_version": 1,
            "run_id": "r1",
            "model": "dqn",
            "metrics": {"tokens_generated": {"unit": "tokens", "direction": "higher_is_better", "samples": [5, 7]}},
        }
    )
    text = exposition(make_registry(PerfgateCollector(lambda: fresh_states([run], Policy()))))
    assert value(text, "perfgate_value", metric="tokens_generated", unit="tokens", machine="unknown") == 6.0
    assert "perfgate_check_" not in text  # a fresh run was not checked: no verdict is invented


def test_families_are_sorted_and_stable():
    states = latest_states(sample_store(), sample_policy())
    names = [f.name for f in metric_families(states)]
    assert names == sorted(names)
    assert [f.name for f in metric_families(list(reversed(states)))] == names


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:9188", ("127.0.0.1", 9188)),
        (":0", ("127.0.0.1", 0)),
        ("9188", ("127.0.0.1", 9188)),
        ("[::1]:80", ("::1", 80)),
        ("0.0.0.0:9188", ("0.0.0.0", 9188)),
    ],
)
def test_listen_address(text, expected):
    assert parse_listen_address(text) == expected


@pytest.mark.parametrize("text", ["host:", "127.0.0.1:99999", "abc", "1.2.3.4:-1"])
def test_bad_listen_address(text):
    with pytest.raises(InputError, match="HOST:PORT"):
        parse_listen_address(text)


# ---- the command -----------------------------------------------------------------------------


def test_textfile_from_the_command_is_the_golden_exposition(sample_sqlite, sample_config, tmp_path):
    out = tmp_path / "textfile" / "perfgate.prom"
    out.parent.mkdir()
    args = ["export", "prometheus", "--store", sample_sqlite, "--config", str(sample_config), "--textfile", str(out)]
    assert main(args) == 0
    assert out.read_text() == GOLDEN.read_text()
    assert out.stat().st_mode & 0o044 == 0o044  # node_exporter (another user) can read it
    assert [p.name for p in out.parent.iterdir()] == ["perfgate.prom"]  # no temporary file left behind


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--textfile", "metrics.txt"], "reads only *.prom files"),
        (["--textfile", "/dev/null/x.prom"], "cannot write"),  # a folder that is a device: nothing is created
        (["--push", "http://127.0.0.1:1"], "cannot push to the Pushgateway"),
        (["--serve", "127.0.0.1:notaport"], "expected HOST:PORT"),
        (["--textfile", "x.prom", "--baseline-runs", "0"], "must be at least 1"),
    ],
)
def test_command_errors_are_one_line_and_exit_2(sample_sqlite, extra, message, capsys):
    assert main(["export", "prometheus", "--store", sample_sqlite, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_unknown_store_scheme_exits_2(capsys):
    assert main(["export", "prometheus", "--store", "mongodb://x", "--textfile", "x.prom"]) == 2
    assert "unsupported store scheme" in capsys.readouterr().err


def test_serve_answers_scrapes_and_stops_on_sigterm(sample_sqlite, sample_config, tmp_path):
    cmd = [sys.executable, "-m", "perfgate", "export", "prometheus", "--store", sample_sqlite]
    cmd += ["--config", str(sample_config), "--serve", "127.0.0.1:0"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        line = proc.stderr.readline() if proc.stderr else ""
        match = re.search(r"serving (http://127\.0\.0\.1:\d+/metrics)", line)
        assert match, line + (proc.stderr.read() if proc.stderr else "")
        assert http_get(match.group(1)) == GOLDEN.read_text()
        assert http_get(match.group(1)) == GOLDEN.read_text()  # every scrape reads the store again
    finally:
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=30)
    assert proc.returncode == 0, rest


# ---- the Pushgateway -------------------------------------------------------------------------


def pushed(stack: PromStack, job: str) -> str:
    """The Pushgateway's exposition, only the samples of ``job``."""
    text = http_get(f"{stack.pushgateway}/metrics")
    return "\n".join(line for line in text.splitlines() if f'job="{job}"' in line) + "\n"


def test_export_push_groups_by_model_machine_and_suite(prom_stack, sample_sqlite, sample_config):
    args = ["export", "prometheus", "--store", sample_sqlite, "--config", str(sample_config)]
    assert main([*args, "--push", prom_stack.pushgateway, "--job", "t-export"]) == 0
    text = pushed(prom_stack, "t-export")
    assert value(text, "perfgate_check_regressions", model="dqn", machine=MACHINE, job="t-export") == 1
    assert value(text, "perfgate_check_budgets_broken", model="tft", machine=MACHINE, job="t-export") == 1
    groups = {(lab["model"], lab["machine"]) for n, lab, _ in samples(text) if n == "push_time_seconds"}
    assert groups == {("dqn", MACHINE), ("dqn", LAPTOP), ("ppo", MACHINE), ("mamba2", MACHINE), ("tft", MACHINE)}


def test_a_fresh_push_replaces_its_group(prom_stack):
    states = latest_states(sample_store(), sample_policy())
    assert push_states(prom_stack.pushgateway, states, job="t-replace") == 5
    newest = [r for r in sample_runs() if r.run_id == f"dqn-{MACHINE}-09"]
    assert push_states(prom_stack.pushgateway, fresh_states(newest, sample_policy()), job="t-replace") == 1
    text = pushed(prom_stack, "t-replace")
    # the bench push of dqn replaced its group: no check of an older run is left next to the new values
    checks = [s for s in samples(text) if s[0] == "perfgate_check_regressions" and s[1]["model"] == "dqn"]
    assert [s[1]["machine"] for s in checks] == [LAPTOP]  # the other machine's group is untouched
    assert value(text, "perfgate_check_regressions", model="ppo", machine=MACHINE, job="t-replace") == 0
    assert value(text, "perfgate_duration_seconds", model="dqn", machine=MACHINE, metric="dbn_load_time_ms") > 0


def test_check_push_metrics(prom_stack, seed_files, tmp_path, capsys):
    base, cur = seed_files
    args = ["check", "--baseline", str(base), "--current", str(cur), "--quiet", "--output", str(tmp_path / "r.md")]
    rc = main([*args, "--push-metrics", prom_stack.pushgateway])
    assert rc == 1  # the original specification's example regresses
    assert "pushed 1 group(s)" in capsys.readouterr().err
    text = http_get(f"{prom_stack.pushgateway}/metrics")
    assert value(text, "perfgate_check_regressions", model="dqn", machine="unknown", job="perfgate") == 2


def test_check_push_failure_warns_and_keeps_the_exit_code(seed_files, tmp_path, capsys):
    base, cur = seed_files
    args = ["check", "--baseline", str(base), "--current", str(cur), "--quiet", "--output", str(tmp_path / "r.md")]
    rc = main([*args, "--push-metrics", "http://127.0.0.1:1"])
    assert rc == 1
    err = capsys.readouterr().err
    assert "warning: metrics not pushed" in err and "Connection refused" in err


def test_prometheus_scrapes_what_was_pushed(prom_stack):
    states = latest_states(sample_store(), sample_policy())
    push_states(prom_stack.pushgateway, states, job="t-scrape")
    result = prom_stack.wait_for('perfgate_check_regressions{job="t-scrape", model="dqn", machine="ci-runner-a"}')
    assert [r["value"][1] for r in result] == ["1"]


def test_import_perfgate_stays_light():
    code = (
        "import sys, perfgate, perfgate.cli, perfgate.export, perfgate.report; "
        "print(sorted(m for m in ('prometheus_client', 'plotly', 'grafana_foundation_sdk') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_time_is_not_in_the_exposition():
    # no sample carries a timestamp: a sample line is "name{labels} value", nothing after it
    before = sample_exposition()
    time.sleep(0.01)
    assert sample_exposition() == before
    assert all(len(line.split("} ")[-1].split()) == 1 for line in before.splitlines() if not line.startswith("#"))


def test_a_missing_extra_is_one_line_exit_2():
    from perfgate.app.export import require_extra
    from perfgate.errors import ConfigError

    with pytest.raises(ConfigError, match=r"pip install 'perfgate\[export\]'"):
        require_extra("perfgate_no_such_module", "perfgate export prometheus")


def test_export_help_runs_in_a_subprocess():
    out = subprocess.run(
        [sys.executable, "-m", "perfgate", "export", "prometheus", "--help"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and "--textfile" in out.stdout and "--serve" in out.stdout
