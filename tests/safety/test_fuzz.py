"""Fuzzing every input perfgate reads, through the command line, in-process.

For run files (versioned and flat), each importer's format, DBN files (plain and zstd),
the TOML configuration, store URLs and URLs with credentials (every URL data is sent to: a
Pushgateway's, a webhook's), every case must end with exit 0, 1 or 2; an exit 2
says why on one line; nothing prints a traceback or "internal error"; no input file is
changed and nothing appears outside the output folder. Peak memory is checked by the
longer seeded run, ``scripts/fuzz_inputs.py``, which starts a process per case.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import tempfile
from collections.abc import Callable
from pathlib import Path
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfgate.cli import main
from tests.conftest import SEED_BASELINE, SEED_CURRENT
from tests.safety import mutate
from tests.safety.recorder import LOCAL_NAMES, Request, recording_resolver, recording_server

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
SEEDS = st.integers(min_value=0, max_value=2**32 - 1)


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def run_case(prepare: Callable[[Path, Path], list[str]]) -> tuple[int, str]:
    """Write the inputs into ``in/``, run perfgate in an empty ``cwd/``, allow writes in ``out/`` only."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        inputs, outputs, cwd = root / "in", root / "out", root / "cwd"
        for folder in (inputs, outputs, cwd):
            folder.mkdir()
        argv = prepare(inputs, outputs)
        before = _snapshot(inputs)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        message = err.getvalue()
        assert code in (0, 1, 2), (code, message)
        assert "Traceback" not in message and "internal error" not in message, message
        if code == 2:
            lines = [line for line in message.splitlines() if "error:" in line]
            assert len(lines) == 1 and "\n" not in lines[0], message
        assert _snapshot(inputs) == before, "an input was changed"
        assert list(cwd.iterdir()) == [], "a file appeared in the working directory"
        assert {p.name for p in root.iterdir()} == {"in", "out", "cwd"}
        return code, message


@SETTINGS
@given(SEEDS)
def test_fuzz_run_files(seed):
    rng = random.Random(seed)

    def prepare(inputs: Path, outputs: Path) -> list[str]:
        base = inputs / "base.json"
        base.write_bytes(mutate.run_file(random.Random(seed + 1)) if rng.random() < 0.3 else b"")
        if base.stat().st_size == 0:
            import json

            base.write_text(json.dumps(SEED_BASELINE))
        cur = inputs / "cur.json"
        cur.write_bytes(mutate.run_file(rng))
        return [
            "check",
            "--baseline",
            str(base),
            "--current",
            str(cur),
            "--output",
            str(outputs / "r.md"),
            "--json",
            str(outputs / "r.json"),
        ]

    run_case(prepare)


@SETTINGS
@given(st.sampled_from(sorted(mutate.IMPORT_FIXTURES)), SEEDS)
def test_fuzz_importers(fmt, seed):
    def prepare(inputs: Path, outputs: Path) -> list[str]:
        data, gz = mutate.import_file(fmt, random.Random(seed))
        path = inputs / ("result.json.gz" if gz else "result.json")
        path.write_bytes(data)
        return ["import", fmt, str(path), "--output", str(outputs / "run.json"), "--machine-from", "file"]

    code, _ = run_case(prepare)
    assert code in (0, 2)


@SETTINGS
@given(SEEDS)
def test_fuzz_dbn_files(seed):
    def prepare(inputs: Path, outputs: Path) -> list[str]:
        data, suffix = mutate.dbn_file(random.Random(seed))
        path = inputs / f"data{suffix}"
        path.write_bytes(data)
        return ["data", "inspect", str(path)]

    run_case(prepare)


@SETTINGS
@given(SEEDS)
def test_fuzz_configuration(seed):
    def prepare(inputs: Path, outputs: Path) -> list[str]:
        import json

        base, cur = inputs / "b.json", inputs / "c.json"
        base.write_text(json.dumps(SEED_BASELINE))
        cur.write_text(json.dumps({**SEED_BASELINE, "training_step_time_ms": 150.0}))
        config = inputs / "perfgate.toml"
        config.write_bytes(mutate.toml_file(random.Random(seed)))
        # --store memory:// keeps a configured store key from touching disk
        argv = ["check", "--baseline", str(base), "--current", str(cur), "--config", str(config)]
        return [*argv, "--store", "memory://", "--quiet"]

    run_case(prepare)


@SETTINGS
@given(SEEDS)
def test_fuzz_store_urls(seed):
    secrets: list[str] = []

    def prepare(inputs: Path, outputs: Path) -> list[str]:
        url = mutate.store_url(random.Random(seed), outputs)
        secrets.extend(s for s in ("s3cret", "pa#ss/w?rd", "p@ss") if s in url)
        return ["history", "--model", "dqn", "--store", url]

    _code, message = run_case(prepare)
    for secret in secrets:
        assert secret not in message, message


# ---- URLs with credentials: every URL perfgate sends data to ----------------------------------


def _check_credentials(case: mutate.CredentialURL, output: str, asked: list[str], received: list[Request]) -> None:
    """What every outlet must do with a URL with credentials: never print them, never give them
    to the resolver, send them as Basic authentication (exactly, when the URL is well formed)."""
    for secret in case.secrets:
        assert secret not in output, (case.url, output)
    # no piece of the userinfo was taken for a host ("h_" is a host of the generator's)
    assert set(asked) <= {*LOCAL_NAMES, mutate.OTHER_HOST}, (case.url, asked)
    assert not any(secret in name for name in asked for secret in case.secrets), (case.url, asked)
    if case.sendable:
        assert received, (case.url, output)
    for request in received:
        assert all(secret not in request.path for secret in case.secrets[:1]), (case.url, request.path)
        if case.exact:
            assert request.credentials == case.credentials, (case.url, request)


def _store_with_one_run(path: Path) -> str:
    from perfgate.store import open_store
    from tests.export.sample_store import sample_runs

    url = f"sqlite:///{path}"
    store = open_store(url)
    try:
        store.add_runs(sample_runs()[-1:])
    finally:
        store.close()
    return url


@SETTINGS
@given(SEEDS)
def test_fuzz_export_push_urls(seed):
    with recording_server() as gateway:
        case = mutate.credential_url(random.Random(seed), gateway.origin, default_scheme=True)

        def prepare(inputs: Path, outputs: Path) -> list[str]:
            return ["export", "prometheus", "--store", _store_with_one_run(inputs / "s.db"), "--push", case.url]

        with recording_resolver() as asked:
            code, message = run_case(prepare)
    assert code in (0, 2) and (code == 0) == bool(gateway.requests), (case.url, message)
    _check_credentials(case, message, asked, gateway.requests)


@SETTINGS
@given(SEEDS)
def test_fuzz_check_push_metrics_urls(seed):
    with recording_server() as gateway:
        case = mutate.credential_url(random.Random(seed), gateway.origin, default_scheme=True)

        def prepare(inputs: Path, outputs: Path) -> list[str]:
            import json

            base, cur = inputs / "base.json", inputs / "cur.json"
            base.write_text(json.dumps(SEED_BASELINE))
            cur.write_text(json.dumps(SEED_CURRENT))
            return ["check", "--baseline", str(base), "--current", str(cur), "--quiet", "--push-metrics", case.url]

        with recording_resolver() as asked:
            code, message = run_case(prepare)
    assert code == 1, message  # a push never changes the verdict
    _check_credentials(case, message, asked, gateway.requests)


@SETTINGS
@given(SEEDS)
def test_fuzz_bench_push_metrics_urls(seed):
    """``bench --push-metrics`` pushes its fresh runs through :func:`push_runs`."""
    import json

    from perfgate.app.export import push_runs
    from perfgate.core.codec import run_from_dict
    from perfgate.core.policy import Policy

    run = run_from_dict(json.loads(json.dumps(SEED_CURRENT)))
    err = io.StringIO()
    with recording_server() as gateway:
        case = mutate.credential_url(random.Random(seed), gateway.origin, default_scheme=True)
        with recording_resolver() as asked, contextlib.redirect_stderr(err):
            push_runs(case.url, [run], Policy())
    message = err.getvalue()
    assert len(message.splitlines()) == 1 and "Traceback" not in message, message
    _check_credentials(case, message, asked, gateway.requests)


@SETTINGS
@given(SEEDS, st.sampled_from(["slack_webhook_env", "webhook_url_env"]))
def test_fuzz_webhook_urls(seed, key):
    import json

    with recording_server() as hook:
        case = mutate.credential_url(random.Random(seed), hook.origin, default_scheme=False)

        def prepare(inputs: Path, outputs: Path) -> list[str]:
            base, cur = inputs / "base.json", inputs / "cur.json"
            base.write_text(json.dumps(SEED_BASELINE))
            cur.write_text(json.dumps(SEED_CURRENT))
            config = inputs / "perfgate.toml"
            config.write_text(f'[tool.perfgate.notify]\n{key} = "FUZZ_HOOK_URL"\nattempts = 1\ntimeout = 5.0\n')
            return [
                "check",
                "--baseline",
                str(base),
                "--current",
                str(cur),
                "--quiet",
                "--notify",
                "--config",
                str(config),
            ]

        with mock.patch.dict(os.environ, {"FUZZ_HOOK_URL": case.url}), recording_resolver() as asked:
            code, message = run_case(prepare)
    assert code == 1, message
    assert "internal error" not in message and len([m for m in message.splitlines() if "notify" in m]) == 1, message
    _check_credentials(case, message, asked, hook.requests)
