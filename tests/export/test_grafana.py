"""The Grafana dashboard: regenerated equals committed, sound structure, and every panel's
query answers with data from a real Prometheus filled by perfgate's own push."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from perfgate.cli import main
from perfgate.export.grafana import DASHBOARD_UID, GENERIC_TITLE, dashboard_json, dashboard_title, panel_queries
from perfgate.export.history import history_openmetrics, read_history
from perfgate.export.latest import latest_states
from perfgate.export.outlets import GROUPING_LABELS, push_states
from perfgate.export.prometheus import VERDICTS, PerfgateCollector, exposition, make_registry
from tests.export.conftest import Backfilled, PromStack
from tests.export.sample_store import (
    COUNTED,
    COUNTS_AT,
    COUNTS_MACHINE,
    MACHINE,
    counted_median,
    counts_runs,
    sample_policy,
    sample_store,
)
from tests.export.test_prometheus import sample_exposition, samples

COMMITTED = Path(__file__).resolve().parent.parent.parent / "dashboards" / "perfgate.json"
JOB = "t-dashboard"
COUNTS_FAMILY = re.compile(r"\bperfgate_(?:history_)?(?:instructions|estimated_cycles)\b")


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return json.loads(COMMITTED.read_text())


def test_committed_dashboard_is_the_generated_one():
    # regenerate with: perfgate dashboard --output dashboards/perfgate.json
    assert dashboard_json() == COMMITTED.read_text()


def test_dashboard_command_writes_it(tmp_path):
    out = tmp_path / "d.json"
    assert main(["dashboard", "--output", str(out)]) == 0
    assert out.read_text() == COMMITTED.read_text()


def test_structure(dashboard):
    assert dashboard["uid"] == DASHBOARD_UID and 8 <= len(DASHBOARD_UID) <= 40
    assert dashboard["schemaVersion"] == 41  # the SDK's Grafana 11.6 flavour
    assert dashboard["title"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)) and all(isinstance(i, int) and i > 0 for i in ids)
    for panel in dashboard["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24 and pos["h"] > 0, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert all(refs) and len(refs) == len(set(refs)), panel["title"]
        assert all(t["expr"] and t["datasource"]["uid"] == "${datasource}" for t in panel["targets"])
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert set(variables) == {"datasource", "model", "machine"}
    assert variables["model"]["multi"] and variables["model"]["includeAll"]


def test_round_trip_through_the_sdk_model(dashboard):
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models.dashboard import Dashboard

    again = json.loads(json.dumps(Dashboard.from_json(dashboard), cls=JSONEncoder))
    assert again == dashboard


def _counts_panels(dashboard: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The panels whose queries read counts, by title."""
    return {
        p["title"]: p for p in dashboard["panels"] if any(COUNTS_FAMILY.search(t["expr"]) for t in p.get("targets", []))
    }


def test_counts_have_their_own_row_of_panels_that_say_they_are_not_times(dashboard):
    counts = _counts_panels(dashboard)
    wanted = {
        "Instructions per call": "perfgate_history_instructions",
        "Estimated cycles per call": "perfgate_history_estimated_cycles",
        "Instructions per call, newest run": "perfgate_instructions",
        "Estimated cycles per call, newest run": "perfgate_estimated_cycles",
    }
    assert set(counts) == set(wanted)
    rows = [p for p in dashboard["panels"] if p["type"] == "row"]
    (row,) = [r for r in rows if "counts" in r["title"].lower()]
    for title, family in wanted.items():
        panel = counts[title]
        assert panel["gridPos"]["y"] > row["gridPos"]["y"], title  # under the counts row
        (target,) = panel["targets"]
        assert re.search(rf"\b{family}\{{", target["expr"]), (title, target["expr"])
        # the same template variables as every other panel, the median of the calls, every stage
        assert 'model=~"$model"' in target["expr"] and 'machine=~"$machine"' in target["expr"]
        assert 'statistic="median"' in target["expr"] and "metric=" not in target["expr"]
        assert "{{metric}}" in target["legendFormat"]  # one series per stage
        assert target["instant"] == ("newest" in title)
        assert panel["fieldConfig"]["defaults"]["unit"] == "short"  # a count, not seconds
        text = panel["description"]
        assert "not times" in text and "callgrind" in text
        for blind_to in ("memory bandwidth", "contention", "threads", "system calls", "I/O", "GPU", "tails"):
            assert blind_to in text, (title, blind_to)


def test_the_title_is_the_default_suites_or_perfgates_own(dashboard, monkeypatch):
    """The reference pipeline declares its title; a default suite that declares none gets perfgate's own."""
    import dataclasses

    import perfgate.export.grafana as grafana
    from perfgate.core.metrics import declared_suites, default_suite

    assert dashboard["title"] == "perfgate: ML pipeline performance" == dashboard_title()
    suite = declared_suites()[default_suite()]
    monkeypatch.setattr(
        grafana, "declared_suites", lambda: {suite.name: dataclasses.replace(suite, dashboard_title="")}
    )
    assert json.loads(dashboard_json())["title"] == GENERIC_TITLE


def test_the_panels_the_original_specification_asks_for(dashboard):
    titles = [p["title"] for p in dashboard["panels"]]
    for wanted in (
        "DBN load time",
        "Inference latency",
        "Training step time",
        "Memory",
        "Regression",
        "Change",
        "Throughput",
    ):
        assert any(wanted.lower() in t.lower() for t in titles), wanted
    by_title = {p["title"]: p for p in dashboard["panels"]}
    dbn = by_title["DBN load time"]["fieldConfig"]["defaults"]
    assert [s["value"] for s in dbn["thresholds"]["steps"]] == [None, 0.01]  # the 10 ms target, in seconds
    assert dbn["custom"]["thresholdsStyle"]["mode"] == "dashed"
    latency = by_title["Inference latency (p50 / p95 / p99)"]
    assert [s["value"] for s in latency["fieldConfig"]["defaults"]["thresholds"]["steps"]] == [None, 50e-6]
    assert "statistic" in latency["targets"][0]["legendFormat"]  # one line per p50/p95/p99


def history_names() -> set[str]:
    runs, flagged = read_history(sample_store())
    text = history_openmetrics(runs, flagged)
    return {line.split("{")[0] for line in text.splitlines() if not line.startswith("#")}


def counts_names() -> set[str]:
    """The families a store with counts runs exports, live and history."""
    store = sample_store()
    store.add_runs(counts_runs())
    states = latest_states(store, sample_policy())
    live = exposition(make_registry(PerfgateCollector(lambda: states)))
    runs, flagged = read_history(store)
    lines = [*live.splitlines(), *history_openmetrics(runs, flagged).splitlines()]
    return {line.split("{")[0] for line in lines if line and not line.startswith("#")}


def test_queries_use_only_exported_names_and_never_always_return_data(dashboard):
    exported = {name for name, _, _ in samples(sample_exposition())} | history_names() | counts_names()
    for title, expr, _ in panel_queries(dashboard):
        names = set(re.findall(r"\bperfgate_[a-z0-9_]+", expr))
        assert names and names <= exported, (title, names - exported)
        # "or vector(0)" and friends would answer even with no perfgate metric at all
        assert not re.search(r"\b(vector|absent|absent_over_time|scalar)\s*\(", expr), (title, expr)
        assert not re.search(r"\bor\b", expr), (title, expr)
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            assert set(re.findall(r"\bperfgate_[a-z0-9_]+", variable["query"])) <= exported


def substitute(expr: str, model: str, machine: str, interval: str = "60s") -> str:
    text = expr.replace("$model", model).replace("$machine", machine).replace("$__interval", interval)
    assert "$" not in text, text
    return text


# history panels look back over the re-dated sample store's runs (6 to 16 hours old)
WINDOW_S, STEP_S = 2 * 86400, 60


@pytest.fixture(scope="module")
def filled(prom_stack: PromStack, backfilled: Backfilled) -> PromStack:
    """Prometheus holding the newest metrics of the sample store and the counts runs, pushed by
    perfgate's own exporter, and their history, backfilled from ``perfgate export prometheus --openmetrics``."""
    store = sample_store()
    store.add_runs(counts_runs())
    states = latest_states(store, sample_policy())
    groups = push_states(prom_stack.pushgateway, states, job=JOB)
    # one push per group: a scrape between two pushes holds only the first ones, so wait for every group
    by = ", ".join(GROUPING_LABELS)
    prom_stack.wait_for(f'count(count by ({by}) (perfgate_run_info{{job="{JOB}"}})) >= {groups}')
    for name in (
        "perfgate_run_info",
        "perfgate_degradation_ratio",
        "perfgate_budget_memory_bytes",
        "perfgate_instructions",
        "perfgate_estimated_cycles",
    ):
        prom_stack.wait_for(f'{name}{{job="{JOB}"}}')
    return prom_stack


def machine_for(expr: str, machine: str) -> str:
    """The machine a query of one machine selects: a counts run has its own (``counts-`` and a hash)."""
    return COUNTS_MACHINE if machine == MACHINE and COUNTS_FAMILY.search(expr) else machine


def test_template_variables_find_values(filled, dashboard):
    models = filled.api("label/model/values", **{"match[]": "perfgate_run_info"})
    assert {"dqn", "ppo", "mamba2", "tft"} <= set(models)
    machines = filled.api("label/machine/values", **{"match[]": 'perfgate_run_info{model=~"dqn"}'})
    assert MACHINE in machines


@pytest.mark.parametrize(("model", "machine"), [(".*", ".*"), ("dqn", MACHINE)])
def test_every_query_returns_data(filled, dashboard, model, machine):
    empty = []
    for title, expr, instant in panel_queries(dashboard):
        query = substitute(expr, model, machine_for(expr, machine))
        result = filled.query(query) if instant else filled.query_range(query, WINDOW_S, STEP_S)
        if not result:
            empty.append((title, query))
    assert empty == []


def test_every_panel_has_data_for_a_multi_selection(filled, dashboard):
    # ppo and tft have no memory budget: that overlay is empty, the panel is not
    answered: dict[str, bool] = {}
    for title, expr, instant in panel_queries(dashboard):
        query = substitute(expr, "(ppo|tft)", ".*")
        result = filled.query(query) if instant else filled.query_range(query, WINDOW_S, STEP_S)
        answered[title] = answered.get(title, False) or bool(result)
    assert [title for title, ok in answered.items() if not ok] == []


def test_panel_values_are_right(filled, dashboard):
    queries = {title: expr for title, expr, _ in panel_queries(dashboard)}
    regressions = filled.query(substitute(queries["Regressions (last check)"], "dqn", MACHINE))
    assert [r["value"][1] for r in regressions] == ["1"]
    verdicts = filled.query(substitute(queries["Verdict of the last check"], ".*", MACHINE))
    by_model = {r["metric"]["model"]: VERDICTS[int(r["value"][1])] for r in verdicts}
    assert by_model == {"dqn": "regressed", "tft": "over_budget", "ppo": "passed", "mamba2": "passed"}
    # the change in each metric's own direction, beside its own threshold, and as a share of it
    change = [e for t, e, _ in panel_queries(dashboard) if t == "Change against baseline"]
    rows = [sorted(tuple(sorted(r["metric"].items())) for r in filled.query(substitute(e, ".*", ".*"))) for e in change]
    assert rows[0] and rows[0] == rows[1] == rows[2]  # the same labels in every query: the table joins them
    answers = [
        {(r["metric"]["metric"], r["metric"]["statistic"]): float(r["value"][1]) for r in filled.query(q)}
        for q in (substitute(e, "dqn", MACHINE) for e in change)
    ]
    worse, threshold, share = answers
    key = ("training_step_time_ms", "median")
    assert worse[key] == pytest.approx(0.25, abs=0.02) and threshold[key] == pytest.approx(0.10)
    assert share[key] == pytest.approx(worse[key] / 0.10)


def _suffix(unit: str) -> str:
    return "instructions" if unit == "instructions" else "est_cycles"


@pytest.mark.parametrize(
    ("title", "unit"),
    [("Instructions per call, newest run", "instructions"), ("Estimated cycles per call, newest run", "cycles")],
)
def test_the_counts_bars_show_the_pushed_counts(filled, dashboard, title, unit):
    (expr,) = [e for t, e, _ in panel_queries(dashboard) if t == title]
    result = filled.query(substitute(expr, "dqn", COUNTS_MACHINE))
    assert {(r["metric"]["model"], r["metric"]["machine"]) for r in result} == {("dqn", COUNTS_MACHINE)}
    got = {r["metric"]["metric"]: float(r["value"][1]) for r in result}
    newest = COUNTS_AT[-1]
    assert got == {f"{stem}_{_suffix(unit)}": counted_median("dqn", stem, unit, newest) for stem in COUNTED["dqn"]}
    assert filled.query(substitute(expr, ".*", MACHINE)) == []  # runs of times have no counts
    machines = filled.api("label/machine/values", **{"match[]": 'perfgate_run_info{model=~"dqn"}'})
    assert COUNTS_MACHINE in machines  # $machine offers the counts machine


@pytest.mark.parametrize(
    ("title", "unit"), [("Instructions per call", "instructions"), ("Estimated cycles per call", "cycles")]
)
def test_the_counts_series_have_one_point_per_counts_run(filled, backfilled, dashboard, title, unit):
    (expr,) = [e for t, e, _ in panel_queries(dashboard) if t == title]
    step, stamps = 60, backfilled.counts_times
    query = substitute(expr, "dqn", COUNTS_MACHINE, f"{step}s")
    result = filled.api("query_range", query=query, start=stamps[0] - 3600, end=time.time(), step=step)["result"]
    by_metric = {r["metric"]["metric"]: r["values"] for r in result}
    assert set(by_metric) == {f"{stem}_{_suffix(unit)}" for stem in COUNTED["dqn"]}
    for stem in COUNTED["dqn"]:
        values = by_metric[f"{stem}_{_suffix(unit)}"]
        assert len(values) == len(COUNTS_AT)
        assert all(0 < float(t) - run <= step for (t, _), run in zip(values, stamps, strict=True))
        assert [float(v) for _, v in values] == [counted_median("dqn", stem, unit, r) for r in COUNTS_AT]
    training = [float(v) for _, v in by_metric[f"training_step_{_suffix(unit)}"]]
    assert training[-1] == pytest.approx(training[0] * 1.04)  # the newest run's step shows


def test_the_verdict_panel_names_every_verdict(dashboard):
    (panel,) = [p for p in dashboard["panels"] if p["title"] == "Verdict of the last check"]
    (mapping,) = panel["fieldConfig"]["defaults"]["mappings"]
    shown = {int(code): option["text"] for code, option in mapping["options"].items()}
    assert shown == {code: name.replace("_", " ") for code, name in enumerate(VERDICTS)}
    assert {"inconclusive", "could_not_decide", "improved"} <= set(VERDICTS)


def test_dashboard_to_stdout_in_a_subprocess():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "perfgate", "dashboard"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == COMMITTED.read_text()
