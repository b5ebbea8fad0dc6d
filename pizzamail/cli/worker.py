"""``worker``: only the agent runner, beside a ``serve`` that shares the PostgreSQL store."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import TYPE_CHECKING

import click

from pizzamail import collector
from pizzamail.cli.app import App
from pizzamail.cli.serve import model_line
from pizzamail.home import usable
from pizzamail.logs import WORKER_LOG_FILE, setup_logging

if TYPE_CHECKING:
    from pizzamail.worker import Worker


@click.command()
@click.option("--concurrency", type=click.IntRange(min=1), metavar="N",
              help="Runs worked on at the same time (default: [runner] concurrency).")
@click.option("-v", "--verbose", is_flag=True, help="Log debug detail to the terminal too.")
@click.option("--beside-serve", type=int, metavar="FD", hidden=True,
              help="serve's own runner process, its commit events on this socket ([runner] separate).")
@click.pass_obj
def worker(app: App, concurrency: int | None, verbose: bool, beside_serve: int | None) -> None:
    """Work on queued runs beside a `serve` that shares the PostgreSQL store, until Ctrl-C."""
    from pizzamail.providers.registry import check_kinds
    from pizzamail.runner.apart import NICENESS
    from pizzamail.worker import Worker, worker_config

    config = worker_config(app.config, concurrency, beside_serve=beside_serve is not None)
    with usable(app.home):
        app.home.create_dirs()
        setup_logging(app.home.logs, verbose=verbose, name=WORKER_LOG_FILE)
    check_kinds(config)
    if beside_serve is not None:
        os.nice(NICENESS)
    collector.pace()
    asyncio.run(_work(app, Worker(home=app.home, config=config, secrets=app.secrets, events_fd=beside_serve),
                      quiet=beside_serve is not None))


async def _work(app: App, worker: Worker, *, quiet: bool) -> None:
    from pizzamail.runner.dispatch import runs_at_once
    from pizzamail.store.location import store_place

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    def ready() -> None:
        if quiet:  # serve's runner process: serve has said all of it
            return
        config = worker.config
        click.echo(f"pizzamail worker: store {store_place(config.store.url)},"
                   f" {runs_at_once(config, app.secrets)} run(s) at a time")
        click.echo(model_line(app))
        click.echo("pizzamail worker is ready. Stop it with Ctrl-C.")

    await worker.run(stop, ready)
    if not quiet:
        click.echo("pizzamail worker stopped.")
