"""The built site read the way a reader sees it: opened from disk in headless Chromium with the network switched off.

Formulas render from the MathJax bundled into ``_static/mathjax`` (no CDN); chapter titles carry their number once;
a wide window shows one search box; the ``%bench`` and ``%ncu`` tables are padded, keep each value on one line, and
scroll inside the text column rather than running past it; no page shows a path of the machine that built the site
or ran its chapters.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sitebuild import CHAPTERS, ROOT, build_site

pytestmark = pytest.mark.slow

WIDE = 1400

#: Resolves once MathJax has typeset the page (or at once when the page loaded no MathJax); then the math counts.
MATH_JS = """(async () => {
  const startup = window.MathJax && window.MathJax.startup;
  if (startup && startup.promise) await startup.promise;
  const math = [...document.querySelectorAll('article .math')];
  return {math: math.length,
          rendered: math.filter(m => m.querySelector('mjx-container')).length,
          raw: math.filter(m => /\\\\[(\\[]/.test(m.innerText)).map(m => m.innerText.slice(0, 60)),
          mathjax: Boolean(startup)};
})()"""

#: Every resource the page asked for, as (scheme, url): nothing may come from http(s).
RESOURCES_JS = "performance.getEntriesByType('resource').map(e => e.name)"

#: Search boxes a reader can see (the theme's search buttons and fields with a non-empty box).
SEARCH_JS = """[...document.querySelectorAll('.search-button-field, .search-button, input[type=search]')]
  .filter(e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0
                 && getComputedStyle(e).visibility !== 'hidden'; })
  .map(e => e.className)"""

#: For each %bench / %ncu table: its cells' padding and wrapping, and where its last column ends once its scroll
#: container (if any) is scrolled to the end, against the right edge of the text column.
TABLES_JS = """(() => {
  const article = document.querySelector('article.bd-article');
  const a = article.getBoundingClientRect();
  const columnRight = a.right - parseFloat(getComputedStyle(article).paddingRight);
  // The folded 'all columns' tables are measured open, as a reader who unfolds them sees them.
  document.querySelectorAll('.labmagic-bench details').forEach(d => { d.open = true; });
  return [...document.querySelectorAll('.labmagic-bench table, .labmagic-ncu table')].map(t => {
    const cells = [...t.querySelectorAll('td')];
    const styles = cells.map(c => getComputedStyle(c));
    let box = t.parentElement;
    while (box && box !== article && !['auto', 'scroll'].includes(getComputedStyle(box).overflowX)) {
      box = box.parentElement;
    }
    const scroller = box && box !== article ? box : null;
    if (scroller) scroller.scrollLeft = scroller.scrollWidth;
    const last = t.querySelector('tr').lastElementChild.getBoundingClientRect();
    const edge = scroller ? scroller.getBoundingClientRect().right : columnRight;
    return {kind: t.closest('.labmagic-bench') ? 'bench' : 'ncu',
            minPadding: Math.min(...styles.map(s => Math.min(parseFloat(s.paddingLeft), parseFloat(s.paddingRight)))),
            wrapping: styles.filter(s => s.whiteSpace !== 'nowrap').length,
            tableRight: t.getBoundingClientRect().right, columnRight,
            scroller: scroller ? {right: edge, scrollWidth: scroller.scrollWidth, clientWidth: scroller.clientWidth}
                               : null,
            lastRight: last.right, visibleRight: edge};
  });
})()"""


#: A path of a machine: an absolute path under a root that holds installations, homes or scratch space (not inside a
#: URL or a relative link: no letter, digit, dot, slash or colon right before it), or a Python installation folder.
HOST_PATH = re.compile(r"(?<![\w.:/~-])/(?:home|root|usr|opt|tmp|var|work|mnt|srv|scratch|Users|private|nix|data)/"
                       r"[^\s\"'<>]*|\b(?:site|dist)-packages\b|\b[A-Z]:\\\\?(?:Users|Program Files)")
#: Every file of the site a reader can open that holds text from the chapters: pages, their sources, the search index
#: (the theme's own assets under _static/ are left out).
PUBLISHED_TEXT = ("*.html", "*.ipynb", "*.md", "*.txt", "*.js")


def host_paths(site: Path, also: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """file under the site -> the host paths found in it (and any of the paths ``also`` names)."""
    found = {}
    for pattern in PUBLISHED_TEXT:
        for path in site.rglob(pattern):
            if "_static" in path.relative_to(site).parts:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            hits = sorted({m.group(0)[:120] for m in HOST_PATH.finditer(text)} | {p for p in also if p in text})
            if hits:
                found[path.relative_to(site).as_posix()] = hits
    return found


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The repository's book, built (the same cached build that the other site tests read)."""
    return build_site(ROOT, tmp_path_factory.mktemp("book"))


def _offline_page(browser, path, width: int | None = None):
    """``path`` of the built site opened as a file:// page with the browser's network switched off."""
    page = browser.page("about:blank")
    browser.send("Network.enable", session=page.session)
    browser.send("Network.emulateNetworkConditions",
                 {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1},
                 session=page.session)
    if width:
        browser.send("Emulation.setDeviceMetricsOverride",
                     {"width": width, "height": browser.height, "deviceScaleFactor": 1, "mobile": False},
                     session=page.session)
    page.goto(path.resolve().as_uri())
    return page


def _has_math(chapter) -> bool:
    return bool(re.search(r"\$[^$\s][^$]*\$", chapter.read_text(encoding="utf-8")))


MATH_CHAPTERS = [c for c in CHAPTERS if _has_math(c)]


def test_some_chapter_has_math():
    assert MATH_CHAPTERS, "no chapter holds a $...$ formula: the MathJax test below would check nothing"


@pytest.mark.parametrize("chapter", MATH_CHAPTERS, ids=[c.stem for c in MATH_CHAPTERS])
def test_formulas_render_offline_from_the_bundled_mathjax(browser, site, chapter):
    page = _offline_page(browser, site / "book" / f"{chapter.stem}.html")
    math = page.evaluate(MATH_JS)
    assert math["mathjax"], f"{chapter.stem}: MathJax did not load with the network off"
    assert math["math"] > 0, f"{chapter.stem}: no formula on the page, though the notebook has $...$"
    assert math["rendered"] == math["math"], f"{chapter.stem}: {math['math'] - math['rendered']} formulas unrendered"
    assert not math["raw"], f"{chapter.stem}: raw TeX on the page: {math['raw'][:3]}"
    remote = [url for url in page.evaluate(RESOURCES_JS) if url.startswith(("http:", "https:"))]
    assert not remote, f"{chapter.stem} asked the network for {remote[:3]}"


def test_built_pages_reference_no_remote_script_or_stylesheet(site):
    remote = re.compile(r"<(?:script|link)\b[^>]*\b(?:src|href)=[\"']?(?:https?:)?//", re.IGNORECASE)
    pages = sorted(site.rglob("*.html"))
    assert any((site / "_static" / "mathjax").glob("tex-*.js")), "no MathJax bundled into _static/mathjax"
    offenders = [str(p.relative_to(site)) for p in pages if remote.search(p.read_text(encoding="utf-8"))]
    assert pages and not offenders, f"pages loading a script or stylesheet from the network: {offenders[:5]}"


def test_no_published_page_shows_a_path_of_a_machine(site):
    """Warnings, errors and provenance reach the site without the paths of the machine that ran the chapter (an
    executed notebook's stderr) or built the book."""
    found = host_paths(site, also=(str(ROOT),))
    assert not found, "host paths on the site (re-execute those chapters): " + "; ".join(
        f"{name}: {', '.join(hits[:2])}" for name, hits in sorted(found.items()))


def test_the_host_path_check_finds_what_python_prints(tmp_path):
    """The check above catches a warning as Python prints it, and passes links, URLs and relative paths."""
    page = tmp_path / "_build" / "html" / "page.html"
    page.parent.mkdir(parents=True)
    page.write_text('<a href="../_static/x.css">x</a> <a href="https://example.org/home/usr/x">y</a> book/01.ipynb')
    assert host_paths(page.parent) == {}
    warning = "/opt/torch/.venv/lib/python3.12/site-packages/torch/profiler/profiler.py:224: UserWarning: x"
    page.write_text(f"<pre>{warning}</pre>")
    assert list(host_paths(page.parent)) == ["page.html"]
    page.write_text("<pre>error in /srv/checkout/results/x.json: y</pre>")
    assert list(host_paths(page.parent)) == ["page.html"]
    page.write_text("<pre>error in C:/builds/kl/results/x.json: y</pre>")
    assert host_paths(page.parent, also=("C:/builds/kl",)) == {"page.html": ["C:/builds/kl"]}


def test_chapter_titles_carry_their_number_once(browser, site):
    href = f"{CHAPTERS[0].stem}.html"
    # The sidebar as seen from another page (on the chapter's own page its entry links to "#").
    entry = _offline_page(browser, site / "book" / "results.html", WIDE).evaluate(
        f"[...document.querySelectorAll('.bd-sidebar-primary a')]"
        f".filter(a => a.getAttribute('href').endsWith('{href}')).map(a => a.innerText.trim())")
    title = _offline_page(browser, site / "book" / href, WIDE).evaluate(
        "document.querySelector('article h1').innerText.trim()")
    number = CHAPTERS[0].stem[:2]
    assert entry, f"no sidebar entry links to {href}"
    for text in (*entry, title):
        assert text.startswith(f"{number} ·"), f"title not led by its own number {number}: {text!r}"
        assert not re.match(r"\d+(\.\d+)*\.\s", text), f"title numbered twice: {text!r}"


def test_one_search_box_at_a_wide_window(browser, site):
    for name in (f"book/{CHAPTERS[0].stem}.html", "book/results.html"):
        shown = _offline_page(browser, site / name, WIDE).evaluate(SEARCH_JS)
        assert len(shown) == 1, f"{name} at {WIDE} px shows {len(shown)} search boxes: {shown}"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_bench_and_ncu_tables_are_padded_and_stay_in_the_column(browser, site, chapter):
    tables = _offline_page(browser, site / "book" / f"{chapter.stem}.html", WIDE).evaluate(TABLES_JS)
    if chapter.stem.startswith("01_"):
        assert {t["kind"] for t in tables} == {"bench", "ncu"}, "chapter 01 stores both %bench and %ncu tables"
    for i, t in enumerate(tables):
        where = f"{chapter.stem}, {t['kind']} table {i}"
        assert t["minPadding"] >= 4, f"{where}: cells padded only {t['minPadding']} px"
        assert t["wrapping"] == 0, f"{where}: {t['wrapping']} cells may break a value across lines"
        scroller = t["scroller"]
        if scroller is None:
            assert t["tableRight"] <= t["columnRight"] + 1, f"{where} runs past the text column: {t}"
            continue
        assert scroller["right"] <= t["columnRight"] + 1, f"{where}: its scroll box runs past the text column: {t}"
        assert t["lastRight"] <= t["visibleRight"] + 1, f"{where}: last column out of reach even scrolled: {t}"


#: Each table of the page that a reader sees without unfolding anything: its right edge against the text column's,
#: its header row and its body rows' cells as text.
VISIBLE_TABLES_JS = """(() => {
  const article = document.querySelector('article.bd-article');
  const a = article.getBoundingClientRect();
  const columnRight = a.right - parseFloat(getComputedStyle(article).paddingRight);
  return [...article.querySelectorAll('table')].filter(t => !t.closest('details:not([open])')).map(t => ({
    right: t.getBoundingClientRect().right, columnRight,
    head: [...t.querySelectorAll('thead th')].map(c => c.innerText.trim()),
    rows: [...t.querySelectorAll('tbody tr')].map(r => [...r.children].map(c => c.innerText.trim())),
    links: [...t.querySelectorAll('tbody a')].map(l => l.getAttribute('href'))}));
})()"""


def test_the_front_page_leads_with_the_books_results(browser, site):
    """The first table of the front page is the headline: a row per chapter and GPU with results (the reference
    GPU's first), each naming the book's kernel, its figure and what it is compared with; then what every chapter
    teaches. Both fit the column."""
    tables = _offline_page(browser, site / "book" / "intro.html", WIDE).evaluate(VISIBLE_TABLES_JS)
    assert len(tables) >= 2, "the front page has no headline and chapter tables"
    numbers, teaches = tables[0], tables[1]
    assert numbers["head"][:4] == ["chapter", "best kernel", "figure", "against"]
    measured = sorted({p.stem for p in ROOT.glob("results/*/bench/[0-9][0-9]_*.csv")})
    assert list(dict.fromkeys(row[0][:2] for row in numbers["rows"])) == [c[:2] for c in measured]
    gpus = {slug.name for slug in ROOT.glob("results/*") if list(slug.glob("bench/[0-9][0-9]_*.csv"))}
    assert len(numbers["rows"]) <= len(measured) * len(gpus)  # each chapter once a GPU at most
    for row in numbers["rows"]:
        assert re.fullmatch(r"[\d,.]+\s(GB|TFLOP|TOP)/s", row[2]), row
        assert re.match(r"\d\.\d\dx \S+|\d+% of copy", row[3]), row
        assert row[1] not in ("torch", "sdpa_cudnn", "sdpa_flash", "torch_int_mm"), f"a library kernel as best: {row}"
    assert [row[0][:2] for row in teaches["rows"]] == [c.stem[:2] for c in CHAPTERS]
    assert all(row[1] and row[1] != "-" for row in teaches["rows"]), "a chapter without its one line"
    assert all(href.endswith(f"{c.stem}.html") for href, c in zip(teaches["links"], CHAPTERS, strict=True))
    for table in tables:
        assert table["right"] <= table["columnRight"] + 1, f"a front-page table runs past the column: {table['head']}"


def test_results_tables_fit_the_column_without_scrolling(browser, site):
    """At 1400 px every Results table a reader sees unfolded fits the text column: variant, time, throughput, % of
    ceiling, vs reference and notes; the other columns and shapes are folded."""
    tables = _offline_page(browser, site / "book" / "results.html", WIDE).evaluate(VISIBLE_TABLES_JS)
    assert tables
    wide = [(t["head"], t["rows"][:3], round(t["right"] - t["columnRight"])) for t in tables
            if t["right"] > t["columnRight"] + 1]
    assert not wide, f"Results tables that need sideways scrolling at {WIDE} px (head, first rows, px over): {wide[:3]}"
    bench = [t for t in tables if t["head"] and t["head"][0] == "variant" and "notes" in t["head"]]
    assert bench and all(len(t["head"]) == 6 for t in bench)
