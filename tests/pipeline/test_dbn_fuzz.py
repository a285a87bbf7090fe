"""Property tests: whatever the bytes, the loader raises DataError or returns consistent records.

"Consistent" means: the records tile the stream exactly from the first record to the end,
every record's length byte matches its layout, every group holds one rtype, and a
single-schema file holds only its schema's rtypes. Byte edits that spare the header and
bytes 0-1 of every record must load with the original count.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfgate_pipeline._dbn_schemas import SCHEMA_RTYPES
from perfgate_pipeline.dbn import DbnFile, load_dbn
from perfgate_pipeline.errors import DataError

from .test_dbn_corpus import DBN_SAMPLES, PLAIN_SAMPLES, decompressed, load_kwargs, mixed_stream, ohlcv_stream, sample

FUZZ = settings(max_examples=250, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
_names = itertools.count()
_SMALL_PLAIN = [s for s in PLAIN_SAMPLES if s.size < 2000]
_STREAMS = {s.name: (decompressed(s), load_kwargs(s)) for s in DBN_SAMPLES}


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("dbn-fuzz")


def _load(folder: Path, data: bytes, suffix: str = ".dbn", **kwargs: object) -> DbnFile | None:
    path = folder / f"case{next(_names)}{suffix}"
    path.write_bytes(data)
    try:
        return load_dbn(path, **kwargs)  # type: ignore[arg-type]
    except DataError as exc:
        assert str(path) in str(exc)
        return None
    finally:
        path.unlink()  # a live mapping survives the unlink; nothing reads it afterwards anyway


def _assert_consistent(result: DbnFile, stream: bytes) -> None:
    record_bytes = 0
    for rtype, arr in result.groups.items():
        assert (arr["rtype"] == rtype).all()
        assert (arr["length"].astype(np.int64) * 4 == arr.dtype.itemsize).all()
        record_bytes += arr.nbytes
    assert result.record_count == sum(len(arr) for arr in result.groups.values())
    assert result.records_offset + record_bytes == len(stream)
    if result.schema is not None and result.records is not None:
        assert set(np.unique(result.records["rtype"]).tolist()) <= set(SCHEMA_RTYPES[result.schema])
    if result.records is not None and not result.compressed:
        assert result.records.tobytes() == stream[result.records_offset :]


_mutation = st.tuples(
    st.sampled_from(["flip", "set", "insert", "delete", "truncate"]), st.integers(0, 10**6), st.integers(0, 255)
)


def _mutate(raw: bytes, mutations: list[tuple[str, int, int]]) -> bytes:
    out = bytearray(raw)
    for kind, where, value in mutations:
        if not out:
            break
        pos = where % len(out)
        if kind == "flip":
            out[pos] ^= 1 << (value % 8)
        elif kind == "set":
            out[pos] = value
        elif kind == "insert":
            out[pos:pos] = bytes([value]) * (1 + value % 8)
        elif kind == "delete":
            del out[pos : pos + 1 + value % 8]
        else:
            del out[pos:]
    return bytes(out)


@FUZZ
@given(
    data=st.binary(max_size=700),
    version=st.sampled_from([None, 1, 2, 3]),
    ts_out=st.booleans(),
    mixed=st.booleans(),
    compress=st.booleans(),
)
def test_arbitrary_bytes(
    fuzz_dir: Path, data: bytes, version: int | None, ts_out: bool, mixed: bool, compress: bool
) -> None:
    payload = zstandard.ZstdCompressor().compress(data) if compress else data
    result = _load(fuzz_dir, payload, version=version, ts_out=ts_out and version is not None, mixed=mixed)
    if result is not None:
        _assert_consistent(result, data)


@FUZZ
@given(
    version=st.sampled_from([1, 2, 3]),
    meta=st.binary(min_size=0, max_size=300),
    length=st.integers(0, 400),
    body=st.binary(max_size=300),
)
def test_arbitrary_header_after_a_valid_prelude(
    fuzz_dir: Path, version: int, meta: bytes, length: int, body: bytes
) -> None:
    stream = b"DBN" + bytes([version]) + length.to_bytes(4, "little") + meta + body
    result = _load(fuzz_dir, stream)
    if result is not None:
        _assert_consistent(result, stream)


@FUZZ
@given(name=st.sampled_from(sorted(_STREAMS)), body=st.binary(max_size=1200), mixed=st.booleans())
def test_arbitrary_records_after_a_real_header(fuzz_dir: Path, name: str, body: bytes, mixed: bool) -> None:
    stream, kwargs = _STREAMS[name]
    whole = load_dbn(sample(name).path, **kwargs)  # type: ignore[arg-type]
    result = _load(fuzz_dir, stream[: whole.records_offset] + body, **kwargs, mixed=mixed)
    if result is not None:
        _assert_consistent(result, stream[: whole.records_offset] + body)


@FUZZ
@given(
    name=st.sampled_from(sorted(_STREAMS)),
    mutations=st.lists(_mutation, min_size=1, max_size=4),
    compress=st.booleans(),
    mixed=st.booleans(),
)
def test_mutated_real_streams(
    fuzz_dir: Path, name: str, mutations: list[tuple[str, int, int]], compress: bool, mixed: bool
) -> None:
    stream, kwargs = _STREAMS[name]
    damaged = _mutate(stream, mutations)
    payload = zstandard.ZstdCompressor().compress(damaged) if compress else damaged
    result = _load(fuzz_dir, payload, **kwargs, mixed=mixed)
    if result is not None:
        _assert_consistent(result, damaged)


@FUZZ
@given(
    name=st.sampled_from(sorted(s.name for s in DBN_SAMPLES if s.compressed)),
    mutations=st.lists(_mutation, min_size=1, max_size=3),
)
def test_mutated_compressed_files(fuzz_dir: Path, name: str, mutations: list[tuple[str, int, int]]) -> None:
    s = sample(name)
    damaged = _mutate(s.path.read_bytes(), mutations)
    result = _load(fuzz_dir, damaged, ".dbn.zst", **load_kwargs(s))
    if result is not None:  # then the damaged bytes are still valid zstd (e.g. a frame without checksum)
        stream = zstandard.ZstdDecompressor().stream_reader(damaged, read_across_frames=True).read()
        _assert_consistent(result, stream)


@FUZZ
@given(name=st.sampled_from([s.name for s in _SMALL_PLAIN if s.records]), data=st.data())
def test_payload_edits_keep_the_count(fuzz_dir: Path, name: str, data: st.DataObject) -> None:
    raw = sample(name).path.read_bytes()
    whole = load_dbn(sample(name).path)
    assert whole.records is not None
    size, start = whole.records.dtype.itemsize, whole.records_offset
    payload = [p for p in range(start, len(raw)) if (p - start) % size >= 2]  # spare length and rtype
    edits = data.draw(st.lists(st.tuples(st.sampled_from(payload), st.integers(0, 255)), min_size=1, max_size=8))
    damaged = bytearray(raw)
    for pos, value in edits:
        damaged[pos] = value
    result = _load(fuzz_dir, bytes(damaged))
    assert result is not None and result.record_count == whole.record_count
    _assert_consistent(result, bytes(damaged))


@FUZZ
@given(mutations=st.lists(_mutation, min_size=1, max_size=3), ts_out=st.booleans())
def test_mutated_synthetic_ts_out_and_mixed_streams(
    fuzz_dir: Path, mutations: list[tuple[str, int, int]], ts_out: bool
) -> None:
    for stream, mixed in ((ohlcv_stream(n=4, ts_out=ts_out), False), (mixed_stream(), True)):
        damaged = _mutate(stream, mutations)
        result = _load(fuzz_dir, damaged, mixed=mixed)
        if result is not None:
            _assert_consistent(result, damaged)
