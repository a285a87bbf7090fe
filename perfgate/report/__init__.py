"""Reports of a check: Markdown (PR comments, job summaries) and JSON."""

__all__: list[str] = []
