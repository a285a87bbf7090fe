"""A store password of any characters never reaches the output, whichever way the URL came.

Every password below holds one class of character a URL parser stumbles on (white space,
the URL delimiters, ``%``, quotes, non-ASCII letters, invisible format characters); each is
written in every form a PostgreSQL store URL takes (user information, raw or
percent-encoded; ``?password=``, alone or among other parameters; a libpq keyword string,
which perfgate does not take as a store and must refuse without quoting) and given by every
source (``--store``, ``PERFGATE_STORE``, the configuration's ``store``) to the commands that
open a store. Nothing listens on 127.0.0.1:1, so each command fails to connect: the exit
code is 2, and neither the password nor any piece of it of 4 characters or more between
white space appears on standard output or standard error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from perfgate.cli import main

HOST = "127.0.0.1:1"  # a closed port: the driver's own error comes back at once

PASSWORDS = [
    "my Zq7secret pw",  # space (the reported case)
    "Tb4x\tKw9tab\tpw",  # tab
    "Nl3q\nRt8line\nzz",  # new line
    "Cr2q\rWd5ret",  # carriage return
    " Lead8 and Trail9 ",  # white space at both ends
    "At4p@Ss7w@rd",  # @
    "Col5n:Pw6d:x",  # :
    "Sl4sh/Pw7d/x",  # /
    "Qm8rk?Pw2d=x",  # ? and =
    "Hs3h#Pw9d#x",  # #
    "Pc50%off%zzQ4",  # % (an invalid percent escape)
    "Pc%41%20Sp7",  # % (valid escapes, one of a space)
    "Qt1'single\"Dbl2",  # quotes
    "Bs5\\back\\Sl6",  # backslash
    "Ünï9cødé€Pw",  # non-ASCII letters
    "Zw1\u200bjoin\u2028Ls4",  # zero-width space, line separator
    "Mx1 a\tb\n@:/?#%'\"é\u00a0Mx2end",  # all of them at once
]


def _libpq_quoted(password: str) -> str:
    return "'" + password.replace("\\", "\\\\").replace("'", "\\'") + "'"


FORMS = {
    "userinfo": lambda pw: f"postgresql://ci:{pw}@{HOST}/perf",
    "userinfo-encoded": lambda pw: f"postgresql://ci:{quote(pw, safe='')}@{HOST}/perf",
    "query": lambda pw: f"postgresql://ci@{HOST}/perf?password={pw}",
    "query-among": lambda pw: f"postgres://ci@{HOST}/perf?sslmode=disable&password={pw}&application_name=x",
    "query-encoded": lambda pw: f"postgresql://ci@{HOST}/perf?password={quote(pw, safe='')}",
    "libpq": lambda pw: f"host=127.0.0.1 port=1 user=ci password={pw}",
    "libpq-quoted": lambda pw: f"host=127.0.0.1 port=1 password={_libpq_quoted(pw)} user=ci",
}
SOURCES = ["flag", "environment", "configuration"]


def _toml_string(text: str) -> str:
    """``text`` as a TOML basic string."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _forbidden(password: str, url: str) -> list[str]:
    """What must not be printed: the password, its encoded form where the URL holds that, and
    every piece of either of at least 4 characters between white space."""
    wholes = [password]
    if quote(password, safe="") in url:
        wholes.append(quote(password, safe=""))
    return sorted({w for w in wholes} | {p for w in wholes for p in w.split() if len(p) >= 4}, key=len)


@pytest.fixture
def run_file(tmp_path: Path, run_doc) -> Path:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run_doc()))
    return path


COMMANDS = {
    "history": lambda run, tmp: ["history", "--model", "dqn"],
    "record": lambda run, tmp: ["record", str(run)],
    "check": lambda run, tmp: ["check", "--current", str(run)],
}
MORE_COMMANDS = {
    "calibrate": lambda run, tmp: ["calibrate", "--model", "dqn", "--output", str(tmp / "noise.json")],
    "baseline-show": lambda run, tmp: ["baseline", "show", "--model", "dqn"],
    "baseline-update": lambda run, tmp: ["baseline", "update", "--model", "dqn"],
    "baseline-accept": lambda run, tmp: ["baseline", "accept", "abc123"],
    "baseline-export": lambda run, tmp: ["baseline", "export", "--model", "dqn", "--output", str(tmp / "b.json")],
    "export": lambda run, tmp: ["export", "prometheus", "--textfile", str(tmp / "m.prom")],
    "report": lambda run, tmp: ["report", "--html", str(tmp / "r.html")],
    "store-compact": lambda run, tmp: ["store", "compact"],
}


def _probe(argv: list[str], url: str, source: str, tmp: Path, monkeypatch, capsys) -> tuple[int, str]:
    monkeypatch.delenv("PERFGATE_STORE", raising=False)
    config = tmp / "perfgate.toml"
    config.write_text("threshold = 10\n")
    if source == "flag":
        argv = [*argv, "--store", url]
    elif source == "environment":
        monkeypatch.setenv("PERFGATE_STORE", url)
    else:
        config.write_text(f"store = {_toml_string(url)}\n")
    code = main([*argv, "--config", str(config)])
    out = capsys.readouterr()
    return code, out.out + out.err


def _assert_hidden(code: int, printed: str, password: str, url: str, what: object) -> None:
    assert code == 2, (what, printed)
    assert "Traceback" not in printed and "internal error" not in printed, (what, printed)
    assert len(printed.strip().splitlines()) == 1, (what, printed)
    for secret in _forbidden(password, url):
        assert secret not in printed, (what, secret, printed)


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_password_is_printed(command, source, run_file, tmp_path, monkeypatch, capsys):
    """Regression for ``--store 'postgresql://ci:my secret pw@…'`` printing the URL, password
    and all, in front of the masked driver message (and ``?password=a b c`` as ``*** b c``)."""
    probes = 0
    for password in PASSWORDS:
        for form, build in FORMS.items():
            url = build(password)
            argv = COMMANDS[command](run_file, tmp_path)
            code, printed = _probe(argv, url, source, tmp_path, monkeypatch, capsys)
            _assert_hidden(code, printed, password, url, (command, source, form, password))
            probes += 1
    assert probes == len(PASSWORDS) * len(FORMS)


@pytest.mark.parametrize("command", sorted(MORE_COMMANDS))
def test_no_password_is_printed_by_any_command_with_a_store(command, run_file, tmp_path, monkeypatch, capsys):
    for password in (PASSWORDS[0], PASSWORDS[-1]):
        for form, build in FORMS.items():
            for source in SOURCES:
                url = build(password)
                argv = MORE_COMMANDS[command](run_file, tmp_path)
                code, printed = _probe(argv, url, source, tmp_path, monkeypatch, capsys)
                _assert_hidden(code, printed, password, url, (command, source, form, password))


def test_the_message_keeps_the_user_and_host(capsys, monkeypatch):
    """The password is masked, not the whole URL: the user and the host stay readable."""
    monkeypatch.delenv("PERFGATE_STORE", raising=False)
    assert main(["history", "--model", "m", "--store", f"postgresql://ci:my secret pw@{HOST}/perf"]) == 2
    err = capsys.readouterr().err
    assert f"postgresql://ci:***@{HOST}/perf" in err and "secret" not in err, err
    assert main(["history", "--model", "m", "--store", f"postgresql://ci@{HOST}/perf?password=a b c"]) == 2
    err = capsys.readouterr().err
    assert f"postgresql://ci@{HOST}/perf?password=***:" in err and "b c" not in err, err


def test_a_real_process_prints_no_password(tmp_path):
    """The installed command, the password in the environment and on the command line."""
    url = f"postgresql://ci:my secret\tpw\nZq7x@{HOST}/perf"
    env = {**os.environ, "PERFGATE_STORE": url}
    for argv in (["history", "--model", "m"], ["history", "--model", "m", "--store", url]):
        done = subprocess.run(
            [sys.executable, "-m", "perfgate", *argv],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        printed = done.stdout + done.stderr
        assert "secret" not in printed and "Zq7x" not in printed and "pw" not in printed.split(), printed
        assert "ci:***@127.0.0.1:1/perf" in printed, printed
