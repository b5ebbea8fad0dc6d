"""The agent runner: a worker pool that drives queued runs through the agent loop."""

from __future__ import annotations

from pizzamail.runner.pool import Runner

__all__ = ["Runner"]
