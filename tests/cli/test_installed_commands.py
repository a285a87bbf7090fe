"""Commands that installed packages add (the ``perfgate.commands`` entry points): one that cannot be
loaded costs only itself, with exit 2 and one line naming its entry point; the others, perfgate's own
and ``perfgate --help`` included, work as if it were not there.

The packages are real installed distributions (a ``*.dist-info`` on ``PYTHONPATH``); perfgate runs
in a subprocess.
"""

from __future__ import annotations

from pathlib import Path

from tests.test_installed_suites import one_line_error, perfgate

HELLO = """\
HELP = "say hello"


def add_arguments(parser):
    parser.add_argument("--name", default="world")


def run(args):
    print(f"hello {args.name}")
    return 0
"""


def _install(root: Path, entries: dict[str, str], modules: dict[str, str]) -> Path:
    info = root / "probe_commands-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: probe_commands\nVersion: 1.0\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entries.items())
    (info / "entry_points.txt").write_text(f"[perfgate.commands]\n{lines}")
    for name, text in modules.items():
        (root / f"{name}.py").write_text(text)
    return root


def test_an_installed_command_runs_and_a_broken_one_costs_only_itself(tmp_path):
    path = _install(
        tmp_path / "site",
        {"hello": "probe_hello", "broken": "probe_broken", "halfway": "probe_halfway", "check": "probe_hello"},
        {
            "probe_hello": HELLO,
            "probe_broken": "raise ValueError('broken on purpose')\n",
            "probe_halfway": "def run(args):\n    return 0\n",
        },
    )
    done = perfgate(tmp_path, "--help", path=path)
    assert done.returncode == 0, done.stderr
    assert "say hello" in done.stdout and "cannot be used: run 'perfgate broken' for why" in done.stdout
    assert "data" in done.stdout  # the reference pipeline's command, beside them
    done = perfgate(tmp_path, "hello", "--name", "there", path=path)
    assert (done.returncode, done.stdout) == (0, "hello there\n"), done.stderr
    line = one_line_error(perfgate(tmp_path, "broken", path=path), "perfgate.commands 'broken = probe_broken'")
    assert "broken on purpose" in line and "probe_commands 1.0" in line
    line = one_line_error(perfgate(tmp_path, "halfway", path=path), "'halfway = probe_halfway'")
    assert "lacks HELP, add_arguments" in line
    # perfgate's own command cannot be replaced
    done = perfgate(tmp_path, "check", "--help", path=path)
    assert done.returncode == 0 and "compare a run against its baseline" in done.stdout
