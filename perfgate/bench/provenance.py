"""Where a run comes from: its commit, the machine it was measured on, its id and when it was made.

Everything that makes a run (``perfgate bench``, its counted form and its worker processes,
``perfgate ab --measure counts``, ``perfgate import`` for what a file lacks, the Python API) takes
these from :func:`collect`, once per command or process, and :meth:`Provenance.renewed` for each
further run the command makes.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from perfgate.core.codec import format_timestamp
from perfgate.core.schema import GitInfo, Machine

__all__ = ["Provenance", "collect"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Provenance:
    """The commit and the machine of a run, its id and its creation time (UTC, as run files write it).

    ``machine`` is what :func:`perfgate.bench.machine.collect_machine` describes, its ``fingerprint``
    included; ``software`` the versions the run is measured with.
    """

    git: GitInfo
    machine: Mapping[str, Any]
    software: Mapping[str, str]
    run_id: str
    created_at: str

    def renewed(self) -> Provenance:
        """The same commit and machine for the next run of the command: a new id, made now."""
        return dataclasses.replace(self, run_id=_run_id(), created_at=_now())

    def machine_record(self) -> Machine:
        """The machine as a run records it: its fingerprint and the rest as details."""
        details = {k: v for k, v in self.machine.items() if k != "fingerprint"}
        return Machine(fingerprint=self.machine.get("fingerprint"), details=details)


def _run_id() -> str:
    return uuid.uuid4().hex


def _now() -> str:
    return format_timestamp(datetime.now(UTC))


def collect(git_commit: str | None = None, branch: str | None = None) -> Provenance:
    """This machine and the git commit (``git_commit`` and ``branch`` win over what git and the CI say)."""
    from perfgate.bench.gitinfo import collect_git
    from perfgate.bench.machine import collect_machine, collect_software

    machine = collect_machine()
    return Provenance(
        git=collect_git(git_commit, branch),
        machine=machine,
        software=collect_software(),
        run_id=_run_id(),
        created_at=_now(),
    )
