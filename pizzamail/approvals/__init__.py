"""Approvals: held actions, their request mails, the user's decisions and exactly-once release.

The runner and intake call one service, :class:`service.Approvals`; :class:`service.Sweep` is its
long-lived part (expiry, reminders and the ``Action`` folder, on a timer of its own). This module
imports nothing, so `pizzamail approvals` reads the ledger without loading the mail composer.

- :mod:`service` the one service the runner and intake call, and its sweep
- :mod:`decide`  pure: which action a reply names and what it decides
- :mod:`reading` pure: which words of a reply the user wrote (HTML and the forms of one reply; the
  plain-text quotes and signatures: :mod:`pizzamail.mail.reply`)
- :mod:`markup`  pure: an HTML reply as a reader sees it (hidden and struck-out text marked)
- :mod:`words`   pure: the approval, denial, stop and courtesy words, and the rule for an approval
- :mod:`ledger`  decisions and their state transitions (the rows: :mod:`pizzamail.store.actions`,
  :mod:`pizzamail.store.approvals`)
- :mod:`release` a resumed run's decided held call turned into the tool step it continues with
- :mod:`intake`  a decision arriving by SMTP, committed before the 250 (also a sent draft)
- :mod:`outbox`  ``draft_email``: the real draft in Drafts, and relaying an approved one
- :mod:`request` the request mail, and ``Action`` as the queue of waiting requests
- :mod:`expiry`  optional expiry and one reminder
"""
