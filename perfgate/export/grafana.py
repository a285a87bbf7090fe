"""The Grafana dashboard of perfgate's Prometheus metrics, built in code.

Built with grafana-foundation-sdk (pinned to its Grafana 11.6 flavour,
``1769699379!11.6.0``, which writes ``schemaVersion`` 41) and committed as
``dashboards/perfgate.json``; ``tests/export/test_grafana.py`` regenerates it and
compares, and runs every panel's query against a real Prometheus filled by ``perfgate export
prometheus --push``. Queries only use names :mod:`perfgate.export.prometheus` exports, never
``or vector(0)``-style constructs that return data whatever the metrics say.

The panels follow the original specification's dashboard: DBN load time with its 10 ms target, inference
latency per model (p50/p95/p99) with the 50 µs target, training step time compared across
models, memory by model, the regression count, the change against the baseline, and
throughput; ``$model`` and ``$machine`` filter every panel.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "DASHBOARD_UID",
    "DBN_LOAD_TARGET_SECONDS",
    "INFERENCE_TARGET_SECONDS",
    "build_dashboard",
    "dashboard_json",
    "panel_queries",
]

DASHBOARD_UID = "perfgate-overview"
DBN_LOAD_TARGET_SECONDS = 0.010  # the original specification's "<10ms" DBN load target
INFERENCE_TARGET_SECONDS = 50e-6  # the original specification's "<50μs" inference target (HFT requirement)
CHANGE_THRESHOLD = 0.10  # perfgate's default regression threshold

_SEL = 'model=~"$model", machine=~"$machine"'
_WHO = "{{model}} · {{machine}}"


def _metric(family: str, metric: str, statistic: str | None = "median") -> str:
    stat = f', statistic="{statistic}"' if statistic else ""
    return f'perfgate_{family}{{{_SEL}, metric="{metric}"{stat}}}'


def build_dashboard() -> Any:
    """The dashboard as the SDK's model (``dashboard_json`` encodes it)."""
    from grafana_foundation_sdk.builders import bargauge, stat, table, timeseries
    from grafana_foundation_sdk.builders import common as common_b
    from grafana_foundation_sdk.builders import dashboard as dash
    from grafana_foundation_sdk.builders import prometheus as prom
    from grafana_foundation_sdk.models import common
    from grafana_foundation_sdk.models import dashboard as model
    from grafana_foundation_sdk.models.prometheus import PromQueryFormat

    ds = model.DataSourceRef(type_val="prometheus", uid="${datasource}")
    next_id = iter(range(1, 100))

    def query(expr: str, legend: str, ref: str = "A", *, instant: bool = False, table_format: bool = False) -> Any:
        q = prom.Dataquery().expr(expr).legend_format(legend).ref_id(ref).datasource(ds)
        if table_format:
            q = q.format(PromQueryFormat.TABLE)
        return q.instant() if instant else q.range()

    def thresholds(*steps: tuple[float | None, str]) -> Any:
        return (
            dash.ThresholdsConfig()
            .mode(model.ThresholdsMode.ABSOLUTE)
            .steps([model.Threshold(value=v, color=c) for v, c in steps])
        )

    def series(title: str, description: str, unit: str, *targets: Any) -> Any:
        panel = (
            timeseries.Panel()
            .id(next(next_id))
            .title(title)
            .description(description)
            .datasource(ds)
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
            .tooltip(
                common_b.VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI).sort(common.SortOrder.DESCENDING)
            )
        )
        for target in targets:
            panel = panel.with_target(target)
        return panel

    def with_target_line(panel: Any, value: float) -> Any:
        # the original specification's target as a dashed red line; the budgets, where configured, come as series
        return panel.thresholds(thresholds((None, "green"), (value, "red"))).thresholds_style(
            common_b.GraphThresholdsStyleConfig().mode(common.GraphThresholdsStyleMode.DASHED)
        )

    def reduce_last() -> Any:
        return common_b.ReduceDataOptions().calcs(["lastNotNull"]).values(False)

    every = model.VariableOption(selected=True, text="All", value="$__all")
    verdict_expr = (
        f"2 * max by (model, machine) (perfgate_check_regressions{{{_SEL}}} > bool 0)"
        f" + max by (model, machine) (perfgate_check_budgets_broken{{{_SEL}}} > bool 0)"
    )
    verdict_map = model.ValueMap(
        options={
            "0": model.ValueMappingResult(text="passed", color="green", index=0),
            "1": model.ValueMappingResult(text="over budget", color="orange", index=1),
            "2": model.ValueMappingResult(text="regressed", color="red", index=2),
            "3": model.ValueMappingResult(text="regressed, over budget", color="red", index=3),
        }
    )

    builder = (
        dash.Dashboard("perfgate: ML pipeline performance")
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
            .datasource(ds)
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
            .datasource(ds)
            .query('label_values(perfgate_run_info{model=~"$model"}, machine)')
            .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(model.VariableSort.ALPHABETICAL_ASC)
            .multi(True)
            .include_all(True)
            .all_value(".*")
            .current(every)
        )
    )

    builder = builder.with_row(dash.Row("Gate").id(next(next_id)))
    builder = builder.with_panel(
        stat.Panel()
        .id(next(next_id))
        .title("Regressions (last check)")
        .description("Comparisons that regressed in the last check of each selected model and machine, summed.")
        .datasource(ds)
        .with_target(query(f"sum(perfgate_check_regressions{{{_SEL}}})", "regressions", instant=True))
        .thresholds(thresholds((None, "green"), (1, "red")))
        .color_mode(common.BigValueColorMode.BACKGROUND)
        .graph_mode(common.BigValueGraphMode.NONE)
        .reduce_options(reduce_last())
        .height(5)
        .span(6)
    )
    builder = builder.with_panel(
        stat.Panel()
        .id(next(next_id))
        .title("Verdict of the last check")
        .description("Per model and machine: passed, regressed, or over an absolute budget.")
        .datasource(ds)
        .with_target(query(verdict_expr, _WHO, instant=True))
        .mappings([verdict_map])
        .thresholds(thresholds((None, "green"), (1, "orange"), (2, "red")))
        .color_mode(common.BigValueColorMode.BACKGROUND)
        .graph_mode(common.BigValueGraphMode.NONE)
        .text_mode(common.BigValueTextMode.VALUE_AND_NAME)
        .reduce_options(reduce_last())
        .height(5)
        .span(12)
    )
    builder = builder.with_panel(
        stat.Panel()
        .id(next(next_id))
        .title("Budgets broken")
        .description("Absolute budgets (e.g. p99 inference ≤ 50 µs) the newest runs break, summed.")
        .datasource(ds)
        .with_target(query(f"sum(perfgate_check_budgets_broken{{{_SEL}}})", "budgets broken", instant=True))
        .thresholds(thresholds((None, "green"), (1, "red")))
        .color_mode(common.BigValueColorMode.BACKGROUND)
        .graph_mode(common.BigValueGraphMode.NONE)
        .reduce_options(reduce_last())
        .height(5)
        .span(6)
    )

    builder = builder.with_row(dash.Row("Pipeline stages").id(next(next_id)))
    builder = builder.with_panel(
        with_target_line(
            series(
                "DBN load time",
                "Median time to load and validate one DBN file; the dashed line is the 10 ms target.",
                "s",
                query(_metric("duration_seconds", "dbn_load_time_ms"), _WHO),
                query(
                    _metric("budget_duration_seconds", "dbn_load_time_ms", None),
                    f"budget {_WHO} ({{{{statistic}}}})",
                    "B",
                ),
            ),
            DBN_LOAD_TARGET_SECONDS,
        )
        .height(8)
        .span(12)
    )
    builder = builder.with_panel(
        with_target_line(
            series(
                "Inference latency (p50 / p95 / p99)",
                "Single-sample prediction latency per model; the dashed line is the 50 µs target.",
                "s",
                query(_metric("duration_seconds", "inference_latency_us", None), f"{_WHO} {{{{statistic}}}}"),
                query(
                    _metric("budget_duration_seconds", "inference_latency_us", None),
                    f"budget {_WHO} ({{{{statistic}}}})",
                    "B",
                ),
            ),
            INFERENCE_TARGET_SECONDS,
        )
        .height(8)
        .span(12)
    )
    builder = builder.with_panel(
        bargauge.Panel()
        .id(next(next_id))
        .title("Training step time by model")
        .description("Median time of one optimiser step (forward, backward, update), newest run of each model.")
        .datasource(ds)
        .with_target(query(_metric("duration_seconds", "training_step_time_ms"), _WHO, instant=True))
        .unit("s")
        .orientation(common.VizOrientation.HORIZONTAL)
        .display_mode(common.BarGaugeDisplayMode.GRADIENT)
        .reduce_options(reduce_last())
        .thresholds(thresholds((None, "blue")))
        .height(8)
        .span(12)
    )
    builder = builder.with_panel(
        series(
            "Feature extraction time",
            "Median time of the 16 technical-indicator features over the loaded bars.",
            "s",
            query(_metric("duration_seconds", "feature_extraction_time_ms"), _WHO),
        )
        .height(8)
        .span(12)
    )

    builder = builder.with_row(dash.Row("Resources and throughput").id(next(next_id)))
    builder = builder.with_panel(
        series(
            "Memory by model",
            "Median peak resident memory of each model's pipeline; budgets as series where configured.",
            "bytes",
            query(_metric("memory_bytes", "memory_usage_mb"), _WHO),
            query(_metric("budget_memory_bytes", "memory_usage_mb", None), f"budget {_WHO} ({{{{statistic}}}})", "B"),
        )
        .height(8)
        .span(12)
    )
    builder = builder.with_panel(
        series(
            "Throughput",
            "Median training samples processed per second (higher is better).",
            "suffix: samples/s",
            query(_metric("throughput_per_second", "throughput_samples_per_sec"), _WHO),
        )
        .height(8)
        .span(12)
    )

    builder = builder.with_panel(
        series(
            "Machine-speed index",
            "Median time of each reference kernel (compute, interpreter, memory: fixed amounts of work) during "
            "each model's newest run. When it rises, the machine itself was slow: a stage that jumped with it "
            "did not get slower by its own doing.",
            "s",
            query(f"perfgate_machine_reference_seconds{{{_SEL}}}", f"{_WHO} {{{{kernel}}}}"),
        )
        .height(8)
        .span(24)
    )

    builder = builder.with_row(dash.Row("Against the baseline").id(next(next_id)))
    builder = builder.with_panel(
        bargauge.Panel()
        .id(next(next_id))
        .title("Change against baseline")
        .description(
            "Direction-adjusted change of each compared statistic against its baseline: positive is worse "
            "(slower, more memory, less throughput). Red beyond the default 10 % threshold."
        )
        .datasource(ds)
        .with_target(
            query(f"perfgate_degradation_ratio{{{_SEL}}}", f"{_WHO} {{{{metric}}}} {{{{statistic}}}}", instant=True)
        )
        .unit("percentunit")
        .orientation(common.VizOrientation.HORIZONTAL)
        .display_mode(common.BarGaugeDisplayMode.BASIC)
        .reduce_options(reduce_last())
        .thresholds(thresholds((None, "green"), (CHANGE_THRESHOLD, "red")))
        .height(10)
        .span(12)
    )
    builder = builder.with_panel(
        series(
            "Regression count",
            "Comparisons that regressed in the last check, per model and machine, over time.",
            "short",
            query(f"sum by (model, machine) (perfgate_check_regressions{{{_SEL}}})", _WHO),
        )
        .draw_style(common.GraphDrawStyle.BARS)
        .fill_opacity(60)
        .height(10)
        .span(12)
    )
    builder = builder.with_panel(
        table.Panel()
        .id(next(next_id))
        .title("Newest runs")
        .description("The run each panel shows: its id, commit and branch, and how long ago it ran.")
        .datasource(ds)
        .with_target(
            query(f"perfgate_run_info{{{_SEL}}}", "", instant=True, table_format=True),
        )
        .with_target(
            query(f"time() - perfgate_run_timestamp_seconds{{{_SEL}}}", "", "B", instant=True, table_format=True),
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
