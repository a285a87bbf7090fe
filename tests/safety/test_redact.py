"""The one secret masker: URLs that break urlsplit, raw delimiters in passwords, SMTP login
echoes, short secrets; and the real commands, whose messages must never carry a password."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfgate.cli import main
from perfgate.notify.dispatch import secrets_of
from perfgate.notify.settings import parse_notify
from perfgate.safe.redact import MASK, mask, mask_url, smtp_secrets, url_secrets

PASSWORDS = ["s3cretpw", "pa#ss/w?rd", "p@ss:w0rd", "p%40ss", "[::1]pw", "q"]


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        ("postgresql://u:s3cretpw@[::1/db", "s3cretpw"),  # urlsplit raises: "Invalid IPv6 URL"
        ("postgresql://u:s3cretpw@[fe80::1%eth0]:5432/db", "s3cretpw"),
        ("postgresql://u:pa#ss/w?rd@127.0.0.1:1/db", "pa#ss/w?rd"),  # urlsplit stops at '#'
        ("postgresql://u:p@ss@host/db", "p@ss"),
        ("http://bot:push-secret@127.0.0.1:9091", "push-secret"),
        ("postgresql://host/db?sslmode=off&password=kw-secret", "kw-secret"),
        ("host=h password='quoted secret' user=u", "quoted secret"),
    ],
)
def test_mask_url_hides_the_password(url, secret):
    masked = mask_url(url)
    assert secret not in masked and MASK in masked
    assert "u:" in masked or "bot:" in masked or "password" in masked  # the user stays readable


def test_mask_url_leaves_urls_without_password():
    for url in ("postgresql://u@h/db", "sqlite:///x.db", "postgresql://[::1]:5432/db", "memory://"):
        assert mask_url(url) == url


def test_url_secrets_include_decoded_and_pieces():
    got = url_secrets("postgresql://u:p%40ss#x/y@h/db")
    assert "p%40ss#x/y" in got and "p@ss#x/y" in got and "y" in got


def test_short_secret_masked_where_it_stands_alone():
    assert mask('token "ab" refused; ab@host', ["ab"]) == 'token "***" refused; ***@host'
    assert mask("absolute", ["ab"]) == "absolute"


def test_smtp_auth_plain_echo_is_masked():
    """Regression: an SMTP server that echoed the AUTH PLAIN string showed the password in base64."""
    config = parse_notify(
        {"smtp_host": "127.0.0.1", "email_to": ["a@b.c"], "smtp_user_env": "U", "smtp_password_env": "P"},
        source="test",
    )
    secrets = secrets_of(config, {"U": "bot", "P": "pw1"})
    echoed = base64.b64encode(b"\0bot\0pw1").decode()
    assert echoed in smtp_secrets("bot", "pw1")
    message = f"the SMTP server answered 535 5.7.8 bad credentials {echoed} for pw1"
    assert mask(message, secrets) == f"the SMTP server answered 535 5.7.8 bad credentials {MASK} for {MASK}"


@settings(max_examples=300, deadline=None)
@given(  # no raw white space: a URL cannot hold it
    st.text(st.characters(codec="ascii", exclude_categories=["Cc", "Zs"]), min_size=1, max_size=20),
    st.sampled_from(["[::1", "[fe80::1%zz]", "127.0.0.1:5432", "h"]),
)
def test_any_password_is_masked(password, host):
    url = f"postgresql://user:{password}@{host}/db"
    shown = mask(f"cannot connect to {url}: bad", url_secrets(url))
    assert f":{password}@" not in shown


@pytest.mark.parametrize("password", PASSWORDS)
def test_store_errors_never_show_the_password(password, capsys):
    """Regression: a malformed IPv6 host made urlsplit raise, and libpq echoed the whole URI."""
    for host in ("[::1", "127.0.0.1:1"):
        url = f"postgresql://ci:{password}@{host}/perf"
        assert main(["history", "--model", "dqn", "--store", url]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert f":{password}@" not in err
        if len(password) >= 4:
            assert password not in err


def test_pushgateway_password_is_masked(seed_files, capsys):
    base, cur = seed_files
    url = "http://bot:push-S3CRET@127.0.0.1:1"
    code = main(["check", "--baseline", str(base), "--current", str(cur), "--push-metrics", url, "--quiet"])
    assert code == 1
    err = capsys.readouterr().err
    assert "metrics not pushed" in err and "push-S3CRET" not in err and "bot:***@" in err


@pytest.mark.parametrize("name", ["token", "access_token", "api_key", "key", "secret", "sig", "X-Amz-Signature"])
@pytest.mark.parametrize("where", ["?", "?a=1&", "#", "/x?a=1#"])
def test_mask_url_hides_query_and_fragment_tokens(name, where):
    """Regression for ``--push 'http://127.0.0.1:1/?token=...'``, which printed the token
    (only ``password=`` was masked)."""
    url = f"http://127.0.0.1:1{where}{name}=TOK-123%2Fz&page=2"
    masked = mask_url(f"cannot push to {url}: refused")
    assert "TOK-123" not in masked and f"{name}={MASK}&page=2: refused" in masked
    assert "TOK-123%2Fz" in url_secrets(url) and "TOK-123/z" in url_secrets(url)


def test_mask_url_hides_a_token_written_as_the_user():
    assert mask_url("https://ghp_T0KEN@example.com/x") == f"https://{MASK}@example.com/x"
    assert "ghp_T0KEN" in url_secrets("https://ghp_T0KEN@example.com/x")
    assert mask_url("postgresql://ci@db/perf") == "postgresql://ci@db/perf"  # a user name, not a token


def test_masking_twice_keeps_the_message_around_the_url():
    """Regression for ``...?password=*** cannot push``: masking the masked text again ate the colon."""
    once = mask_url("http://h:1/?password=pw1&token=t0k")
    assert once == f"http://h:1/?password={MASK}&token={MASK}"
    assert mask_url(f"{once}: cannot push") == f"{once}: cannot push"
    assert mask_url(f"http://u:{MASK}@h: refused") == f"http://u:{MASK}@h: refused"
