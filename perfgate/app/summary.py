"""``perfgate summary``: Markdown reports joined into one PR comment or job summary, within a hard limit.

GitHub refuses a comment longer than 65,536 characters. Each report of ``perfgate check``
stays under 60,000, but a workflow that checks several models publishes several. This
command joins them — one collapsible section per report, failing ones open — under a
hidden marker that lets the workflow find and update its earlier comment, and guarantees
the result fits in ``--max-chars``: a section over its share is cut at a line boundary and
ends with a marker line saying so. The size is counted in UTF-8 bytes, which is never less
than the count in characters or UTF-16 code units, whichever GitHub measures.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

from perfgate.errors import InputError, os_error_text
from perfgate.inputs import read_capped
from perfgate.output import check_distinct
from perfgate.report.escape import md_link_url, md_text
from perfgate.safe.text import plain

__all__ = [
    "DEFAULT_MARKER",
    "GITHUB_COMMENT_LIMIT",
    "Section",
    "SummaryRequest",
    "compose",
    "report_path",
    "size",
    "summary",
]

GITHUB_COMMENT_LIMIT = 65_536
DEFAULT_MARKER = "<!-- perfgate-report -->"
MAX_REPORT_BYTES = 16 << 20
TRUNCATED = "✂️ *Truncated by perfgate summary: {shown} of {total} lines shown. The full report is in the {where}.*"


@dataclass(frozen=True, slots=True)
class Section:
    """One report: its label (the model) and its Markdown (a leading ``# `` title is dropped)."""

    label: str
    markdown: str

    def __post_init__(self) -> None:
        first, _, rest = self.markdown.partition("\n")
        if first.startswith("# "):  # the comment has its own title; each report's is noise
            object.__setattr__(self, "markdown", rest.lstrip("\n"))

    @property
    def verdict(self) -> str:
        """The report's verdict heading (``❌ Regression Detected``), or a note that it has none."""
        for line in self.markdown.splitlines():
            if line.startswith("## "):
                return line[3:].strip()
        return "⚠️ no verdict (see the job log)"

    @property
    def failed(self) -> bool:
        return not self.verdict.startswith("✅")


def size(text: str) -> int:
    """The size that counts against the limit: UTF-8 bytes."""
    return len(text.encode("utf-8"))


def _cut(text: str, limit: int, notice: str) -> str:
    """``text`` cut to at most ``limit`` bytes in all, ending with ``notice`` (the last resort)."""
    if size(text) <= limit:
        return text
    room = max(0, limit - size(notice))
    return text.encode("utf-8")[:room].decode("utf-8", "ignore") + notice[: max(0, limit)]


def _wrap(section: Section, body: str) -> str:
    state = " open" if section.failed else ""
    label = html.escape(plain(section.label))
    verdict = html.escape(plain(section.verdict))
    return f"<details{state}>\n<summary><b>{label}</b>: {verdict}</summary>\n\n{body.rstrip()}\n\n</details>\n\n"


def _fit(section: Section, budget: int, where: str, marker: str) -> str:
    # a report that carries the marker would make the workflow find the wrong comment
    markdown = section.markdown.replace(marker, md_text(marker))
    whole = _wrap(section, markdown)
    if size(whole) <= budget:
        return whole
    lines = markdown.rstrip().splitlines()
    notice = "\n\n" + TRUNCATED.format(shown=len(lines), total=len(lines), where=where)
    room = budget - size(_wrap(section, "")) - size(notice)
    kept: list[str] = []
    used = 0
    for line in lines:
        cost = size(line) + 1
        if used + cost > room:
            break
        kept.append(line)
        used += cost
    notice = "\n\n" + TRUNCATED.format(shown=len(kept), total=len(lines), where=where)
    return _wrap(section, "\n".join(kept) + notice)


def compose(
    sections: list[Section],
    *,
    limit: int = GITHUB_COMMENT_LIMIT,
    marker: str = DEFAULT_MARKER,
    title: str = "Performance check",
    details_url: str | None = None,
) -> str:
    """The comment body: marker, title, one line per verdict, the sections; at most ``limit`` bytes."""
    failed = sum(s.failed for s in sections)
    if not sections:
        overall = "⚠️ No report was produced (see the job log)."
    elif failed:
        overall = f"❌ {failed} of {len(sections)} report(s) failed or could not decide."
    else:
        overall = f"✅ No regression in {len(sections)} report(s)."
    head = f"{marker}\n## {md_text(title)}\n\n{overall}\n\n"
    url = md_link_url(details_url, field="--details-url") if details_url else None
    where = f"[workflow run]({url})" if url else "workflow artifacts"
    tail = f"Full reports (HTML, JSON, run files): [workflow run]({url}).\n" if url else ""
    remaining = limit - size(head) - size(tail)
    parts = []
    # the failing sections first: they are what a reader needs when space runs out
    ordered = sorted(sections, key=lambda s: not s.failed)
    for i, section in enumerate(ordered):
        share = remaining // (len(ordered) - i)  # what is left, shared fairly; short reports leave room to others
        part = _fit(section, share, where, marker)
        parts.append(part)
        remaining -= size(part)
    text = head + "".join(parts) + tail
    return _cut(text, limit, "\n\n" + TRUNCATED.format(shown="some", total="all", where=where) + "\n")


def _split(arg: str) -> tuple[str, str]:
    label, sep, path = arg.rpartition("=")
    if not sep or Path(arg).exists():  # a path may hold "=" itself
        label, path = Path(arg).stem, arg
    return label, path


def report_path(arg: str) -> str:
    """The file of a ``[LABEL=]REPORT.md`` argument."""
    return _split(arg)[1]


def _section(arg: str) -> Section:
    label, path = _split(arg)
    try:
        with Path(path).open("rb") as handle:  # a report of perfgate check is under 60,000 characters
            text = read_capped(handle, MAX_REPORT_BYTES, source=path, what="the report", env=None).decode()
    except FileNotFoundError:
        raise InputError("report not found; check the path", source=path) from None
    except IsADirectoryError:
        raise InputError("is a directory; give a Markdown report of perfgate check", source=path) from None
    except OSError as exc:
        raise InputError(f"cannot read: {os_error_text(exc)}", source=path) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte offset {exc.start})", source=path) from None
    return Section(label=label, markdown=text)


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryRequest:
    """The reports to join (``[LABEL=]REPORT.md`` each), the limit in UTF-8 bytes, the hidden marker
    line, the heading, the link to the full reports, and the files the caller will write, by flag."""

    reports: tuple[str, ...]
    max_chars: int = GITHUB_COMMENT_LIMIT
    marker: str = DEFAULT_MARKER
    title: str = "Performance check"
    details_url: str | None = None
    outputs: tuple[tuple[str, Path | None], ...] = ()


def summary(request: SummaryRequest) -> str:
    """The comment body of ``request``'s reports (:func:`compose`).

    Raises:
        InputError: a limit under 1024, a marker of several lines or over 200 bytes, a report that
            cannot be read, an output that names a report.
    """
    if request.max_chars < 1024:
        raise InputError(f"must be at least 1024, got {request.max_chars}", field="--max-chars")
    if "\n" in request.marker or size(request.marker) > 200:
        raise InputError("must be one line of at most 200 bytes", field="--marker")
    sections = [_section(arg) for arg in request.reports]
    check_distinct(dict(request.outputs), {_split(a)[1]: _split(a)[1] for a in request.reports})
    return compose(
        sections, limit=request.max_chars, marker=request.marker, title=request.title, details_url=request.details_url
    )
