"""The viewer in a real browser: Debian's chromium, driven by Playwright, on pages served by
``longread view`` (a real uvicorn on 127.0.0.1) and on an exported file."""

from __future__ import annotations

import asyncio
import re
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

from longread.view import export_html

from .view_helpers import CHROMIUM_FLAGS, PAYLOAD, make_run_folder, served

pytestmark = pytest.mark.browser
sync_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium")
if CHROMIUM is None:  # `make test` installs it; `make test-fast` does not
    pytest.skip(
        "Debian's chromium is not installed (make test installs it)", allow_module_level=True
    )


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    yield context.new_page()
    context.close()


@pytest.fixture
def run_dir(tmp_path):
    # In a thread of its own: Playwright's sync API keeps an event loop on this one.
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, make_run_folder(tmp_path)).result()


def header(page, name: str):
    """The samples table's header cell ``name`` (the report's table has some of the names)."""
    return page.locator("table.samples thead th").filter(has_text=re.compile(f"^{name}$"))


def column(page, header: str) -> list[str]:
    """The visible cells of the samples table's column ``header``, top to bottom."""
    headers = page.locator("table.samples thead th").all_inner_texts()
    index = [h.strip(" ↕▲▼") for h in headers].index(header) + 1
    return page.locator(f"table.samples tbody tr:visible td:nth-child({index})").all_inner_texts()


def test_the_run_page_sorts_and_filters_its_samples(page, run_dir):
    with served(run_dir) as url:
        page.goto(url)
        assert page.locator("h1").inner_text() == "Run run"
        assert column(page, "sample") == ["right", "wrong", "payload", "failed", "capped"]
        assert page.locator(".filter-count").inner_text() == "5 of 5 shown"

        header(page, "prompt tokens").click()
        tokens = [int(t.replace(",", "")) for t in column(page, "prompt tokens")]
        assert tokens == sorted(tokens) and tokens[0] == 0  # the failed sample first
        header(page, "prompt tokens").click()
        assert [int(t.replace(",", "")) for t in column(page, "prompt tokens")] == sorted(
            tokens, reverse=True
        )
        header(page, "sample").click()
        assert column(page, "sample") == ["capped", "failed", "payload", "right", "wrong"]

        page.get_by_placeholder("Filter samples…").fill("felix")
        assert column(page, "sample") == ["wrong"]
        assert page.locator(".filter-count").inner_text() == "1 of 5 shown"
        page.get_by_placeholder("Filter samples…").fill("")
        page.get_by_label("Show").select_option("correct")
        assert column(page, "sample") == ["payload", "right"]
        page.get_by_label("Show").select_option("failed")
        assert column(page, "sample") == ["failed"]
        page.get_by_label("Show").select_option("flagged")
        assert column(page, "sample") == ["capped", "failed"]


def test_a_trace_page_expands_its_memory_diff(page, run_dir):
    with served(run_dir) as url:
        page.goto(url)
        page.get_by_role("link", name="wrong", exact=True).click()
        page.wait_for_url("**/traces/wrong.json")
        assert page.locator("h1").inner_text() == "Trace wrong"
        assert page.locator(".gold li").all_inner_texts() == ["Max"]
        assert page.locator(".final .answer").inner_text() == "Felix"
        assert page.locator("li.step").count() == 5

        step = page.locator("#step-2")
        diff = step.locator("details.memory .diff")
        assert not diff.is_visible()  # collapsed until asked for
        step.locator("details.memory > summary").click()
        assert diff.is_visible()
        assert diff.locator("ins").all_inner_texts() == ["Fact 3 is Kit."]
        assert [t.strip() for t in diff.locator("del").all_inner_texts()] == ["Fact 1 is Tom."]
        assert not page.locator("#step-1 details.memory .diff").is_visible()

        chunk = step.locator("details.chunk pre")
        assert not chunk.is_visible()
        step.locator("details.chunk > summary").click()
        assert "Fact 3 is Kit." in chunk.inner_text()
        # The span the memory line was aligned with is highlighted, saying which line it backs.
        mark = chunk.locator("mark.source")
        assert mark.all_inner_texts() == ["Fact 3 is Kit."]
        assert mark.is_visible()
        assert mark.get_attribute("title") == "backs the memory line: Fact 3 is Kit."

        page.get_by_role("button", name="Expand memories").click()
        assert page.locator("details.memory .diff:visible").count() == 4
        page.get_by_role("button", name="Collapse all").click()
        assert page.locator("li.step details[open]").count() == 0


def test_a_script_in_the_data_stays_text(page, run_dir):
    with served(run_dir) as url:
        for address in (url, url + "traces/payload.json"):
            page.goto(address)
            assert page.evaluate("typeof window.__pwned") == "undefined"
        assert PAYLOAD in page.locator(".question").inner_text()
        page.get_by_role("button", name="Expand memories").click()
        assert PAYLOAD in page.locator("#step-0 details.memory").inner_text()
        assert page.evaluate("typeof window.__pwned") == "undefined"


def test_the_exported_file_works_on_its_own(page, run_dir, tmp_path):
    out = tmp_path / "run.html"
    export_html(run_dir, out)
    page.goto(out.as_uri())
    index = page.locator("#index")
    assert index.is_visible()
    assert not page.locator("section.page-trace").first.is_visible()
    header(page, "calls").click()  # its script is inline
    assert column(page, "calls") == ["0", "2", "3", "4", "5"]

    page.get_by_role("link", name="wrong", exact=True).click()
    trace = page.locator("section.page-trace:target")
    assert trace.locator("h1").inner_text() == "Trace wrong"
    assert not index.is_visible()
    trace.locator("li.step").nth(2).locator("details.memory > summary").click()
    assert trace.locator("li.step").nth(2).locator("ins").inner_text() == "Fact 3 is Kit."
    page.locator("#t3-step-2 a.step-no").click()  # a link to a call keeps its trace shown
    assert page.url.endswith("#t3-step-2")
    assert page.locator("#t3-step-2").is_visible() and not index.is_visible()

    page.get_by_role("link", name="← run").click()
    assert index.is_visible()
    page.get_by_role("link", name="payload", exact=True).click()
    assert page.evaluate("typeof window.__pwned") == "undefined"
    with page.expect_download() as download:
        page.locator("section.page-trace:target button.download").click()
    assert download.value.suggested_filename == "payload.json"
