"""When things happen, the pure part: cron arithmetic and time zones (:mod:`.cron`), English phrases
to cron (:mod:`.phrases`) and back to words (:mod:`.words`), and the check of a trigger's prompt
template (:mod:`.templates`).

A leaf: it imports nothing of pizzamail, so config can validate schedules and hooks without
importing the triggers that run them.
"""
