"""Every ``longread`` command (ask, data, eval), and the one path from errors to exit codes.

Library packages never import this one: it is a front door over them.
"""

from .main import cli, main

__all__ = ["cli", "main"]
