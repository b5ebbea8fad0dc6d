"""Pure parts: subjects and references, backoff, argument parsing, wire shapes, key lookup, history."""

from __future__ import annotations

import asyncio
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

import pizzamail.runner.history as history_module
from pizzamail.composer import Composer, MailContext, reference_chain, reply_subject
from pizzamail.composer.render import markdown_html, templates_dir
from pizzamail.config import AgentSettings, Config, ProviderSettings, RunnerSettings, parse_config
from pizzamail.errors import ProviderNotConfigured, RunError
from pizzamail.home import Home
from pizzamail.mail.parse import parse_bytes
from pizzamail.providers import Message, local, provider_for
from pizzamail.providers.openai import MAX_WAIT, OpenAIProvider, backoff, parse_arguments, wire_message
from pizzamail.runner.dispatch import runs_at_once
from pizzamail.runner.history import RunContext, history
from pizzamail.secrets import SecretStore, secret_store
from pizzamail.store.blobs import FileBlobs
from pizzamail.store.runs import Run, Step
from pizzamail.store.threads import Message as StoredMessage
from pizzamail.transcript import step_from_row
from tests.fakes.openai_server import FakeOpenAI, text


@pytest.mark.parametrize(("subject", "expected"), [
    ("Summarise issues", "Re: Summarise issues"),
    ("Re: Summarise issues", "Re: Summarise issues"),
    ("RE: re: Re[2]: AW: x", "Re: x"),
    ("", "Re: (no subject)"),
    ("Regarding: the plan", "Re: Regarding: the plan"),
])
def test_reply_subject_never_stacks_prefixes(subject: str, expected: str) -> None:
    assert reply_subject(subject) == expected


def test_reference_chain_keeps_the_root_and_the_latest() -> None:
    ctx = MailContext(thread_id=1, run_id=1, subject="s", in_reply_to="last@x",
                      references=[f"m{i}@x" for i in range(30)])
    chain = reference_chain(ctx)
    assert len(chain) == 20 and chain[0] == "m0@x" and chain[-1] == "last@x"


def test_templates_come_from_the_repo_when_running_from_source() -> None:
    root = templates_dir()
    assert Path(str(root)) == Path(__file__).resolve().parents[2] / "templates"
    for name in ("mail.txt.j2", "mail.html.j2", "error.md.j2", "notice.md.j2", "system.md.j2"):
        assert (root / name).is_file()


def test_a_templates_folder_overrides_bundled_templates_one_by_one(tmp_path: Path) -> None:
    (tmp_path / "mail.txt.j2").write_text("custom {{ body }}")
    composer = Composer(config=Config(), templates=tmp_path)
    ctx = MailContext(thread_id=1, run_id=2, subject="s", in_reply_to=None)
    mail = parse_bytes(composer.reply(ctx, "hi").as_bytes())
    assert mail.get_body(("plain",)).get_content().splitlines() == ["custom hi"]  # type: ignore[union-attr]
    assert "<p>hi</p>" in mail.get_body(("html",)).get_content()  # type: ignore[union-attr]
    assert "In-Reply-To" not in mail


def test_html_autoescapes_the_subject() -> None:
    composer = Composer(config=Config())
    ctx = MailContext(thread_id=1, run_id=2, subject="<b>bold</b>", in_reply_to="a@x")
    mail = parse_bytes(composer.reply(ctx, "hi").as_bytes())
    html = mail.get_body(("html",)).get_content()  # type: ignore[union-attr]
    assert "<title>Re: &lt;b&gt;bold&lt;/b&gt;</title>" in html


def test_markdown_html_drops_dangerous_markup() -> None:
    assert markdown_html("<b onclick=x>hi</b>") == "<p>&lt;b onclick=x&gt;hi&lt;/b&gt;</p>\n"
    assert 'rel="noopener noreferrer"' in markdown_html("[a](https://example.org)")


def test_backoff_honours_retry_after_and_grows_with_jitter() -> None:
    assert backoff(0, "7") == 7.0
    assert backoff(0, "100000") == MAX_WAIT
    assert backoff(0, "Wed, 21 Oct 2015 07:28:00 GMT", jitter=lambda: 0.0) == 0.5
    assert [backoff(n, None, jitter=lambda: 1.0) for n in range(4)] == [1.0, 2.0, 4.0, 8.0]
    assert backoff(20, None, jitter=lambda: 1.0) == MAX_WAIT


@pytest.mark.parametrize(("raw", "arguments", "problem"), [
    ('{"a": 1}', {"a": 1}, None),
    ("", {}, None),
    ("[1, 2]", {}, "must be a JSON object"),
    ('{"a": ', {}, "not valid JSON"),
])
def test_tool_arguments_are_validated(raw: str, arguments: dict[str, int], problem: str | None) -> None:
    parsed, error = parse_arguments(raw)
    assert parsed == arguments
    assert (error is None) if problem is None else (error is not None and problem in error)


def test_a_tool_error_is_marked_in_the_text_for_chat_completions() -> None:
    message = Message(role="tool", content="boom", tool_call_id="c1", is_error=True)
    assert wire_message(message) == {"role": "tool", "tool_call_id": "c1", "content": "ERROR: boom"}


def _secrets(tmp_path: Path) -> SecretStore:
    return SecretStore(fallback=tmp_path / "secrets.json", scope="t", use_keyring=False)


async def test_the_key_comes_from_the_environment_when_not_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    provider = provider_for(Config(), _secrets(tmp_path))
    assert isinstance(provider, OpenAIProvider)
    assert (provider.api_key, provider.model, provider.base_url) == (
        "sk-env", "gpt-4.1-mini", "https://api.openai.com/v1")
    await provider.aclose()


async def test_a_named_provider_uses_its_own_keyring_entry(tmp_path: Path) -> None:
    secrets = _secrets(tmp_path)
    secrets.set("local-key", "sk-local")
    config = Config(agent=AgentSettings(model="local:llama3"),
                    providers={"local": ProviderSettings(base_url="http://127.0.0.1:9/v1", key="local-key")})
    provider = provider_for(config, secrets)
    assert isinstance(provider, OpenAIProvider)
    assert (provider.name, provider.api_key, provider.model) == ("local", "sk-local", "llama3")
    await provider.aclose()


def test_runs_at_once_by_default_many_for_a_remote_provider_one_for_the_embedded_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = _secrets(tmp_path)
    monkeypatch.setattr(local, "available", lambda: True)
    assert runs_at_once(Config(), secrets) == 1  # no key: the embedded model stands in
    assert runs_at_once(Config(agent=AgentSettings(model="local:smollm2")), secrets) == 1
    own_server = {"local": ProviderSettings(base_url="http://127.0.0.1:9/v1", key_required=False)}
    theirs = Config(agent=AgentSettings(model="local:llama3"), providers=own_server)
    assert runs_at_once(theirs, secrets) == 32
    secrets.set("openai", "sk-test")
    assert runs_at_once(Config(), secrets) == 32
    explicit = Config(agent=AgentSettings(model="local:smollm2"), runner=RunnerSettings(concurrency=3))
    assert runs_at_once(explicit, secrets) == 3  # config.toml's number wins
    assert parse_config({"runner": {"concurrency": 2}}).runner.runs_at_once(embedded_model=False) == 2


def test_a_missing_key_explains_every_way_to_fix_it(tmp_path: Path) -> None:
    with pytest.raises(ProviderNotConfigured) as caught:
        provider_for(Config(), _secrets(tmp_path))
    hint = caught.value.hint or ""
    for needed in ("`pizzamail keys set openai`", "$OPENAI_API_KEY", "`[agent] model`",
                   '"openai:gpt-4.1-mini"', "`[providers.openai] base_url`"):
        assert needed in hint


def _stored(row: int, direction: str, kind: str, body: str, blob: str = "b") -> StoredMessage:
    return StoredMessage(id=row, thread_id=1, message_id=f"m{row}@x", in_reply_to=None, refs=[],
                         direction=direction, kind=kind, sender="s", subject="s", body=body, blob=blob,
                         size=1, folder="INBOX", flags="", run_id=None, created_at="t")


async def test_history_is_bounded_and_leaves_out_our_own_notices(tmp_path: Path) -> None:
    blobs = FileBlobs(root=tmp_path)
    plain = blobs.put(b"Subject: s\r\n\r\nq\r\n")
    earlier = [_stored(1, "in", "task", "q1", plain), _stored(2, "out", "reply", "a1"),
               _stored(3, "in", "task", "q2", plain), _stored(4, "out", "error", "it broke")]
    ctx = RunContext(subject="s", trigger=_stored(5, "in", "task", "q3", plain), earlier=earlier)
    assert [(m.role, m.content) for m in await history(ctx, limit=2, blobs=blobs)] == [
        ("assistant", "a1"), ("user", "q2"), ("user", "q3")]
    run = Run(id=7, thread_id=1, message_id=5, status="running", attempts=1, model=None, error=None,
              created_at="t", started_at=None, finished_at=None)
    mail = ctx.mail(run)
    assert mail.in_reply_to == "m5@x" and mail.references == ["m1@x", "m2@x", "m3@x", "m4@x"]


async def test_a_small_mail_without_files_is_read_without_a_worker_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blobs = FileBlobs(root=tmp_path)
    trips: list[str] = []
    real = asyncio.to_thread

    async def counted(fn: Any, *args: Any) -> Any:
        trips.append(fn.__name__)
        return await real(fn, *args)

    monkeypatch.setattr(history_module.asyncio, "to_thread", counted)
    with_file = EmailMessage()
    with_file["Subject"] = "s"
    with_file.set_content("see the notes")
    with_file.add_attachment(b"the notes", maintype="text", subtype="plain", filename="notes.txt")
    large = b"Subject: s\r\n\r\n" + b"words " * 20_000 + b"\r\n"
    for raw, parsed_in_a_thread in ((b"Subject: s\r\n\r\nq\r\n", False), (bytes(with_file), True),
                                    (large, True)):
        trips.clear()
        ctx = RunContext(subject="s", trigger=_stored(1, "in", "task", "q", blobs.put(raw)), earlier=[])
        await history(ctx, limit=2, blobs=blobs)
        assert ("_attached" in trips) is parsed_in_a_thread  # (the blob's own read is a file's)
    ctx = RunContext(subject="s", trigger=_stored(1, "in", "task", "q", blobs.put(bytes(with_file))),
                     earlier=[])
    [turn] = await history(ctx, limit=2, blobs=blobs)
    assert "[attached: notes.txt]" in turn.content and "the notes" in turn.content


def test_an_unreadable_checkpoint_is_a_run_error() -> None:
    with pytest.raises(RunError, match="unknown kind"):
        step_from_row(Step(seq=3, kind="mystery", data={}))
    with pytest.raises(RunError, match="unreadable"):
        step_from_row(Step(seq=4, kind="tool", data={"text": "x"}))


async def test_a_provider_that_needs_no_key_is_called_without_one(
    home: Home, fake_openai: FakeOpenAI
) -> None:
    config = parse_config({"agent": {"model": "local:llama3"},
                           "providers": {"local": {"base_url": fake_openai.base_url,
                                                   "key_required": False}}})
    fake_openai.script([text("hi")])
    provider = provider_for(config, secret_store(home))
    try:
        answer = await provider.complete([Message(role="user", content="hello")], [])
    finally:
        await provider.aclose()
    assert answer.text == "hi"
    assert "authorization" not in fake_openai.requests[0].headers


def test_a_remote_endpoint_without_a_key_is_not_configured(home: Home) -> None:
    config = parse_config({"agent": {"model": "remote:m"},
                           "providers": {"remote": {"base_url": "https://llm.example.com/v1"}}})
    with pytest.raises(ProviderNotConfigured, match="no API key"):
        provider_for(config, secret_store(home))
