"""Durable SMTP intake throughput against a bare aiosmtpd server, measured in the same run.

Both servers run in their own process with the same AUTH settings and the same event loop;
``--clients`` client threads (4) each send messages over one authenticated connection. The baseline
handler answers 250 without doing anything; pizzamail's handler parses and commits the mail's
bytes, thread, message and run before it answers (mails arriving together share one commit). Prints
messages per second for both and their ratio, and the CPU each server spent a mail (user and
system, all its threads, while the clients sent; from /proc, so Linux only): the rates move with
whatever else the machine runs, the CPU a mail much less.

    python bench/intake.py [--messages 400] [--clients 4]
"""

from __future__ import annotations

import argparse
import asyncio
import email.policy
import math
import multiprocessing as mp
import os
import smtplib
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from email.message import EmailMessage
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiosmtpd.smtp import SMTP, Envelope, Session

from pizzamail import collector
from pizzamail.auth import Accounts
from pizzamail.intake.smtp import IntakeHandler, authenticator, start_smtp_server
from pizzamail.store import Store
from pizzamail.store.blobs import FileBlobs, SqliteBlobs

OWNER, BOT, CLIENTS = "me@pizzamail.localhost", "bot@pizzamail.localhost", 4
ACCOUNTS = Accounts(user="me", password="pw", addresses=frozenset({OWNER}))


class NoOp:
    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        return "250 OK"


async def _serve(kind: str, port_out: mp.Queue[int], home: str) -> None:
    if kind == "pizzamail":
        store = await Store(path=Path(home) / "state.db").open()
        blobs = SqliteBlobs(files=FileBlobs(root=Path(home) / "blobs"), store=store)
        handler = IntakeHandler(store=store, blobs=blobs,
                                accounts=ACCOUNTS, agents=frozenset({BOT}), domain="pizzamail.localhost")
        server = await start_smtp_server(host="127.0.0.1", port=0, handler=handler, max_size=10_000_000)
    else:
        server = await asyncio.get_running_loop().create_server(
            lambda: SMTP(NoOp(), auth_required=True, auth_require_tls=False,
                         authenticator=authenticator(ACCOUNTS)),
            host="127.0.0.1", port=0)
    port_out.put(server.sockets[0].getsockname()[1])
    await asyncio.Event().wait()


def server_process(kind: str, port_out: mp.Queue[int], home: str) -> None:
    import warnings
    warnings.simplefilter("ignore")
    if kind == "pizzamail":
        collector.pace()  # as serve does
    asyncio.run(_serve(kind, port_out, home))


def message(i: int) -> bytes:
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = OWNER, BOT, f"Task {i}"
    msg["Message-ID"] = f"<bench-{i}-{time.time_ns()}@client>"
    msg.set_content("Please summarise the attached quarterly numbers.\n" * 20)
    return msg.as_bytes(policy=email.policy.SMTP)


def client(port: int, count: int, password: str = "pw") -> None:
    """``count`` messages over one connection, logged in as ``me`` (bench/agent.py's (e) sends the
    same against a real serve)."""
    with smtplib.SMTP("127.0.0.1", port, timeout=60) as smtp:
        smtp.login("me", password)
        for i in range(count):
            smtp.sendmail(OWNER, [BOT], message(i))


def cpu_seconds(pid: int | None) -> float:
    """User and system CPU of process ``pid`` so far (NaN where /proc is not there)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(kind: str, messages: int, clients: int = CLIENTS) -> tuple[float, float]:
    """Messages per second, and the server's CPU milliseconds a mail."""
    with tempfile.TemporaryDirectory() as home:
        (Path(home) / "blobs").mkdir()
        ports: mp.Queue[int] = mp.Queue()
        proc = mp.Process(target=server_process, args=(kind, ports, home), daemon=True)
        proc.start()
        port = ports.get(timeout=30)
        per_client = messages // clients
        cpu, start = cpu_seconds(proc.pid), time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            list(pool.map(lambda _: client(port, per_client), range(clients)))
        elapsed, cpu = time.perf_counter() - start, cpu_seconds(proc.pid) - cpu
        proc.terminate()
        proc.join()
    sent = per_client * clients
    return sent / elapsed, 1000 * cpu / sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--clients", type=int, default=CLIENTS)
    args = parser.parse_args()
    (baseline, baseline_cpu) = measure("baseline", args.messages, args.clients)
    (ours, ours_cpu) = measure("pizzamail", args.messages, args.clients)
    print(f"bare aiosmtpd (no-op handler): {baseline:8.1f} msg/s  {baseline_cpu:5.2f} ms CPU a mail")
    print(f"pizzamail durable intake:      {ours:8.1f} msg/s  {ours_cpu:5.2f} ms CPU a mail")
    print(f"ratio pizzamail / baseline:    {ours / baseline:8.2f}        {ours_cpu / baseline_cpu:5.2f}")


if __name__ == "__main__":
    main()
