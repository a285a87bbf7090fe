"""Headless Chromium (Debian's /usr/bin/chromium, driven by Playwright; no browser download).

Missing Chromium or Playwright skips the browser tests with the reason, except in CI
(``CI=true``), where it fails: ``.ci/run`` installs Chromium and ``dev`` Playwright.
"""

from __future__ import annotations

import base64
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.export.conftest import in_ci, sample_config, sample_sqlite

__all__ = ["browser", "distinct_colours", "ink_fractions", "sample_config", "sample_sqlite", "watched"]

FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _missing(reason: str) -> None:
    if in_ci():
        pytest.fail(f"{reason}; it is required in CI")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    executable = shutil.which("chromium") or "/usr/bin/chromium"
    if not shutil.which(executable):
        _missing("Chromium is not installed (Debian package chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed (pip install -e '.[dev]')")
    with sync_playwright() as p:
        # Chromium's singleton socket lives in TMPDIR and must stay under 108 bytes: a short one
        env = {**os.environ, "TMPDIR": "/tmp"} if Path("/tmp").is_dir() else None
        chromium = p.chromium.launch(executable_path=executable, headless=True, args=FLAGS, env=env)
        try:
            yield chromium
        finally:
            chromium.close()


@dataclass
class Watched:
    """A page and what it did: console errors, uncaught errors, dialogs, requests."""

    page: Any
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    @property
    def external(self) -> list[str]:
        return [u for u in self.requests if not u.startswith(("file:", "data:", "blob:", "about:"))]


@pytest.fixture
def watched(browser: Any) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    w = Watched(page)
    page.on("console", lambda m: w.errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: w.errors.append(f"uncaught: {e}"))
    page.on("request", lambda r: w.requests.append(r.url))

    def on_dialog(dialog: Any) -> None:
        w.dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    try:
        yield w
    finally:
        context.close()


def distinct_colours(browser: Any, png: bytes) -> int:
    """How many colours a PNG screenshot holds (every 7th pixel), decoded by the browser's canvas."""
    page = browser.new_page()
    try:
        page.set_content("<canvas id='c'></canvas>")
        return int(
            page.evaluate(
                """async (b64) => {
                    const img = new Image();
                    img.src = "data:image/png;base64," + b64;
                    await img.decode();
                    const c = document.getElementById("c");
                    c.width = img.width; c.height = img.height;
                    const ctx = c.getContext("2d");
                    ctx.drawImage(img, 0, 0);
                    const d = ctx.getImageData(0, 0, c.width, c.height).data;
                    const seen = new Set();
                    for (let i = 0; i < d.length; i += 4 * 7) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
                    return seen.size;
                }""",
                base64.b64encode(png).decode("ascii"),
            )
        )
    finally:
        page.close()


def ink_fractions(browser: Any, png: bytes, boxes: list[dict[str, float]]) -> list[float]:
    """Per box (``x``, ``y``, ``width``, ``height`` in the PNG's pixels), the share of its pixels
    that are not (near) white, in a PNG screenshot decoded by the browser's canvas."""
    page = browser.new_page()
    try:
        page.set_content("<canvas id='c'></canvas>")
        return [
            float(v)
            for v in page.evaluate(
                """async ([b64, boxes]) => {
                    const img = new Image();
                    img.src = "data:image/png;base64," + b64;
                    await img.decode();
                    const c = document.getElementById("c");
                    c.width = img.width; c.height = img.height;
                    const ctx = c.getContext("2d");
                    ctx.drawImage(img, 0, 0);
                    return boxes.map((b) => {
                        const w = Math.max(1, Math.floor(b.width)), h = Math.max(1, Math.floor(b.height));
                        const d = ctx.getImageData(Math.floor(b.x), Math.floor(b.y), w, h).data;
                        let ink = 0;
                        for (let i = 0; i < d.length; i += 4) if (d[i] + d[i + 1] + d[i + 2] < 3 * 235) ink++;
                        return ink / (w * h);
                    });
                }""",
                [base64.b64encode(png).decode("ascii"), boxes],
            )
        ]
    finally:
        page.close()
