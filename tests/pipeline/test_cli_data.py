"""``perfgate data``: inspect in-process (exit codes, output) plus one real subprocess run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from perfgate.cli import main
from perfgate_pipeline.dbn import load_dbn

from .test_dbn_corpus import mixed_stream, sample, zstd_frames

GOOD = sample("test_data.ohlcv-1m.dbn").path
ROOT = Path(__file__).resolve().parents[2]


def _truncated(tmp_path: Path) -> Path:
    path = tmp_path / "cut.dbn"
    path.write_bytes(GOOD.read_bytes()[:-10])
    return path


def test_inspect_a_valid_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["data", "inspect", str(GOOD)]) == 0
    out = capsys.readouterr().out
    lines = dict(line.split(None, 1) for line in out.splitlines() if not line.startswith(("requested", "ts_event")))
    assert lines["format"] == "DBN v2, uncompressed"
    assert lines["schema"] == "ohlcv-1m"
    assert lines["dataset"] == "GLBX.MDP3"
    assert lines["symbols"] == "ESH1"
    assert lines["records"] == "2 (ohlcv-1m: 2)"
    assert lines["validation"] == "ok"
    assert "2020-12-28T13:00:00Z .. 2020-12-29T00:00:00Z" in out  # requested range, ISO UTC
    assert "2020-12-28T13:00:00Z .. 2020-12-28T13:01:00Z" in out  # first and last bar


def test_inspect_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["data", "inspect", "--format", "json", str(sample("test_data.mbp-1.v1.dbn.zst").path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["valid"] is True and doc["error"] is None
    assert (doc["version"], doc["schema"], doc["compressed"], doc["record_count"]) == (1, "mbp-1", True, 2)
    assert doc["symbols"] == ["ESH1"] and doc["stype_in"] == "raw_symbol" and doc["stype_out"] == "instrument_id"
    assert doc["start"] == "2020-12-28T13:00:00Z" and doc["first_ts_event"].startswith("2020-12-28T13:00:00.")


def test_inspect_a_damaged_file_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _truncated(tmp_path)
    assert main(["data", "inspect", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err
    assert lines[0].startswith(f"perfgate data: error: {path}")
    assert "byte offset 409" in lines[0] and "truncated" in lines[0]


def test_inspect_a_damaged_file_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _truncated(tmp_path)
    assert main(["data", "inspect", str(path), "--format", "json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["valid"] is False and doc["file"] == str(path)
    assert "byte offset 409" in doc["error"]


@pytest.mark.parametrize("name", ["test_data.ohlcv-1m.dbz", "does-not-exist.dbn"])
def test_inspect_refuses_dbz_and_missing_files(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = GOOD.parent / name
    assert main(["data", "inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(path) in err


def test_inspect_a_fragment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    frag = sample("test_data.definition.v3.dbn.frag").path
    assert main(["data", "inspect", str(frag), "--dbn-version", "3", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["fragment"] is True and doc["records_by_type"] == {"definition": 2} and doc["schema"] is None
    assert main(["data", "inspect", str(frag), "--ts-out"]) == 2  # --ts-out needs --dbn-version
    assert "--ts-out applies only" in capsys.readouterr().err
    assert main(["data", "inspect", str(frag), "--dbn-version", "1"]) == 2  # wrong version: lengths do not match
    assert "length byte 130 (520 bytes)" in capsys.readouterr().err


def test_inspect_a_mixed_stream(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "live.dbn.zst"
    path.write_bytes(zstd_frames(mixed_stream(), 3))
    assert main(["data", "inspect", str(path)]) == 2
    assert "mixed=True" in capsys.readouterr().err
    assert main(["data", "inspect", str(path), "--mixed", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["records_by_type"] == {"ohlcv-1m": 3, "trades": 2, "mbo": 3} and doc["schema"] is None


def test_data_needs_an_action(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["data"]) == 2
    assert "ACTION" in capsys.readouterr().err


def test_synth_writes_a_file_the_loader_accepts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bars.dbn.zst"
    argv = ["data", "synth", "--schema", "ohlcv-1m", "--records", "500", "--seed", "3", "--output", str(out)]
    assert main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and str(out) in lines[0] and "500" in lines[0]
    loaded = load_dbn(out)
    assert loaded.compressed and loaded.schema == "ohlcv-1m" and loaded.record_count == 500
    assert main([*argv[:3], "no-such-schema", *argv[4:]]) == 2


def test_python_m_perfgate_data_inspect_subprocess(tmp_path: Path) -> None:
    good = subprocess.run(
        [sys.executable, "-m", "perfgate", "data", "inspect", "--format", "json", str(GOOD)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["record_count"] == 2
    bad = subprocess.run(
        [sys.executable, "-m", "perfgate", "data", "inspect", str(_truncated(tmp_path))],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2 and bad.stdout == ""
    assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
