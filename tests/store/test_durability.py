"""Writes are transactions: concurrent writers lose nothing, a killed writer leaves no half
run, and a full or read-only disk, a wrong password or an unreachable server give exit 2
with a one-line message naming the store (password masked), and no damage."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from perfgate.cli import main
from perfgate.core.codec import run_to_dict
from perfgate.errors import StorageError
from perfgate.store import open_store
from perfgate.store.base import RunQuery
from tests.store.helpers import consistency_problems, run, stamp, without_dac_override

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _samples(seed: int, metrics: int = 7, n: int = 50) -> dict[str, list[float]]:
    rng = random.Random(seed)
    names = [
        "dbn_load_time_ms",
        "feature_extraction_time_ms",
        "training_step_time_ms",
        "inference_latency_us",
        "throughput_samples_per_sec",
        "memory_usage_mb",
        "gpu_utilization_pct",
    ]
    return {name: [rng.uniform(1.0, 100.0) for _ in range(n)] for name in names[:metrics]}


# --- many writers at once -----------------------------------------------------------------


def _record_many(args: tuple[str, int, int]) -> int:
    url, worker, count = args
    from perfgate.store import open_store as opener
    from tests.store.helpers import run as make

    with opener(url) as s:
        for i in range(count):
            s.add_run(make(f"w{worker}-{i}", created_at=stamp(worker * count + i), samples=_samples(i, 3, 20)))
    return count


def test_concurrent_writers_lose_nothing(shared_url):
    workers, each = 8, 50
    open_store(shared_url).close()
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        assert sum(pool.map(_record_many, [(shared_url, w, each) for w in range(workers)])) == workers * each
    with open_store(shared_url) as s:
        assert len(s.runs(RunQuery())) == workers * each
        assert {r.run_id for r in s.runs(RunQuery())} == {f"w{w}-{i}" for w in range(workers) for i in range(each)}
        assert consistency_problems(s) == []


def test_concurrent_first_open_migrates_once(shared_url):
    # every CI job may be the first to open a fresh store
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        assert pool.map(_record_many, [(shared_url, w, 1) for w in range(4)]) == [1, 1, 1, 1]
    with open_store(shared_url) as s:
        assert len(s.runs(RunQuery())) == 4


# --- a writer killed mid-run -----------------------------------------------------------------

_KILL_INSIDE = textwrap.dedent(
    """
    import sys, time
    from perfgate.store import open_store
    from perfgate.store._sql import SQLStore
    from tests.store.helpers import run

    original = SQLStore._insert_metrics

    def stall(self, cur, prepared):
        original(self, cur, prepared)
        if any(p.run.run_id == "victim" for p in prepared):  # its rows are written, not committed
            print("inside", flush=True)
            time.sleep(600)

    SQLStore._insert_metrics = stall
    s = open_store(sys.argv[1])
    s.add_run(run("before", created_at="2026-11-29T18:00:00Z"))
    s.add_run(run("victim", created_at="2026-11-29T18:01:00Z"))
    """
)


def test_writer_killed_inside_the_transaction_leaves_nothing(shared_url):
    with subprocess.Popen(
        [sys.executable, "-c", _KILL_INSIDE, shared_url], stdout=subprocess.PIPE, text=True, env=_env()
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "inside"
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    with open_store(shared_url) as s:
        assert s.has_run("before")
        assert not s.has_run("victim")
        assert s.series("dqn", "machine-a", "training_step_time_ms") == [
            ("before", "2026-11-29T18:00:00Z", "abc123", 100.0)
        ]
        assert consistency_problems(s) == []
        assert s.add_run(run("victim")) is True  # nothing left behind blocks it


_RECORD_LOOP = textwrap.dedent(
    """
    import random, sys
    from perfgate.store import open_store
    from tests.store.helpers import run, stamp

    url, start = sys.argv[1], int(sys.argv[2])
    rng = random.Random(start)
    names = ["training_step_time_ms", "dbn_load_time_ms", "memory_usage_mb", "inference_latency_us"]
    s = open_store(url)
    for i in range(start, start + 100000):
        samples = {name: [rng.uniform(1, 9) for _ in range(200)] for name in names}
        s.add_run(run(f"loop{i}", created_at=stamp(i), samples=samples))
        print(i, flush=True)
    """
)


def test_writer_killed_at_random_moments_leaves_whole_runs(shared_url):
    rng = random.Random(20261129)
    committed: set[str] = set()
    for start in (0, 1000, 2000):
        with subprocess.Popen(
            [sys.executable, "-c", _RECORD_LOOP, shared_url, str(start)],
            stdout=subprocess.PIPE,
            text=True,
            env=_env(),
        ) as child:
            assert child.stdout is not None
            try:
                for _ in range(3 + rng.randrange(5)):
                    line = child.stdout.readline()
                    assert line, "the recording loop ended early"
                    committed.add(f"loop{int(line)}")
                time.sleep(rng.uniform(0.0, 0.03))  # somewhere in the following add_run calls
            finally:
                child.send_signal(signal.SIGKILL)
                child.wait(timeout=60)
            committed.update(f"loop{int(i)}" for i in child.stdout.read().split())
    with open_store(shared_url) as s:
        stored = {r.run_id for r in s.runs(RunQuery())}
        assert committed <= stored  # every add_run that returned is there
        assert len(stored - committed) <= 3  # at most one committed-but-unreported run per kill
        assert consistency_problems(s) == []


def test_failed_batch_stores_none_of_its_runs(shared_url, monkeypatch):
    from perfgate.store._sql import SQLStore

    s = open_store(shared_url)
    original = SQLStore._insert_metrics

    def fail_after_the_runs(self, cur, prepared):
        original(self, cur, prepared[:1])  # the runs and one run's metric rows are written
        raise self.driver_errors[0]("simulated failure after part of the batch")

    monkeypatch.setattr(SQLStore, "_insert_metrics", fail_after_the_runs)
    with pytest.raises(StorageError, match="simulated failure") as info:
        s.add_runs([run("b1"), run("b2"), run("b3")])
    assert str(info.value).startswith(s.url)
    monkeypatch.undo()
    assert s.runs(RunQuery()) == []
    assert s.add_runs([run("b1")]) == [True]
    assert consistency_problems(s) == []
    s.close()


# --- full disk, read-only disk -----------------------------------------------------------------


def _big_run_file(tmp_path: Path, run_id: str, samples: int = 20000) -> Path:
    path = tmp_path / f"{run_id}.json"
    path.write_text(json.dumps(run_to_dict(run(run_id, samples=_samples(1, 7, samples)))))
    return path


def _seed_store(url: str) -> None:
    with open_store(url) as s:
        s.add_runs([run(f"old{i}", created_at=stamp(i)) for i in range(3)])


def _intact(path: Path, url: str) -> None:
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    with open_store(url) as s:
        assert sorted(r.run_id for r in s.runs(RunQuery())) == ["old0", "old1", "old2"]
        assert consistency_problems(s) == []


_RECORD_WITH_FILE_LIMIT = textwrap.dedent(
    """
    import resource, signal, sys
    from perfgate.cli import main

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
    limit = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    sys.exit(main(sys.argv[2:]))
    """
)


def test_full_disk_gives_exit_2_and_no_damage(tmp_path):
    path = tmp_path / "full.db"
    url = f"sqlite:///{path}"
    _seed_store(url)
    big = _big_run_file(tmp_path, "big")
    limit = max(path.stat().st_size, 64 * 1024) + 64 * 1024  # the WAL may grow to this; a big run does not fit
    out = subprocess.run(
        [sys.executable, "-c", _RECORD_WITH_FILE_LIMIT, str(limit), "record", str(big), "--store", url],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr
    assert lines[0].startswith(f"perfgate record: error: {url}: cannot record run big")
    assert "free" in lines[0]
    _intact(path, url)


def test_store_at_its_size_limit_gives_a_clear_error_and_no_damage(tmp_path, write_json):
    path = tmp_path / "capped.db"
    url = f"sqlite:///{path}"
    _seed_store(url)
    s = open_store(url)
    pages = s._conn.execute("PRAGMA page_count").fetchone()[0]
    s._conn.execute(f"PRAGMA max_page_count = {pages + 2}")
    with pytest.raises(StorageError, match=r"cannot record run big: database or disk is full; free disk space"):
        s.add_run(run("big", samples=_samples(1, 7, 5000)))
    s.close()
    _intact(path, url)


def test_read_only_store_gives_exit_2_and_no_damage(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "ro.db"
    url = f"sqlite:///{path}"
    _seed_store(url)
    new = _big_run_file(tmp_path, "new", samples=10)
    prefix = without_dac_override()
    path.chmod(0o444)
    folder.chmod(0o555)
    try:
        out = subprocess.run(
            [*prefix, sys.executable, "-m", "perfgate", "record", str(new), "--store", url],
            capture_output=True,
            text=True,
            env=_env(),
            timeout=120,
        )
    finally:
        folder.chmod(0o755)
        path.chmod(0o644)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr
    assert lines[0].startswith(f"perfgate record: error: {url}: cannot ")
    assert "writable" in lines[0]
    _intact(path, url)


# --- PostgreSQL: wrong password, unreachable server, read-only database -------------------------


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens there once the socket is closed


def test_wrong_password_gives_exit_2_with_masked_url(pg_server, tmp_path, write_json, capsys):
    f = write_json("r.json", run_to_dict(run("r1")))
    url = pg_server.url("postgres", password="not-the-Password-123")
    assert main(["record", str(f), "--store", url]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "not-the-Password-123" not in err
    assert f"postgresql://postgres:***@127.0.0.1:{pg_server.port}/postgres" in err
    assert "password authentication failed" in err and "check the user and password" in err


def test_unreachable_server_gives_exit_2(pg_server, write_json, capsys):
    f = write_json("r.json", run_to_dict(run("r1")))
    port = _closed_port()
    url = pg_server.url("postgres", port=port)
    assert main(["record", str(f), "--store", url]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert f"postgresql://postgres:***@127.0.0.1:{port}/postgres" in err and pg_server.password not in err
    assert "cannot connect to the PostgreSQL store" in err and "reachable" in err


def test_unreachable_server_in_a_subprocess(pg_server, write_json):
    f = write_json("r.json", run_to_dict(run("r1")))
    url = pg_server.url("postgres", port=_closed_port())
    out = subprocess.run(
        [sys.executable, "-m", "perfgate", "record", str(f), "--store", url],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert pg_server.password not in out.stderr + out.stdout


def test_read_only_database_gives_exit_2_and_no_damage(pg_server, write_json, capsys):
    name = "readonly_db"
    url = pg_server.create_database(name)
    try:
        _seed_store(url)
        pg_server.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
        f = write_json("r.json", run_to_dict(run("r1")))
        assert main(["record", str(f), "--store", url]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1
        assert "read-only transaction" in err and "writable" in err and pg_server.password not in err
        with open_store(url) as s:  # still readable, nothing half-written
            assert sorted(r.run_id for r in s.runs(RunQuery())) == ["old0", "old1", "old2"]
            assert consistency_problems(s) == []
    finally:
        pg_server.drop_database(name)
