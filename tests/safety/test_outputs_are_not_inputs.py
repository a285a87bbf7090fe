"""Every file a command writes goes through one check (``perfgate.output.check_distinct``):
an output that names one of the command's inputs (the store, the configuration, a run file)
is refused with exit 2 before anything is written, and the input keeps its bytes.

The table below lists each command's outputs and inputs; a test walks every command's parser
and fails when a command gains an output flag that the table does not list, so a new output
cannot skip the check unnoticed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

from perfgate.cli import _command_parser, commands, main
from perfgate.output import output_file

# (argv before the output flag, output flag, the inputs that flag may name); argv placeholders
# {run} {store} {config} {report} are filled in by the test.
CASES: list[tuple[tuple[str, ...], str, tuple[str, ...]]] = [
    (("bench", "--model", "dqn", "--store", "{store}", "--config", "{config}"), "--output", ("store", "config")),
    (
        ("check", "--current", "{run}", "--store", "{store}", "--config", "{config}"),
        "--output",
        ("store", "config", "run"),
    ),
    (
        ("check", "--current", "{run}", "--store", "{store}", "--config", "{config}"),
        "--json",
        ("store", "config", "run"),
    ),
    (
        ("check", "--current", "{run}", "--store", "{store}", "--config", "{config}"),
        "--html",
        ("store", "config", "run"),
    ),
    (
        ("check", "--current", "{run}", "--store", "{store}", "--config", "{config}"),
        "--comment",
        ("store", "config", "run"),
    ),
    (
        ("baseline", "export", "--model", "dqn", "--store", "{store}", "--config", "{config}"),
        "--output",
        ("store", "config"),
    ),
    (("calibrate", "--model", "dqn", "--store", "{store}", "--config", "{config}"), "--output", ("store", "config")),
    (
        ("import", "pyperf", "{run}", "--store", "{store}", "--config", "{config}"),
        "--output",
        ("store", "config", "run"),
    ),
    (("summary", "{report}"), "--output", ("report",)),
    (("summary", "{report}"), "--append", ("report",)),
    (("export", "prometheus", "--store", "{store}", "--config", "{config}"), "--textfile", ("store", "config")),
    (("export", "prometheus", "--store", "{store}", "--config", "{config}"), "--openmetrics", ("store", "config")),
    (("report", "--store", "{store}", "--config", "{config}"), "--html", ("store", "config")),
    (("report", "--store", "{store}", "--config", "{config}", "--html", "{html}"), "--comment", ("store", "config")),
    (
        ("ab", "--model", "dqn", "--baseline-ref", "HEAD", "--current-ref", "HEAD", "--config", "{config}"),
        "--output",
        ("config",),
    ),
    (
        ("ab", "--model", "dqn", "--baseline-ref", "HEAD", "--current-ref", "HEAD", "--config", "{config}"),
        "--json",
        ("config",),
    ),
    (
        ("ab", "--model", "dqn", "--baseline-ref", "HEAD", "--current-ref", "HEAD", "--config", "{config}"),
        "--html",
        ("config",),
    ),
    (
        ("ab", "--model", "dqn", "--baseline-ref", "HEAD", "--current-ref", "HEAD", "--config", "{config}"),
        "--comment",
        ("config",),
    ),
    (
        ("explain", "--model", "dqn", "--baseline-ref", "HEAD", "--current-ref", "HEAD", "--data", "{run}"),
        "--output",
        ("run",),
    ),
    (
        ("explain", "--model", "dqn", "--baseline-ref", "HEAD", "--current-ref", "HEAD", "--data", "{run}"),
        "--json",
        ("run",),
    ),
    (
        ("explain", "--model", "dqn", "--baseline-ref", "HEAD", "--current-ref", "HEAD", "--data", "{run}"),
        "--html",
        ("run",),
    ),
]

# outputs that cannot name an input: the command reads no file
NO_INPUTS = {("data synth", "--output"), ("dashboard", "--output"), ("baseline save", "--dir")}
_OUTPUT_DESTS = {"output", "json", "html", "comment", "append", "textfile", "openmetrics", "dir"}


def _output_flags() -> set[tuple[str, str, bool]]:
    found: set[tuple[str, str, bool]] = set()

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{prefix} {name}")
            elif action.dest in _OUTPUT_DESTS and action.type in (Path, output_file):
                found.add((prefix, action.option_strings[-1], action.type is output_file))

    for name in commands():
        parser, _module = _command_parser(name)
        walk(parser, name)
    return found


def test_the_table_lists_every_output_of_every_command():
    commands = {(" ".join(argv[:2]) if argv[0] in ("baseline", "export") else argv[0], flag) for argv, flag, _ in CASES}
    flags = _output_flags()
    readers = {("baseline show", "--dir"), ("baseline save", "--dir")}  # folders, read or filled
    untyped = {(c, f) for c, f, typed in flags if not typed} - readers
    assert not untyped, f"outputs that accept a folder name ('reports/'): {sorted(untyped)}"
    missing = {(c, f) for c, f, _ in flags} - commands - NO_INPUTS - {("baseline show", "--dir")}  # a folder it reads
    assert not missing, f"outputs not in the table of refusals: {sorted(missing)}"


@pytest.fixture
def inputs(tmp_path: Path, run_doc) -> dict[str, Path]:
    run = tmp_path / "run.json"
    run.write_text(json.dumps(run_doc()))
    store = tmp_path / "s.db"
    assert main(["record", str(run), "--store", f"sqlite:///{store}"]) == 0
    config = tmp_path / "perfgate.toml"
    config.write_text("threshold = 10\n")
    report = tmp_path / "dqn.md"
    report.write_text("# Performance Regression Check\n\n## No Regression Detected\n")
    return {"run": run, "store": store, "config": config, "report": report}


@pytest.mark.parametrize(
    ("argv", "flag", "names"),
    CASES,
    ids=[f"{a[0]}{'-' + a[1] if a[0] in ('baseline', 'export') else ''}{f}" for a, f, _ in CASES],
)
def test_an_output_that_is_an_input_is_refused(argv, flag, names, inputs, capsys):
    """Regression for export replacing the SQLite store with the exposition text (exit 0, data lost)."""
    fill = {
        "{run}": str(inputs["run"]),
        "{store}": f"sqlite:///{inputs['store']}",
        "{config}": str(inputs["config"]),
        "{report}": str(inputs["report"]),
        "{html}": str(inputs["run"].parent / "r.html"),
    }
    base = [fill.get(a, a) for a in argv]
    for name in names:
        target = inputs[name]
        path = target
        if flag == "--textfile":  # node_exporter reads only *.prom: name the input through a link that ends so
            path = target.parent / f"{name}.prom"
            path.unlink(missing_ok=True)
            path.symlink_to(target)
        before = {p: p.read_bytes() for p in inputs.values()}
        code = main([*base, flag, str(path)])
        err = capsys.readouterr().err
        assert code == 2, (argv, flag, name, err)
        assert "same file as the input" in err, err
        assert [line for line in err.splitlines() if line.strip()] == [err.strip()], err
        assert {p: p.read_bytes() for p in inputs.values()} == before, (flag, name)


@pytest.mark.parametrize("flag", ["--output", "--json"])
def test_an_output_ending_with_a_slash_is_refused(tmp_path, seed_files, flag, capsys):
    """Regression for ``--output nodir/`` writing a regular file ``nodir`` and exiting 0."""
    base, cur = seed_files
    target = tmp_path / "nodir"
    code = main(["check", "--baseline", str(base), "--current", str(cur), flag, f"{target}/"])
    assert code == 2
    assert "names a folder" in capsys.readouterr().err
    assert not target.exists()


def test_a_fifo_without_a_reader_is_refused_after_a_wait(tmp_path, seed_files, capsys, monkeypatch):
    """Regression for ``--output`` or ``summary --append`` to a FIFO nobody reads blocking forever."""
    import os
    import threading

    import perfgate.output

    monkeypatch.setattr(perfgate.output, "FIFO_WAIT_SECONDS", 0.5)
    base, cur = seed_files
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    report = tmp_path / "dqn.md"
    report.write_text("# Performance Regression Check\n\n## No Regression Detected\n")
    results: list[int] = []
    runs = [
        ["check", "--baseline", str(base), "--current", str(cur), "--output", str(fifo)],
        ["summary", str(report), "--append", str(fifo)],
    ]

    def go() -> None:
        for argv in runs:
            results.append(main(argv))

    worker = threading.Thread(target=go, daemon=True)
    worker.start()
    worker.join(60)  # a generous bound: the bug blocks forever
    if worker.is_alive():  # unblock the thread so the test run can end, then fail
        with open(fifo, "rb"):
            pass
        pytest.fail("writing to a FIFO without a reader blocked")
    assert results == [2, 2]
    err = capsys.readouterr().err
    assert err.count("FIFO that nobody read within") == 2, err


def test_reports_are_written_all_or_nothing(tmp_path, seed_files, capsys):
    """Regression for a failed ``--json`` leaving the Markdown ``--output`` written, with exit 2."""
    base, cur = seed_files
    report = tmp_path / "r.md"
    html = tmp_path / "r.html"
    report.write_text("the report of the last check")
    argv = ["check", "--baseline", str(base), "--current", str(cur), "--output", str(report), "--html", str(html)]
    code = main([*argv, "--json", "/dev/full"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "/dev/full" in err
    assert report.read_text() == "the report of the last check"
    assert not html.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["r.md", base.name, cur.name])


@pytest.mark.parametrize(("rule", "code"), [("fail", 1), ("refuse", 2)])
def test_a_budget_on_a_missing_metric_says_one_thing(tmp_path, seed_files, rule, code, capsys):
    """Regression for the warning "this budget is not checked" followed by a failed check (exit 1)."""
    base, cur = seed_files
    config = tmp_path / "perfgate.toml"
    config.write_text(f'missing_metric = "{rule}"\n[budgets.dqn]\nno_such_metric_us = {{ p99 = 50 }}\n')
    assert main(["check", "--config", str(config), "--baseline", str(base), "--current", str(cur)]) == code
    err = capsys.readouterr().err
    assert "not checked" not in err
    assert ("fails the check" if rule == "fail" else "undecided") in err


_STAGES = """\
from perfgate.bench import stage

@stage("split", metric="split_time_ms", unit="ms", suite="{suite}", models=["m"])
def split(ctx):
    text = "a b c " * 100
    return lambda: text.split()
"""


@pytest.mark.parametrize("how", ["name", "dot-slash", "symlink", "hardlink", "package-init"])
def test_an_output_over_the_stages_module_is_refused(how, tmp_path, monkeypatch, capsys):
    """Regression for ``bench --stages-module tinystages --output tinystages.py`` replacing the
    user's code with the run file (exit 0)."""
    module = f"outstages_{how.replace('-', '_')}"  # a name of its own: no module of another test is reused
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    if how == "package-init":
        (tmp_path / module).mkdir()
        (tmp_path / module / "__init__.py").write_text("# the package's own code\n")
        source = tmp_path / module / "stages.py"
        source.write_text(_STAGES.format(suite=module))
        name, target = f"{module}.stages", f"{module}/__init__.py"
        source = tmp_path / target
    else:
        source = tmp_path / f"{module}.py"
        source.write_text(_STAGES.format(suite=module))
        name, target = module, f"{module}.py"
        if how == "dot-slash":
            target = f"./{module}.py"
        elif how == "symlink":
            target = "link.py"
            (tmp_path / target).symlink_to(source)
        elif how == "hardlink":
            target = "hard.py"
            (tmp_path / target).hardlink_to(source)
    before = source.read_bytes()
    argv = ["bench", "--suite", module, "--stages-module", name, "--model", "m", "--output", target]
    code = main([*argv, "--rounds", "1", "--repeat", "1", "--warmup", "0"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"same file as the input --stages-module {name}" in err, err
    assert [line for line in err.splitlines() if line.strip()] == [err.strip()], err
    assert source.read_bytes() == before
    assert name not in sys.modules  # refused before the module was imported: no work done


def test_the_stages_module_is_found_without_running_it(tmp_path, monkeypatch):
    """The module's file is found as its import would find it, from the working directory, and
    neither the module nor its package runs."""
    from perfgate.app.files import module_files

    monkeypatch.chdir(tmp_path)
    (tmp_path / "quietpkg").mkdir()
    (tmp_path / "quietpkg" / "__init__.py").write_text("raise SystemExit('the package ran')\n")
    (tmp_path / "quietpkg" / "stages.py").write_text("raise SystemExit('the module ran')\n")
    assert module_files("quietpkg.stages") == [
        tmp_path / "quietpkg" / "__init__.py",
        tmp_path / "quietpkg" / "stages.py",
    ]
    assert "quietpkg" not in sys.modules
    assert module_files("no_such_module_here") == []
