"""``longread view``: look at traces and eval run folders in a browser, or export one page."""

from __future__ import annotations

import contextlib
import webbrowser
from pathlib import Path

import click

from ..errors import UsageError

# The viewer shows local files, to this machine only.
HOST = "127.0.0.1"


@click.command(name="view")
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port on 127.0.0.1; 0 picks a free one.",
)
@click.option("--no-browser", is_flag=True, help="Print the address without opening a browser.")
@click.option(
    "--export",
    "export_to",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write one self-contained HTML file (inline CSS and JavaScript) here and exit.",
)
def view_command(path: Path, port: int, no_browser: bool, export_to: Path | None) -> None:
    """Show PATH in the browser: a trace JSON file, an eval run folder, or a folder of trace
    JSON files. Serves a local page on 127.0.0.1 until Ctrl-C."""
    try:
        from ..asgi import bind, serve, url
        from ..view import create_app, export_html
        from ..view.sources import open_source
    except ImportError as exc:
        raise UsageError(
            f"longread view needs the serve extra ({exc.name} is missing): "
            "pip install 'longread[serve]'"
        ) from None
    open_source(path, allow_empty=False)  # a mistyped folder is refused, not shown empty
    if export_to is not None:
        count = export_html(path, export_to)
        click.echo(f"wrote {export_to} ({count} trace(s))")
        return
    app = create_app(path)
    sock = bind(HOST, port)
    address = url(sock) + "/"

    def ready() -> None:
        click.echo(f"longread view: {address}  (Ctrl-C stops)")
        if not no_browser:
            webbrowser.open(address)

    # serve() returns on Ctrl-C or SIGTERM; a KeyboardInterrupt is a Ctrl-C that came before
    # the server's own handlers were in place. Stopping is no error.
    with contextlib.suppress(KeyboardInterrupt):
        serve(app, sock, ready)
