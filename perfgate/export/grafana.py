"""The Grafana dashboard of perfgate's Prometheus metrics, built in code.

Built with grafana-foundation-sdk (pinned to its Grafana 11.6 flavour,
``1769699379!11.6.0``, which writes ``schemaVersion`` 41) and committed as
``dashboards/perfgate.json``; ``tests/export/test_grafana.py`` regenerates it and
compares, and runs every panel's query against a real Prometheus filled by ``perfgate export
prometheus --push``. Queries only use names :mod:`perfgate.export.prometheus` exports, never
``or vector(0)``-style constructs that return data whatever the metrics say.

The gate's panels (verdicts, regressions, budgets broken, the change against the baseline, the
machine-speed index) are perfgate's own; the panels of each metric come from the declared
suites (the ``DashboardPanel`` entries of their declarations, :mod:`perfgate.core.metrics`).
The reference pipeline declares the original specification's: DBN load time with its 10 ms
target, inference latency per model (p50/p95/p99) with the 50 µs target, training step time
compared across models, feature extraction, peak memory by model and throughput. A row of
counts (``--measure counts``: instructions and estimated cycles per call of each stage, which
are not times) follows.
``$model`` and ``$machine`` filter every panel. The title is the default suite's (its declaration's
``dashboard_title``), else :data:`GENERIC_TITLE`.

:func:`build_dashboard` assembles the dashboard from one builder per row (gate, the suites' rows,
machine speed, against the baseline, counts) on a frame of title and variables; each row builder
adds its panels through the builders of their kinds (series, bars, stats, tables).

Time series plot the history, one point per run at the run's own time
(``perfgate_history_*``, backfilled from ``perfgate export prometheus --openmetrics``, see
:mod:`perfgate.export.history`); a scraped value carries the scrape's time, so plotted over
time it would only repeat the newest run. The gate panels, the training-step bars, the counts
bars and the change against the baseline show the newest check (the live ``perfgate_*`` families).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from perfgate.core.metrics import DashboardPanel, declared_suites, default_suite, metric_info
from perfgate.export.prometheus import VERDICTS, unit_family

__all__ = [
    "DASHBOARD_UID",
    "GENERIC_TITLE",
    "build_dashboard",
    "dashboard_json",
    "dashboard_title",
    "panel_queries",
    "verdict_expression",
]

DASHBOARD_UID = "perfgate-overview"
# the title of a dashboard whose default suite declares none (SuiteDeclaration.dashboard_title)
GENERIC_TITLE = "perfgate: performance"
# Grafana's unit of each exported family (perfgate.export.prometheus.unit_family)
_GRAFANA_UNIT = {
    "duration_seconds": "s",
    "memory_bytes": "bytes",
    "throughput_per_second": "suffix: samples/s",
    "utilization_ratio": "percentunit",
}
_SEL = 'model=~"$model", machine=~"$machine"'
_WHO = "{{model}} · {{machine}}"
# what every panel of counts says of them (as perfgate.core.decision.NOT_TIMES does in reports)
_COUNTS_ARE_NOT_TIMES = (
    "Counts, not times (perfgate bench --measure counts), counted under valgrind's callgrind, a simulated CPU. "
    "They repeat to a fraction of a per cent from one process or day to the next, so a small change in a stage's "
    "work shows, but they do not see memory bandwidth, contention, threads, system calls, I/O, GPU kernels or "
    "tails: a stage can get slower with the same counts. A counts run's machine is counts- and a hash of the "
    "instruction set the code ran on, not a host."
)
# (family, what is counted) of the counts panels
_COUNTS = (
    ("instructions", "Instructions per call", "Instructions executed per call of each stage (callgrind's Ir)"),
    (
        "estimated_cycles",
        "Estimated cycles per call",
        "Estimated cycles per call of each stage: L1 hits + 5 × LL hits + 35 × RAM accesses of callgrind's "
        "simulated caches",
    ),
)


def _metric(family: str, metric: str | None, statistic: str | None = "median") -> str:
    """The selector of ``perfgate_<family>``: one metric, or every metric of the family when None."""
    name = f', metric="{metric}"' if metric else ""
    stat = f', statistic="{statistic}"' if statistic else ""
    return f"perfgate_{family}{{{_SEL}{name}{stat}}}"


def _per_run(selector: str) -> str:
    """One point per run: the newest sample of each step's own interval.

    A bare selector would show a backfilled run at every step of the 5 minutes after it, and
    miss it altogether when Grafana's step is longer; the windows of ``$__interval`` tile the
    time range, so each run lands on exactly one step (the later of two runs in one step).
    The windows end 1 ms before their step: Prometheus 2 closes a range at both ends, so a run
    stamped exactly on a step (whole minutes, and Grafana aligns steps to them) would
    otherwise count in two.
    """
    return f"last_over_time({selector}[$__interval] offset 1ms)"


def _history(family: str, metric: str | None, statistic: str | None = "median") -> str:
    """The backfilled ``perfgate_history_<family>`` series, one point per run."""
    return _per_run(_metric(f"history_{family}", metric, statistic))


def verdict_expression() -> str:
    """Per model and machine, the most severe verdict of the newest checks, as its index in ``VERDICTS``.

    Each check exports every verdict (1 for its own, 0 for the others), so the sum over the
    verdicts of index × indicator is the index of its verdict; ``max`` takes the most severe
    over the suites of one model and machine.
    """
    terms = [f'{code} * perfgate_check_verdict{{{_SEL}, verdict="{name}"}}' for code, name in enumerate(VERDICTS)]
    return "max by (model, machine) (" + " + ignoring(verdict) ".join(terms) + ")"


# text and colour of each verdict in the verdict panel
_VERDICT_SHOWN = {
    "passed": ("passed", "green"),
    "improved": ("improved", "blue"),
    "inconclusive": ("inconclusive", "yellow"),
    "over_budget": ("over budget", "orange"),
    "metric_missing": ("metric missing", "dark-orange"),
    "could_not_decide": ("could not decide", "purple"),
    "regressed": ("regressed", "red"),
}


def dashboard_title() -> str:
    """The dashboard's title: the default suite's (its declaration's ``dashboard_title``), else perfgate's own."""
    suite = declared_suites().get(default_suite())
    return suite.dashboard_title if suite is not None and suite.dashboard_title else GENERIC_TITLE


def _datasource() -> Any:
    """The Prometheus data source that the dashboard's ``$datasource`` variable picks."""
    from grafana_foundation_sdk.models import dashboard as model

    return model.DataSourceRef(type_val="prometheus", uid="${datasource}")


def _query(expr: str, legend: str, ref: str = "A", *, instant: bool = False, table_format: bool = False) -> Any:
    """A PromQL query of a panel: over the time range, or (``instant``) its newest value; rows for a table."""
    from grafana_foundation_sdk.builders import prometheus as prom
    from grafana_foundation_sdk.models.prometheus import PromQueryFormat

    q = prom.Dataquery().expr(expr).legend_format(legend).ref_id(ref).datasource(_datasource())
    if table_format:
        q = q.format(PromQueryFormat.TABLE)
    return q.instant() if instant else q.range()


def _thresholds(*steps: tuple[float | None, str]) -> Any:
    """Absolute thresholds: from each value on (None: from the bottom), the colour."""
    from grafana_foundation_sdk.builders import dashboard as dash
    from grafana_foundation_sdk.models import dashboard as model

    return (
        dash.ThresholdsConfig()
        .mode(model.ThresholdsMode.ABSOLUTE)
        .steps([model.Threshold(value=v, color=c) for v, c in steps])
    )


def _reduce_last() -> Any:
    """A single-value panel's reduction: the newest value."""
    from grafana_foundation_sdk.builders import common as common_b

    return common_b.ReduceDataOptions().calcs(["lastNotNull"]).values(False)


def _series(ids: Iterator[int], title: str, description: str, unit: str, *targets: Any) -> Any:
    """A time-series panel of ``targets``, one point per run, with a legend below and a shared tooltip."""
    from grafana_foundation_sdk.builders import common as common_b
    from grafana_foundation_sdk.builders import timeseries
    from grafana_foundation_sdk.models import common

    panel = (
        timeseries.Panel()
        .id(next(ids))
        .title(title)
        .description(description)
        .datasource(_datasource())
        .unit(unit)
        .line_width(2)
        .point_size(5)
        .show_points(common.VisibilityMode.ALWAYS)
        .span_nulls(True)
        .legend(
            common_b.VizLegendOptions()
            .display_mode(common.LegendDisplayMode.LIST)
            .placement(common.LegendPlacement.BOTTOM)
            .show_legend(True)
        )
        .tooltip(common_b.VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI).sort(common.SortOrder.DESCENDING))
    )
    for target in targets:
        panel = panel.with_target(target)
    return panel


def _with_target_line(panel: Any, value: float) -> Any:
    """``panel`` with a fixed target as a dashed red line; the budgets, where configured, come as series."""
    from grafana_foundation_sdk.builders import common as common_b
    from grafana_foundation_sdk.models import common

    return panel.thresholds(_thresholds((None, "green"), (value, "red"))).thresholds_style(
        common_b.GraphThresholdsStyleConfig().mode(common.GraphThresholdsStyleMode.DASHED)
    )


def _bars(ids: Iterator[int], title: str, description: str, unit: str, target: Any) -> Any:
    """A bar-gauge panel: the newest run's value of each series of ``target``, as horizontal bars."""
    from grafana_foundation_sdk.builders import bargauge
    from grafana_foundation_sdk.models import common

    return (
        bargauge.Panel()
        .id(next(ids))
        .title(title)
        .description(description)
        .datasource(_datasource())
        .with_target(target)
        .unit(unit)
        .orientation(common.VizOrientation.HORIZONTAL)
        .display_mode(common.BarGaugeDisplayMode.GRADIENT)
        .reduce_options(_reduce_last())
        .thresholds(_thresholds((None, "blue")))
        .height(8)
        .span(12)
    )


def _count_stat(ids: Iterator[int], title: str, description: str, family: str, legend: str, span: int) -> Any:
    """A stat panel of ``perfgate_<family>`` summed over the selection, red from 1 on."""
    from grafana_foundation_sdk.builders import stat
    from grafana_foundation_sdk.models import common

    return (
        stat.Panel()
        .id(next(ids))
        .title(title)
        .description(description)
        .datasource(_datasource())
        .with_target(_query(f"sum(perfgate_{family}{{{_SEL}}})", legend, instant=True))
        .thresholds(_thresholds((None, "green"), (1, "red")))
        .color_mode(common.BigValueColorMode.BACKGROUND)
        .graph_mode(common.BigValueGraphMode.NONE)
        .reduce_options(_reduce_last())
        .height(5)
        .span(span)
    )


def _verdict_stat(ids: Iterator[int]) -> Any:
    """The stat panel of the last check's verdict per model and machine, in words and colours."""
    from grafana_foundation_sdk.builders import stat
    from grafana_foundation_sdk.models import common
    from grafana_foundation_sdk.models import dashboard as model

    verdict_map = model.ValueMap(
        options={
            str(code): model.ValueMappingResult(text=_VERDICT_SHOWN[name][0], color=_VERDICT_SHOWN[name][1], index=code)
            for code, name in enumerate(VERDICTS)
        }
    )
    return (
        stat.Panel()
        .id(next(ids))
        .title("Verdict of the last check")
        .description(
            "Per model and machine, the verdict of the last check: passed, improved, inconclusive (a change "
            "over its threshold the test could not confirm, or too few samples), over an absolute budget, "
            "could not decide (the check could not be made), or regressed; the most severe over its suites."
        )
        .datasource(_datasource())
        .with_target(_query(verdict_expression(), _WHO, instant=True))
        .mappings([verdict_map])
        .thresholds(_thresholds((None, "green")))
        .color_mode(common.BigValueColorMode.BACKGROUND)
        .graph_mode(common.BigValueGraphMode.NONE)
        .text_mode(common.BigValueTextMode.VALUE_AND_NAME)
        .reduce_options(_reduce_last())
        .height(5)
        .span(12)
    )


def _suite_panel(ids: Iterator[int], declared: DashboardPanel) -> Any:
    """The panel a suite declares: its metric over time (with budgets and target) or its newest bars."""
    info = metric_info(declared.metric)
    fam = unit_family(info.unit if info is not None else "")
    unit = _GRAFANA_UNIT.get(fam.suffix, "short")
    if declared.style == "bars":
        return _bars(
            ids,
            declared.title,
            declared.description,
            unit,
            _query(_metric(fam.suffix, declared.metric), _WHO, instant=True),
        ).span(declared.width)
    statistic = None if declared.per_statistic else "median"
    legend = f"{_WHO} {{{{statistic}}}}" if declared.per_statistic else _WHO
    targets = [_query(_history(fam.suffix, declared.metric, statistic), legend)]
    if declared.budgets:
        targets.append(
            _query(_metric(f"budget_{fam.suffix}", declared.metric, None), f"budget {_WHO} ({{{{statistic}}}})", "B")
        )
    panel = _series(ids, declared.title, declared.description, unit, *targets)
    if declared.target is not None:
        panel = _with_target_line(panel, fam.convert(declared.target))
    return panel.height(8).span(declared.width)


def _frame(title: str) -> Any:
    """The dashboard without rows: its title, time range, annotations and the data source, model and
    machine variables."""
    from grafana_foundation_sdk.builders import dashboard as dash
    from grafana_foundation_sdk.models import dashboard as model

    every = model.VariableOption(selected=True, text="All", value="$__all")
    return (
        dash.Dashboard(title)
        .uid(DASHBOARD_UID)
        .description("Newest benchmark results, checks and budgets per model and machine, exported by perfgate.")
        .tags(["perfgate", "performance", "ml"])
        .editable()
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
        .time("now-7d", "now")
        .timezone("utc")
        .refresh("1m")
        .annotation(
            dash.AnnotationQuery()
            .name("Annotations & Alerts")
            .datasource(model.DataSourceRef(type_val="grafana", uid="-- Grafana --"))
            .enable(True)
            .hide(True)
            .icon_color("rgba(0, 211, 255, 1)")
            .type("dashboard")
            .built_in(1)
        )
        .with_variable(dash.DatasourceVariable("datasource").label("Data source").type("prometheus"))
        .with_variable(
            dash.QueryVariable("model")
            .label("Model")
            .datasource(_datasource())
            .query("label_values(perfgate_run_info, model)")
            .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(model.VariableSort.ALPHABETICAL_ASC)
            .multi(True)
            .include_all(True)
            .all_value(".*")
            .current(every)
        )
        .with_variable(
            dash.QueryVariable("machine")
            .label("Machine")
            .datasource(_datasource())
            .query('label_values(perfgate_run_info{model=~"$model"}, machine)')
            .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(model.VariableSort.ALPHABETICAL_ASC)
            .multi(True)
            .include_all(True)
            .all_value(".*")
            .current(every)
        )
    )


def _row(builder: Any, ids: Iterator[int], title: str) -> Any:
    """``builder`` with a new row ``title``: the panels added after it go in it."""
    from grafana_foundation_sdk.builders import dashboard as dash

    return builder.with_row(dash.Row(title).id(next(ids)))


def _gate_row(builder: Any, ids: Iterator[int]) -> Any:
    """The gate: regressions, the verdict and the budgets broken of the last check."""
    builder = _row(builder, ids, "Gate")
    builder = builder.with_panel(
        _count_stat(
            ids,
            "Regressions (last check)",
            "Comparisons that regressed in the last check of each selected model and machine, summed.",
            "check_regressions",
            "regressions",
            6,
        )
    )
    builder = builder.with_panel(_verdict_stat(ids))
    return builder.with_panel(
        _count_stat(
            ids,
            "Budgets broken",
            "Absolute budgets (e.g. p99 inference ≤ 50 µs) the newest runs break, summed.",
            "check_budgets_broken",
            "budgets broken",
            6,
        )
    )


def _suite_rows(builder: Any, ids: Iterator[int]) -> Any:
    """The suites' own panels (their declarations, :mod:`perfgate.core.metrics`), row by row in their order."""
    rows: dict[str, list[DashboardPanel]] = {}
    for suite in declared_suites().values():
        for declared in suite.panels:
            rows.setdefault(declared.row or suite.name, []).append(declared)
    for title, panels in rows.items():
        builder = _row(builder, ids, title)
        for declared in panels:
            builder = builder.with_panel(_suite_panel(ids, declared))
    return builder


def _machine_row(builder: Any, ids: Iterator[int]) -> Any:
    """The machine-speed index: the reference kernels' times during each run."""
    builder = _row(builder, ids, "Machine speed")
    return builder.with_panel(
        _series(
            ids,
            "Machine-speed index",
            "Median time of each reference kernel (compute, interpreter, memory: fixed amounts of work) during "
            "each run, one point per run. When it rises, the machine itself was slow: a stage that jumped with it "
            "did not get slower by its own doing.",
            "s",
            _query(_per_run(f"perfgate_history_machine_reference_seconds{{{_SEL}}}"), f"{_WHO} {{{{kernel}}}}"),
        )
        .height(8)
        .span(24)
    )


def _unnamed(expr: str) -> str:
    """``expr`` without ``__name__``: the rows of a table's queries then have the same labels, so "merge" joins them."""
    return f'label_replace({expr}, "__name__", "", "", "")'


def _change_table(ids: Iterator[int]) -> Any:
    """The table of the last check's changes against the baseline, beside each metric's threshold."""
    from grafana_foundation_sdk.builders import table
    from grafana_foundation_sdk.models import dashboard as model

    change_sel = f"{{{_SEL}}}"
    return (
        table.Panel()
        .id(next(ids))
        .title("Change against baseline")
        .description(
            "Each compared statistic of the last check in its metric's own direction: positive is worse "
            "(slower, more memory, less throughput), negative better. Beside it the metric's own threshold, "
            "and the change as a share of it: red from 100 % (beyond the threshold; a regression when the "
            "test confirms it, else inconclusive)."
        )
        .datasource(_datasource())
        .with_target(_query(_unnamed(f"perfgate_degradation_ratio{change_sel}"), "", instant=True, table_format=True))
        .with_target(
            _query(_unnamed(f"perfgate_check_threshold_ratio{change_sel}"), "", "B", instant=True, table_format=True)
        )
        .with_target(
            _query(
                f"perfgate_degradation_ratio{change_sel} / perfgate_check_threshold_ratio{change_sel}",
                "",
                "C",
                instant=True,
                table_format=True,
            )
        )
        .with_transformation(model.DataTransformerConfig(id_val="merge", options={}))
        .with_transformation(
            model.DataTransformerConfig(
                id_val="organize",
                options={
                    "excludeByName": {"Time": True, "__name__": True, "instance": True, "job": True, "suite": True},
                    "renameByName": {
                        "Value #A": "change (positive is worse)",
                        "Value #B": "threshold",
                        "Value #C": "share of threshold",
                    },
                },
            )
        )
        .unit("percentunit")
        .thresholds(_thresholds((None, "green"), (1, "red")))
        .override_by_name(
            "share of threshold",
            [
                model.DynamicConfigValue(
                    id_val="custom.cellOptions", value={"type": "color-background", "mode": "basic"}
                )
            ],
        )
        .height(10)
        .span(12)
    )


def _newest_runs_table(ids: Iterator[int]) -> Any:
    """The table of the run each panel shows: its id, commit, branch and age."""
    from grafana_foundation_sdk.builders import table
    from grafana_foundation_sdk.models import dashboard as model

    return (
        table.Panel()
        .id(next(ids))
        .title("Newest runs")
        .description("The run each panel shows: its id, commit and branch, and how long ago it ran.")
        .datasource(_datasource())
        .with_target(
            _query(f"perfgate_run_info{{{_SEL}}}", "", instant=True, table_format=True),
        )
        .with_target(
            _query(f"time() - perfgate_run_timestamp_seconds{{{_SEL}}}", "", "B", instant=True, table_format=True),
        )
        .with_transformation(model.DataTransformerConfig(id_val="merge", options={}))
        .with_transformation(
            model.DataTransformerConfig(
                id_val="organize",
                options={
                    "excludeByName": {"Time": True, "Value #A": True, "__name__": True, "instance": True, "job": True},
                    "renameByName": {"Value #B": "age"},
                },
            )
        )
        .override_by_name("age", [model.DynamicConfigValue(id_val="unit", value="s")])
        .height(8)
        .span(24)
    )


def _baseline_row(builder: Any, ids: Iterator[int]) -> Any:
    """Against the baseline: the last check's changes, the runs flagged as regressions, the newest runs."""
    from grafana_foundation_sdk.models import common

    builder = _row(builder, ids, "Against the baseline")
    builder = builder.with_panel(_change_table(ids))
    builder = builder.with_panel(
        _series(
            ids,
            "Regressions per run",
            "1 for each run the gate flagged as a regression (and nobody accepted since), per model and machine.",
            "short",
            _query(f"sum by (model, machine) ({_per_run(f'perfgate_history_flagged{{{_SEL}}}')})", _WHO),
        )
        .draw_style(common.GraphDrawStyle.BARS)
        .fill_opacity(60)
        .height(10)
        .span(12)
    )
    return builder.with_panel(_newest_runs_table(ids))


def _counts_row(builder: Any, ids: Iterator[int]) -> Any:
    """Counts (``--measure counts``): instructions and estimated cycles per call of each stage, over time and newest."""
    builder = _row(builder, ids, "Counts (callgrind, not times)")
    per_metric = f"{_WHO} {{{{metric}}}}"
    for family, title, what in _COUNTS:
        builder = builder.with_panel(
            _series(
                ids,
                title,
                f"{what}, the median of the counted calls, one point per run. {_COUNTS_ARE_NOT_TIMES}",
                "short",
                _query(_history(family, None), per_metric),
            )
            .height(8)
            .span(12)
        )
    for family, title, what in _COUNTS:
        builder = builder.with_panel(
            _bars(
                ids,
                f"{title}, newest run",
                f"{what}, the median of the counted calls of the newest counts run. {_COUNTS_ARE_NOT_TIMES}",
                "short",
                _query(_metric(family, None), per_metric, instant=True),
            )
        )
    return builder


# the dashboard's rows, top to bottom
_ROWS: tuple[Callable[[Any, Iterator[int]], Any], ...] = (
    _gate_row,
    _suite_rows,
    _machine_row,
    _baseline_row,
    _counts_row,
)


def build_dashboard() -> Any:
    """The dashboard as the SDK's model (``dashboard_json`` encodes it): the frame, then its rows in order,
    panels and rows numbered from 1 as they are added."""
    ids = iter(range(1, 100))
    builder = _frame(dashboard_title())
    for add_row in _ROWS:
        builder = add_row(builder, ids)
    return builder.build()


def dashboard_json(dashboard: Any | None = None) -> str:
    """The dashboard as Grafana JSON, deterministic (sorted keys, two-space indent, final newline)."""
    from grafana_foundation_sdk.cog.encoder import JSONEncoder

    data = json.loads(json.dumps(dashboard if dashboard is not None else build_dashboard(), cls=JSONEncoder))
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def panel_queries(data: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(panel title, expression, instant) of every query of every panel of dashboard JSON ``data``."""
    found = []
    for panel in data.get("panels", []):
        for target in panel.get("targets", []):
            found.append((panel["title"], target["expr"], bool(target.get("instant"))))
    return found
