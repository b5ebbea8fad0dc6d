"""Which store a home uses: ``[store] url`` (PostgreSQL, its password from the keyring) or the
home's own SQLite file; and, following it, where blobs and run files live."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pizzamail.config import Config
from pizzamail.home import Home
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore, FileBlobs, SqliteBlobs, StoredBlobs
from pizzamail.store.runfiles import StoredWorkspaces, Workspaces
from pizzamail.store.sql import POSTGRESQL

if TYPE_CHECKING:
    from pizzamail.secrets import SecretStore

#: the keyring entry of the PostgreSQL password (`pizzamail keys set store`)
STORE_KEY = "store"


def store_for(home: Home, config: Config, secrets: SecretStore | None = None) -> Store:
    """The home's store, not yet opened. Without a password in the keyring, libpq's own ways apply
    ($PGPASSWORD, ~/.pgpass, a trusted or peer login)."""
    url = config.store.url
    if not url:
        return Store(path=home.database)
    from pizzamail.secrets import secret_store  # the keyring: only a PostgreSQL store needs it

    password = (secrets or secret_store(home)).get(STORE_KEY)
    return Store(url=url, password=password, pool_size=config.store.pool)


def blobs_for(home: Home, store: Store) -> BlobStore:
    """The blobs of the home's open store: in PostgreSQL itself, which every machine reaches; a
    SQLite home's in files under ``blobs/`` and, for mail taken by SMTP, in its database."""
    if store.dialect == POSTGRESQL:
        return StoredBlobs(store=store)
    return SqliteBlobs(files=FileBlobs(root=home.blobs), store=store)


def workspaces_for(home: Home, store: Store) -> Workspaces:
    """The run folders under ``workspaces/``; kept in the store too when it is PostgreSQL, so a run
    resumed on another machine has its files."""
    root = home.root / "workspaces"
    if store.dialect == POSTGRESQL:
        return StoredWorkspaces(root=root, store=store, blobs=StoredBlobs(store=store))
    return Workspaces(root=root)


def store_place(url: str) -> str:
    """Where a store url points, as ``user@host:port/database`` (nothing else of the url: no
    password or option is ever shown)."""
    parts = urlsplit(url)
    user = f"{parts.username}@" if parts.username else ""
    port = f":{parts.port}" if parts.port else ""
    return f"{user}{parts.hostname or 'localhost'}{port}/{parts.path.strip('/')}"
