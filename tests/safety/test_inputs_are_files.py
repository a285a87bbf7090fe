"""Every file a command reads must be a regular file: a FIFO, a directory or a device is refused.

A FIFO that nobody writes blocked ``perfgate check --current FIFO`` forever; ``/dev/zero``
never ends. Each input flag (and input argument) of each command is given a FIFO, a
directory and ``/dev/zero`` in turn; each must end with exit 2 and one line naming the path,
before any work. The table of argument lists is checked against the parsers, so a command
that gains an input flag must be added here.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from pathlib import Path

import pytest

from perfgate.cli import _command_parser, commands, main
from perfgate.output import output_file

_HANG_GUARD_S = 60  # a generous bound: the bug blocks forever; not a timing assertion

# (command, the input under test, argv with {input} where it goes); {run} {store} {out}
# {report} are filled in: every other argument is valid, so the input is the only fault
PROBES: list[tuple[str, str, list[str]]] = [
    ("bench", "--data", ["bench", "--suite", "{suite}", "--stages-module", "{stages}", "--model", "m", "--output",
                         "{out}/run.json", "--rounds", "1", "--repeat", "1", "--warmup", "0", "--data", "{input}"]),
    ("bench", "--config", ["bench", "--suite", "{suite}", "--stages-module", "{stages}", "--model", "m", "--output",
                           "{out}/run.json", "--rounds", "1", "--repeat", "1", "--warmup", "0", "--config", "{input}"]),
    ("bench", "--stages-module", ["bench", "--suite", "{suite}", "--stages-module", "{input}", "--model", "m",
                                  "--output", "{out}/run.json", "--rounds", "1", "--repeat", "1", "--warmup", "0"]),
    ("check", "--baseline", ["check", "--current", "{run}", "--baseline", "{input}"]),
    ("check", "--current", ["check", "--current", "{input}", "--baseline", "{run}"]),
    ("check", "--noise", ["check", "--current", "{run}", "--baseline", "{run}", "--noise", "{input}"]),
    ("check", "--config", ["check", "--current", "{run}", "--baseline", "{run}", "--config", "{input}"]),
    ("record", "RUN.json", ["record", "{input}", "--store", "{store}"]),
    ("record", "--config", ["record", "{run}", "--store", "{store}", "--config", "{input}"]),
    ("baseline save", "RUN.json", ["baseline", "save", "{input}", "--dir", "{out}/baselines"]),
    ("baseline show", "--config", ["baseline", "show", "--model", "dqn", "--store", "{store}", "--config", "{input}"]),
    ("baseline update", "--config", ["baseline", "update", "--model", "dqn", "--store", "{store}", "--config",
                                     "{input}"]),
    ("baseline accept", "--config", ["baseline", "accept", "x", "--store", "{store}", "--config", "{input}"]),
    ("baseline export", "--config", ["baseline", "export", "--model", "dqn", "--output", "{out}/b.json", "--store",
                                     "{store}", "--config", "{input}"]),
    ("history", "--config", ["history", "--model", "dqn", "--store", "{store}", "--config", "{input}"]),
    ("data inspect", "FILE", ["data", "inspect", "{input}"]),
    ("calibrate", "--config", ["calibrate", "--model", "dqn", "--store", "{store}", "--output", "{out}/noise.json",
                               "--config", "{input}"]),
    ("import", "FILE", ["import", "pyperf", "{input}", "--output", "{out}/imported.json"]),
    ("import", "--config", ["import", "pyperf", "{run}", "--output", "{out}/imported.json", "--config", "{input}"]),
    ("summary", "[LABEL=]REPORT.md", ["summary", "{report}", "{input}"]),
    ("export prometheus", "--config", ["export", "prometheus", "--textfile", "{out}/m.prom", "--store", "{store}",
                                       "--config", "{input}"]),
    ("report", "--config", ["report", "--html", "{out}/r.html", "--store", "{store}", "--config", "{input}"]),
    ("store compact", "--config", ["store", "compact", "--store", "{store}", "--config", "{input}"]),
    ("ab", "--data", ["ab", "--baseline-ref", "HEAD", "--current-ref", "HEAD", "--suite", "{suite}",
                      "--stages-module", "{stages}", "--model", "m", "--output", "{out}/ab.md", "--data", "{input}"]),
    ("ab", "--stages-module", ["ab", "--baseline-ref", "HEAD", "--current-ref", "HEAD", "--suite", "{suite}",
                               "--stages-module", "{input}", "--model", "m", "--output", "{out}/ab.md"]),
    ("ab", "--config", ["ab", "--baseline-ref", "HEAD", "--current-ref", "HEAD", "--suite", "{suite}",
                        "--stages-module", "{stages}", "--model", "m", "--output", "{out}/ab.md", "--config",
                        "{input}"]),
    ("explain", "--data", ["explain", "--baseline-ref", "HEAD", "--current-ref", "HEAD", "--suite", "{suite}",
                           "--stages-module", "{stages}", "--model", "m", "--output", "{out}/ex.md", "--data",
                           "{input}"]),
    ("explain", "--stages-module", ["explain", "--baseline-ref", "HEAD", "--current-ref", "HEAD", "--suite",
                                    "{suite}", "--stages-module", "{input}", "--model", "m", "--output",
                                    "{out}/ex.md"]),
]  # fmt: skip
KINDS = ["fifo", "directory", "dev-zero"]
FOLDERS = {"--dir", "--repo"}  # flags that name a folder, read or filled


def _input_flags() -> set[tuple[str, str]]:
    """(command, flag or argument) of every input the parsers declare: typed Path and not a
    folder, summary's reports, --stages-module."""
    found: set[tuple[str, str]] = set()

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{prefix} {name}")
                continue
            label = action.option_strings[-1] if action.option_strings else str(action.metavar)
            if action.type is output_file or label in FOLDERS:
                continue
            if action.type is Path or action.dest in ("reports", "stages_module", "stages_modules"):
                found.add((prefix, label))

    for name in commands():
        parser, _module = _command_parser(name)
        walk(parser, name)
    return found


def test_the_table_lists_every_input_of_every_command():
    assert _input_flags() == {(command, flag) for command, flag, _ in PROBES}


def _hostile(kind: str, flag: str, tmp: Path) -> tuple[str, Path | None]:
    """The argument to give ``flag`` and the FIFO to unblock should the command hang."""
    if flag == "--stages-module":  # a module name; its file is the FIFO or the device
        name = f"hostile_{kind.replace('-', '_')}"
        path = tmp / f"{name}.py"
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "directory":
            path.mkdir()
        else:
            path.symlink_to("/dev/zero")
        return name, path if kind == "fifo" else None
    if kind == "fifo":
        path = tmp / f"fifo-{flag.strip('-[]=.').replace('=', '-')}"
        os.mkfifo(path)
        return str(path), path
    if kind == "directory":
        path = tmp / "a-folder"
        path.mkdir(exist_ok=True)
        return str(path), None
    return "/dev/zero", None


def _run(argv: list[str], fifo: Path | None) -> int:
    results: list[int] = []
    worker = threading.Thread(target=lambda: results.append(main(argv)), daemon=True)
    worker.start()
    worker.join(_HANG_GUARD_S)
    if worker.is_alive():
        if fifo is not None:  # unblock the reader so that the test run can end, then fail
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
            worker.join(_HANG_GUARD_S)
        pytest.fail(f"{argv} blocked on its input")
    return results[0]


@pytest.fixture
def files(tmp_path: Path, run_doc) -> dict[str, str]:
    run = tmp_path / "run.json"
    run.write_text(json.dumps(run_doc()))
    report = tmp_path / "dqn.md"
    report.write_text("# Performance Regression Check\n\n## No Regression Detected\n")
    store = f"sqlite:///{tmp_path}/s.db"
    suite = "filesuite"
    (tmp_path / "filestages.py").write_text(
        "from perfgate.bench import stage\n\n"
        f'@stage("split", metric="split_time_ms", unit="ms", suite="{suite}", models=["m"])\n'
        "def split(ctx):\n    return lambda: 'a b'.split()\n"
    )
    (tmp_path / "out").mkdir()
    return {"{run}": str(run), "{report}": str(report), "{store}": store, "{out}": str(tmp_path / "out"),
            "{suite}": suite, "{stages}": "filestages"}  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("command", "flag", "argv"), PROBES, ids=[f"{c}-{f}" for c, f, _ in PROBES])
def test_an_input_that_is_not_a_file_is_refused(command, flag, argv, kind, files, tmp_path, monkeypatch, capsys):
    """Regression for ``perfgate check --current FIFO`` blocking forever when nobody writes the FIFO."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    given, fifo = _hostile(kind, flag, tmp_path)
    filled = [given if a == "{input}" else a for a in argv]
    for key, value in files.items():
        filled = [a.replace(key, value) for a in filled]
    code = _run(filled, fifo)
    err = capsys.readouterr().err
    assert code == 2, (filled, err)
    assert [line for line in err.splitlines() if line.strip()] == [err.strip()], err
    assert "Traceback" not in err and "internal error" not in err, err
    if flag == "--stages-module":  # Python's import takes regular files only: there is no such module
        # ab and explain need a git repository first
        assert command in ("ab", "explain") or f"cannot import {given!r}" in err, err
    else:
        assert "not a regular file" in err or "is a directory" in err, err
        assert str(given) in err, err
    assert not any((tmp_path / "out").iterdir())  # refused before anything was written
