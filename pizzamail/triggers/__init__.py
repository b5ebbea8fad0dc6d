"""Triggers: work that starts without a mail from the owner (cron schedules, webhooks).

Each trigger records a task exactly like intake does (a message and a queued run in one
transaction), so the runner, history and approvals treat it like any other task.
"""
