"""Result stores: one protocol, chosen by URL (``sqlite:///…``, ``postgresql://…``, ``memory://``).

``open_store(url)`` imports the backend lazily (psycopg only for PostgreSQL). The default is
an embedded SQLite file in the project's ``.perfgate/`` folder; ``PERFGATE_STORE`` or
``--store`` choose another.
"""

from perfgate.store.base import (
    DEFAULT_STORE_URL,
    BaselineRecord,
    RunQuery,
    RunStatus,
    SeriesPoint,
    Store,
    mask_url,
    open_store,
    resolve_store_url,
)

__all__ = [
    "DEFAULT_STORE_URL",
    "BaselineRecord",
    "RunQuery",
    "RunStatus",
    "SeriesPoint",
    "Store",
    "mask_url",
    "open_store",
    "resolve_store_url",
]
