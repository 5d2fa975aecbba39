"""The reading room in a real headless browser (Debian's Chromium driven by Selenium, never a
downloaded browser), against `bookrag mcp --http` serving the fixture corpus: a citation URL
highlights its paragraph, a summary sentence's anchor lands on the paragraphs it cites, a search
leads to a hit in its chapter, a note call and its note link both ways, a bad path is a 404 page.

Outside CI a machine without chromium and chromium-driver skips these tests; in CI (CI=true),
which installs them (.ci/run), their absence is a failure. BOOKRAG_TEST_CHROMIUM and
BOOKRAG_TEST_CHROMEDRIVER name other binaries (a path that does not exist shows what a machine
without them does). SAVE_FIGURES=docs/figures also writes
the screenshots of README's reading-room section there."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bookrag.links import citation_url
from tests.mcp_server.conftest import NOTED
from tests.mcp_server.test_server import start_http, stop_http

CHROMIUM = os.environ.get("BOOKRAG_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("BOOKRAG_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
INSTALL = "apt-get install chromium chromium-driver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1000,900",
)
MARK = "rgb(255, 240, 168)"  # room.css's --mark: a highlighted paragraph's background
BOOK = "traite-des-echanges"
BAKER = f"corpus/{BOOK}/premiere-partie/chapitre-01-le-boulanger/source.md"


def _missing_browser() -> str | None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if missing:
        return f"{' and '.join(missing)} missing: {INSTALL}"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is in the test extra: pip install -e '.[test]'"
    return None


def require_browser() -> None:
    """Fail in CI, skip elsewhere, when Chromium, its driver or Selenium is missing."""
    reason = _missing_browser()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the browser tests must run in CI: {reason}")
        pytest.skip(reason)


def test_a_missing_browser_fails_in_ci_and_skips_elsewhere(monkeypatch):
    # whatever this machine has installed: both paths are set, one missing, one an executable
    here = sys.modules[__name__]
    monkeypatch.setattr(here, "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setattr(here, "CHROMEDRIVER", sys.executable)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as failed:
        require_browser()
    assert str(failed.value) == f"the browser tests must run in CI: /nonexistent/chromium missing: {INSTALL}"
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception) as skipped:
        require_browser()
    assert str(skipped.value) == f"/nonexistent/chromium missing: {INSTALL}"
    # neither installed: the one line names both and how to install them
    monkeypatch.setattr(here, "CHROMEDRIVER", "/nonexistent/chromedriver")
    with pytest.raises(pytest.skip.Exception) as skipped:
        require_browser()
    assert str(skipped.value) == f"/nonexistent/chromium and /nonexistent/chromedriver missing: {INSTALL}"


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="bookrag-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def base(room_url: str, room_home: Path) -> Iterator[str]:
    """`bookrag mcp --http` on a free port, serving the reading room of the fixture corpus."""
    proc, url = start_http(room_url, room_home)
    yield url
    stop_http(proc)


def background(driver: Any, element_id: str) -> str:
    return driver.execute_script(
        "return getComputedStyle(document.getElementById(arguments[0])).backgroundColor", element_id
    )


def target(driver: Any) -> str | None:
    return driver.execute_script("const t = document.querySelector(':target'); return t && t.id")


def highlighted(driver: Any) -> list[str]:
    return [
        p.get_attribute("id")
        for p in driver.find_elements("css selector", ".para")
        if background(driver, p.get_attribute("id")) == MARK
    ]


def wait_for(driver: Any, selector: str, seconds: float = 60) -> Any:
    """The element once the page shows it: a form's submit returns before the next page has loaded, and the
    server's first search loads the embedding model."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, seconds).until(lambda d: d.find_element("css selector", selector))
    except TimeoutException:
        body = driver.find_element("tag name", "body").text[:500]
        pytest.fail(f"no {selector!r} on {driver.current_url} after {seconds:.0f} s; the page says: {body!r}")


def test_a_citation_url_highlights_its_paragraph(browser, base):
    browser.get(citation_url(base, BAKER, 2))
    assert target(browser) == "p2"
    assert highlighted(browser) == ["p2"]
    assert browser.find_element("id", "p2").text.startswith("§2 Autrefois chaque famille cuisait")


def test_a_summary_sentence_leads_to_the_paragraphs_it_cites(browser, base):
    browser.get(citation_url(base, BAKER))
    assert highlighted(browser) == []
    anchor = browser.find_element("css selector", "#s-0-0 a.anchor")
    assert anchor.text == "[§2–3]"
    anchor.click()  # its ?hl= loads a new page
    wait_for(browser, "#p3.hl")
    assert browser.current_url == citation_url(base, BAKER, [2, 3])
    assert target(browser) == "p2" and highlighted(browser) == ["p2", "p3"]
    # and back: each cited paragraph links to the sentence citing it
    browser.find_element("css selector", "#p3 a.cited-by").click()
    assert target(browser) == "s-0-0" and background(browser, "s-0-0") == MARK


def test_a_search_leads_to_its_hit_in_context(browser, base):
    browser.get(f"{base}/search")
    box = browser.find_element("css selector", "form.search input[name=q]")
    box.send_keys("le meunier vend la farine")
    box.submit()
    first = wait_for(browser, ".hit a.open, p.error")
    assert first.tag_name == "a", f"the search page says: {first.text!r}"
    # led by the scholarly citation (the file and its § are a detail below)
    assert first.text == "bookrag, Petit traité des échanges (2026), 1re partie, ch. I, « Le boulanger », § 3"
    first.click()
    wait_for(browser, "#p3")
    assert browser.current_url == citation_url(base, BAKER, 3)
    assert target(browser) == "p3" and highlighted(browser) == ["p3"]


def test_a_note_call_and_its_note_link_both_ways(browser, base):
    browser.get(f"{base}/books/{BOOK}/{NOTED}")
    browser.find_element("css selector", "#p2 .note-call a").click()
    assert target(browser) == "fn-1" and highlighted(browser) == ["p4"]  # the note's paragraph
    browser.find_element("id", "fn-1").click()
    assert target(browser) == "fnref-1" and highlighted(browser) == []
    assert background(browser, "fnref-1") == MARK


def test_a_bad_path_is_a_404_page(browser, base):
    browser.get(f"{base}/books/{BOOK}/premiere-partie/chapitre-09")
    assert browser.title == "Not found · bookrag reading room"
    assert browser.find_element("css selector", "p.error").text == (
        "no chapter or part 'premiere-partie/chapitre-09' in Petit traité des échanges; its table of contents is at "
        f"/books/{BOOK}"
    )


def test_screenshots(browser, base, tmp_path):
    """The library, a chapter with a highlighted citation, a search: README's figures."""
    out = Path(os.environ.get("SAVE_FIGURES") or tmp_path)
    pages = {
        "reading-room-library.png": f"{base}/",
        "reading-room-chapter.png": citation_url(base, BAKER, [2, 3]),
        "reading-room-search.png": f"{base}/search?q=le+prix+du+pain",
    }
    for name, url in pages.items():
        browser.get(url)
        assert browser.save_screenshot(str(out / name))
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_pasted_answer_shows_each_quote_with_its_verdict_and_link(browser, base):
    browser.get(f"{base}/verify")
    box = browser.find_element("css selector", "form.verify textarea[name=answer]")
    box.send_keys(
        "« Autrefois chaque famille cuisait elle-même sa galette » (corpus/traite-des-echanges/premiere-partie/"
        "chapitre-01-le-boulanger/source.md §1)."
    )
    browser.find_element("css selector", "form.verify button").click()
    quote = wait_for(browser, "li.quote, p.error")
    assert quote.tag_name == "li", f"the verify page says: {quote.text!r}"
    assert quote.get_attribute("class") == "quote verdict-elsewhere"
    assert quote.find_element("css selector", ".verdict strong").text == "elsewhere"
    quote.find_element("css selector", "a.open").click()
    wait_for(browser, "#p2")
    assert browser.current_url == citation_url(base, BAKER, 2)
    assert target(browser) == "p2" and highlighted(browser) == ["p2"]
