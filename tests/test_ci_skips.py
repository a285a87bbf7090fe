"""With CI=true a skip is a failure (tests/conftest.py), except for tests marked ``hardware``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests import conftest


def _report(item_markers: tuple[str, ...], *, skipped: bool = True, xfail: bool = False) -> SimpleNamespace:
    report = SimpleNamespace(skipped=skipped, outcome="skipped" if skipped else "passed")
    report.longrepr = ("tests/x.py", 3, "Skipped: prometheus is not installed")
    if xfail:
        report.wasxfail = "known"
    item = SimpleNamespace(get_closest_marker=lambda name: object() if name in item_markers else None)
    gen = conftest.pytest_runtest_makereport(item, None)
    next(gen)
    with pytest.raises(StopIteration):
        gen.send(SimpleNamespace(get_result=lambda: report))
    return report


@pytest.mark.parametrize("ci", ["true", "1"])
def test_a_skip_in_ci_fails_and_names_the_reason(monkeypatch, ci):
    monkeypatch.setenv("CI", ci)
    report = _report(())
    assert report.outcome == "failed"
    assert "prometheus is not installed" in report.longrepr and ".ci/run" in report.longrepr


def test_outside_ci_and_for_hardware_a_skip_stays_a_skip(monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert _report(("hardware",)).outcome == "skipped"
    assert _report((), xfail=True).outcome == "skipped"
    assert _report((), skipped=False).outcome == "passed"
    monkeypatch.delenv("CI")
    assert _report(()).outcome == "skipped"
