"""Seeded generators of hostile input, shared by the fuzz tests and ``scripts/fuzz_inputs.py``.

Each takes a :class:`random.Random` and returns bytes (or text) to write to a file; the same
seed always gives the same case, so a failure is reproduced by its seed alone.
"""

from __future__ import annotations

import copy
import gzip
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import zstandard

ROOT = Path(__file__).resolve().parent.parent.parent
DATA = ROOT / "tests" / "data"
IMPORT_FIXTURES = {
    "pytest-benchmark": ROOT / "tests/importers/fixtures/pytest-benchmark/3.2.3.json",
    "pyperf": ROOT / "tests/importers/fixtures/pyperf/1.7.1.json",
    "asv": ROOT / "tests/importers/fixtures/asv/v1/results/box/4e4f2c0a-py3.6.json",
    "hyperfine": ROOT / "tests/importers/fixtures/hyperfine/1.15.0.json",
    "google-benchmark": ROOT / "tests/importers/fixtures/google-benchmark/1.7.1.json",
}
RUN_FIXTURES = [DATA / "runs" / "v1_dqn.json", DATA / "runs" / "seed_flat_dqn.json"]
DBN_FIXTURES = sorted(p for p in (DATA / "dbn").iterdir() if p.name.endswith((".dbn", ".dbn.zst")))

_ODD_STRINGS = [
    "",
    "\x00",
    "[/]",
    "\n# x",
    "<img src=x>",
    "é" * 3,
    "\ud800",
    "9" * 400,
    "NaN",
    "-1",
    "1e999",
    "training_step_time_ms",
    "lower_is_better",
    "2026-13-45T99:99:99Z",
]


def odd_value(rng: random.Random, depth: int = 0) -> Any:
    """A JSON value of a kind a field may not expect."""
    kind = rng.randrange(10 if depth < 3 else 7)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 1, 2**63, -(2**70), 10**400 if rng.random() < 0.1 else 7])
    if kind == 3:
        return rng.choice([0.0, -0.0, 1e-320, 1e308, -5.5, 3.25])
    if kind in (4, 5, 6):
        return rng.choice(_ODD_STRINGS)
    if kind == 7:
        return [odd_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 8:
        return {rng.choice(_ODD_STRINGS): odd_value(rng, depth + 1) for _ in range(rng.randrange(4))}
    return [1.0] * rng.randrange(0, 50)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:20]):
            out += _paths(v, (*prefix, i))
    return out


def mutate_document(doc: Any, rng: random.Random, rounds: int | None = None) -> Any:
    """``doc`` with a few fields replaced, removed or added."""
    doc = copy.deepcopy(doc)
    for _ in range(rounds if rounds is not None else rng.randrange(1, 4)):
        path = rng.choice(_paths(doc))
        if not path:
            if rng.random() < 0.1:
                doc = odd_value(rng)
            continue
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        last = path[-1]
        action = rng.randrange(3)
        if action == 0:
            parent[last] = odd_value(rng)
        elif action == 1:
            del parent[last]
        elif isinstance(parent, dict):
            parent[rng.choice(_ODD_STRINGS)] = odd_value(rng)
        else:
            parent.insert(last, odd_value(rng))
    return doc


def _encode(doc: Any, rng: random.Random) -> bytes:
    text = json.dumps(doc, allow_nan=True)
    choice = rng.randrange(12)
    if choice == 0:  # truncated
        return text.encode()[: rng.randrange(len(text) + 1)]
    if choice == 1:  # a duplicate key
        return text.replace("{", '{"model": "x", ', 1).encode()
    if choice == 2:  # deep nesting
        depth = rng.choice([500, 5_000, 100_000])
        return ("[" * depth + "]" * depth).encode()
    if choice == 3:  # not UTF-8
        return text.encode("utf-16")
    if choice == 4:  # a byte flipped
        raw = bytearray(text.encode())
        if raw:
            raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
        return bytes(raw)
    return text.encode()


def run_file(rng: random.Random) -> bytes:
    """A mutated run file, versioned or flat."""
    doc = json.loads(rng.choice(RUN_FIXTURES).read_text())
    return _encode(mutate_document(doc, rng), rng)


def import_file(fmt: str, rng: random.Random) -> tuple[bytes, bool]:
    """A mutated result file of an importer's format, and whether it is gzip-compressed."""
    doc = json.loads(IMPORT_FIXTURES[fmt].read_text())
    raw = _encode(mutate_document(doc, rng), rng)
    if rng.random() < 0.3:
        data = gzip.compress(raw)
        if rng.random() < 0.3:
            data = data[: rng.randrange(len(data) + 1)]
        return data, True
    return raw, False


def dbn_file(rng: random.Random) -> tuple[bytes, str]:
    """A damaged DBN file (plain or zstd) and the suffix to give it."""
    source = rng.choice(DBN_FIXTURES)
    raw = source.read_bytes()
    if source.name.endswith(".zst") and rng.random() < 0.5:
        raw = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    compress = rng.random() < 0.5
    data = bytearray(raw)
    for _ in range(rng.randrange(1, 6)):
        action = rng.randrange(4)
        if action == 0 and data:
            data[rng.randrange(len(data))] = rng.randrange(256)
        elif action == 1:
            data = data[: rng.randrange(len(data) + 1)]
        elif action == 2:
            at = rng.randrange(len(data) + 1)
            data[at:at] = rng.randbytes(rng.randrange(1, 64))
        elif len(data) >= 8:  # the metadata length, or a record length, made absurd
            at = rng.choice([4, 8 + rng.randrange(max(1, len(data) - 8))])
            data[at : at + 4] = rng.choice([b"\xff\xff\xff\xff", b"\x00\x00\x00\x00", b"\x00\x00\x00\xb3"])
    out = bytes(data)
    if compress:
        out = zstandard.ZstdCompressor(level=1).compress(out)
        if rng.random() < 0.3:
            out = out[: rng.randrange(len(out) + 1)]
    return out, ".dbn.zst" if compress else ".dbn"


def _toml_key(rng: random.Random) -> str:
    return rng.choice(
        ["threshold", "alpha", "store", "thresholds", "budgets", "metrics", "notify", "confidence", "x", "dqn"]
    )


def _toml_value(rng: random.Random, depth: int = 0) -> str:
    kind = rng.randrange(8 if depth < 2 else 5)
    if kind == 0:
        return str(rng.choice([0, -5, 10, 1e9, 0.5, -0.0]))
    if kind == 1:
        return json.dumps(rng.choice([*_ODD_STRINGS[:6], "sqlite:///x.db", "lower_is_better", "p99"]))
    if kind == 2:
        return rng.choice(["true", "false", "nan", "inf", "-inf"])
    if kind == 3:
        return "[" + ", ".join(_toml_value(rng, depth + 1) for _ in range(rng.randrange(3))) + "]"
    if kind == 4:
        return "1979-05-27T07:32:00Z"
    inner = ", ".join(
        f"{rng.choice(['p99', 'min', 'max', 'median', 'unit', 'direction', 'x'])} = {_toml_value(rng, depth + 1)}"
        for _ in range(rng.randrange(3))
    )
    return "{ " + inner + " }"


def toml_file(rng: random.Random) -> bytes:
    """A configuration: valid TOML of odd shapes, or broken TOML."""
    lines = []
    for _ in range(rng.randrange(1, 6)):
        if rng.random() < 0.3:
            table = rng.choice(["tool.perfgate", "budgets.dqn", "thresholds", "metrics.m", "notify", "tool"])
            lines.append(f"[{table}]")
        lines.append(f"{_toml_key(rng)} = {_toml_value(rng)}")
    text = "\n".join(lines) + "\n"
    choice = rng.randrange(8)
    if choice == 0:
        return text.encode()[: rng.randrange(len(text) + 1)]
    if choice == 1:
        return text.encode("latin-1", "replace") + b"\xff"
    if choice == 2:
        return text.encode() + b"x = [" * 2_000
    return text.encode()


def store_url(rng: random.Random, folder: Path) -> str:
    """A store URL: malformed, unsupported, or pointing inside ``folder`` (never a remote host)."""
    password = rng.choice(["s3cret", "pa#ss/w?rd", "p@ss", "q", "%zz", "[::1]"])
    return rng.choice(
        [
            f"postgresql://ci:{password}@[::1/db",
            f"postgresql://ci:{password}@[fe80::1%zz]:1/db",
            f"postgresql://ci:{password}@127.0.0.1:1/db",
            f"postgres://ci:{password}@",
            f"sqlite:///{folder / 'store.db'}",
            "sqlite://",
            "sqlite:///",
            f"sqlite:///{folder}",
            f"sqlite:///{folder / 'missing' / 'deeper'}/x.db",
            "memory://",
            "mysql://root:" + password + "@h/db",
            "",
            " ",
            "\x00",
            "sqlite:///" + "a" * 5000,
        ]
    )


# ---- URLs with credentials ---------------------------------------------------------------------

# what a user or password may hold: every URL delimiter, escapes good and bad, non-ASCII, space
_USERINFO_PIECES = ["@", ":", "#", "?", "%", "/", "%41", "%zz", "%ff", "ü", "€", "pa", "w0", " ", "&", "=", "[", "]"]
SECRET_PARAMETERS = ["token", "access_token", "api_key", "key", "secret", "sig"]
OTHER_HOST = "h_"  # a name that is not this host's: the resolver is asked, and refuses it


@dataclass(frozen=True)
class CredentialURL:
    """An outgoing URL with credentials, and what must become of them.

    ``secrets`` must never be printed; ``credentials`` is the (user, password) a server
    must receive as Basic authentication; ``sendable``: the URL is well formed (the
    userinfo percent-encoded, the host this one's), so the request must be made.
    """

    url: str
    secrets: tuple[str, ...]
    credentials: tuple[str, str]
    sendable: bool
    exact: bool  # a request, if made, carries exactly ``credentials`` (no raw % to decode)


def _hex(rng: random.Random, n: int = 6) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def credential_url(rng: random.Random, origin: str, *, default_scheme: bool) -> CredentialURL:
    """A URL to send data to (``origin``: the ``127.0.0.1:PORT`` of a local recorder) with a
    user and password, often hostile: raw delimiters, bad escapes, an empty host, a bad
    port, a token in the query or fragment. ``default_scheme``: the outlet puts ``http://``
    before a URL without a scheme (the Pushgateway), else it refuses one."""
    core = "S3cR" + _hex(rng)  # in every password: what the output is searched for
    password = "".join(rng.choice(_USERINFO_PIECES) for _ in range(rng.randrange(3))) + core
    password += "".join(rng.choice(_USERINFO_PIECES) for _ in range(rng.randrange(3)))
    user = rng.choice(["pg", "hook", "", "b@t", "ü", "u:x", "a b", "n%41me"])
    encoded = rng.random() < 0.7
    userinfo = f"{quote(user, safe='')}:{quote(password, safe='')}" if encoded else f"{user}:{password}"
    port = origin.rpartition(":")[2]
    host = rng.choice(
        [origin] * 8
        + [f"localhost:{port}", "", "127.0.0.1:0", "127.0.0.1:99999", f"127.0.0.1:{core}", "[::1", OTHER_HOST]
    )
    scheme = rng.choice(["http://"] * 8 + ["HTTP://", "https://", "", "ftp://"])
    path = rng.choice(["", "/", "/hook", "/a@b"])
    name, token = rng.choice(SECRET_PARAMETERS), "QtK" + _hex(rng)
    query = rng.choice(["", f"?{name}={token}", f"?a=1&{name}={token}"])
    fragment = rng.choice(["", "#frag", f"#{name}={token}"])
    url = f"{scheme}{userinfo}@{host}{path}{query}{fragment}"
    secrets = (core, token) if query or fragment else (core,)
    sendable = (
        encoded
        and ":" not in user
        and host in (origin, f"localhost:{port}")
        and scheme in ("http://", "HTTP://", *(("",) if default_scheme else ()))
        and "@" not in path
    )
    exact = encoded or ("%" not in userinfo and ":" not in user)
    return CredentialURL(url=url, secrets=secrets, credentials=(user, password), sendable=sendable, exact=exact)
