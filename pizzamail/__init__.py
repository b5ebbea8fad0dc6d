"""pizzamail: a self-hosted inbox for background AI agents. Email is the interface."""

__version__ = "0.1.0"
