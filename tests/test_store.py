"""One contract for every store backend, plus `perfgate record` and `check --store`."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3

import pytest

from perfgate.cli import main
from perfgate.core.codec import run_from_dict
from perfgate.errors import StorageError
from perfgate.store import open_store
from perfgate.store.base import RunQuery
from perfgate.store.baseline import pooled_baseline


@pytest.fixture(params=["memory", "sqlite"])
def store(request, tmp_path):
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/store.db"
    s = open_store(url)
    yield s
    s.close()


def _run(run_doc, **kw):
    return run_from_dict(run_doc(**kw))


def test_add_get_and_idempotent(store, run_doc):
    run = _run(run_doc, run_id="r1")
    assert store.add_run(run) is True
    assert store.add_run(run) is False
    assert store.get_run("r1") == run
    with pytest.raises(StorageError, match="no run"):
        store.get_run("nope")


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
    from perfgate.errors import MismatchError

    with pytest.raises(MismatchError, match="aaaa"):
        pooled_baseline(store, current)


def test_unsupported_scheme():
    with pytest.raises(StorageError, match="unsupported store scheme"):
        open_store("redis://localhost")


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


def _record_many(args):
    url, worker, count = args
    from perfgate.core.codec import run_from_dict as decode
    from perfgate.store import open_store as opener

    s = opener(url)
    for i in range(count):
        s.add_run(
            decode(
                {
                    "schema_version": 1,
                    "model": "dqn",
                    "run_id": f"w{worker}-{i}",
                    "metrics": {"training_step_time_ms": {"samples": [float(i + 1)]}},
                }
            )
        )
    s.close()


def test_concurrent_writers_lose_nothing(tmp_path):
    url = f"sqlite:///{tmp_path}/shared.db"
    open_store(url).close()
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        pool.map(_record_many, [(url, w, 25) for w in range(4)])
    s = open_store(url)
    assert len(s.runs(RunQuery())) == 100
    s.close()


def test_cli_record_then_check_from_store(run_doc, write_json, tmp_path, capsys):
    url = f"sqlite:///{tmp_path}/s.db"
    files = [
        write_json(f"r{i}.json", run_doc(seed=i, run_id=f"r{i}", created_at=f"2026-11-29T18:0{i}:00Z"))
        for i in range(3)
    ]
    assert main(["record", *map(str, files), "--store", url]) == 0
    assert main(["record", str(files[0]), "--store", url]) == 0
    assert "already recorded" in capsys.readouterr().err
    slow = write_json(
        "slow.json",
        run_doc(
            {"training_step_time_ms": 130.0, "dbn_load_time_ms": 2.0},
            seed=7,
            run_id="slow",
            created_at="2026-11-29T19:00:00Z",
            branch="pr",
        ),
    )
    report = tmp_path / "r.md"
    assert main(["check", "--store", url, "--current", str(slow), "--output", str(report)]) == 1
    text = report.read_text()
    assert "samples pooled from the last 3 run(s) on main" in text
    other = write_json("other.json", run_doc(fingerprint="elsewhere", run_id="o"))
    assert main(["check", "--store", url, "--current", str(other)]) == 2
    assert "machine-a" in capsys.readouterr().err


def test_cli_record_seed_file_gets_stable_id(seed_files, tmp_path, capsys):
    base, _ = seed_files
    url = f"sqlite:///{tmp_path}/s.db"
    assert main(["record", str(base), "--store", url]) == 0
    first = capsys.readouterr().err
    assert main(["record", str(base), "--store", url]) == 0
    assert "already recorded" in capsys.readouterr().err
    assert "recorded" in first


def test_cli_record_bad_file_records_nothing(run_doc, write_json, tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    good = write_json("good.json", run_doc(run_id="g"))
    bad = write_json("bad.json", json.dumps({"schema_version": 1, "model": "dqn", "metrics": {}}))
    assert main(["record", str(good), str(bad), "--store", url]) == 2
    s = open_store(url)
    assert s.runs(RunQuery()) == []
    s.close()
