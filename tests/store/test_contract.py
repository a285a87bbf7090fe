"""One contract for every store backend: memory, SQLite and a real PostgreSQL server.

Every test here takes the ``store`` fixture and runs unchanged against all three
(tests/store/conftest.py); tests of what only a shared backend can do (reopening, several
processes) take ``shared_url``.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import sys

import numpy as np
import pytest

from perfgate.core.codec import run_from_dict
from perfgate.errors import MismatchError, StorageError
from perfgate.store import BaselineRecord, RunQuery, RunStatus, SeriesPoint, mask_url, open_store
from perfgate.store.baseline import (
    accept_run,
    baseline_for,
    pooled_baseline,
    record_verdict,
    stored_baseline,
    update_baselines,
)
from tests.store.helpers import consistency_problems, doc, run, stamp


def _run(run_doc, **kw):
    return run_from_dict(run_doc(**kw))


# --- runs -----------------------------------------------------------------------------


def test_add_get_and_idempotent(store, run_doc):
    r = _run(run_doc, run_id="r1")
    assert store.add_run(r) is True
    assert store.add_run(r) is False
    assert store.get_run("r1") == r
    with pytest.raises(StorageError, match="no run"):
        store.get_run("nope")


def test_run_keeps_samples_provenance_and_details(store):
    d = doc("full", samples={"training_step_time_ms": [3.25, 1e-9, 123456.789, 0.1 + 0.2]})
    d["machine"] = {"fingerprint": "fp1", "cpu": "Xeon", "cores": 2, "gpu": None}
    d["config"] = {"data": "bars.dbn", "seed": 7, "sizes": [1, 2]}
    d["git"]["dirty"] = True
    d["created_at"] = "2026-11-29T18:00:00.250000Z"
    original = run_from_dict(d)
    store.add_run(original)
    back = store.get_run("full")
    assert back == original
    assert back.metrics["training_step_time_ms"].samples == (3.25, 1e-9, 123456.789, 0.1 + 0.2)
    assert dict(back.machine.details) == {"cpu": "Xeon", "cores": 2, "gpu": None}
    assert back.git.dirty is True and back.config["sizes"] == [1, 2]
    assert store.has_run("full") and not store.has_run("other")


def test_add_runs_reports_which_were_new(store):
    assert store.add_runs([run("a"), run("b")]) == [True, True]
    assert store.add_runs([run("b"), run("c")]) == [False, True]
    assert {r.run_id for r in store.runs(RunQuery())} == {"a", "b", "c"}


def test_a_run_id_twice_in_one_batch_is_stored_once(store):
    assert store.add_runs([run("twin"), run("twin", commit="other"), run("solo")]) == [True, False, True]
    assert store.get_run("twin").git.commit == "abc123"
    assert len(store.series("dqn", "machine-a", "training_step_time_ms")) == 2


def test_run_without_id_is_refused(store, run_doc):
    with pytest.raises(StorageError, match="run_id"):
        store.add_run(_run(run_doc))


def test_queries_newest_first_and_filtered(store, run_doc):
    for i, (model, fp, branch) in enumerate(
        [
            ("dqn", "a", "main"),
            ("dqn", "b", "main"),
            ("ppo", "a", "main"),
            ("dqn", "a", "feature"),
            ("dqn", "a", "main"),
        ]
    ):
        store.add_run(
            _run(
                run_doc,
                run_id=f"r{i}",
                model=model,
                fingerprint=fp,
                branch=branch,
                created_at=f"2026-11-29T18:0{i}:00Z",
            )
        )
    assert [r.run_id for r in store.runs(RunQuery(model="dqn", machine="a", branch="main"))] == ["r4", "r0"]
    assert [r.run_id for r in store.runs(RunQuery(branch="feature"))] == ["r3"]
    assert [r.run_id for r in store.runs(RunQuery(limit=2))] == ["r4", "r3"]
    assert [r.run_id for r in store.runs(RunQuery(model="DQN", suite="pipeline", machine="b"))] == ["r1"]


def test_sub_second_timestamps_sort_by_time_not_text(store):
    # regression for text ordering: "...:00.5Z" sorts before "...:00Z" as text but is later
    store.add_run(run("whole", created_at="2026-11-29T18:00:00Z"))
    store.add_run(run("half", created_at="2026-11-29T18:00:00.500000Z"))
    store.add_run(run("undated", created_at=None))
    assert [r.run_id for r in store.runs(RunQuery())] == ["half", "whole", "undated"]


def test_latest_run_per_model_and_machine(store):
    for i, (rid, model, fp) in enumerate(
        [("d-a-old", "dqn", "a"), ("d-b", "dqn", "b"), ("p-a", "ppo", "a"), ("d-a-new", "dqn", "a")]
    ):
        store.add_run(run(rid, model=model, fingerprint=fp, created_at=stamp(i)))
    assert [r.run_id for r in store.latest(RunQuery())] == ["d-a-new", "d-b", "p-a"]  # by model, then machine
    assert sorted(r.run_id for r in store.latest(RunQuery(model="dqn"))) == ["d-a-new", "d-b"]
    assert [r.run_id for r in store.latest(RunQuery(machine="b"))] == ["d-b"]


# --- series -----------------------------------------------------------------------------


def _series_fixture(store):
    rng = np.random.default_rng(1)
    expected = []
    for i in range(12):
        branch = "main" if i % 3 else "feature"
        samples = [float(v) for v in rng.lognormal(np.log(100 + i), 0.05, 30)]
        store.add_run(
            run(
                f"s{i:02d}",
                commit=f"c{i:02d}",
                branch=branch,
                created_at=stamp(i),
                samples={"training_step_time_ms": samples, "dbn_load_time_ms": [1.0]},
            )
        )
        expected.append((f"s{i:02d}", branch, samples))
    store.add_run(run("other-machine", fingerprint="zzz", created_at=stamp(99)))
    return expected


def test_series_oldest_first_with_summary_values(store):
    expected = _series_fixture(store)
    points = store.series("dqn", "machine-a", "training_step_time_ms")
    assert [p.run_id for p in points] == [rid for rid, _, _ in expected]
    assert all(isinstance(p, SeriesPoint) for p in points)
    first = points[0]
    assert first == ("s00", stamp(0), "c00", pytest.approx(float(np.median(expected[0][2]))))
    for stat, fn in (
        ("p95", lambda s: np.percentile(s, 95)),
        ("p99", lambda s: np.percentile(s, 99)),
        ("mean", np.mean),
        ("min", np.min),
        ("max", np.max),
        ("p50", np.median),
    ):
        values = [p.value for p in store.series("dqn", "machine-a", "training_step_time_ms", stat)]
        assert values == pytest.approx([float(fn(s)) for _, _, s in expected], rel=1e-12), stat


def test_series_filters_and_limit_keeps_the_newest(store):
    expected = _series_fixture(store)
    main = store.series("DQN", "machine-a", "training_step_time_ms", branch="main")
    assert [p.run_id for p in main] == [rid for rid, b, _ in expected if b == "main"]
    last3 = store.series("dqn", "machine-a", "training_step_time_ms", limit=3)
    assert [p.run_id for p in last3] == ["s09", "s10", "s11"]
    assert len(store.series("dqn", None, "training_step_time_ms")) == 13
    assert store.series("dqn", "machine-a", "no_such_metric") == []
    with pytest.raises(StorageError, match="statistic"):
        store.series("dqn", "machine-a", "training_step_time_ms", "p42")


# --- statuses and baselines -----------------------------------------------------------------------


def test_status_of_runs_and_checks(store):
    assert store.status("ghost") is None
    store.add_run(run("r1"))
    assert store.status("r1") is RunStatus.RECORDED
    store.set_status("checked-first", RunStatus.FLAGGED, "2 regressions")
    assert store.status("checked-first") is RunStatus.FLAGGED
    store.add_run(run("checked-first"))  # recording a checked run keeps its status
    assert store.status("checked-first") is RunStatus.FLAGGED
    store.set_status("r1", RunStatus.PASSED)
    store.set_status("r1", RunStatus.FLAGGED)
    assert store.status("r1") is RunStatus.FLAGGED


def test_flagged_runs_leave_baselines_until_accepted(store):
    for i in range(4):
        store.add_run(run(f"r{i}", created_at=stamp(i)))
    assert record_verdict(store, "r3", regressed=True, note="slower") is RunStatus.FLAGGED
    assert record_verdict(store, "r2", regressed=False) is RunStatus.PASSED
    query = RunQuery(model="dqn", include_flagged=False)
    assert [r.run_id for r in store.runs(query)] == ["r2", "r1", "r0"]
    assert [r.run_id for r in store.runs(RunQuery(model="dqn"))] == ["r3", "r2", "r1", "r0"]
    current = run("cur", created_at=stamp(10))
    base, source = pooled_baseline(store, current, k=2)
    assert base.config["pooled_run_ids"] == ["r2", "r1"] and "r3" not in source
    assert accept_run(store, "r3") is RunStatus.FLAGGED
    assert store.status("r3") is RunStatus.ACCEPTED
    assert record_verdict(store, "r3", regressed=True) is RunStatus.ACCEPTED  # acceptance sticks
    base, _ = pooled_baseline(store, current, k=2)
    assert base.config["pooled_run_ids"] == ["r3", "r2"]
    assert accept_run(store, "r2") is RunStatus.PASSED and store.status("r2") is RunStatus.PASSED
    with pytest.raises(StorageError, match="no run or check"):
        accept_run(store, "ghost")


def test_baseline_records_keep_history_and_key(store):
    first = BaselineRecord(
        suite="pipeline", model="DQN", machine="a", branch="main", run_ids=("r1", "r0"), created_at=stamp(1)
    )
    second = dataclasses.replace(first, run_ids=("r2", "r1"), created_at=stamp(2))
    other = dataclasses.replace(first, machine=None, run_ids=("x",))
    for record in (first, second, other):
        store.save_baseline(record)
    got = store.baseline(suite="pipeline", model="dqn", machine="a", branch="main")
    assert got == second and got.model == "dqn"
    assert store.baseline(suite="pipeline", model="dqn", machine=None, branch="main") == other
    assert store.baseline(suite="pipeline", model="dqn", machine="a", branch="dev") is None
    assert store.baselines() == [other, second]  # by model, then machine (none first)
    assert store.baselines("ppo") == []
    assert len(store.baselines("dqn")) == 2


def test_update_baselines_takes_the_last_k_unflagged_runs_per_machine(store):
    for i in range(14):
        store.add_run(run(f"a{i:02d}", created_at=stamp(i), fingerprint="a"))
    for i in range(3):
        store.add_run(run(f"b{i}", created_at=stamp(i), fingerprint="b"))
    store.add_run(run("pr", created_at=stamp(50), branch="pr-7"))
    store.add_run(run("ppo", model="ppo", created_at=stamp(1)))
    store.set_status("a13", RunStatus.FLAGGED)
    done = update_baselines(store, created_at=stamp(60), model="DQN", k=10)
    records = {rec.machine: rec for rec, _ in done}
    assert set(records) == {"a", "b"}
    assert records["a"].run_ids == tuple(f"a{i:02d}" for i in range(12, 2, -1))  # a13 flagged, pr not main
    assert records["b"].run_ids == ("b2", "b1", "b0")  # fewer than K: all of them, never one
    assert store.baseline(suite="pipeline", model="dqn", machine="a", branch="main") == records["a"]
    assert store.baselines("ppo") == []
    with pytest.raises(StorageError, match="no unflagged run of model 'tft'"):
        update_baselines(store, created_at=stamp(61), model="tft")
    with pytest.raises(StorageError, match="at least 1"):
        update_baselines(store, created_at=stamp(61), k=0)


def test_check_uses_the_stored_baseline_then_falls_back_to_pooled(store):
    for i in range(6):
        store.add_run(run(f"r{i}", created_at=stamp(i)))
    current = run("cur", created_at=stamp(20))
    assert stored_baseline(store, current) is None
    _, source = baseline_for(store, current, k=3)
    assert "samples pooled from the last 3 run(s) on main" in source and "kept by" not in source
    update_baselines(store, created_at=stamp(21), k=4)
    base, source = baseline_for(store, current, k=3)
    assert "kept by `perfgate baseline update`" in source and "last 4 run(s)" in source
    assert base.config["pooled_run_ids"] == ["r5", "r4", "r3", "r2"]
    assert len(base.metrics["training_step_time_ms"].samples) == 12
    inside = run("r5", created_at=stamp(5))  # a run is never its own baseline
    base, source = baseline_for(store, inside, k=3)
    assert base.config["pooled_run_ids"] == ["r4", "r3", "r2"] and "kept by" not in source


def test_pooled_baseline(store, run_doc):
    for i in range(4):
        store.add_run(_run(run_doc, run_id=f"r{i}", seed=i, created_at=f"2026-11-29T18:0{i}:00Z", n=10))
    current = _run(run_doc, run_id="cur", seed=9, created_at="2026-11-29T19:00:00Z")
    base, source = pooled_baseline(store, current, k=3)
    assert len(base.metrics["training_step_time_ms"].samples) == 30
    assert base.run_id == "r3" and "r3" in source and "r0" not in source


def test_pooled_baseline_names_the_fingerprints_it_has(store, run_doc):
    store.add_run(_run(run_doc, run_id="r0", fingerprint="aaaa"))
    current = _run(run_doc, run_id="cur", fingerprint="zzzz")
    with pytest.raises(MismatchError, match="aaaa"):
        pooled_baseline(store, current)
    with pytest.raises(MismatchError, match="aaaa"):
        baseline_for(store, current)
    with pytest.raises(MismatchError, match="no runs of this model at all"):
        pooled_baseline(store, _run(run_doc, run_id="p", model="ppo"))


# --- opening -----------------------------------------------------------------------------


def test_reopened_store_has_everything(shared_url):
    with open_store(shared_url) as s:
        s.add_runs([run("r0", created_at=stamp(0)), run("r1", created_at=stamp(1))])
        s.set_status("r1", RunStatus.FLAGGED, "why")
        update_baselines(s, created_at=stamp(2), k=3)
    with open_store(shared_url) as s:  # migrations already done: opening writes nothing
        assert s.get_run("r1").run_id == "r1"
        assert s.status("r1") is RunStatus.FLAGGED
        assert [b.run_ids for b in s.baselines()] == [("r0",)]
        assert consistency_problems(s) == []


def test_unsupported_scheme():
    with pytest.raises(StorageError, match="unsupported store scheme"):
        open_store("redis://localhost")


def test_password_is_masked_everywhere():
    assert mask_url("postgresql://u:s3cret@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert mask_url("postgresql://u@h/db") == "postgresql://u@h/db"
    assert mask_url("postgresql://h/db?password=s3cret&sslmode=off") == "postgresql://h/db?password=***&sslmode=off"
    assert "s3cret" not in mask_url("host=h password=s3cret user=u")
    with pytest.raises(StorageError) as info:
        open_store("mysql://u:s3cret@h/db")
    assert "s3cret" not in str(info.value) and "***" in str(info.value)


def test_postgres_without_its_driver_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    with pytest.raises(StorageError, match=r"pip install 'psycopg\[binary\]'") as info:
        open_store("postgresql://u:s3cret@127.0.0.1:1/db")
    assert "s3cret" not in str(info.value) and "postgresql://u:***@127.0.0.1:1/db" in str(info.value)


def test_unopenable_sqlite_path_is_storage_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StorageError, match="cannot open"):
        open_store(f"sqlite:///{blocker}/sub/store.db")


def test_newer_store_schema_refused(tmp_path):
    path = tmp_path / "s.db"
    open_store(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO schema_migrations (version) VALUES (99)")
    with pytest.raises(StorageError, match="newer"):
        open_store(f"sqlite:///{path}")


def test_newer_postgres_schema_refused(pg_server):
    url = pg_server.create_database("newer_schema")
    try:
        open_store(url).close()
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("INSERT INTO schema_migrations (version) VALUES (99)")
        with pytest.raises(StorageError, match="newer") as info:
            open_store(url)
        assert pg_server.password not in str(info.value)
    finally:
        pg_server.drop_database("newer_schema")


# a document as a schema-1 store kept it (the run file format of that time), written out so
# that no change to the codec can change what the migration is tested on
_V1_DOCUMENT = (
    '{"created_at": "2026-11-29T18:00:00Z", "git": {"branch": "main", "commit": "abc123"}, '
    '"machine": {"fingerprint": "machine-a"}, "config": {}, "model": "DQN", "run_id": "old", '
    '"schema_version": 1, "suite": "pipeline", "metrics": {"training_step_time_ms": '
    '{"direction": "lower_is_better", "samples": [4.0, 1.0, 2.0], "unit": "ms"}}}'
)


def _v1_store(path):
    from perfgate.store.sqlite import MIGRATIONS

    undated = (
        _V1_DOCUMENT.replace('"created_at": "2026-11-29T18:00:00Z", ', "")
        .replace('"old"', '"undated"')
        .replace("abc123", "abc124")
    )
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY)")
        conn.executescript(MIGRATIONS[0])
        conn.execute("INSERT INTO schema_migrations VALUES (1)")
        conn.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            ("old", "pipeline", "dqn", "machine-a", "main", "abc123", "2026-11-29T18:00:00Z", _V1_DOCUMENT),
        )
        conn.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            ("undated", "pipeline", "dqn", "machine-a", "main", "abc124", None, undated),
        )
    conn.close()


def test_sqlite_version_1_store_is_migrated_with_its_runs(tmp_path):
    """A store written before metric rows existed (schema 1) gains them on open, from the documents,
    and its runs table the NOT NULL created_at of schema 3."""
    path = tmp_path / "v1.db"
    _v1_store(path)
    with open_store(f"sqlite:///{path}") as s:
        points = s.series("dqn", "machine-a", "training_step_time_ms")
        assert points == [("undated", None, "abc124", 2.0), ("old", "2026-11-29T18:00:00Z", "abc123", 2.0)]
        assert s.series("dqn", "machine-a", "training_step_time_ms", "p95")[1].value == pytest.approx(3.8)
        assert s.series("dqn", "machine-a", "training_step_time_ms", "mean")[1].value == pytest.approx(7 / 3)
        s.add_run(run("new", created_at="2026-11-29T18:00:00.5Z"))
        assert [r.run_id for r in s.runs(RunQuery())] == ["new", "old", "undated"]
        assert s.get_run("old").model == "DQN"
        assert consistency_problems(s) == []
    with sqlite3.connect(path) as conn:
        assert [v for (v,) in conn.execute("SELECT version FROM schema_migrations ORDER BY version")] == [1, 2, 3, 4]
        assert conn.execute("SELECT created_at FROM runs WHERE run_id = 'undated'").fetchone() == ("",)
        with pytest.raises(sqlite3.IntegrityError, match="NOT NULL"):
            conn.execute("UPDATE runs SET created_at = NULL WHERE run_id = 'old'")
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        indexes = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {"runs_model_machine", "runs_branch", "metrics_series", "baselines_key"} <= indexes
    conn.close()


def test_migrations_call_no_live_code():
    """Regression for a migration that decoded documents with the live codec: the migrations
    module imports the standard library only, so what an upgrade does is fixed when it ships."""
    import ast
    from pathlib import Path

    import perfgate.store._migrations as migrations

    tree = ast.parse(Path(migrations.__file__).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not {name for name in imported if name.startswith("perfgate")}, imported


def _sqlite_columns(path):
    with sqlite3.connect(path) as conn:
        tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        out = {
            # an INTEGER PRIMARY KEY is the rowid, never NULL; any other column only with NOT NULL
            (table, name): (kind.lower(), bool(notnull) or (pk == 1 and kind.upper() == "INTEGER"))
            for table in tables
            if not table.startswith("sqlite_")
            for _, name, kind, notnull, _default, pk in conn.execute(f"PRAGMA table_info({table})")
        }
    conn.close()
    return out


def test_sqlite_and_postgresql_tables_agree(tmp_path, pg_server):
    """Same tables, columns, types and NOT NULL in both backends (regression for runs.created_at,
    nullable in SQLite only). SQLite's INTEGER is 64-bit: PostgreSQL's bigint id is the same type."""
    path = tmp_path / "s.db"
    open_store(f"sqlite:///{path}").close()
    _v1_store(tmp_path / "v1.db")
    open_store(f"sqlite:///{tmp_path / 'v1.db'}").close()
    url = pg_server.create_database("ddl_agree")
    try:
        open_store(url).close()
        import psycopg

        with psycopg.connect(url) as conn:
            rows = conn.execute(
                "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns"
                " WHERE table_schema = 'public'"
            ).fetchall()
    finally:
        pg_server.drop_database("ddl_agree")
    postgres = {
        (table, name): ({"bigint": "integer"}.get(kind, kind), nullable == "NO") for table, name, kind, nullable in rows
    }
    fresh = _sqlite_columns(path)
    assert fresh == postgres
    assert _sqlite_columns(tmp_path / "v1.db") == fresh


def test_the_protocol_imports_no_backend():
    """Regression for the import circle of a protocol module that also chose the backends: the
    protocol imports nothing of the store package, and the factory imports backends lazily."""
    import ast
    from pathlib import Path

    import perfgate.store
    import perfgate.store.base as base

    def imported(path, *, top_level_only):
        tree = ast.parse(Path(path).read_text())
        nodes = tree.body if top_level_only else list(ast.walk(tree))
        names = {a.name for n in nodes if isinstance(n, ast.Import) for a in n.names}
        return names | {n.module or "" for n in nodes if isinstance(n, ast.ImportFrom)}

    assert not {n for n in imported(base.__file__, top_level_only=False) if n.startswith("perfgate.store")}
    backends = {"perfgate.store.sqlite", "perfgate.store.postgres", "perfgate.store.memory"}
    assert not imported(perfgate.store.__file__, top_level_only=True) & backends
