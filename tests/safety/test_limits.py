"""Bombs and unbounded input: capped, streamed readers with a limit the user can raise; and
deep, duplicate-keyed or undecodable JSON as one-line errors. Peak memory is measured in a
fresh process."""

from __future__ import annotations

import gzip
import json
import struct
import zlib
from pathlib import Path

import pytest
import zstandard

from perfgate.cli import main
from tests.safety.procs import one_line_error, perfgate

IMPORT_FORMATS = ["pytest-benchmark", "pyperf", "asv", "hyperfine", "google-benchmark"]


def _gzip_of_spaces(path: Path, mib: int) -> Path:
    """A gzip file of ``mib`` MiB of spaces and then ``{}``: valid JSON, tiny on disk."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: gzip framing
    block = b" " * (1 << 20)
    with path.open("wb") as fh:
        for _ in range(mib):
            fh.write(comp.compress(block))
        fh.write(comp.compress(b"{}"))
        fh.write(comp.flush())
    return path


def test_gzip_bomb_stops_at_the_limit_in_bounded_memory(tmp_path):
    """Regression: a 2 MB gzip that expanded to 2 GiB was read whole (4.3 GB RSS, exit 0)."""
    bomb = _gzip_of_spaces(tmp_path / "bomb.json.gz", 512)
    assert bomb.stat().st_size < 2 << 20
    done = perfgate("import", "pyperf", bomb, "--output", tmp_path / "run.json")
    assert done.code == 2
    one_line_error(done.err)
    assert "larger than the limit of 64 MiB" in done.err and "PERFGATE_MAX_JSON_MB" in done.err
    assert done.peak_rss_mb < 400, done.peak_rss_mb
    assert not (tmp_path / "run.json").exists()


def test_the_json_limit_can_be_raised_and_lowered(tmp_path, seed_files, monkeypatch):
    base, cur = seed_files
    padded = tmp_path / "padded.json"
    padded.write_text(json.dumps(json.loads(cur.read_text())) + " " * (2 << 20))
    monkeypatch.setenv("PERFGATE_MAX_JSON_MB", "1")
    assert main(["check", "--baseline", str(base), "--current", str(padded), "--quiet"]) == 2
    monkeypatch.setenv("PERFGATE_MAX_JSON_MB", "3")
    assert main(["check", "--baseline", str(base), "--current", str(padded), "--quiet"]) == 1
    monkeypatch.setenv("PERFGATE_MAX_JSON_MB", "lots")
    assert main(["check", "--baseline", str(base), "--current", str(padded), "--quiet"]) == 2


def test_deep_json_is_an_input_error_in_check(tmp_path, seed_files, capsys):
    """Regression: 100k-deep JSON was a RecursionError, reported as an internal error."""
    base, _cur = seed_files
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert main(["check", "--baseline", str(base), "--current", str(deep)]) == 2
    err = capsys.readouterr().err
    one_line_error(err)
    assert "nested too deeply" in err


@pytest.mark.parametrize("fmt", IMPORT_FORMATS)
@pytest.mark.parametrize("gz", [False, True])
def test_deep_json_is_an_input_error_in_every_importer(fmt, gz, tmp_path, capsys):
    text = ('{"a":' * 100_000 + "1" + "}" * 100_000).encode()
    path = tmp_path / ("deep.json.gz" if gz else "deep.json")
    path.write_bytes(gzip.compress(text) if gz else text)
    assert main(["import", fmt, str(path), "--output", str(tmp_path / "run.json")]) == 2
    err = capsys.readouterr().err
    one_line_error(err)
    assert "nested too deeply" in err and not (tmp_path / "run.json").exists()


def test_duplicate_keys_are_refused(tmp_path, seed_files, capsys):
    """Regression: a second training_step_time_ms silently hid the first."""
    base, _cur = seed_files
    dup = tmp_path / "dup.json"
    dup.write_text(
        '{"model_type": "DQN", "training_step_time_ms": 100.0, "training_step_time_ms": 1.0, '
        '"timestamp": "2025-10-15T10:00:00Z"}'
    )
    assert main(["check", "--baseline", str(base), "--current", str(dup)]) == 2
    err = capsys.readouterr().err
    one_line_error(err)
    assert "duplicate key 'training_step_time_ms'" in err


def test_non_utf8_json_is_an_input_error(tmp_path, seed_files, capsys):
    base, _cur = seed_files
    bad = tmp_path / "latin1.json"
    bad.write_bytes(b'{"model_type": "DQN\xe9"}')
    assert main(["check", "--baseline", str(base), "--current", str(bad)]) == 2
    one_line_error(capsys.readouterr().err)


def _zst_of_zeros(path: Path, mib: int, *, head: bytes = b"") -> Path:
    cctx = zstandard.ZstdCompressor(level=1, write_content_size=False)
    block = bytes(1 << 20)
    with path.open("wb") as fh, cctx.stream_writer(fh, closefd=False) as zf:
        zf.write(head)
        for _ in range(mib):
            zf.write(block)
    return path


def test_dbn_zstd_bomb_stops_at_the_limit_in_bounded_memory(tmp_path):
    """Regression: a small .dbn.zst of zeros was decompressed whole into memory (killed at 4 GB)."""
    bomb = _zst_of_zeros(tmp_path / "bomb.dbn.zst", 1024)
    assert bomb.stat().st_size < 1 << 20
    done = perfgate("data", "inspect", bomb, env={"PERFGATE_MAX_DBN_MB": "64"})
    assert done.code == 2
    one_line_error(done.err)
    assert "larger than the limit of 64 MiB" in done.err and "PERFGATE_MAX_DBN_MB" in done.err
    assert done.peak_rss_mb < 64 + 150, done.peak_rss_mb  # the limit, one block, the interpreter


def test_dbn_metadata_claiming_gigabytes_costs_nothing(tmp_path):
    """Regression: a header claiming 3 GB of metadata cost 3 GB of memory before it was refused."""
    head = b"DBN\x03" + struct.pack("<I", 3_000_000_000)
    bomb = _zst_of_zeros(tmp_path / "claim.dbn.zst", 1, head=head)
    done = perfgate("data", "inspect", bomb)
    assert done.code == 2
    one_line_error(done.err)
    assert "metadata length" in done.err
    assert done.peak_rss_mb < 250, done.peak_rss_mb


def test_a_real_zstd_file_still_loads_under_a_small_limit(tmp_path):
    data = Path(__file__).resolve().parent.parent / "data" / "dbn" / "test_data.bbo-1m.v3.dbn.zst"
    done = perfgate("data", "inspect", data, "--format", "json", env={"PERFGATE_MAX_DBN_MB": "1"})
    assert done.code == 0, done.err
    assert json.loads(done.out)["record_count"] == 4


def test_summary_refuses_a_huge_report(tmp_path, capsys):
    big = tmp_path / "dqn.md"
    with big.open("wb") as fh:
        fh.truncate(17 << 20)  # sparse: 17 MiB of NUL bytes, nothing on disk
    assert main(["summary", str(big)]) == 2
    err = capsys.readouterr().err
    one_line_error(err)
    assert "larger than the limit of 16 MiB" in err


def test_a_config_that_is_a_device_or_fifo_is_refused_without_reading(tmp_path):
    """Regression: ``--config /dev/zero`` was read until the kernel killed perfgate at 24 GB, and a
    FIFO blocked forever."""
    import os

    fifo = tmp_path / "perfgate.toml"
    os.mkfifo(fifo)
    for config in ("/dev/zero", str(fifo)):
        done = perfgate("check", "--config", config, "--current", tmp_path / "none.json")
        assert done.code == 2, done.err
        one_line_error(done.err)
        assert "not a regular file" in done.err and config in done.err
        assert done.peak_rss_mb < 400, done.peak_rss_mb


def test_a_sparse_config_of_gigabytes_costs_nothing(tmp_path):
    """Regression: a 2 GiB sparse perfgate.toml cost 2.1 GB of memory before it was refused."""
    config = tmp_path / "perfgate.toml"
    with config.open("wb") as fh:
        fh.truncate(2 << 30)
    done = perfgate("check", "--config", config, "--current", tmp_path / "none.json")
    assert done.code == 2
    one_line_error(done.err)
    assert "larger than 4 MiB" in done.err
    assert done.peak_rss_mb < 400, done.peak_rss_mb


@pytest.mark.parametrize("where", ["check", *IMPORT_FORMATS])
def test_a_json_integer_too_long_to_convert_is_an_input_error(where, tmp_path, capsys):
    """Regression: an integer of 4,301 or more digits ended in a traceback (int conversion limit)."""
    path = tmp_path / "run.json"
    path.write_text('{"a": ' + "9" * 5000 + "}")
    argv = (
        ["check", "--current", str(path)]
        if where == "check"
        else ["import", where, str(path), "--output", str(tmp_path / "o.json")]
    )
    assert main(argv) == 2
    err = capsys.readouterr().err
    one_line_error(err)
    assert "too long" in err and str(path) in err


@pytest.mark.parametrize("limit", ["nan", "inf", "-inf"])
def test_a_budget_limit_must_be_finite(limit, tmp_path, seed_files, capsys):
    """Regression: ``{ max = nan }`` in a budget ended in a traceback."""
    base, cur = seed_files
    config = tmp_path / "perfgate.toml"
    config.write_text(f"[budgets.dqn]\ninference_latency_us = {{ max = {limit} }}\n")
    assert main(["check", "--config", str(config), "--baseline", str(base), "--current", str(cur)]) == 2
    err = capsys.readouterr().err
    one_line_error(err)
    assert "budgets.dqn.inference_latency_us.max" in err and "finite" in err


def test_a_run_with_more_metrics_than_the_cap_is_refused(tmp_path, capsys):
    """Regression: a run of 1,000,000 metrics did not finish a check in 120 s; the cap is documented."""
    from perfgate.core.schema import MAX_METRICS

    metrics = {
        f"m{i}_time_us": {"direction": "lower_is_better", "unit": "us", "samples": [1.0]}
        for i in range(MAX_METRICS + 1)
    }
    path = tmp_path / "run.json"
    path.write_text(
        json.dumps({"schema_version": 3, "model": "big", "suite": "user", "run_id": "x", "metrics": metrics})
    )
    assert main(["check", "--current", str(path), "--baseline", str(path)]) == 2
    err = capsys.readouterr().err
    one_line_error(err)
    assert f"at most {MAX_METRICS:,}" in err
    docs = (Path(__file__).resolve().parents[2] / "docs" / "limits.md").read_text()
    assert f"{MAX_METRICS:,}" in docs
