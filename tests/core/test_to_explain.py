"""Which stages a regressed check asks to be profiled (CheckResult.to_explain)."""

from __future__ import annotations

import dataclasses

from perfgate.core.compare import Verdict
from tests.report.where_fixtures import check_with


def test_a_derived_throughput_stands_for_the_stage_it_is_derived_from():
    result = check_with([])
    (timed,) = result.comparisons
    assert timed.verdict is Verdict.REGRESSED and result.to_explain() == ("features_time_ms",)
    rate = dataclasses.replace(timed, metric="features_per_sec", derived_from="features_time_ms")
    assert dataclasses.replace(result, comparisons=(timed, rate)).to_explain() == ("features_time_ms",)
    assert dataclasses.replace(result, comparisons=(rate,)).to_explain() == ("features_time_ms",)
    unchanged = dataclasses.replace(timed, verdict=Verdict.UNCHANGED)
    assert dataclasses.replace(result, comparisons=(unchanged,)).to_explain() == ()
