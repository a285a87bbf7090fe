"""One version (pyproject, ``perfgate --version``, the changelog); the docs point inside the repository."""

from __future__ import annotations

import re
import tomllib

from perfgate import __version__
from perfgate.cli import main
from tests.conftest import ROOT


def test_version_is_the_package_version_and_has_a_changelog_entry(capsys):
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert __version__ == version
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"perfgate {version}"
    assert re.search(rf"^## {re.escape(version)}$", (ROOT / "CHANGELOG.md").read_text(), re.M)


def test_every_file_the_readme_and_changelog_link_to_is_in_the_repository():
    for doc in ("README.md", "CHANGELOG.md"):
        text = (ROOT / doc).read_text()
        targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
        local = [t for t in targets if not re.match(r"[a-z]+://", t)]
        for target in local:
            assert (ROOT / target).exists(), f"{doc} links to {target}, which is not in the repository"
        anchors = re.findall(r"\]\(#([^)]+)\)", text)
        headings = {
            re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in re.findall(r"^#+ (.+)$", text, re.M)
        }
        for anchor in anchors:
            assert anchor in headings, f"{doc} links to #{anchor}, which is no heading of it"
