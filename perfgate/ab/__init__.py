"""``perfgate ab``'s engine: two git revisions measured interleaved in one job, then decided paired."""

__all__: list[str] = []
