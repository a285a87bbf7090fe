"""Fixtures of the export tests: the sample store as SQLite, its configuration, a real
Prometheus with a Pushgateway (started once per session on free ports, stopped by PID), and
the history of two SQLite stores backfilled into that Prometheus with promtool, as a user
would: ``perfgate export prometheus --openmetrics`` then ``promtool tsdb create-blocks-from
openmetrics`` into its data directory.

A test whose binary (prometheus, prometheus-pushgateway, promtool) is missing is skipped
with the reason, except in CI (``CI=true``), where it fails: ``.ci/run`` installs them.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from perfgate.core.codec import run_from_dict
from perfgate.core.schema import Run
from perfgate.store import open_store
from perfgate.store.base import RunStatus
from tests.export.sample_store import COUNTS_MACHINE, MACHINE, RUNS, STEP_AT, counts_runs, sample_runs

SAMPLE_CONFIG = """\
[tool.perfgate.budgets.dqn]
dbn_load_time_ms = { median = 10.0 }
inference_latency_us = { p99 = 50.0 }
memory_usage_mb = { max = 150.0 }

[tool.perfgate.budgets.ppo]
dbn_load_time_ms = { median = 10.0 }
inference_latency_us = { p99 = 50.0 }

[tool.perfgate.budgets.mamba2]
dbn_load_time_ms = { median = 10.0 }
inference_latency_us = { p99 = 50.0 }

[tool.perfgate.budgets.tft]
dbn_load_time_ms = { median = 10.0 }
inference_latency_us = { p99 = 50.0 }
"""


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def need(binary: str, package: str) -> str:
    """The path of ``binary``; skip without it, except in CI, where that is a failure."""
    path = shutil.which(binary)
    if path is None:
        reason = f"{binary} is not installed (Debian package {package})"
        if in_ci():
            pytest.fail(f"{reason}; it is required in CI (.ci/run installs it)")
        pytest.skip(reason)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(url: str, timeout: float = 10.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode("utf-8")


@pytest.fixture
def sample_config(tmp_path: Path) -> Path:
    path = tmp_path / "perfgate.toml"
    path.write_text(SAMPLE_CONFIG)
    return path


@pytest.fixture
def sample_sqlite(tmp_path: Path) -> str:
    """The sample store as a SQLite file; its URL."""
    url = f"sqlite:///{tmp_path / 'perfgate.db'}"
    store = open_store(url)
    try:
        store.add_runs(sample_runs())
        for r in range(STEP_AT, RUNS - 1):
            store.set_status(f"dqn-{MACHINE}-{r:02d}", RunStatus.FLAGGED, "training_step_time_ms +25.0%")
    finally:
        store.close()
    return url


@dataclass
class PromStack:
    """A running Prometheus that scrapes a running Pushgateway every second."""

    prometheus: str  # http://127.0.0.1:PORT
    pushgateway: str
    logs: Path

    @property
    def data(self) -> Path:
        """The running Prometheus's TSDB folder."""
        return self.logs / "data"

    def backfill(self, openmetrics: Path) -> None:
        """Blocks made by promtool from ``openmetrics``, written into the running Prometheus's data folder.

        Prometheus loads blocks that appear in its data folder at its next block reload
        (about once a minute); :meth:`wait_for` polls until they answer.
        """
        promtool = need("promtool", "prometheus")
        proc = subprocess.run(
            [promtool, "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(self.data)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr

    def api(self, path: str, **params: Any) -> dict[str, Any]:
        url = f"{self.prometheus}/api/v1/{path}?{urllib.parse.urlencode(params, doseq=True)}"
        try:
            body = http_get(url)
        except urllib.error.HTTPError as exc:  # 400 on a bad expression: show Prometheus's message
            body = exc.read().decode("utf-8")
        data = json.loads(body)
        assert data["status"] == "success", f"{path} {params}: {data}"
        return data["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return self.api("query", query=expr)["result"]

    def query_range(self, expr: str, seconds: int = 120, step: int = 1) -> list[dict[str, Any]]:
        end = time.time()
        return self.api("query_range", query=expr, start=end - seconds, end=end, step=step)["result"]

    def wait_for(self, expr: str, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Poll until ``expr`` has a result (the first scrape comes about 5 s after start)."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(expr)
            if result:
                return result
            if time.monotonic() > deadline:
                logs = "\n".join(p.read_text(errors="replace")[-2000:] for p in sorted(self.logs.glob("*.log")))
                pytest.fail(f"no data for {expr} after {timeout:.0f} s; daemon logs:\n{logs}")
            time.sleep(0.5)


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{url} exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            http_get(url, timeout=2.0)
            return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"{url} not ready after {timeout:.0f} s:\n{log.read_text(errors='replace')[-3000:]}")


@pytest.fixture(scope="session")
def prom_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PromStack]:
    prometheus = need("prometheus", "prometheus")
    pushgateway = need("prometheus-pushgateway", "prometheus-pushgateway")
    root = tmp_path_factory.mktemp("prometheus")
    pgw_port, prom_port = free_port(), free_port()
    (root / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: pushgateway\n"
        "    honor_labels: true\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{pgw_port}']}}]\n"
    )
    procs: list[subprocess.Popen[bytes]] = []
    try:
        pgw_log = root / "pushgateway.log"
        with pgw_log.open("wb") as out:
            procs.append(
                subprocess.Popen(
                    [
                        pushgateway,
                        f"--web.listen-address=127.0.0.1:{pgw_port}",
                        f"--persistence.file={root / 'pushgateway.data'}",
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
        prom_log = root / "prometheus.log"
        with prom_log.open("wb") as out:
            procs.append(
                subprocess.Popen(
                    [
                        prometheus,
                        f"--config.file={root / 'prometheus.yml'}",
                        f"--storage.tsdb.path={root / 'data'}",
                        f"--web.listen-address=127.0.0.1:{prom_port}",
                        "--log.level=warn",
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
        _wait_ready(f"http://127.0.0.1:{pgw_port}/-/ready", procs[0], pgw_log)
        _wait_ready(f"http://127.0.0.1:{prom_port}/-/ready", procs[1], prom_log)
        yield PromStack(f"http://127.0.0.1:{prom_port}", f"http://127.0.0.1:{pgw_port}", root)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


# ---- history, backfilled -----------------------------------------------------------------------

HISTORY_MACHINE = "history-runner"  # the three recorded runs of the history test: ppo on this machine
HISTORY_DBN_MS = (0.5, 0.8, 0.6)  # their DBN load medians, one per run
SAMPLE_NEWEST_AGE_S = 6 * 3600  # the sample store's newest run, re-dated this long before the test


def _iso(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Backfilled:
    """The stack, with the three recorded runs' times and the sample store's history (and the counts runs) loaded."""

    stack: PromStack
    times: tuple[float, ...]  # the three recorded runs' created_at, Unix time, oldest first
    sample_times: tuple[float, ...]  # the re-dated sample store's run times
    counts_times: tuple[float, ...]  # the re-dated counts runs' times


def _history_runs(now: float) -> tuple[list[Run], tuple[float, ...]]:
    """Three ppo runs a day apart, each older than the Prometheus started for the tests."""
    base = (now // 3600) * 3600
    times = tuple(base - days * 86400 for days in (3, 2, 1))
    runs = []
    for i, (stamp, median) in enumerate(zip(times, HISTORY_DBN_MS, strict=True)):
        doc = {
            "schema_version": 2,
            "run_id": f"history-{i}",
            "suite": "pipeline",
            "model": "ppo",
            "created_at": _iso(stamp),
            "git": {"commit": f"h{i}", "branch": "main", "dirty": False},
            "machine": {"fingerprint": HISTORY_MACHINE},
            "metrics": {"dbn_load_time_ms": {"samples": [median] * 5}},
        }
        runs.append(run_from_dict(doc))
    return runs, times


def _redated_sample_runs(now: float) -> list[Run]:
    """The sample store's runs and the counts runs moved in time, their spacing kept, the newest a few hours old."""
    runs = [*sample_runs(), *counts_runs()]
    newest = max(datetime.fromisoformat(r.created_at.replace("Z", "+00:00")).timestamp() for r in runs if r.created_at)
    shift = ((now - SAMPLE_NEWEST_AGE_S) // 60) * 60 - newest
    return [
        replace(r, created_at=_iso(datetime.fromisoformat(r.created_at.replace("Z", "+00:00")).timestamp() + shift))
        for r in runs
        if r.created_at
    ]


def _export_history(url: str, path: Path) -> None:
    from perfgate.cli import main

    assert main(["export", "prometheus", "--store", url, "--openmetrics", str(path)]) == 0


@pytest.fixture(scope="session")
def backfilled(prom_stack: PromStack, tmp_path_factory: pytest.TempPathFactory) -> Backfilled:
    root = tmp_path_factory.mktemp("history")
    now = time.time()
    runs, times = _history_runs(now)
    three = f"sqlite:///{root / 'three.db'}"
    with open_store(three) as store:
        store.add_runs(runs)
        store.set_status("history-1", RunStatus.FLAGGED, "dbn_load_time_ms +60.0%")
    sample = f"sqlite:///{root / 'sample.db'}"
    redated = _redated_sample_runs(now)
    with open_store(sample) as store:
        store.add_runs(redated)
        for r in range(STEP_AT, RUNS - 1):
            store.set_status(f"dqn-{MACHINE}-{r:02d}", RunStatus.FLAGGED, "training_step_time_ms +25.0%")
    for name, url in (("three.om", three), ("sample.om", sample)):
        _export_history(url, root / name)
        prom_stack.backfill(root / name)
    prom_stack.backfill(root / "three.om")  # a second backfill of the same runs adds no point
    window = int(now - times[0]) + 3600
    for selector in (f'machine="{HISTORY_MACHINE}"', f'machine="{MACHINE}"', f'machine="{COUNTS_MACHINE}"'):
        prom_stack.wait_for(f"count_over_time(perfgate_history_flagged{{{selector}}}[{window}s])", timeout=180)

    def stamps(counts: bool) -> tuple[float, ...]:
        return tuple(
            sorted(
                {
                    datetime.fromisoformat(r.created_at.replace("Z", "+00:00")).timestamp()
                    for r in redated
                    if r.created_at and (r.measure == "counts") == counts
                }
            )
        )

    return Backfilled(prom_stack, times, stamps(counts=False), stamps(counts=True))
