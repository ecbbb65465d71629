"""The book's Methods part, built: a reader finds how to read a roofline, time a kernel and add a chapter from the
site's navigation alone, and the pages' tables and figures are the repository's results, drawn at build time."""

from __future__ import annotations

import json
import re

import pytest
from sitebuild import ROOT, build_site, page_text

from labmagic.benchmark.ncu_check import AGREES, read_check_csv
from labmagic.compiler.backend import refusal
from labmagic.display.methods_pages import EXAMPLE_HIP

pytestmark = pytest.mark.slow

#: The Methods part, in the order of the table of contents: page -> its title in the navigation.
METHODS = {"roofline": "Reading the roofline", "timing": "Timing a kernel", "profiling": "Profiling and sanitizing",
           "adding_a_chapter": "Adding a chapter", "rocm": "Porting to ROCm"}
H200 = ROOT / "results" / "nvidia-h200"

#: The primary sidebar as a reader sees it: captions and links, in order, with where each link goes.
SIDEBAR_JS = """[...document.querySelectorAll('.bd-sidebar-primary p.caption, .bd-sidebar-primary a')]
  .filter(e => e.getBoundingClientRect().width > 0)
  .map(e => ({text: e.innerText.trim(), href: e.tagName === 'A' ? e.href : null}))"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The repository's book, built (the same cached build that the other site tests read)."""
    return build_site(ROOT, tmp_path_factory.mktemp("book"))


def _html(site, name):
    return (site / "book" / "methods" / f"{name}.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("page", ["intro", "01_vector_add", "results"])
def test_every_page_lists_the_methods_part_in_its_navigation(site, page):
    html = (site / "book" / f"{page}.html").read_text(encoding="utf-8")
    assert '<span class="caption-text">Methods</span>' in html
    links = re.findall(r'<a class="reference internal" href="([^"#]*)">([^<]+)</a>', html)
    for name, title in METHODS.items():
        assert any(href.endswith(f"methods/{name}.html") and text.strip() == title for href, text in links), \
            f"{page}: no navigation link to {title!r}"


def test_a_reader_reaches_timing_roofline_and_adding_a_chapter_from_the_home_page(browser, site):
    home = browser.page("about:blank")
    browser.send("Emulation.setDeviceMetricsOverride", {"width": 1400, "height": browser.height,
                                                        "deviceScaleFactor": 1, "mobile": False},
                 session=home.session)
    home.goto((site / "book" / "intro.html").resolve().as_uri())  # index.html redirects here
    entries = home.evaluate(SIDEBAR_JS)
    texts = [e["text"] for e in entries]
    assert "Methods" in texts, texts
    after = texts[texts.index("Methods") + 1:texts.index("Methods") + 1 + len(METHODS)]
    assert after == list(METHODS.values())
    for title in ("Timing a kernel", "Reading the roofline", "Adding a chapter"):
        href = next(e["href"] for e in entries if e["text"] == title)
        page = browser.page("about:blank")
        page.goto(href)
        assert page.evaluate("document.querySelector('article h1').innerText.trim()") == title


def test_the_roofline_page_shows_the_measured_ceilings_the_chapter_chart_and_the_books_roofline(site):
    html = _html(site, "roofline")
    text = page_text(site / "book" / "methods" / "roofline.html")
    ceilings = json.loads((H200 / "ceilings.json").read_text())
    for key in ("copy_gbps", "peak_gbps"):
        assert f"{ceilings[key]:,.0f}" in text
    for dtype, tflops in ceilings["matmul_tflops"].items():
        shown = f"{tflops:,.0f}" if tflops >= 1000 else f"{tflops:.4g}"
        assert f"matmul {dtype} (cuBLAS, n x n x n), TFLOP/s {shown}" in text
    assert len(re.findall(r'<img [^>]*src="data:image/png;base64,', html)) == 1  # the book's roofline
    chart = re.search(r'<img [^>]*src="([^"]*01_vector_add\.png)"', html)
    assert chart and (site / "book" / "methods" / chart.group(1)).resolve().is_file()


def test_the_timing_page_shows_the_nsight_cross_check_of_results(site):
    html = _html(site, "timing")
    rows = read_check_csv(H200 / "nsight_check" / "01_vector_add.csv")
    agree = sum(r["verdict"] == AGREES for r in rows)
    assert f"{len(rows)} rows from 01_vector_add: {agree} agree within 5%" in page_text(
        site / "book" / "methods" / "timing.html")
    assert len(re.findall(r'<img [^>]*src="data:image/png;base64,', html)) == 1


def test_the_rocm_page_quotes_the_backends_refusal_and_counts_each_chapters_cuda_only_code(site):
    html = _html(site, "rocm")
    assert refusal(EXAMPLE_HIP) in page_text(site / "book" / "methods" / "rocm.html")
    assert re.search(r'<pre>.*BackendUnavailable: this torch is a ROCm build', html, re.S)
    assert 'href="../01_vector_add.html"' in html


@pytest.mark.parametrize("name", list(METHODS))
def test_no_methods_page_keeps_an_unfilled_part_or_an_error(site, name):
    html = _html(site, name)
    assert "labmagic-generated" not in html and "could not be generated" not in html
