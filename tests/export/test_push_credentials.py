"""Credentials in a Pushgateway URL: sent as Basic authentication, never to the resolver or the screen.

A local server stands in for the Pushgateway (it records the request's path and its
``Authorization`` header); the resolver is wrapped to record every name it is asked for.
"""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from perfgate.app.export import push_runs
from perfgate.cli import main
from perfgate.core.codec import run_from_dict
from perfgate.core.policy import Policy
from tests.conftest import SEED_CURRENT
from tests.safety.recorder import recording_resolver, recording_server

PASSWORD = "pushPW9"
ODD_PASSWORD = "p@ss:w/rd#?%ü"  # every delimiter, a percent sign and a non-ASCII letter


def _export(store: str, url: str) -> int:
    return main(["export", "prometheus", "--store", store, "--push", url])


def test_export_push_sends_the_userinfo_as_basic_auth(sample_sqlite, capsys):
    """Regression for the Pushgateway URL whose user and password went to the name resolver
    as part of the host name and were never sent as HTTP authentication."""
    with recording_server() as gateway, recording_resolver() as asked:
        assert _export(sample_sqlite, f"http://pg:{PASSWORD}@{gateway.origin}/") == 0
    assert gateway.requests and {r.credentials for r in gateway.requests} == {("pg", PASSWORD)}
    assert all(r.method == "PUT" and r.path.startswith("/metrics/job/perfgate/") for r in gateway.requests)
    assert set(asked) == {"127.0.0.1"}
    out, err = capsys.readouterr()
    assert PASSWORD not in out + err and f"http://pg:***@{gateway.origin}/" in err


def test_percent_encoded_userinfo_is_decoded(sample_sqlite, capsys):
    url_password = quote(ODD_PASSWORD, safe="")
    with recording_server() as gateway:
        assert _export(sample_sqlite, f"http://p%40g:{url_password}@{gateway.origin}") == 0
    assert {r.credentials for r in gateway.requests} == {("p@g", ODD_PASSWORD)}
    out, err = capsys.readouterr()
    assert url_password not in out + err and ODD_PASSWORD not in out + err


def test_a_password_in_the_url_never_reaches_the_resolver(sample_sqlite, capsys):
    """Regression for ``pg:pushPW9@127.0.0.1`` given to getaddrinfo as a host name: a DNS
    query could carry the password off the machine."""
    with recording_resolver() as asked:
        assert _export(sample_sqlite, f"http://pg:{PASSWORD}@127.0.0.1:1/") == 2
    assert asked and all(PASSWORD not in name for name in asked), asked
    err = capsys.readouterr().err
    assert "Connection refused" in err and PASSWORD not in err


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        (f"http://pg:{PASSWORD}@/", "with a host"),  # was: InvalidURL: nonnumeric port: 'pushPW9@'
        (f"http://pg:pu#sh{PASSWORD}@127.0.0.1:1/", "an @ after the host"),
        (f"http://pg:pu?sh{PASSWORD}@127.0.0.1:1/", "an @ after the host"),
        (f"http://pg:pu/sh{PASSWORD}@127.0.0.1:1/", "an @ after the host"),
        (f"http://pg:pu%sh{PASSWORD}@127.0.0.1:1/", "not a %XX escape"),
        (f"http://pg:{PASSWORD}%ff@127.0.0.1:1/", "not UTF-8"),
        (f"http://pg:{PASSWORD}@127.0.0.1:99999/", "port"),
        (f"http://pg:{PASSWORD}@127.0.0.1:x{PASSWORD}/", "port"),
        (f"ftp://pg:{PASSWORD}@127.0.0.1:1/", "http:// or https://"),
        (f"http://pg:{PASSWORD}@exa mple/", "white space"),
    ],
)
def test_unusable_userinfo_exits_2_with_one_line_and_no_secret(sample_sqlite, url, reason, capsys):
    """Regression for the traceback (``InvalidURL: nonnumeric port: 'pushPW9@'``) that printed
    the password: a URL perfgate cannot read one way only is refused, masked, before any push."""
    with recording_resolver() as asked:
        assert _export(sample_sqlite, url) == 2
    assert asked == []
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and "--push" in err and reason in err and "percent-encoded" in err
    assert PASSWORD not in err


@pytest.mark.parametrize("name", ["token", "access_token", "api_key", "key", "secret", "sig", "password"])
def test_a_query_token_is_kept_and_masked(sample_sqlite, name, capsys):
    """Regression for ``--push 'http://127.0.0.1:1/?token=...'``, which printed the token."""
    token = "QT0KEN-a1b2c3"
    with recording_server() as gateway:
        assert _export(sample_sqlite, f"http://{gateway.origin}/?{name}={token}") == 0
    # the token follows the group's path, where the Pushgateway (or a proxy before it) reads it
    assert gateway.requests and all(r.path.endswith(f"?{name}={token}") for r in gateway.requests)
    assert all(r.path.startswith("/metrics/job/perfgate/") for r in gateway.requests)
    with recording_resolver():
        assert _export(sample_sqlite, f"http://127.0.0.1:1/?{name}={token}#{name}={token}") == 2
    out, err = capsys.readouterr()
    assert token not in out + err and f"?{name}=***" in err


def test_check_push_metrics_sends_basic_auth(seed_files, capsys):
    base, cur = seed_files
    with recording_server() as gateway, recording_resolver() as asked:
        url = f"http://pg:{PASSWORD}@{gateway.origin}"
        assert main(["check", "--baseline", str(base), "--current", str(cur), "--push-metrics", url, "--quiet"]) == 1
    assert [r.credentials for r in gateway.requests] == [("pg", PASSWORD)]
    assert set(asked) == {"127.0.0.1"}
    err = capsys.readouterr().err
    assert "pushed 1 group(s)" in err and PASSWORD not in err


def test_check_push_metrics_with_unusable_userinfo_warns_and_keeps_the_exit_code(seed_files, capsys):
    base, cur = seed_files
    url = f"http://pg:{PASSWORD}@/"
    assert main(["check", "--baseline", str(base), "--current", str(cur), "--push-metrics", url, "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "metrics not pushed" in err and "--push-metrics" in err and "with a host" in err
    assert PASSWORD not in err and "Traceback" not in err


def test_bench_push_sends_basic_auth(capsys):
    """``bench --push-metrics`` pushes through :func:`push_runs`."""
    run = run_from_dict(json.loads(json.dumps(SEED_CURRENT)))
    with recording_server() as gateway, recording_resolver() as asked:
        push_runs(f"http://pg:{PASSWORD}@{gateway.origin}/", [run], Policy())
        push_runs(f"http://pg:{PASSWORD}@[::1/", [run], Policy())
    assert [r.credentials for r in gateway.requests] == [("pg", PASSWORD)]
    assert set(asked) == {"127.0.0.1"}
    err = capsys.readouterr().err
    assert "pushed 1 group(s)" in err and "metrics not pushed" in err and PASSWORD not in err
