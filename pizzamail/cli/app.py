"""What every command needs: the home folder, its config and its secrets (loaded lazily).

Config, keyring and cryptography are imported on first use: a command that needs none of them
starts without paying for them.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pizzamail.home import Home, resolve_home, write_private

if TYPE_CHECKING:
    from pizzamail.config import Config
    from pizzamail.secrets import SecretStore
    from pizzamail.store import Store
    from pizzamail.store.blobs import BlobStore


@dataclass(kw_only=True)
class App:
    home: Home
    _config: Config | None = field(default=None, repr=False)

    @classmethod
    def for_home(cls, option: Path | None) -> App:
        return cls(home=resolve_home(option))

    @property
    def config(self) -> Config:
        if self._config is None:
            from pizzamail.config import load_config

            self._config = load_config(self.home.config)
        return self._config

    @property
    def secrets(self) -> SecretStore:
        from pizzamail.secrets import secret_store

        return secret_store(self.home)

    def has_store(self) -> bool:
        """Whether there is state to read: a PostgreSQL store, or the home's SQLite file (a command
        that only reads does not make an empty one)."""
        return bool(self.config.store.url) or self.home.database.exists()

    def store(self) -> Store:
        """The home's store (``[store] url``, else its SQLite file), not yet opened. The keyring is
        asked only for a PostgreSQL store's password (finding its backend takes a tenth of a second)."""
        from pizzamail.store.location import store_for

        return store_for(self.home, self.config)

    def blobs(self, store: Store) -> BlobStore:
        """Where the open ``store`` keeps mail bytes and attachments (files, or PostgreSQL itself)."""
        from pizzamail.store.location import blobs_for

        return blobs_for(self.home, store)

    def initialise(self) -> list[str]:
        """Create whatever is missing (folders, config, account password). Returns what was made."""
        from pizzamail.config import default_config_text
        from pizzamail.tls import generate_certificate

        made = []
        if not self.home.root.is_dir():
            made.append(f"home folder {self.home.root}")
        self.home.create_dirs()
        if not self.home.config.exists():
            write_private(self.home.config, default_config_text().encode())
            made.append(f"config {self.home.config}")
        self.config  # validate before creating secrets  # noqa: B018
        if self.secrets.ensure_account_password():
            made.append(f"mail password, stored in {self.secrets.location}")
        cert, key = self.tls_paths()
        if not cert.exists() and cert == self.home.tls_cert:
            generate_certificate(cert, key, hosts=certificate_hosts(self.config.server.host))
            made.append(f"TLS certificate {cert} (self-signed)")
        return made

    def tls_paths(self) -> tuple[Path, Path]:
        server = self.config.server
        cert = Path(server.tls_cert).expanduser() if server.tls_cert else self.home.tls_cert
        key = Path(server.tls_key).expanduser() if server.tls_key else self.home.tls_key
        return cert, key


def certificate_hosts(bind: str) -> list[str]:
    """Names the certificate should cover: this machine's name, and the bound address."""
    hosts = [socket.gethostname()]
    if not ipaddress.ip_address(bind).is_unspecified:
        hosts.append(bind)
    return hosts
