"""From ``[agent] model = "NAME:MODEL"`` to a ready :class:`Provider`.

Provider *kinds* (wire formats) register in :data:`KINDS` through :func:`register_kind`; the
built-in ``openai``, ``anthropic``, ``bedrock`` and ``local`` kinds register exactly as a third-party
one would, and :func:`check_kinds` holds config.toml's kinds against them.
A *name* is a ``[providers.NAME]`` section of config.toml that picks a kind, an endpoint and where its
key is kept (``openai``, ``anthropic``, ``bedrock``, ``ollama`` and ``local`` work without a section).

Key lookup order: the keyring entry named ``key`` (default: the provider's name), then the
environment variable ``key_env``. A missing key is :class:`ProviderNotConfigured`, whose hint is
the whole recipe to fix it, unless the section says ``key_required = false`` (a local server such
as Ollama or LM Studio), which is then called without one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from pizzamail.config import Config, ProviderSettings
from pizzamail.errors import ConfigError, ProviderNotConfigured, SecretMissing
from pizzamail.providers import bedrock, local
from pizzamail.providers.anthropic import AnthropicProvider
from pizzamail.providers.openai import OpenAIProvider, Sleep
from pizzamail.providers.types import Provider
from pizzamail.secrets import SecretStore


@dataclass(frozen=True, kw_only=True)
class ProviderArgs:
    """Everything a kind needs to build a provider."""

    name: str
    model: str
    settings: ProviderSettings
    api_key: str
    sleep: Sleep = asyncio.sleep
    http: httpx.AsyncClient | None = None
    """a client to share (a runner's, for all its runs); None: the provider opens its own"""


ProviderKind = Callable[[ProviderArgs], Provider]

KINDS: dict[str, ProviderKind] = {}


def register_kind(kind: str, factory: ProviderKind) -> None:
    """Make ``kind = "..."`` usable in ``[providers.NAME]`` sections."""
    KINDS[kind] = factory


def _openai(args: ProviderArgs) -> Provider:
    return OpenAIProvider(
        name=args.name, base_url=args.settings.base_url, model=args.model, api_key=args.api_key,
        timeout=args.settings.timeout, max_retries=args.settings.max_retries, sleep=args.sleep,
        key_entry=args.settings.key or args.name, vision=args.settings.vision, http=args.http,
    )


def _anthropic(args: ProviderArgs) -> Provider:
    return AnthropicProvider(
        name=args.name, base_url=args.settings.base_url, model=args.model, api_key=args.api_key,
        timeout=args.settings.timeout, max_retries=args.settings.max_retries,
        max_tokens=args.settings.max_tokens, sleep=args.sleep, key_entry=args.settings.key or args.name,
        vision=args.settings.vision, http=args.http,
    )


def _bedrock(args: ProviderArgs) -> Provider:
    region = bedrock.region_of(args.settings.region)
    headers, auth = bedrock.auth_for(args.settings.key or args.name, args.api_key, region)
    return bedrock.BedrockProvider(
        name=args.name, base_url=args.settings.base_url or bedrock.base_url_for(region), model=args.model,
        headers=headers, auth=auth, timeout=args.settings.timeout, max_retries=args.settings.max_retries,
        max_tokens=args.settings.max_tokens, sleep=args.sleep, key_entry=args.settings.key or args.name,
        vision=args.settings.vision, http=args.http,
    )


def _local(args: ProviderArgs) -> Provider:
    return local.LocalProvider(name=args.name, model=args.model or local.MODEL_NAME)


register_kind("openai", _openai)
register_kind("anthropic", _anthropic)
register_kind("bedrock", _bedrock)
register_kind("local", _local)


def check_kinds(config: Config) -> None:
    """Every ``[providers.NAME] kind`` is one registered here. Config takes any kind (it sits below
    the providers and cannot know them), so ``serve``, ``doctor`` and ``models`` ask here."""
    for name, settings in config.providers.items():
        if settings.kind not in KINDS:
            raise ConfigError(f"providers.{name}.kind", settings.kind,
                              "a kind this pizzamail knows: " + ", ".join(sorted(KINDS)))


def select_provider(config: Config, secrets: SecretStore, *, sleep: Sleep = asyncio.sleep,
                    offline: Callable[[], bool] = local.available, http: httpx.AsyncClient | None = None,
                    ) -> Provider:
    """:func:`provider_for`, except that when it is not configured (no key, unknown name) and the
    embedded model is installed (and ``[agent] offline_model`` allows it), the embedded model answers,
    with a notice under each reply saying how to set up the configured provider."""
    try:
        return provider_for(config, secrets, sleep=sleep, http=http)
    except ProviderNotConfigured as exc:
        if not (config.agent.offline_model and offline()):
            raise
        return local.LocalProvider(notice=local.offline_notice(exc.hint or exc.message))


def provider_for(config: Config, secrets: SecretStore, *, sleep: Sleep = asyncio.sleep,
                 http: httpx.AsyncClient | None = None) -> Provider:
    """The provider for ``config.agent.model``; raises :class:`ProviderNotConfigured`."""
    name, _, model = config.agent.model.partition(":")
    settings, kind = _resolve(config)
    key = _api_key(name, config.agent.model, settings, secrets)
    return kind(ProviderArgs(name=name, model=model, settings=settings, api_key=key, sleep=sleep, http=http))


def _resolve(config: Config) -> tuple[ProviderSettings, ProviderKind]:
    name = config.agent.model.partition(":")[0]
    settings = config.provider(name)
    if settings is None:
        raise ProviderNotConfigured(
            f"no provider named {name!r} (from `[agent] model = \"{config.agent.model}\"`)",
            hint=f"add a `[providers.{name}]` section with `base_url` to config.toml, or set"
                 " `[agent] model` to a configured provider, such as \"openai:gpt-4.1-mini\"",
        )
    kind = KINDS.get(settings.kind)
    if kind is None:
        raise ProviderNotConfigured(
            f"provider {name!r} has kind {settings.kind!r}, which this pizzamail does not know",
            hint=f"set `kind` in `[providers.{name}]` to one of: " + ", ".join(sorted(KINDS)),
        )
    return settings, kind


@dataclass(frozen=True, kw_only=True)
class Answering:
    """Which model answers the main agent's runs, as ``serve``, ``doctor`` and ``models`` say it."""

    model: str
    """``[agent] model``"""
    key: str
    """where its key is found (:func:`find_key`)"""
    toy: bool
    """the embedded offline model stands in for it"""
    problem: str = ""
    """why the selected provider cannot answer ("" when it can)"""
    fix: str = ""

    @property
    def summary(self) -> str:
        if not self.problem:
            embedded = " (the embedded offline toy model)" if self.model.startswith("local:") else ""
            return f"{self.model}{embedded}, key: {self.key}"
        if self.toy:
            return f"{self.model} cannot answer ({self.problem}): the offline toy model stands in"
        return f"none: {self.model} cannot answer ({self.problem}), and no offline model stands in"


def answering(config: Config, secrets: SecretStore, *,
              offline: Callable[[], bool] | None = None) -> Answering:
    """What :func:`select_provider` would pick, without building a provider. ``offline``: whether the
    embedded model is installed (default: :func:`local.available`)."""
    name = config.agent.model.partition(":")[0]
    settings = config.provider(name)
    key = find_key(name, settings, secrets)[1] if settings else "missing"
    installed = (offline or local.available)()
    try:
        settings, _ = _resolve(config)
        _api_key(name, config.agent.model, settings, secrets)
    except ProviderNotConfigured as exc:
        toy = config.agent.offline_model and installed
        return Answering(model=config.agent.model, key=key, toy=toy, problem=exc.message, fix=exc.hint or "")
    if settings.kind == "local" and not installed:
        return Answering(model=config.agent.model, key=key, toy=False,
                         problem="the embedded offline model is not installed", fix=f"run `{local.INSTALL}`")
    return Answering(model=config.agent.model, key=key, toy=False)


def _api_key(name: str, model: str, settings: ProviderSettings, secrets: SecretStore) -> str:
    entry = settings.key or name
    try:
        return secrets.lookup(entry, env=settings.key_env or None, command=f"pizzamail keys set {entry}")
    except SecretMissing:
        if not settings.key_required:
            return ""
        raise ProviderNotConfigured(
            f"no API key for the model provider {name!r}", hint=key_hint(name, entry, model, settings)
        ) from None


def key_hint(name: str, entry: str, model: str, settings: ProviderSettings) -> str:
    env = f" or set the environment variable ${settings.key_env}" if settings.key_env else ""
    return (
        f"store the key with `pizzamail keys set {entry}`{env}. The model is chosen by"
        f" `[agent] model` in config.toml (now \"{model}\") and the endpoint by"
        f" `[providers.{name}] base_url` (now {settings.base_url})."
    )


def find_key(name: str, settings: ProviderSettings, secrets: SecretStore) -> tuple[str, str]:
    """``(key, where)`` without raising: where is ``keyring``, ``file``, ``env $VAR``, ``not needed``
    or ``missing`` (key is then "")."""
    if settings.kind == "local":
        return "", "not needed"
    stored = secrets.get(settings.key or name)
    if stored:
        return stored, "keyring" if secrets.use_keyring else "file"
    from_env = secrets.from_env(settings.key_env) if settings.key_env else None
    if from_env:
        return from_env, f"env ${settings.key_env}"
    if settings.kind == "bedrock":
        return "", "aws credential chain" if bedrock.botocore_available() else "missing"
    return "", "missing" if settings.key_required else "not needed"
