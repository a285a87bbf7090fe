"""Checks shared by the store tests: is every stored run whole, do the metric rows match it?"""

from __future__ import annotations

import json
import math
import os
import shutil
from typing import Any

import pytest

from perfgate.core.codec import run_from_dict
from perfgate.store._rows import created_key, metric_rows
from perfgate.store._sql import SQLStore


def doc(
    run_id: str,
    *,
    model: str = "dqn",
    fingerprint: str | None = "machine-a",
    branch: str | None = "main",
    commit: str = "abc123",
    created_at: str | None = "2026-11-29T18:00:00Z",
    samples: dict[str, list[float]] | None = None,
    suite: str = "pipeline",
) -> dict[str, Any]:
    """A small run document with given samples (default: two metrics, three samples)."""
    samples = samples or {"training_step_time_ms": [100.0, 101.0, 99.0], "dbn_load_time_ms": [2.0, 2.1, 1.9]}
    d: dict[str, Any] = {
        "schema_version": 1,
        "run_id": run_id,
        "suite": suite,
        "model": model,
        "git": {"commit": commit, **({"branch": branch} if branch else {})},
        "machine": {"fingerprint": fingerprint} if fingerprint else {},
        "metrics": {name: {"samples": values} for name, values in samples.items()},
    }
    if created_at:
        d["created_at"] = created_at
    return d


def run(run_id: str, **kw: Any):  # type: ignore[no-untyped-def]
    return run_from_dict(doc(run_id, **kw))


def stamp(i: int) -> str:
    """Distinct, increasing timestamps."""
    return f"2026-11-{1 + i // 1440:02d}T{(i // 60) % 24:02d}:{i % 60:02d}:00Z"


def consistency_problems(store: SQLStore) -> list[str]:
    """Everything wrong with a SQL store's tables: half-written runs, rows that disagree."""
    problems = []
    rows: dict[str, dict[str, tuple[Any, ...]]] = {}
    for r in store._fetch(
        "SELECT run_id, metric, model, machine, branch, git_commit, created_at, unit, direction, n, mean, median,"
        " p95, p99, min_value, max_value FROM metrics"
    ):
        rows.setdefault(r[0], {})[r[1]] = r[2:]
    stored = store._fetch("SELECT run_id, model, machine, branch, git_commit, created_at, document FROM runs")
    seen = set()
    for run_id, model, machine, branch, commit, created, document in stored:
        seen.add(run_id)
        try:
            run = run_from_dict(json.loads(document))
        except Exception as exc:
            problems.append(f"run {run_id}: document unreadable: {exc}")
            continue
        if (model, machine, branch, commit, created) != (
            run.model_key,
            run.machine.fingerprint,
            run.git.branch,
            run.git.commit,
            created_key(run.created_at),
        ):
            problems.append(f"run {run_id}: key columns disagree with the document")
        expected = {row.metric: row for row in metric_rows(run)}
        have = rows.get(run_id, {})
        if set(have) != set(expected):
            problems.append(f"run {run_id}: metric rows {sorted(have)} != document metrics {sorted(expected)}")
            continue
        for name, row in expected.items():
            got = have[name]
            want = (model, machine, branch, commit, created, row.unit, row.direction, row.n, row.mean, row.median)
            want += (row.p95, row.p99, row.min, row.max)
            same = all(
                math.isclose(a, b, rel_tol=1e-12) if isinstance(b, float) else a == b
                for a, b in zip(got, want, strict=True)
            )
            if not same:
                problems.append(f"run {run_id}: metric row {name} differs from the document: {got} != {want}")
    orphans = set(rows) - seen
    if orphans:
        problems.append(f"metric rows without a run: {sorted(orphans)[:5]}")
    return problems


def without_dac_override() -> list[str]:
    """The command prefix that makes file permissions bind: as root they do not, so drop the
    capabilities that override them (empty for any other user)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot make a file or folder read-only for this process")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner", "--inh-caps=-all", "--"]
