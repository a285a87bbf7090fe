"""The ways out of the Prometheus exposition: node_exporter's textfile, an HTTP ``/metrics``
endpoint, and a Pushgateway (one group per model, machine and suite).

prometheus_client is imported only inside these functions, lazily.

Internal: shared with ``cli``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import functools
import http.client
import urllib.error
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from perfgate.core.metrics import MetricInfo
from perfgate.errors import InputError
from perfgate.export.latest import RunState, state_key
from perfgate.export.prometheus import PerfgateCollector, make_registry
from perfgate.safe.redact import mask
from perfgate.safe.urls import OutgoingURL, parse_outgoing_url

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

__all__ = ["GROUPING_LABELS", "JOB", "parse_listen_address", "push_states", "serve", "write_textfile"]

JOB = "perfgate"
GROUPING_LABELS = ("model", "machine", "suite")  # one Pushgateway group per key: a push replaces its group
_NO_INFO: Mapping[str, MetricInfo] = MappingProxyType({})


def write_textfile(path: Path | str, registry: CollectorRegistry) -> None:
    """Write the exposition for node_exporter's textfile collector, atomically.

    prometheus_client writes a temporary file next to ``path`` and renames it over (the
    collector never reads half a file); the file gets the usual umask permissions, so a
    node_exporter running as another user can read it.

    Raises:
        InputError: the file cannot be written (no such directory, no permission).
    """
    from prometheus_client import write_to_textfile

    try:
        write_to_textfile(str(path), registry)
    except OSError as exc:
        raise InputError(f"cannot write: {exc.strerror or exc}", source=str(path), field="--textfile") from None


def parse_listen_address(text: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` or ``PORT`` (host 127.0.0.1: never every interface unless asked).

    Raises:
        InputError: not an address with a port in 0-65535.
    """
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = "", text
    host = host.strip("[]") or default_host
    try:
        port = int(port_text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise InputError(f"expected HOST:PORT (e.g. 127.0.0.1:9188), got {text!r}", field="--serve")
    return host, port


def serve(registry: CollectorRegistry, host: str, port: int) -> Any:
    """Serve ``/metrics`` in a background thread; returns the server (``server_port``, ``shutdown()``).

    Raises:
        InputError: the address cannot be bound (in use, or not an address of this host).
    """
    from prometheus_client import start_http_server

    try:
        server, _thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}", field="--serve") from None
    return server


def push_states(
    gateway: str,
    states: Sequence[RunState],
    *,
    job: str = JOB,
    metric_info: Mapping[str, MetricInfo] = _NO_INFO,
    timeout: float = 10.0,
    flag: str = "--push",
) -> int:
    """Push ``states`` to a Pushgateway, one group per (model, machine, suite); returns the groups pushed.

    Each push replaces its group (HTTP PUT), so a group always holds one run and the check
    of that run, never metrics left over from an older one. A user and password in
    ``gateway`` are sent as Basic authentication, never as part of the host name (see
    :mod:`perfgate.safe.urls`); a query (``?token=...``) is kept after the group's path.

    Raises:
        InputError: ``gateway`` is not a usable URL (named as ``flag``), or the Pushgateway
            cannot be reached or refused the push.
    """
    from prometheus_client import push_to_gateway

    target = parse_outgoing_url(gateway, what=flag, default_scheme="http")
    base, _, query = target.url.partition("?")
    handler = _handler(target, f"?{query}" if query else "")
    groups: dict[tuple[str, str, str], list[RunState]] = {}
    for state in states:
        groups.setdefault(state_key(state), []).append(state)
    for key, members in sorted(groups.items()):
        registry = make_registry(PerfgateCollector(functools.partial(list, members), metric_info))
        grouping = dict(zip(GROUPING_LABELS, key, strict=True))
        try:
            push_to_gateway(base, job=job, registry=registry, grouping_key=grouping, timeout=timeout, handler=handler)
        except urllib.error.HTTPError as exc:
            body = exc.read().decode("utf-8", "replace").strip().splitlines()
            detail = f": {body[0]}" if body else ""
            raise InputError(
                f"the Pushgateway refused the push (HTTP {exc.code}){mask(detail, target.secrets)}",
                source=target.shown,
            ) from None
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            raise InputError(
                f"cannot push to the Pushgateway: {mask(str(reason), target.secrets)}; "
                "check the URL and that the Pushgateway runs",
                source=target.shown,
            ) from None
    return len(groups)


def _handler(target: OutgoingURL, query: str) -> Callable[..., Callable[[], None]]:
    """prometheus_client's push handler for ``target``: Basic authentication from its userinfo,
    and its query put back after the path that push_to_gateway appends."""
    from prometheus_client.exposition import basic_auth_handler, default_handler

    def handler(
        url: str, method: str, timeout: float | None, headers: list[tuple[str, str]], data: bytes
    ) -> Callable[[], None]:
        if target.user is None:
            return default_handler(url + query, method, timeout, headers, data)
        return basic_auth_handler(url + query, method, timeout, headers, data, target.user, target.password or "")

    return handler
