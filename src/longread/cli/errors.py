"""The one path from a user-facing error to a message and an exit code, for every command."""

from __future__ import annotations

from typing import Any

import click

from ..errors import LongreadError

# A file that cannot be read or written (a bad --trace or --out path) is the user's to fix.
FILE_ERROR_EXIT = 2


class LongreadGroup(click.Group):
    """A command group whose commands may raise ``LongreadError`` (or ``OSError`` for a path):
    the user sees ``longread: error: <message>`` and the error's exit code, never a
    traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LongreadError as exc:
            fail(ctx, str(exc), exc.exit_code)
        except OSError as exc:
            where = f": {exc.filename}" if exc.filename else ""
            fail(ctx, f"{exc.strerror or exc}{where}", FILE_ERROR_EXIT)


def fail(ctx: click.Context, message: str, code: int) -> None:
    click.echo(f"longread: error: {message}", err=True)
    ctx.exit(code)
