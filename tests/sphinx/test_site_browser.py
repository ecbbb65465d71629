"""The built site, opened in headless Chromium and checked through the browser's DOM.

Each chapter page must show its code, and every bench table and plot that its stored outputs hold (plots loaded,
with a non-zero size); the Results page must show a table for every GPU in ``results/``. A screenshot of chapter
01's page is kept as a test artifact (``$LABMAGIC_ARTIFACTS``, default ``_build/test-artifacts/``).
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import threading
from pathlib import Path

import pytest
from sitebuild import CHAPTERS, ROOT, build_site, contains, signature_lines

pytestmark = pytest.mark.slow

ARTIFACTS = Path(os.environ.get("LABMAGIC_ARTIFACTS", ROOT / "_build" / "test-artifacts"))

#: Every <img> on the page, forced to load, with its decoded size.
IMAGES_JS = """(async () => {
  const imgs = [...document.querySelectorAll(SELECTOR)];
  await Promise.all(imgs.map(i => { i.loading = 'eager'; return i.decode().catch(() => null); }));
  return imgs.map(i => ({src: i.getAttribute('src'), width: i.naturalWidth, height: i.naturalHeight}));
})()"""


@pytest.fixture(scope="module")
def served_site(tmp_path_factory):
    """The repository's book, built, and served over HTTP on the loopback interface."""
    site = build_site(ROOT, tmp_path_factory.mktemp("book"))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args, **kwargs: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _stored_outputs(chapter: Path) -> tuple[int, int]:
    """(HTML tables, PNG images) among the chapter's stored outputs: what its page must show."""
    nb = json.loads(chapter.read_text(encoding="utf-8"))
    tables = images = 0
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            html = "".join(data.get("text/html", ""))
            tables += html.count("<table")
            images += "image/png" in data or html.count("<img")
    return tables, images


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_chapter_page_shows_code_tables_and_plots(browser, served_site, chapter):
    page = browser.page(f"{served_site}/book/{chapter.stem}.html")
    code = page.evaluate("[...document.querySelectorAll('.cell_input pre, div.highlight pre')]"
                         ".map(p => p.innerText).join('\\n')") or ""
    missing = [line for line in signature_lines(chapter) if not contains(code, line)]
    assert not missing, f"code missing from {chapter.stem}'s page: {missing[:3]}"

    tables, images = _stored_outputs(chapter)
    shown_tables = page.evaluate("document.querySelectorAll('.cell_output table').length")
    assert shown_tables >= tables, f"{chapter.stem}: {tables} stored output tables, {shown_tables} on the page"
    shown = page.evaluate(IMAGES_JS.replace("SELECTOR", "'.cell_output img'"))
    assert len(shown) >= images, f"{chapter.stem}: {images} stored plots, {len(shown)} on the page"
    broken = [img["src"] for img in shown if img["width"] == 0 or img["height"] == 0]
    assert not broken, f"{chapter.stem}: images that did not load: {broken}"

    if chapter.stem.startswith("01_"):
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / f"{chapter.stem}.png"
        data = page.screenshot(shot)
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
        print(f"screenshot: {shot}")


def test_results_page_shows_a_table_for_every_gpu(browser, served_site):
    gpus = sorted({p.parent.parent.name for p in ROOT.glob("results/*/bench/*.csv")})
    page = browser.page(f"{served_site}/book/results.html")
    assert page.evaluate("document.querySelector('h1').innerText").startswith("Results")
    shown = page.evaluate("Object.fromEntries([...document.querySelectorAll('.lab-gpu')].map(d => "
                          "[[...d.classList].find(c => c.startsWith('lab-gpu-')).slice(8), "
                          "d.querySelectorAll('table').length]))")
    for gpu in gpus:
        assert shown.get(gpu, 0) >= 1, f"no results table for {gpu} on the Results page"
    if not gpus:
        assert "No results yet" in page.evaluate("document.body.innerText")
    broken = [img["src"] for img in page.evaluate(IMAGES_JS.replace("SELECTOR", "'article img'"))
              if img["width"] == 0]
    assert not broken, f"plots that did not load on the Results page: {broken}"
