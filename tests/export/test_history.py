"""The history export: every run at its own time, in OpenMetrics, backfilled into a real
Prometheus with promtool, and what the dashboard's history panels get back from it."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from perfgate.cli import main
from perfgate.core.codec import run_from_dict
from perfgate.export.grafana import panel_queries
from perfgate.export.history import history_families, history_openmetrics, read_history
from tests.export.conftest import HISTORY_DBN_MS, HISTORY_MACHINE, MACHINE, Backfilled, need
from tests.export.sample_store import HOSTILE_METRIC, RUNS, STEP_AT, hostile_runs, sample_store
from tests.export.test_prometheus import samples
from tests.safety.hostile import HOSTILE, hostile_result

COMMITTED = Path(__file__).resolve().parent.parent.parent / "dashboards" / "perfgate.json"


def _run(run_id: str, created_at: str | None, median: float = 1.0, machine: str = "m1"):
    doc = {
        "schema_version": 2,
        "run_id": run_id,
        "model": "dqn",
        "created_at": created_at,
        "machine": {"fingerprint": machine},
        "metrics": {"dbn_load_time_ms": {"samples": [median] * 3}},
    }
    if created_at is None:
        del doc["created_at"]
    return run_from_dict(doc)


def _points(text: str) -> list[tuple[str, dict[str, str], float, float]]:
    """(name, labels, value, timestamp) of every sample line of an OpenMetrics text."""
    out = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        head, value, stamp = line.rsplit(" ", 2)
        name, _, _ = head.partition("{")
        (parsed,) = [(n, labels, v) for n, labels, v in samples(f"{head} {value}")]
        out.append((name, parsed[1], float(value), float(stamp)))
    return out


# ---- the exposition ---------------------------------------------------------------------------


def test_every_run_is_one_point_at_its_own_time():
    runs, flagged = read_history(sample_store(), model="dqn", machine=MACHINE)
    assert len(runs) == RUNS and runs == sorted(runs, key=lambda r: r.created_at)
    assert flagged == {f"dqn-{MACHINE}-{r:02d}" for r in range(STEP_AT, RUNS - 1)}
    text = history_openmetrics(runs, flagged)
    assert text.endswith("# EOF\n")
    points = _points(text)
    load = [p for p in points if p[0] == "perfgate_history_duration_seconds" and p[1]["metric"] == "dbn_load_time_ms"]
    assert len(load) == RUNS
    stamps = [p[3] for p in load]
    assert stamps == sorted(stamps) and len(set(stamps)) == RUNS
    assert stamps[1] - stamps[0] == 3600  # the sample runs are an hour apart
    assert all(p[2] == pytest.approx(0.7e-3, rel=0.05) for p in load)
    marks = [p[2] for p in points if p[0] == "perfgate_history_flagged"]
    assert marks == [1.0 if STEP_AT <= r < RUNS - 1 else 0.0 for r in range(RUNS)]
    kernels = {p[1]["kernel"] for p in points if p[0] == "perfgate_history_machine_reference_seconds"}
    assert kernels == {"compute", "interpreter", "memory"}


def test_series_are_contiguous_runs_without_a_time_left_out_and_one_value_per_second():
    runs = [
        _run("a", "2026-11-29T10:00:00Z", 1.0, "m2"),
        _run("b", "2026-11-29T09:00:00Z", 2.0, "m1"),
        _run("c", None, 3.0, "m1"),
        _run("d", "2026-11-29T11:00:00Z", 4.0, "m1"),
        _run("e", "2026-11-29T11:00:00Z", 5.0, "m1"),  # same key, same second: the backfill takes one value
    ]
    families = history_families(runs)
    (durations,) = [f for f in families if f.name == "perfgate_history_duration_seconds"]
    order = [(s.labels["machine"], s.timestamp, s.value) for s in durations.samples]
    assert order == [("m1", 1795942800.0, 0.002), ("m1", 1795950000.0, 0.004), ("m2", 1795946400.0, 0.001)]


def test_promtool_makes_blocks_of_it(tmp_path):
    promtool = need("promtool", "prometheus")
    runs, flagged = read_history(sample_store())
    source = tmp_path / "history.om"
    source.write_text(history_openmetrics(runs, flagged))
    proc = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(tmp_path / "blocks")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert [p for p in (tmp_path / "blocks").iterdir() if (p / "meta.json").is_file()]


def test_hostile_names_survive_the_openmetrics_text_exactly():
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    result = hostile_result(list(HOSTILE), commit="abc\n# x", fingerprint="fp<b>[/]\x1b[0m", source="f")
    runs = [replace(result.current, created_at="2026-11-29T10:00:00Z"), *hostile_runs()]
    text = history_openmetrics(runs)
    found = {
        (s.labels["model"], s.labels["machine"], s.labels["metric"])
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if "metric" in s.labels
    }
    assert (hostile_runs()[0].model_key, MACHINE, HOSTILE_METRIC) in found
    assert {(m, f) for m, f, _ in found} >= {("dqn", result.current.machine.fingerprint)}
    assert {name for _, f, name in found if f != MACHINE} >= set(HOSTILE)  # every name exactly, escaped
    # no name breaks out of its label value into a line of its own (a line ends at \n, as parsers read it)
    assert all(line.startswith(("# ", "perfgate_history_")) for line in text.rstrip("\n").split("\n"))


def test_the_command_writes_it_and_fails_in_one_line(sample_sqlite, tmp_path, capsys):
    out = tmp_path / "history.om"
    assert main(["export", "prometheus", "--store", sample_sqlite, "--openmetrics", str(out), "--model", "ppo"]) == 0
    assert "wrote 10 run(s)" in capsys.readouterr().err
    assert {p[1]["model"] for p in _points(out.read_text())} == {"ppo"}
    bad = ["export", "prometheus", "--store", sample_sqlite, "--openmetrics", "/dev/null/x.om"]
    assert main(bad) == 2
    err = capsys.readouterr().err.strip()
    assert "x.om" in err and "\n" not in err and "Traceback" not in err


# ---- a real Prometheus, backfilled --------------------------------------------------------------


def _dashboard_query(title: str) -> str:
    (expr,) = [e for t, e, _ in panel_queries(json.loads(COMMITTED.read_text())) if t == title and "budget" not in e]
    return expr


def test_three_recorded_runs_are_three_points(backfilled: Backfilled):
    stack, times = backfilled.stack, backfilled.times
    selector = f'machine="{HISTORY_MACHINE}", metric="dbn_load_time_ms", statistic="median"'
    window = int(time.time() - times[0]) + 3600
    (series,) = stack.query(f"perfgate_history_duration_seconds{{{selector}}}[{window}s]")
    assert [float(t) for t, _ in series["values"]] == list(times)
    assert [float(v) for _, v in series["values"]] == [pytest.approx(ms / 1000) for ms in HISTORY_DBN_MS]
    (flags,) = stack.query(f'perfgate_history_flagged{{machine="{HISTORY_MACHINE}"}}[{window}s]')
    assert [float(v) for _, v in flags["values"]] == [0.0, 1.0, 0.0]  # the second run was flagged


def _panel(title: str, model: str, machine: str, interval: int) -> str:
    expr = _dashboard_query(title)
    return expr.replace("$model", model).replace("$machine", machine).replace("$__interval", f"{interval}s")


def test_the_dashboard_history_query_returns_one_point_per_run(backfilled: Backfilled):
    # the DBN panel's own query, as Grafana sends it with a one-day step: three distinct points
    stack, times = backfilled.stack, backfilled.times
    expr = _panel("DBN load time", "ppo", HISTORY_MACHINE, 86400)
    result = stack.api("query_range", query=expr, start=times[0], end=times[-1] + 86400, step=86400)["result"]
    assert len(result) == 1
    values = result[0]["values"]
    assert [float(t) for t, _ in values] == [t + 86400 for t in times]  # each run at the end of its step
    assert len({v for _, v in values}) == 3
    assert [float(v) for _, v in values] == [pytest.approx(ms / 1000) for ms in HISTORY_DBN_MS]


@pytest.mark.parametrize("step", [60, 1800])
def test_each_run_lands_on_exactly_one_step(backfilled: Backfilled, step: int):
    # whatever Grafana's step (shorter or longer than Prometheus's 5-minute look-back): one point per run
    stack, stamps = backfilled.stack, backfilled.sample_times
    expr = _panel("Peak memory by model", "dqn", MACHINE, step)
    end = time.time()
    (series,) = stack.api("query_range", query=expr, start=stamps[0] - 3600, end=end, step=step)["result"]
    points = [float(t) for t, _ in series["values"]]
    dqn_times = stamps[:RUNS]  # dqn on ci-runner-a: one run an hour, the laptop's run is another series
    assert len(points) == RUNS
    assert all(0 < p - t <= step for p, t in zip(points, dqn_times, strict=True))


def test_the_regressions_per_run_panel_counts_flagged_runs(backfilled: Backfilled):
    stack, stamps = backfilled.stack, backfilled.sample_times
    expr = _panel("Regressions per run", "dqn", MACHINE, 60)
    (series,) = stack.api("query_range", query=expr, start=stamps[0] - 3600, end=time.time(), step=60)["result"]
    assert sum(float(v) for _, v in series["values"]) == RUNS - 1 - STEP_AT
