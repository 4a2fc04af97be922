"""Errors every command shares (so the command modules import downwards, never each other)."""


class CommandError(Exception):
    """An expected failure of a command: printed as one line, exit status 1, no traceback."""
