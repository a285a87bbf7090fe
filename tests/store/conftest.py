"""Store fixtures: every backend behind one contract, PostgreSQL as a real server.

The PostgreSQL server is started once per session (``pg_server``) and only when a test
asks for it; each test gets a fresh database. Where no server can be started, the tests
skip with the reason, except in CI (``CI=true``), where they fail: a missing service must
never turn into a green build.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from perfgate.store import open_store
from perfgate.store.base import Store
from tests.store.pg_server import TempPostgres, pg_unavailable_reason

ALL_BACKENDS = ["memory", "sqlite", "postgresql"]
SHARED_BACKENDS = ["sqlite", "postgresql"]  # the ones several processes can use at once

_counter = itertools.count()


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


@pytest.fixture(scope="session")
def pg_server() -> Iterator[TempPostgres]:
    reason = pg_unavailable_reason()
    if reason is not None:
        if in_ci():
            pytest.fail(f"PostgreSQL is required in CI: {reason}")
        pytest.skip(f"no PostgreSQL test server: {reason}")
    server = TempPostgres()
    try:
        server.start()
    except Exception as exc:  # any failure to start is the reason to report
        server.stop()
        if in_ci():
            pytest.fail(f"PostgreSQL test server did not start: {exc}")
        pytest.skip(f"PostgreSQL test server did not start: {exc}")
    yield server
    server.stop()


def _url(backend: str, request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:  # type: ignore[no-untyped-def]
    if backend == "memory":
        yield "memory://"
    elif backend == "sqlite":
        yield f"sqlite:///{tmp_path}/store.db"
    else:
        server: TempPostgres = request.getfixturevalue("pg_server")
        name = f"t{os.getpid()}_{next(_counter)}"
        url = server.create_database(name)
        yield url
        server.drop_database(name)


@pytest.fixture(params=ALL_BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:  # type: ignore[no-untyped-def]
    yield from _url(request.param, request, tmp_path)


@pytest.fixture(params=SHARED_BACKENDS)
def shared_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:  # type: ignore[no-untyped-def]
    yield from _url(request.param, request, tmp_path)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = open_store(store_url)
    yield s
    s.close()
