"""Every kind of command on a store that does not exist yet, all started at once, round after round.

A CI pipeline's jobs each run a command on the shared store: five `record`s, a `calibrate`, a
`check --store` and a `history` here, released together by one barrier (each runs ``main`` in
a process of its own, so the round's start is not spread over eight interpreters' start-up),
on a new SQLite file or a new PostgreSQL database every round. Every `record` must exit 0, no
command may fail to open the store, and every run of every `record` must be there, whole.

Regression for a round that ended with 8 of 10 runs: one `record` exited 2 with "cannot open
the SQLite store: database disk image is malformed" while `PRAGMA integrity_check` found the
file whole (22 rounds of the same eight commands as separate processes). How often that came
is not known here: before the fix, neither 2,300 rounds like these nor 480 rounds of eight
separate `perfgate` processes met it again on a 2-core machine, loaded or not; what it was and
the test that fails without the fix are in ``test_first_open.py``
(``test_a_store_being_copied_into_is_waited_for_not_called_malformed``). These rounds keep the
whole of the first open honest: the switch to WAL mode, the schema made by one process while
the others wait, readers that find an empty or a half-made store.
"""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import os
import queue
import threading
from pathlib import Path
from typing import Any

from perfgate.core.codec import run_to_dict
from perfgate.store import open_store
from perfgate.store.base import RunQuery
from tests.store.helpers import consistency_problems, run, stamp

RECORDS, FILES_EACH = 5, 2
COMMANDS = RECORDS + 3  # and a calibrate, a check --store and a history
SQLITE_ROUNDS = 120
POSTGRES_ROUNDS = 15
# what a command that could not open the store (or crashed) says; a reader of a store with
# too few runs may exit 2 for that, in its own words ("no model has 3 runs", "no runs")
_OPEN_FAILED = ("cannot open", "database", "read-only", "locked", "something else", "internal error", "Traceback")


def _argv(folder: Path, command: int, number: int) -> list[str]:
    if command < RECORDS:
        return ["record", *(str(folder / f"run{command * FILES_EACH + i}.json") for i in range(FILES_EACH))]
    return [
        ["calibrate", "--model", "dqn", "--machine", "machine-a", "--output", str(folder / f"noise{number}.json")],
        ["check", "--current", str(folder / "current.json")],
        ["history", "--model", "dqn"],
    ][command - RECORDS]


def _command(folder: Path, urls: list[str], command: int, barrier: Any, results: Any) -> None:
    """Run this process's command on each store in turn, with the others (the barrier releases
    them at once); report (round, command, argv, exit code, stderr)."""
    from perfgate.cli import main

    for number, url in enumerate(urls):
        argv = _argv(folder, command, number)
        try:
            barrier.wait(timeout=300)  # only against a hang: a process that died breaks the barrier
        except threading.BrokenBarrierError:
            results.put((number, command, argv, None, "the other commands did not arrive"))
            return
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main([*argv, "--store", url])
        results.put((number, command, argv, code, err.getvalue()))


def _every_command_at_once(folder: Path, urls: list[str]) -> list[str]:
    """Run the COMMANDS processes over ``urls`` (stores that do not exist yet); what went wrong."""
    for i in range(RECORDS * FILES_EACH):
        (folder / f"run{i}.json").write_text(json.dumps(run_to_dict(run(f"r{i}", created_at=stamp(i)))))
    (folder / "current.json").write_text(json.dumps(run_to_dict(run("current", created_at=stamp(999)))))
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(COMMANDS), ctx.Queue()
    processes = [
        ctx.Process(target=_command, args=(folder, urls, command, barrier, results)) for command in range(COMMANDS)
    ]
    for p in processes:
        p.start()
    problems = []
    try:
        for _ in range(len(urls) * COMMANDS):
            number, command, argv, code, err = results.get(timeout=600)  # only against a hang
            said = " ".join(err.split())
            if code is None or (command < RECORDS and code != 0) or any(w in said for w in _OPEN_FAILED):
                problems.append(f"round {number}: perfgate {' '.join(argv[:1])} exited {code}: {said}")
    except queue.Empty:
        problems.append("the commands stopped reporting")
    finally:
        for p in processes:
            p.join(timeout=60)
            if p.exitcode is None:
                p.kill()
                p.join()
    problems += [f"command process {c} exited {p.exitcode}" for c, p in enumerate(processes) if p.exitcode != 0]
    expected = {f"r{i}" for i in range(RECORDS * FILES_EACH)}
    for number, url in enumerate(urls):
        with open_store(url) as s:
            stored = {r.run_id for r in s.runs(RunQuery())} - {"current"}  # check --store may record its run
            if stored != expected:
                problems.append(f"round {number}: {len(stored)}/{len(expected)} runs stored")
            problems += [f"round {number}: {p}" for p in consistency_problems(s)]  # type: ignore[arg-type]
    return problems


def test_every_command_at_once_on_a_new_sqlite_store_loses_nothing(tmp_path):
    urls = [f"sqlite:///{tmp_path}/round{n}/store.db" for n in range(SQLITE_ROUNDS)]
    assert _every_command_at_once(tmp_path, urls) == []


def test_every_command_at_once_on_a_new_postgres_database_loses_nothing(pg_server, tmp_path):
    """A new database each round, migrated by whichever command comes first (under an advisory
    lock, so that two `CREATE TABLE`s never race in the catalogue) while the others wait."""
    names = [f"every_command_{os.getpid()}_{n}" for n in range(POSTGRES_ROUNDS)]
    urls = [pg_server.create_database(name) for name in names]
    try:
        assert _every_command_at_once(tmp_path, urls) == []
    finally:
        for name in names:
            pg_server.drop_database(name)
