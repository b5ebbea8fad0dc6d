"""What every command needs: the home folder, its config and its secrets (loaded lazily)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pizzamail.config import Config, default_config_text, load_config
from pizzamail.home import Home, resolve_home, write_private
from pizzamail.secrets import SecretStore, secret_store


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
            self._config = load_config(self.home.config)
        return self._config

    @property
    def secrets(self) -> SecretStore:
        return secret_store(self.home)

    def initialise(self) -> list[str]:
        """Create whatever is missing (folders, config, account password). Returns what was made."""
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
        return made
