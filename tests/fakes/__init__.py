"""Scripted stand-ins for the outside world: only the model is faked, over real HTTP."""
