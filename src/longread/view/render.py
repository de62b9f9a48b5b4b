"""Pages as HTML: one Jinja environment (autoescaped: every text from a document or a model
is escaped) shared by the app and the export, which differ only in how pages link and
whether the CSS and JavaScript are linked or inlined."""

from __future__ import annotations

import importlib.resources
import json
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

ASSETS = ("view.css", "view.js")


class _Links:
    def step(self, anchor: str, number: int) -> str:
        """A call on a trace page (``anchor`` tells the traces of an export apart)."""
        return f"#{anchor}step-{number}"


@dataclass(frozen=True)
class AppLinks(_Links):
    """Links between the app's pages, relative to the page (``root`` leads back to the app's
    root), so the app works wherever it is mounted."""

    root: str = ""

    def index(self) -> str:
        return self.root or "./"

    def trace(self, name: str) -> str:
        return f"{self.root}traces/{quote(name)}"

    def raw(self, name: str) -> str | None:
        return f"{self.root}raw/{quote(name)}"


@dataclass(frozen=True)
class ExportLinks(_Links):
    """Links inside one exported file: every trace is a section, shown when it is the
    fragment's target."""

    anchors: dict[str, str]  # trace name -> section id

    def index(self) -> str:
        return "#"

    def trace(self, name: str) -> str:
        return f"#{self.anchors.get(name, 'index')}"

    def raw(self, name: str) -> str | None:
        return None  # the export embeds the trace's JSON instead


@cache
def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("longread.view", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        seconds=_seconds,
        count=_count,
        flag_label=_flag_label,
        short=_short,
        pretty=_pretty,
        json_script=json_script,
    )
    return env


def render(template: str, *, inline: bool, **context: Any) -> str:
    """Template ``template`` as a page; ``inline`` puts the CSS and JavaScript in the page."""
    assets = {name.replace(".", "_"): Markup(asset(name)) for name in ASSETS} if inline else {}
    return environment().get_template(template).render(inline=inline, assets=assets, **context)


@cache
def asset(name: str) -> str:
    """A static file shipped with the package (package data, no build step)."""
    return (importlib.resources.files("longread.view") / "static" / name).read_text("utf-8")


def json_script(data: Any) -> Markup:
    """``data`` as JSON safe inside ``<script type="application/json">``: ``<``, ``>`` and
    ``&`` as ``\\u003c``-style escapes, so no text in it can close the script element."""
    text = json.dumps(data, ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup(text)


def _seconds(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "-"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 1000 else f"{value:,.0f}"


def _count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "-" if value is None else str(value)


def _pretty(data: Any) -> str:
    """Indented JSON for people (escaped like any text when the page is rendered)."""
    return json.dumps(data, indent=2, ensure_ascii=False)


def _flag_label(flag: str) -> str:
    return flag.replace("_", " ")


def _short(text: Any, limit: int = 120) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
