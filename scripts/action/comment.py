"""perfgate's GitHub Action: post the report as ONE pull-request comment, updated on every push.

The earlier comment is the first one by ``COMMENT_AUTHOR`` (``github-actions[bot]``, the
login of the workflow token) whose body starts with ``MARKER``; only the author's own counts,
since anyone can paste the marker into a comment of theirs. Environment: ``GITHUB_TOKEN``,
``GITHUB_API_URL``, ``GITHUB_REPOSITORY`` (``owner/name``), ``PR_NUMBER``, ``COMMENT_FILE``,
``MARKER``, ``COMMENT_AUTHOR``.

A token that may not comment (a fork's pull request gets a read-only one) is not a failure
of the gate: the report is still in the job summary, so this prints a ``::warning`` and
exits 0. A missing input exits 2. Standard library only: it runs before and without perfgate.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


def _request(method: str, url: str, token: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Accept", "application/vnd.github+json")
    req.add_header("Authorization", f"Bearer {token}")
    req.add_header("X-GitHub-Api-Version", "2022-11-28")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"null")


def find_previous(comments: list[dict[str, Any]], marker: str, author: str) -> dict[str, Any] | None:
    for comment in comments:
        login = (comment.get("user") or {}).get("login")
        if login == author and (comment.get("body") or "").startswith(marker):
            return comment
    return None


def publish(api: str, repo: str, number: str, token: str, body: str, marker: str, author: str) -> str:
    """Update the earlier comment or create one; returns ``updated`` or ``created``."""
    comments: list[dict[str, Any]] = []
    page = 1
    while True:
        batch = _request("GET", f"{api}/repos/{repo}/issues/{number}/comments?per_page=100&page={page}", token)
        comments += batch
        if len(batch) < 100:
            break
        page += 1
    previous = find_previous(comments, marker, author)
    if previous is not None:
        _request("PATCH", f"{api}/repos/{repo}/issues/comments/{previous['id']}", token, {"body": body})
        return "updated"
    _request("POST", f"{api}/repos/{repo}/issues/{number}/comments", token, {"body": body})
    return "created"


def main() -> int:
    env = os.environ
    missing = [k for k in ("GITHUB_TOKEN", "GITHUB_REPOSITORY", "PR_NUMBER", "COMMENT_FILE") if not env.get(k)]
    if missing:
        print(f"::error title=perfgate::comment: {', '.join(missing)} not set")
        return 2
    path = Path(env["COMMENT_FILE"])
    if not path.is_file():
        print(f"::error title=perfgate::comment: no comment body at {path}")
        return 2
    body = path.read_text(encoding="utf-8")
    marker = env.get("MARKER") or "<!-- perfgate-report -->"
    author = env.get("COMMENT_AUTHOR") or "github-actions[bot]"
    api = (env.get("GITHUB_API_URL") or "https://api.github.com").rstrip("/")
    try:
        done = publish(api, env["GITHUB_REPOSITORY"], env["PR_NUMBER"], env["GITHUB_TOKEN"], body, marker, author)
    except urllib.error.HTTPError as exc:
        print(f"::warning title=perfgate::could not comment (HTTP {exc.code}); the report is in the job summary")
        return 0
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        print(f"::warning title=perfgate::could not reach the GitHub API ({exc}); the report is in the job summary")
        return 0
    print(f"perfgate: pull-request comment {done}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
