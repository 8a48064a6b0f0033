"""The ``ragbridge`` command."""

from ragbridge.adapters.cli.main import main

__all__ = ["main"]
