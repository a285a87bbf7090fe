"""One meaning per flag name across perfgate's commands, walked on the real argparse tree.

A flag that appears in several commands has the same action, type, nargs, choices and help
text in each (a command may add its own default, as a final ``(default …)``); every command,
sub-command and flag has help; no parser accepts abbreviations; a removed spelling is an
error that names the new one. And worker processes of ``perfgate bench`` get explicit
options: however the parent's flags are spelt, only the parent records.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
from pathlib import Path

import pytest

from perfgate.cli import _build_parser, _command_parser, _help, commands, main
from perfgate.cli._flags import _REMOVED, FLAG_HELP
from perfgate.output import output_file

# Flags whose object is, by nature, the command's own: each command writes its own kind of file.
PER_COMMAND = {
    "--output": "the file each command writes (a run file, a Markdown report, a DBN file, a calibration file)",
}
_DEFAULT = re.compile(r" \(default[^()]*(\([^()]*\)[^()]*)*\)$")


def _parsers() -> list[tuple[str, argparse.ArgumentParser, str | None]]:
    """Every (command path, parser, help shown in the parent's list) of the real tree."""
    out: list[tuple[str, argparse.ArgumentParser, str | None]] = []

    def walk(path: str, parser: argparse.ArgumentParser, help_text: str | None) -> None:
        out.append((path, parser, help_text))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {a.dest: a.help for a in action._choices_actions}
                for name, sub in action.choices.items():
                    walk(f"{path} {name}", sub, helps.get(name))

    for name in commands():
        parser, _ = _command_parser(name)
        walk(f"perfgate {name}", parser, _help(name))
    return out


def _actions():
    for path, parser, _ in _parsers():
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
                continue
            yield path, action


def _meaning(action: argparse.Action) -> tuple[object, ...]:
    help_text = _DEFAULT.sub("", action.help or "")
    choices = tuple(action.choices) if action.choices is not None else None
    return type(action).__name__, action.type, action.nargs, choices, help_text


def test_a_flag_name_means_the_same_in_every_command():
    seen: dict[str, dict[tuple[object, ...], list[str]]] = {}
    for path, action in _actions():
        for flag in action.option_strings:
            if flag not in PER_COMMAND:
                seen.setdefault(flag, {}).setdefault(_meaning(action), []).append(path)
    differing = {flag: meanings for flag, meanings in seen.items() if len(meanings) > 1}
    assert differing == {}
    shared = {flag for flag, meanings in seen.items() if sum(len(p) for p in meanings.values()) > 1}
    # a flag of several commands takes its help from the one table, so a new command cannot drift
    # (--dir: the two sub-commands of baseline that read baseline files share one help text of their own)
    assert shared - set(FLAG_HELP) - {"--dir"} == set()


# Flags whose attribute is not their name: a repeatable flag is read as a list under a plural
# name, and the negative of a switch sets the switch's own attribute.
ATTRIBUTES = {
    "--stage": "stages",
    "--stages-module": "stages_modules",
    "--no-explain": "explain",
    "--no-notify": "notify",
    "--no-randomise-layout": "randomise_layout",
}


def test_a_flag_is_read_under_one_attribute_in_every_command():
    """``--html`` is ``args.html`` in ``check``, ``ab``, ``explain`` and ``report`` alike: the flag's
    name without its dashes, ``-`` as ``_`` (except the few of :data:`ATTRIBUTES`)."""
    dests: dict[str, dict[str, list[str]]] = {}
    for path, action in _actions():
        for flag in action.option_strings:
            dests.setdefault(flag, {}).setdefault(action.dest, []).append(path)
    several = {flag: found for flag, found in dests.items() if len(found) > 1}
    assert several == {}
    named = {flag: next(iter(found)) for flag, found in dests.items() if flag.startswith("--")}
    expected = {flag: ATTRIBUTES.get(flag, flag[2:].replace("-", "_")) for flag in named}
    assert named == expected


def test_the_meanings_that_used_to_differ_now_have_names_of_their_own():
    by_path: dict[str, dict[str, argparse.Action]] = {}
    for path, action in _actions():
        for flag in action.option_strings:
            by_path.setdefault(path, {})[flag] = action
    assert "--changepoint-alpha" in by_path["perfgate history"] and "--alpha" not in by_path["perfgate history"]
    assert by_path["perfgate check"]["--alpha"].help == by_path["perfgate ab"]["--alpha"].help
    for path in ("perfgate check", "perfgate report", "perfgate calibrate", "perfgate history"):
        assert "--baseline-branch" in by_path[path] and "--branch" not in by_path[path]
    for path in ("perfgate bench", "perfgate import"):
        assert by_path[path]["--branch"].help.startswith(FLAG_HELP["--branch"])  # the branch to record, only
    assert "--version" not in by_path["perfgate data inspect"]
    assert by_path["perfgate data inspect"]["--dbn-version"].type is int
    for path, flags in by_path.items():
        if "--json" in flags:  # --json takes a file wherever it is
            assert flags["--json"].type is output_file, path
    assert "--seed" not in by_path["perfgate ab"] and "--order-seed" in by_path["perfgate ab"]
    for path in ("perfgate baseline update", "perfgate calibrate"):
        assert "--runs" not in by_path[path] and "--baseline-runs" in by_path[path]
    for path in ("perfgate history", "perfgate report"):
        assert "--trend-runs" in by_path[path]


def test_help_texts_do_not_speak_of_other_commands():
    """A flag's one help text is read in every command that has it: it names none of them."""
    names = sorted(commands(), key=len, reverse=True)
    leaks = [
        (flag, text)
        for flag, text in FLAG_HELP.items()
        for name in names
        if re.search(rf"\b(in|of|for) {re.escape(name)}\b", text)
    ]
    assert leaks == []


def test_store_is_declared_once_with_one_help_text():
    stores = [(path, action) for path, action in _actions() if "--store" in action.option_strings]
    assert len(stores) >= 9
    assert {action.help for _, action in stores} == {FLAG_HELP["--store"]}
    assert all("PERFGATE_STORE" in (action.help or "") for _, action in stores)


def test_removed_spellings_are_registered_nowhere_and_name_a_flag_that_exists():
    assert sum(len(v) for v in _REMOVED.values()) >= 15
    registered = {(path.split()[1], flag) for path, action in _actions() for flag in action.option_strings}
    for command, removed in _REMOVED.items():
        for old, new in removed.items():
            assert (command, new.split()[0]) in registered, (command, new)
            flags_here = {flag for c, flag in registered if c == command}
            assert old not in flags_here, (command, old)


def test_every_command_subcommand_and_flag_has_help():
    missing = []
    for path, parser, help_text in _parsers():
        if not help_text or not parser.description:
            missing.append(f"{path}: no help or description")
    for path, action in _actions():
        if not action.help or action.help == argparse.SUPPRESS:
            missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}: no help")
    assert missing == []


def test_no_parser_accepts_abbreviations():
    parsers = [("perfgate", _build_parser())] + [(path, parser) for path, parser, _ in _parsers()]
    assert [path for path, parser in parsers if parser.allow_abbrev] == []


@pytest.mark.parametrize("flag", ["--stor", "--baseline-run", "--thresh"])
def test_an_abbreviated_flag_is_an_error(tmp_path, capsys, flag):
    base = tmp_path / "run.json"
    base.write_text("{}")
    code = main(["check", "--baseline", str(base), "--current", str(base), flag, "x"])
    assert code == 2
    assert f"unrecognized arguments: {flag}" in capsys.readouterr().err


def test_seed_only_means_a_random_seed():
    allowed = re.compile(r"random seed|--(order-)?seed|seeded")
    texts = [help_text for _, _, help_text in _parsers() if help_text]
    texts += [parser.description or "" for _, parser, _ in _parsers()]
    texts += [action.help or "" for _, action in _actions()]
    bad = [text for text in texts if "seed" in allowed.sub("", text.lower())]
    assert bad == []


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["history", "--model", "dqn", "--limit", "5"], "--limit was removed: use --trend-runs"),
        (["history", "--model", "dqn", "--json"], "--json was removed: use --format json"),
        (["ab", "--baseline-ref", "main", "--model", "dqn", "--seed=3"], "--seed was removed: use --order-seed"),
        (["baseline", "update", "--runs", "3"], "--runs was removed: use --baseline-runs"),
        (["data", "inspect", "x.dbn", "--version", "2"], "--version was removed: use --dbn-version"),
    ],
)
def test_a_removed_spelling_is_an_error_that_names_the_new_one(tmp_path, capsys, argv, hint):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert hint in err and "unrecognized arguments" in err and "Traceback" not in err


# --- PERFGATE_STORE, the same in every command ---------------------------------------


def _runs_in(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("select count(*) from runs").fetchone()[0])


def _run_file(path: Path, level: float, commit: str) -> Path:
    samples = [level * (1 + 0.01 * ((i % 5) - 2)) for i in range(30)]
    doc = {
        "schema_version": 1,
        "run_id": commit * 4,
        "model": "dqn",
        "created_at": f"2026-11-0{len(commit)}T10:00:00Z",
        "git": {"commit": commit, "branch": "main", "dirty": False},
        "metrics": {"training_step_time_ms": {"unit": "ms", "direction": "lower_is_better", "samples": samples}},
    }
    path.write_text(json.dumps(doc))
    return path


def test_check_takes_its_baseline_from_perfgate_store(tmp_path, monkeypatch, capsys):
    """``check`` used to ignore PERFGATE_STORE while ``record`` used it."""
    base = _run_file(tmp_path / "base.json", 10.0, "a")
    cur = _run_file(tmp_path / "cur.json", 30.0, "bb")
    db = tmp_path / "env.db"
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PERFGATE_STORE", raising=False)
    assert main(["check", "--current", str(cur), "--quiet"]) == 2  # no baseline anywhere
    assert "give --baseline FILE" in capsys.readouterr().err
    monkeypatch.setenv("PERFGATE_STORE", f"sqlite:///{db}")
    assert main(["record", str(base)]) == 0
    assert _runs_in(db) == 1
    report = tmp_path / "r.md"
    # three times as slow (twice is inside the raw run-to-run term's tail with the assumed noise)
    assert main(["check", "--current", str(cur), "--output", str(report), "--quiet"]) == 1
    assert f"store `sqlite:///{db}`, samples pooled from the last 1 run(s) on main" in report.read_text()


# --- worker processes get explicit options ----------------------------------------------

STAGES = """\
from perfgate.bench import stage

@stage("work", metric="work_time_ms", unit="ms", suite="flagsuite", repeat=3, warmup=1)
def work(ctx):
    data = list(range(2000))
    return lambda: sorted(data, reverse=True)
"""


def _bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> int:
    (tmp_path / "flagstages.py").write_text(STAGES)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{Path(__file__).resolve().parents[2]}")
    monkeypatch.syspath_prepend(str(tmp_path))
    argv = ["bench", "--suite", "flagsuite", "--stages-module", "flagstages", "--model", "m"]
    return main([*argv, "--output", str(tmp_path / "run.json"), "--rounds", "1", "--processes", "2", *extra])


def test_an_abbreviated_store_flag_is_refused_and_nothing_is_recorded(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("PERFGATE_STORE", raising=False)
    db = tmp_path / "abbrev.db"
    assert _bench(tmp_path, monkeypatch, "--stor", f"sqlite:///{db}") == 2
    assert "unrecognized arguments: --stor" in capsys.readouterr().err
    assert not db.exists() and not (tmp_path / "run.json").exists()


def test_workers_record_nothing_only_the_parent_records_once(tmp_path, monkeypatch):
    """2 worker processes, a store from the flag, from PERFGATE_STORE and from the configuration:
    one run in each, the parent's combined one (it was 3: each worker recorded its own)."""
    flag_db, env_db, config_db = tmp_path / "flag.db", tmp_path / "env.db", tmp_path / "config.db"
    (tmp_path / "perfgate.toml").write_text(f'[tool.perfgate]\nstore = "sqlite:///{config_db}"\n')
    monkeypatch.setenv("PERFGATE_STORE", f"sqlite:///{env_db}")
    assert _bench(tmp_path, monkeypatch, "--store", f"sqlite:///{flag_db}") == 0
    doc = json.loads((tmp_path / "run.json").read_text())
    assert len(doc["metrics"]["work_time_ms"]["groups"]) == 2  # it did run in 2 workers
    assert _runs_in(flag_db) == 1
    assert not env_db.exists() and not config_db.exists()  # --store wins, and no worker opened another store
    assert main(["bench", "--help"]) == 0  # (the parser still builds after the run)


def test_workers_record_nothing_with_the_store_from_the_environment(tmp_path, monkeypatch):
    env_db = tmp_path / "env.db"
    monkeypatch.setenv("PERFGATE_STORE", f"sqlite:///{env_db}")
    assert _bench(tmp_path, monkeypatch) == 0
    assert _runs_in(env_db) == 1


def test_worker_options_are_parsed_fields_not_the_command_line(tmp_path):
    from perfgate.cli._bench import measure_options
    from perfgate.workers.measure import BenchJob

    parser, _ = _command_parser("bench")
    args = parser.parse_args(
        ["--model", "dqn", "--output", "x.json", "--store", "sqlite:///s.db", "--push-metrics", "http://h:9091"]
    )
    job = BenchJob(options=measure_options(args), model="dqn", output=tmp_path / "w.json", progress=tmp_path / "p")
    options = job.to_json()
    assert "store" not in options and "push_metrics" not in options and "processes" not in options
    assert BenchJob.from_json(json.loads(json.dumps(options))) == job  # JSON values only, read back whole


def test_a_worker_refuses_options_it_does_not_know(tmp_path):
    import subprocess
    import sys

    from perfgate.workers.repeat import WORKER_MODULE

    job = {"model": "m", "output": str(tmp_path / "w.json"), "store": "sqlite:///x.db"}
    proc = subprocess.run(
        [sys.executable, "-m", WORKER_MODULE], input=json.dumps(job), capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2
    assert "worker options must have exactly the fields" in proc.stderr
    assert "Traceback" not in proc.stderr
