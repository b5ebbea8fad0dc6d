"""``python -m pizzamail`` is the ``pizzamail`` command."""

from pizzamail.cli import main

main()
