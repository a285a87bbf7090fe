"""The one output writer: files replaced atomically with their mode kept; links, devices and
FIFOs never replaced; an output that is an input refused; every OSError a one-line exit 2."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from perfgate.cli import main
from perfgate.errors import OutputError
from perfgate.output import append_output, check_distinct, is_replaceable, open_output, write_output

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="only root can replace device nodes and /dev links")


def _one_line_error(err: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err and "internal error" not in err


@pytest.fixture
def runs(tmp_path: Path, seed_files: tuple[Path, Path]) -> tuple[Path, Path]:
    return seed_files


def test_new_file_is_written_with_the_umask_mode(tmp_path):
    target = tmp_path / "sub" / "report.md"
    write_output(target, "hello\n")
    assert target.read_text() == "hello\n"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask
    assert [p.name for p in target.parent.iterdir()] == ["report.md"]  # no temporary file left


def test_existing_file_keeps_its_mode(tmp_path):
    """Regression for an atomic rename that turned a private 0600 report into 0644."""
    target = tmp_path / "private.md"
    target.write_text("old")
    target.chmod(0o600)
    write_output(target, "new")
    assert target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_failed_write_leaves_the_old_file(tmp_path):
    target = tmp_path / "report.md"
    target.write_text("old")
    with pytest.raises(RuntimeError), open_output(target) as handle:
        handle.write(b"half")
        raise RuntimeError("stop")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]


def test_symlink_to_a_file_keeps_the_link_and_replaces_its_target(tmp_path):
    real = tmp_path / "real.md"
    real.write_text("old")
    real.chmod(0o640)
    link = tmp_path / "link.md"
    link.symlink_to(real.name)
    write_output(link, "new")
    assert link.is_symlink() and link.readlink() == Path("real.md")
    assert real.read_text() == "new"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640


def test_dangling_symlink_is_refused(tmp_path):
    link = tmp_path / "link.md"
    link.symlink_to(tmp_path / "nowhere" / "x.md")
    with pytest.raises(OutputError, match="does not exist"):
        write_output(link, "x")
    assert link.is_symlink() and not (tmp_path / "nowhere").exists()


def test_fifo_is_written_in_place(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_output(fifo, "through the pipe\n")
    reader.join(timeout=30)
    assert got == [b"through the pipe\n"]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_directory_and_dev_full_are_one_line_errors(tmp_path, runs, capsys):
    base, cur = runs
    for target, words in ((tmp_path, "is a directory"), (Path("/dev/full"), "no space left")):
        code = main(["check", "--baseline", str(base), "--current", str(cur), "--output", str(target)])
        err = capsys.readouterr().err
        assert code == 2
        assert words in err
        _one_line_error(err)


@pytest.mark.parametrize("target", ["/proc/perfgate-report.md", "/sys/perfgate-report.md", "/proc/self/status"])
def test_proc_and_sys_are_one_line_errors(target, runs, capsys):
    base, cur = runs
    code = main(["check", "--baseline", str(base), "--current", str(cur), "--output", target])
    err = capsys.readouterr().err
    assert code == 2 and target in err
    _one_line_error(err)


def test_output_that_is_an_input_is_refused(runs, capsys):
    """Regression: --output naming the --current file overwrote it silently."""
    base, cur = runs
    before = cur.read_bytes()
    for flag in ("--output", "--json", "--html"):
        code = main(["check", "--baseline", str(base), "--current", str(cur), flag, str(cur)])
        err = capsys.readouterr().err
        assert code == 2 and "same file as the input --current" in err
        _one_line_error(err)
    assert cur.read_bytes() == before


def test_output_through_a_link_to_an_input_is_refused(tmp_path, runs, capsys):
    base, cur = runs
    link = tmp_path / "alias.json"
    link.symlink_to(base)
    code = main(["check", "--baseline", str(base), "--current", str(cur), "--output", str(link)])
    assert code == 2 and "--baseline" in capsys.readouterr().err
    assert json.loads(base.read_text())["model_type"] == "DQN"


def test_two_outputs_on_one_file_are_refused(tmp_path, runs, capsys):
    base, cur = runs
    out = tmp_path / "both.md"
    code = main(["check", "--baseline", str(base), "--current", str(cur), "--output", str(out), "--json", str(out)])
    assert code == 2 and "same file as --output" in capsys.readouterr().err
    assert not out.exists()


def test_check_distinct_lets_devices_repeat():
    check_distinct({"--output": "/dev/null", "--json": "/dev/null"}, {"--current": "/dev/null"})


def test_append_creates_and_appends(tmp_path):
    target = tmp_path / "summary.md"
    append_output(target, "a\n")
    append_output(target, "b\n")
    assert target.read_text() == "a\nb\n"
    with pytest.raises(OutputError, match="is a directory"):
        append_output(tmp_path, "x")


def test_companion_files_only_beside_regular_outputs(tmp_path):
    assert is_replaceable(tmp_path / "new.json")
    assert not is_replaceable("/dev/null")
    assert not is_replaceable("/dev/stdout")
    assert not is_replaceable(tmp_path)


def _perfgate(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "perfgate", *args], capture_output=True, text=True, timeout=120, **kwargs
    )


def test_stdout_on_dev_full_is_a_one_line_error(runs):
    base, cur = runs
    with Path("/dev/full").open("w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "perfgate", "check", "--baseline", str(base), "--current", str(cur)],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 2, proc.stderr
    assert "no space left" in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if not line.startswith(("✗", "✓"))]
    assert len(lines) == 1 and "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr


def test_output_dev_stdout_writes_to_the_pipe(runs):
    base, cur = runs
    proc = _perfgate("check", "--baseline", str(base), "--current", str(cur), "--output", "/dev/stdout", "--quiet")
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("# Performance Regression Check")
    assert Path("/dev/stdout").is_symlink()


@ROOT_ONLY
def test_dev_null_stays_a_device_for_root(runs):
    """Regression: as root, --json /dev/null renamed a regular file over /dev/null."""
    base, cur = runs
    before = os.lstat("/dev/null")
    for flag in ("--output", "--json", "--html"):
        assert main(["check", "--baseline", str(base), "--current", str(cur), flag, "/dev/null"]) == 1
    after = os.lstat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino


@ROOT_ONLY
def test_dev_stdout_link_stays_a_link_for_root(runs):
    base, cur = runs
    before = Path("/dev/stdout").readlink()
    proc = _perfgate("check", "--baseline", str(base), "--current", str(cur), "--output", "/dev/stdout")
    assert proc.returncode == 1
    assert Path("/dev/stdout").is_symlink() and Path("/dev/stdout").readlink() == before
    assert not Path("/dev/stdout.model.pt").exists()


@ROOT_ONLY
def test_block_device_is_refused_for_root(tmp_path):
    node = tmp_path / "blk"
    os.mknod(node, 0o600 | stat.S_IFBLK, os.makedev(7, 200))  # a loop device number, never opened
    with pytest.raises(OutputError, match="block device"):
        write_output(node, "x")
    assert stat.S_ISBLK(node.lstat().st_mode)


@ROOT_ONLY
def test_char_device_node_is_written_in_place_for_root(tmp_path):
    node = tmp_path / "null"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a second /dev/null
    write_output(node, "discarded")
    assert stat.S_ISCHR(node.lstat().st_mode)


def test_output_that_is_the_store_is_refused(tmp_path, run_doc, capsys):
    """The history must not be replaced by a report: the SQLite store counts as an input."""
    run = tmp_path / "run.json"
    run.write_text(json.dumps(run_doc()))
    db = tmp_path / "s.db"
    url = f"sqlite:///{db}"
    assert main(["record", str(run), "--store", url]) == 0
    before = db.read_bytes()
    for argv in (
        ["check", "--current", str(run), "--store", url, "--output", str(db)],
        ["report", "--store", url, "--html", str(db)],
        ["import", "pyperf", str(run), "--store", url, "--output", str(db)],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "same file as the input the store" in err, err
    assert db.read_bytes() == before


def test_store_on_a_device_is_refused(capsys):
    """Regression: sqlite:////dev/null made perfgate create /dev/null-journal."""
    assert main(["history", "--model", "dqn", "--store", "sqlite:////dev/null"]) == 2
    assert "not a regular file" in capsys.readouterr().err
    assert not Path("/dev/null-journal").exists()


def test_unwritable_folder_is_a_one_line_error(tmp_path, runs, capsys):
    """A folder nobody may write, not even root (the immutable attribute)."""
    import shutil

    if shutil.which("chattr") is None:
        pytest.skip("needs chattr")
    folder = tmp_path / "locked"
    folder.mkdir()
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("this file system has no immutable attribute")
    try:
        base, cur = runs
        code = main(["check", "--baseline", str(base), "--current", str(cur), "--output", str(folder / "r.md")])
        err = capsys.readouterr().err
        assert code == 2 and "not permitted" in err
        _one_line_error(err)
        assert list(folder.iterdir()) == []
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=False)


def test_import_and_summary_refuse_to_overwrite_their_input(tmp_path, capsys):
    source = Path(__file__).resolve().parent.parent / "importers" / "fixtures" / "pyperf" / "1.7.1.json"
    result = tmp_path / "result.json"
    result.write_bytes(source.read_bytes())
    before = result.read_bytes()
    assert main(["import", "pyperf", str(result), "--output", str(result)]) == 2
    assert "same file as the input FILE" in capsys.readouterr().err
    assert result.read_bytes() == before
    report = tmp_path / "dqn.md"
    report.write_text("# Performance Regression Check\n\n## ✅ No Regression Detected\n")
    for flag in ("--output", "--append"):
        assert main(["summary", str(report), flag, str(report)]) == 2
        assert "same file as the input" in capsys.readouterr().err
    assert report.read_text().startswith("# Performance Regression Check")


def test_a_refused_output_is_found_before_any_other_is_written(tmp_path, runs, capsys):
    base, cur = runs
    report = tmp_path / "report.md"
    code = main(
        ["check", "--baseline", str(base), "--current", str(cur), "--output", str(report), "--json", str(tmp_path)]
    )
    assert code == 2 and "is a directory" in capsys.readouterr().err
    assert not report.exists()
