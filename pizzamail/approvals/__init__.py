"""Approvals: held actions, their request mails, the user's decisions and exactly-once release.

- :mod:`decide`  pure: which action a reply names and what it decides
- :mod:`reading` pure: which words of a reply the user wrote (quotes, signatures, HTML set aside)
- :mod:`markup`  pure: an HTML reply as a reader sees it (hidden and struck-out text marked)
- :mod:`words`   pure: the approval, denial and courtesy words, and the rule for an approval
- :mod:`ledger`  the store side: decisions, state transitions, standing rules
- :mod:`release` the runner side: turning a decided action into the tool step the run continues with
- :mod:`intake`  a decision arriving by SMTP, committed before the 250 (also a sent draft)
- :mod:`outbox`  ``draft_email``: the real draft in Drafts, and relaying an approved one
- :mod:`expiry`  optional expiry and one reminder, on the runner's idle poll
"""
