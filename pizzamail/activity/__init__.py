"""The Activity folder as a live board: one status mail per run, replaced as the run moves on,
and a copy of each progress note. Driven by the store's commit events, not by the runner.

The package imports nothing itself, so ``pizzamail activity`` reads the board's wording
(:mod:`~pizzamail.activity.status`) without the composer: :mod:`~pizzamail.activity.board` syncs the
folder, :mod:`~pizzamail.activity.live` is the part the service runs.
"""
