"""Result stores: one protocol, chosen by URL (``sqlite:///…``, ``memory://``).

``open_store(url)`` imports the backend lazily. The default is an embedded SQLite file in
the project's ``.perfgate/`` folder; ``PERFGATE_STORE`` or ``--store`` choose another.
"""

from perfgate.store.base import DEFAULT_STORE_URL, RunQuery, Store, open_store, resolve_store_url

__all__ = ["DEFAULT_STORE_URL", "RunQuery", "Store", "open_store", "resolve_store_url"]
