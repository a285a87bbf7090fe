"""A store written before run format version 3 is migrated to the keys that version reads it under.

Version 3 fingerprints the hardware alone and names a bench run's per-round memory figure
``round_memory_mb``. The documents are upgraded when read, but the queries filter on the
columns written when each run was stored: without the migration an old store's history
would sit under fingerprints no new run has, and its per-round memory under the name of the
pipeline's peak. Both backends, PostgreSQL as a real server.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from perfgate.store import RunQuery, open_store
from tests.store.helpers import consistency_problems

# the machine details of a version-2 bench run, and the fingerprints of both versions,
# written out (computed once with perfgate.core.machine) so no change to the code changes them
DETAILS = {"cpu": "AMD EPYC", "cores": 2, "memory_gib": 7.8, "os": "Debian 12", "arch": "x86_64",
           "python": "3.11.2", "torch": "2.13.0"}  # fmt: skip
OLD_FINGERPRINT = "9a3c25eb0f6e6d36"
NEW_FINGERPRINT = "d87cbede19c6dc94"
MEMORY_2 = "peak RSS above the process state at the start of each round (includes set-up)"


def _document(run_id: str, fingerprint: str, *, bench: bool) -> dict[str, Any]:
    return {
        "schema_version": 2,
        "run_id": run_id,
        "suite": "pipeline",
        "model": "dqn",
        "created_at": f"2026-11-2{len(run_id)}T10:00:00Z",
        "git": {"commit": f"c-{run_id}", "branch": "main"},
        "machine": {**DETAILS, "fingerprint": fingerprint},
        "config": {"memory_definition": MEMORY_2} if bench else {},
        "metrics": {
            "training_step_time_ms": {"unit": "ms", "direction": "lower_is_better", "samples": [4.0, 5.0, 6.0]},
            "memory_usage_mb": {"unit": "MB", "direction": "lower_is_better", "samples": [5.0, 5.0, 5.0]},
        },
    }


OLD_RUNS = [
    _document("bench", OLD_FINGERPRINT, bench=True),
    # another fingerprint (an import's, one set by hand) and a memory figure its author measured: kept
    _document("other", "set-by-hand", bench=False),
]


def _fill(execute: Callable[..., Any], p: str) -> None:
    """The rows a version-2 perfgate stored for OLD_RUNS, and a baseline of the bench run."""
    for doc in OLD_RUNS:
        fp, created = doc["machine"]["fingerprint"], doc["created_at"].replace("Z", ".000000Z")
        keys = (doc["run_id"], "pipeline", "dqn", fp, "main", doc["git"]["commit"], created)
        execute(f"INSERT INTO runs VALUES ({', '.join([p] * 8)})", (*keys, json.dumps(doc)))
        for name, metric in doc["metrics"].items():
            s = sorted(metric["samples"])  # three samples: the quantiles interpolate the top two

            def quantile(q: float, s: list[float] = s) -> float:
                return s[1] + (2 * q - 1) * (s[2] - s[1])

            summary = (3, sum(s) / 3, quantile(0.5), quantile(0.95), quantile(0.99), s[0], s[2])
            execute(
                f"INSERT INTO metrics VALUES ({', '.join([p] * 17)})",
                (keys[0], name, *keys[1:], metric["unit"], metric["direction"], *summary),
            )
    execute(
        f"INSERT INTO baselines (suite, model, machine, branch, run_ids, method, created_at) VALUES "
        f"({', '.join([p] * 7)})",
        ("pipeline", "dqn", OLD_FINGERPRINT, "main", '["bench"]', "latest", "2026-11-29T10:00:00Z"),
    )


def _check_migrated(url: str) -> None:
    with open_store(url) as s:
        assert [r.run_id for r in s.runs(RunQuery(machine=NEW_FINGERPRINT))] == ["bench"]
        assert s.runs(RunQuery(machine=OLD_FINGERPRINT)) == []
        assert [r.run_id for r in s.runs(RunQuery(machine="set-by-hand"))] == ["other"]
        # the per-round figure keeps its meaning under its own name; the other run's is untouched
        assert s.series("dqn", NEW_FINGERPRINT, "memory_usage_mb") == []
        assert [p.value for p in s.series("dqn", NEW_FINGERPRINT, "round_memory_mb")] == [5.0]
        assert [p.value for p in s.series("dqn", "set-by-hand", "memory_usage_mb")] == [5.0]
        assert [p.value for p in s.series("dqn", NEW_FINGERPRINT, "training_step_time_ms")] == [5.0]
        record = s.baseline(suite="pipeline", model="dqn", machine=NEW_FINGERPRINT, branch="main")
        assert record is not None and record.run_ids == ("bench",)
        assert s.get_run("bench").metrics["round_memory_mb"].direction.value == "informational"
        assert consistency_problems(s) == []


def test_a_sqlite_store_of_run_format_2_is_read_under_the_keys_of_format_3(tmp_path):
    from perfgate.store.sqlite import MIGRATIONS

    path = tmp_path / "v2.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY)")
        conn.executescript(MIGRATIONS[0])
        MIGRATIONS[1](conn)  # type: ignore[operator]
        conn.executescript(MIGRATIONS[2])  # type: ignore[arg-type]
        conn.executemany("INSERT INTO schema_migrations VALUES (?)", [(1,), (2,), (3,)])
        _fill(conn.execute, "?")
    conn.close()
    _check_migrated(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:
        assert [v for (v,) in conn.execute("SELECT version FROM schema_migrations ORDER BY version")] == [1, 2, 3, 4]
    conn.close()


def test_a_postgres_store_of_run_format_2_is_read_under_the_keys_of_format_3(pg_server):
    import psycopg

    from perfgate.store.postgres import MIGRATIONS

    url = pg_server.create_database("format2_keys")
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY)")
            for statement in MIGRATIONS[0]:
                assert isinstance(statement, str)
                conn.execute(statement)
            conn.execute("INSERT INTO schema_migrations VALUES (1)")
            _fill(conn.execute, "%s")
        _check_migrated(url)
        with psycopg.connect(url, autocommit=True) as conn:
            versions = [v for (v,) in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]
        assert versions == [1, 2]
    finally:
        pg_server.drop_database("format2_keys")


def test_the_frozen_fingerprints_are_the_ones_perfgate_computes():
    """The values written out above and the migration's frozen hash agree with perfgate's own code."""
    from perfgate.core.machine import hardware_fingerprint, v2_fingerprint
    from perfgate.store import _migrations as migrations

    assert (v2_fingerprint(DETAILS), hardware_fingerprint(DETAILS)) == (OLD_FINGERPRINT, NEW_FINGERPRINT)
    assert migrations._fingerprint_4(DETAILS, migrations._FINGERPRINT_2) == OLD_FINGERPRINT
    assert migrations._fingerprint_4(DETAILS, migrations._FINGERPRINT_3) == NEW_FINGERPRINT
