"""Numbered schema migrations; the ``migrations`` table records which ran.

Append new migrations at the end; never edit one that has shipped. Each is SQLite DDL that
:func:`pizzamail.store.sql.ddl_for_postgres` also makes PostgreSQL's, or a pair, one per dialect.
"""

from __future__ import annotations

from pizzamail.store.sql import SQLITE, ddl_for_postgres

MIGRATIONS: list[tuple[str, str | dict[str, str]]] = [
    (
        "001_core",
        """
        CREATE TABLE threads(
            id INTEGER PRIMARY KEY,
            subject TEXT NOT NULL,
            agent TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE messages(
            id INTEGER PRIMARY KEY,
            thread_id INTEGER NOT NULL REFERENCES threads(id),
            message_id TEXT NOT NULL UNIQUE,
            in_reply_to TEXT,
            refs TEXT NOT NULL DEFAULT '',
            direction TEXT NOT NULL CHECK (direction IN ('in', 'out')),
            kind TEXT NOT NULL,
            sender TEXT NOT NULL,
            subject TEXT NOT NULL,
            body TEXT NOT NULL,
            blob TEXT NOT NULL,
            size INTEGER NOT NULL,
            run_id INTEGER,
            folder TEXT NOT NULL,
            flags TEXT NOT NULL DEFAULT '',
            filed INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL
        );
        CREATE INDEX messages_thread ON messages(thread_id);
        CREATE INDEX messages_unfiled ON messages(filed) WHERE filed = 0;
        CREATE TABLE runs(
            id INTEGER PRIMARY KEY,
            thread_id INTEGER NOT NULL REFERENCES threads(id),
            message_id INTEGER REFERENCES messages(id),
            status TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            model TEXT,
            error TEXT,
            created_at TEXT NOT NULL,
            started_at TEXT,
            finished_at TEXT
        );
        CREATE INDEX runs_status ON runs(status);
        CREATE TABLE steps(
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            data TEXT NOT NULL,
            created_at TEXT NOT NULL,
            UNIQUE (run_id, seq)
        );
        CREATE TABLE events(
            id INTEGER PRIMARY KEY,
            at TEXT NOT NULL,
            kind TEXT NOT NULL,
            thread_id INTEGER,
            run_id INTEGER,
            data TEXT NOT NULL DEFAULT '{}'
        );
        CREATE TABLE folders(
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            uidvalidity INTEGER NOT NULL,
            uidnext INTEGER NOT NULL DEFAULT 1,
            modseq INTEGER NOT NULL DEFAULT 1,
            special_use TEXT,
            subscribed INTEGER NOT NULL DEFAULT 1
        );
        CREATE TABLE mail(
            folder_id INTEGER NOT NULL REFERENCES folders(id) ON DELETE CASCADE,
            uid INTEGER NOT NULL,
            name TEXT NOT NULL,
            subdir TEXT NOT NULL CHECK (subdir IN ('new', 'cur')),
            size INTEGER NOT NULL,
            internaldate INTEGER NOT NULL,
            flags TEXT NOT NULL DEFAULT '',
            modseq INTEGER NOT NULL,
            message_ref INTEGER REFERENCES messages(id),
            envelope BLOB,
            bodystructure BLOB,
            PRIMARY KEY (folder_id, uid)
        );
        CREATE UNIQUE INDEX mail_name ON mail(folder_id, name);
        """,
    ),
    (
        # IMAP sessions catch up with "rows changed since modseq N": keep that proportional to
        # the changes, not to the folder.
        "002_mail_modseq_index",
        """
        CREATE INDEX mail_modseq ON mail(folder_id, modseq);
        """,
    ),
    (
        # IMAP QRESYNC (RFC 7162) tells a reconnecting client which UIDs vanished since its last
        # modseq, so each expunge is remembered with the modseq it was given.
        "003_expunged",
        """
        CREATE TABLE expunged(
            folder_id INTEGER NOT NULL REFERENCES folders(id) ON DELETE CASCADE,
            uid INTEGER NOT NULL,
            modseq INTEGER NOT NULL,
            PRIMARY KEY (folder_id, uid)
        );
        CREATE INDEX expunged_modseq ON expunged(folder_id, modseq);
        """,
    ),
    (
        # A tool call held for approval is recorded, never run, in the same transaction as the
        # run's step that holds it; (run_id, call_id) makes recording it twice impossible.
        # The memory is a few notes the agent keeps across threads (remember/recall).
        "004_held_actions_and_memory",
        """
        CREATE TABLE held_actions(
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            thread_id INTEGER NOT NULL REFERENCES threads(id),
            call_id TEXT NOT NULL,
            tool TEXT NOT NULL,
            server TEXT NOT NULL,
            original TEXT NOT NULL,
            arguments TEXT NOT NULL,
            arguments_sha256 TEXT NOT NULL,
            nonce TEXT NOT NULL UNIQUE,
            reason TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL,
            created_at TEXT NOT NULL,
            decided_at TEXT,
            UNIQUE (run_id, call_id)
        );
        CREATE INDEX held_actions_status ON held_actions(status);
        CREATE TABLE memory(
            id INTEGER PRIMARY KEY,
            text TEXT NOT NULL,
            thread_id INTEGER,
            run_id INTEGER,
            call_id TEXT,
            created_at TEXT NOT NULL,
            UNIQUE (run_id, call_id)
        );
        """,
    ),
    (
        # Approvals: a held action moves held -> approved -> executing -> done/failed (or denied,
        # feedback, ignored, unknown); each decision is a row of its own (who, what, via which mail),
        # and "approve always" leaves a standing rule the user can list and revoke.
        "005_approvals",
        """
        ALTER TABLE held_actions ADD COLUMN approved_arguments TEXT;
        ALTER TABLE held_actions ADD COLUMN note TEXT NOT NULL DEFAULT '';
        ALTER TABLE held_actions ADD COLUMN result TEXT;
        ALTER TABLE held_actions ADD COLUMN result_is_error INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE held_actions ADD COLUMN idempotent INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE held_actions ADD COLUMN request_message_id TEXT;
        ALTER TABLE held_actions ADD COLUMN action_copy TEXT;
        CREATE INDEX held_actions_request ON held_actions(request_message_id);
        CREATE TABLE decisions(
            id INTEGER PRIMARY KEY,
            action_id INTEGER NOT NULL REFERENCES held_actions(id),
            kind TEXT NOT NULL,
            by_address TEXT NOT NULL,
            via TEXT NOT NULL,
            arguments TEXT,
            note TEXT NOT NULL DEFAULT '',
            applied INTEGER NOT NULL,
            at TEXT NOT NULL
        );
        CREATE INDEX decisions_action ON decisions(action_id);
        CREATE TABLE approval_rules(
            id INTEGER PRIMARY KEY,
            server TEXT NOT NULL,
            tool TEXT NOT NULL,
            arguments TEXT NOT NULL,
            action_id INTEGER,
            created_at TEXT NOT NULL,
            UNIQUE (server, tool, arguments)
        )
        """,
    ),
    (
        # A draft_email approved by sending the edited draft: the bytes to relay (Bcc and routing
        # header removed) and the envelope recipients. reminded_at: the one reminder was sent.
        "006_approval_drafts_and_reminders",
        """
        ALTER TABLE held_actions ADD COLUMN outgoing_blob TEXT;
        ALTER TABLE held_actions ADD COLUMN outgoing_rcpts TEXT;
        ALTER TABLE held_actions ADD COLUMN reminded_at TEXT
        """,
    ),
    (
        # Usage per run (summed from its model steps, whose data keep each call's usage) and the
        # limit that stopped it early, if one did.
        "007_run_usage",
        """
        ALTER TABLE runs ADD COLUMN model_calls INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE runs ADD COLUMN tool_calls INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE runs ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE runs ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE runs ADD COLUMN stopped_by TEXT
        """,
    ),
    (
        # Triggers: a schedule continues one thread (thread_id); each occurrence is a row, unique per
        # (schedule, due_at), so firing twice is impossible. Webhook deliveries are remembered by
        # their id (replays are refused) and a hook with thread = "one" keeps its thread here.
        "008_triggers",
        """
        CREATE TABLE schedules(
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            cron TEXT NOT NULL,
            tz TEXT NOT NULL,
            prompt TEXT NOT NULL,
            catch_up TEXT NOT NULL CHECK (catch_up IN ('once', 'skip')),
            source TEXT NOT NULL DEFAULT 'cli',
            thread_id INTEGER REFERENCES threads(id),
            last_fired_at TEXT,
            next_due TEXT,
            enabled INTEGER NOT NULL DEFAULT 1,
            created_at TEXT NOT NULL
        );
        CREATE TABLE occurrences(
            id INTEGER PRIMARY KEY,
            schedule_id INTEGER NOT NULL REFERENCES schedules(id) ON DELETE CASCADE,
            due_at TEXT NOT NULL,
            status TEXT NOT NULL,
            run_id INTEGER REFERENCES runs(id),
            message_id TEXT,
            created_at TEXT NOT NULL,
            UNIQUE (schedule_id, due_at)
        );
        CREATE TABLE hooks(
            name TEXT PRIMARY KEY,
            thread_id INTEGER REFERENCES threads(id),
            last_at TEXT,
            last_outcome TEXT
        );
        CREATE TABLE deliveries(
            id INTEGER PRIMARY KEY,
            hook TEXT NOT NULL,
            delivery_id TEXT NOT NULL,
            run_id INTEGER,
            received_at TEXT NOT NULL,
            UNIQUE (hook, delivery_id)
        )
        """,
    ),
    (
        # Watched remote mailboxes: per watch the mailbox (user@host:port/folder) and its UIDVALIDITY,
        # the last UID handled, the thread it continues (thread = "one") and its connection state,
        # last time and outcome; each mail handled is a row,
        # unique per (watch, uidvalidity, uid) and written in the task's own transaction, so a mail
        # never becomes two tasks, across reconnects and restarts.
        "009_watches",
        """
        CREATE TABLE watches(
            name TEXT PRIMARY KEY,
            mailbox TEXT,
            uidvalidity INTEGER,
            last_uid INTEGER NOT NULL DEFAULT 0,
            thread_id INTEGER REFERENCES threads(id),
            state TEXT,
            last_at TEXT,
            last_outcome TEXT
        );
        CREATE TABLE watched_mail(
            id INTEGER PRIMARY KEY,
            watch TEXT NOT NULL,
            uidvalidity INTEGER NOT NULL,
            uid INTEGER NOT NULL,
            message_id TEXT,
            run_id INTEGER REFERENCES runs(id),
            handled_at TEXT NOT NULL,
            UNIQUE (watch, uidvalidity, uid)
        )
        """,
    ),
    (
        # The highest UIDVALIDITY ever given out, kept apart from the folders: a folder deleted and
        # made again must get a new one even when it was the newest (RFC 3501 2.3.1.1).
        "010_uidvalidity",
        """
        CREATE TABLE uidvalidity(id INTEGER PRIMARY KEY CHECK (id = 1), latest INTEGER NOT NULL);
        INSERT INTO uidvalidity(id, latest) SELECT 1, coalesce(max(uidvalidity), 0) FROM folders
        """,
    ),
    (
        # What posted a run's task: schedule:NAME, hook:NAME or watch:NAME (its tool rules depend on
        # it); NULL for mail through SMTP intake and `pizzamail task`. Written only by the trigger's
        # own code, never taken from a header of received mail, which any SMTP sender could write.
        "011_run_source",
        """
        ALTER TABLE runs ADD COLUMN source TEXT
        """,
    ),
    (
        # IMAP \Recent (RFC 3501 2.3.2) lives with its folder: UIDs from first_recent on have not
        # been shown as recent to any session yet. Messages present at the upgrade count as seen.
        # Folder ids are never given out twice (folder_ids keeps the highest), so nothing keyed by
        # an id, such as a session's open folder, can mistake a new folder for a deleted one.
        "012_imap_recent",
        """
        ALTER TABLE folders ADD COLUMN first_recent INTEGER NOT NULL DEFAULT 1;
        UPDATE folders SET first_recent = uidnext;
        CREATE TABLE folder_ids(id INTEGER PRIMARY KEY CHECK (id = 1), latest INTEGER NOT NULL);
        INSERT INTO folder_ids(id, latest) SELECT 1, coalesce(max(id), 0) FROM folders
        """,
    ),
    (
        # Crashes of the process in a row that cut a run off before it checkpointed anything new.
        # A crash is not a failed attempt of the runs it interrupts; only a run that keeps taking
        # the process down, alone and without getting further, runs out of these.
        "013_run_crashes",
        """
        ALTER TABLE runs ADD COLUMN crashes INTEGER NOT NULL DEFAULT 0
        """,
    ),
    (
        # Webhook signatures accepted, per hook: pizzamail's own scheme does not sign the delivery id,
        # so the same signed request under a new id must be caught by its signature. A row is needed
        # only while its signed timestamp could still pass the tolerance window; older ones are pruned.
        "014_webhook_signatures",
        """
        CREATE TABLE webhook_signatures(
            hook TEXT NOT NULL,
            digest TEXT NOT NULL,
            signed_at INTEGER NOT NULL,
            PRIMARY KEY (hook, digest)
        );
        CREATE INDEX webhook_signatures_signed_at ON webhook_signatures(signed_at)
        """,
    ),
    (
        # A call a standing rule ("approve always") let run without asking: which rule, the exact
        # arguments and when, so the run's mail can say so (X-Pizzamail-Decision) like any decision.
        # rule_action: the action whose "approve always" made the rule (the rule may be revoked later).
        "015_approvals_hardening",
        """
        CREATE TABLE rule_releases(
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            call_id TEXT NOT NULL,
            rule_id INTEGER NOT NULL,
            rule_action INTEGER,
            server TEXT NOT NULL,
            tool TEXT NOT NULL,
            arguments TEXT NOT NULL,
            at TEXT NOT NULL,
            UNIQUE (run_id, call_id)
        )
        """,
    ),
    (
        # The agent a run is of (its address, lower case): mail To research@ runs research. NULL is
        # the main agent ([agent]), which every run before specialists was.
        "016_agents",
        """
        ALTER TABLE runs ADD COLUMN agent TEXT
        """,
    ),
    (
        # A stop asked for by reply or by `pizzamail stop`: who asked (the address, or "cli"). The
        # runner working on the run cancels it; a run a crash left with one ends stopped when resumed.
        "017_stop",
        """
        ALTER TABLE runs ADD COLUMN stop_requested TEXT
        """,
    ),
    (
        # Delegation: a child run started by a `delegate` call knows its parent (which waits in
        # status 'delegating' until its children end) and how deep it is. A thread lives in a folder
        # (a delegation's thread in Activity): its mails are filed there unless they name another.
        "018_delegation",
        """
        ALTER TABLE runs ADD COLUMN parent_run INTEGER REFERENCES runs(id);
        ALTER TABLE runs ADD COLUMN depth INTEGER NOT NULL DEFAULT 0;
        CREATE INDEX runs_parent ON runs(parent_run);
        ALTER TABLE threads ADD COLUMN folder TEXT NOT NULL DEFAULT 'INBOX'
        """,
    ),
    (
        # The notes matching a task go into its prompt: a full-text index of the memory, kept by
        # store/memory.py (no triggers, so that PostgreSQL can do the same with a tsvector column).
        "020_memory_search",
        {
            "sqlite": """
            CREATE VIRTUAL TABLE memory_search USING fts5(text);
            INSERT INTO memory_search(rowid, text) SELECT id, text FROM memory
            """,
            "postgresql": """
            ALTER TABLE memory ADD COLUMN search tsvector
                GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED;
            CREATE INDEX memory_search ON memory USING gin(search)
            """,
        },
    ),
    (
        # [mailbox] mode = "imap": where the reader is in the account's INBOX (UIDVALIDITY and the
        # last UID looked at), and each mail it took, unique by (mailbox, UIDVALIDITY, UID) and
        # recorded in the transaction of the task, decision or refusal it became: a mail is taken
        # once across reconnects and crashes. Its Message-ID too: the same mail under another UID
        # (copied back, or a second delivery) is not taken twice.
        "022_account_inbox",
        """
        CREATE TABLE account_folders(
            folder TEXT PRIMARY KEY,
            mailbox TEXT NOT NULL,
            uidvalidity INTEGER NOT NULL,
            last_uid INTEGER NOT NULL,
            last_at TEXT,
            last_outcome TEXT
        );
        CREATE TABLE account_mail(
            id INTEGER PRIMARY KEY,
            mailbox TEXT NOT NULL,
            uidvalidity INTEGER NOT NULL,
            uid INTEGER NOT NULL,
            message_id TEXT,
            outcome TEXT NOT NULL,
            handled_at TEXT NOT NULL,
            UNIQUE (mailbox, uidvalidity, uid)
        );
        CREATE INDEX account_mail_message_id ON account_mail(message_id)
        """,
    ),
    (
        # The user's own IMAP account ([mailbox] mode = "imap"): each of pizzamail's folders there
        # (its name at the account and UIDVALIDITY), and each mail pizzamail APPENDed, by the name its
        # writer gave it. A mail is written down before its APPEND (uid NULL) and its UID after, so a
        # crash in between is resolved by a search for its Message-ID, never by a second APPEND.
        "023_remote_mail",
        """
        CREATE TABLE remote_folders(
            id INTEGER PRIMARY KEY,
            account TEXT NOT NULL,
            name TEXT NOT NULL,
            remote TEXT NOT NULL,
            uidvalidity INTEGER NOT NULL,
            UNIQUE (account, name)
        );
        CREATE TABLE remote_mail(
            folder_id INTEGER NOT NULL REFERENCES remote_folders(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            message_id TEXT NOT NULL,
            uid INTEGER,
            PRIMARY KEY (folder_id, name)
        )
        """,
    ),
    (
        # the worker that holds a running run, and until when (epoch seconds, renewed by its
        # heartbeat): a run whose lease ran out is requeued and another worker takes it over
        "024_run_leases",
        """
        ALTER TABLE runs ADD COLUMN lease_owner TEXT;
        ALTER TABLE runs ADD COLUMN lease_until INTEGER
        """,
    ),
    (
        # With PostgreSQL nothing is shared but the database: mail bytes and attachments (a SQLite
        # home's blobs/ files), and each run's workspace files, named by their blob, so a worker on
        # another machine resuming the run finds them. SQLite homes keep both on disk.
        "025_blobs_in_store",
        {"sqlite": "",
         "postgresql": """
        CREATE TABLE blobs(
            digest TEXT PRIMARY KEY,
            data BYTEA NOT NULL
        );
        CREATE TABLE run_files(
            run_id BIGINT NOT NULL,
            name TEXT NOT NULL,
            digest TEXT NOT NULL REFERENCES blobs(digest),
            PRIMARY KEY (run_id, name)
        )
        """},
    ),
    (
        # The header fields clients list (From, To, Cc, Subject, Date, Message-ID, References,
        # In-Reply-To, Content-Type), their raw lines in the file's order, so a header listing
        # answers from the index without opening the message files. NULL: not read yet. The index
        # on flags lets opening a folder find its first unseen message and its keywords without
        # reading every row (rows are large now).
        "026_mail_header_cache",
        """
        ALTER TABLE mail ADD COLUMN headers BLOB;
        CREATE INDEX mail_flags ON mail(folder_id, flags, uid)
        """,
    ),
    (
        # `pizzamail threads` reads each thread's latest run (without the first index, a scan of
        # every run per thread: seconds with 10,000 threads) and the newest threads first
        "027_thread_listing",
        """
        CREATE INDEX runs_thread ON runs(thread_id, id);
        CREATE INDEX threads_recent ON threads(updated_at, id)
        """,
    ),
    (
        # A SQLite home keeps the bytes of mail taken by SMTP in the transaction that records it
        # (one fsync before the 250: its commit; a file costs its own and its folder's). The other
        # blobs stay files under blobs/; PostgreSQL has had this table since 025.
        "029_sqlite_blobs",
        {"sqlite": """
        CREATE TABLE blobs(
            digest TEXT PRIMARY KEY,
            data BLOB NOT NULL
        )
        """,
         "postgresql": ""},
    ),
    (
        # The header cache now holds every field Thunderbird, mutt and K-9 list (it had nine: their
        # listings read every file). Lines cached with fewer would answer the new fields with
        # nothing: forgotten, a message's next listing reads its file and caches them.
        "030_header_cache_fields",
        "UPDATE mail SET headers = NULL WHERE headers IS NOT NULL",
    ),
    (
        # The cached lines' blocks became NUL name NUL raw (were name NUL raw NUL), which a listing
        # picks from faster (imap/cache.py). Forgotten as in 030: each message's next listing
        # caches them again from its file.
        "031_header_cache_framing",
        "UPDATE mail SET headers = NULL WHERE headers IS NOT NULL",
    ),
]


def script(entry: str | dict[str, str], dialect: str) -> str:
    """A migration's SQL for ``dialect``: written for SQLite, PostgreSQL's types translated, unless
    the migration gives each dialect its own."""
    if isinstance(entry, dict):
        return entry[dialect]
    return entry if dialect == SQLITE else ddl_for_postgres(entry)
