"""An in-memory store for unit tests; same contract as the real backends."""

from __future__ import annotations

from perfgate.core.schema import Run
from perfgate.errors import StorageError
from perfgate.store.base import RunQuery

__all__ = ["MemoryStore", "matches"]


def matches(run: Run, query: RunQuery) -> bool:
    return (
        (query.model is None or run.model_key == query.model)
        and (query.machine is None or run.machine.fingerprint == query.machine)
        and (query.branch is None or run.git.branch == query.branch)
        and (query.suite is None or run.suite == query.suite)
    )


class MemoryStore:
    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._runs: dict[str, Run] = {}

    def add_run(self, run: Run) -> bool:
        if not run.run_id:
            raise StorageError("a run needs a run_id to be stored", source=self.url)
        if run.run_id in self._runs:
            return False
        self._runs[run.run_id] = run
        return True

    def get_run(self, run_id: str) -> Run:
        try:
            return self._runs[run_id]
        except KeyError:
            raise StorageError(f"no run with id {run_id!r}", source=self.url) from None

    def runs(self, query: RunQuery) -> list[Run]:
        found = [r for r in self._runs.values() if matches(r, query)]
        found.sort(key=lambda r: (r.created_at or "", r.run_id or ""), reverse=True)
        return found[: query.limit] if query.limit is not None else found

    def close(self) -> None:
        pass
