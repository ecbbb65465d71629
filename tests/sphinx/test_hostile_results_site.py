"""The Results page built by jupyter-book from CSVs that attack it, opened in headless Chromium.

CSVs come from other machines and pull requests. Script tags, event handlers, MyST directives that would copy a file
of the build machine into the site, and roles, placed in the fields the page shows, must reach the reader as text;
and a malformed CSV must fail the strict build, naming the file and line.
"""

from __future__ import annotations

import functools
import http.server
import threading
import uuid

import pytest
from sitebuild import build_site, page_text, scratch_checkout

from labmagic.cli import book
from labmagic.errors import LabError
from labmagic.store.bench_csv import write_rows

pytestmark = pytest.mark.slow

TOKEN = f"plantedsecret{uuid.uuid4().hex}"  # one word: a highlighter cannot split it into spans
SCRIPT = "<script>window.pwnedScript=1;document.title=42</script>"
IMG = "<img src=x onerror=window.pwnedImg=1;document.title=43>"
HOSTILE = {  # in the text columns the page shows (names and statuses are checked on read, not escaped)
    "backend": SCRIPT,
    "gpu": IMG,
    "driver": "x\n```{literalinclude} /secret.txt\n```\n",  # absolute: from the source folder, the checkout
    "cuda": "y\n:::{literalinclude} ../secret.txt\n:::\n",  # relative to book/results.md
    "torch": "[link](javascript:window.pwnedLink=1)",
    "triton": "{ref}`results-gpu-cpu` <b onmouseover=window.pwnedB=1>bold</b>",
}


def _rows(source: str, when: str) -> list[dict]:
    base = dict(chapter="01_vector_add", shape="4096", dtype="float32", ms_median=1.0, ms_min=0.9,
                ms_max=1.2, sol_pct=50.0, timestamp=when, **HOSTILE)
    return [dict(base, variant="cuda_x", status="ok", source_hash=source),
            dict(base, variant="torch", status="error", source_hash="same")]


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory):
    """A checkout whose two GPUs' CSVs carry the payloads (the older one stale, so the warning shows them too),
    with a planted file the directives try to publish; built strictly, served on the loopback interface."""
    root = scratch_checkout(tmp_path_factory.mktemp("hostile") / "repo")
    (root / "secret.txt").write_text(TOKEN + "\n")
    write_rows(root / "results" / "nvidia-h200" / "bench" / "01_vector_add.csv",
               _rows("new", "2026-11-29T10:00:00+00:00"))
    write_rows(root / "results" / "cpu" / "bench" / "01_vector_add.csv", _rows("old", "2026-11-20T10:00:00+00:00"))
    site = build_site(root, tmp_path_factory.mktemp("hostile-out"))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args, **kwargs: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield site, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_no_planted_file_reaches_the_site(hostile_site):
    site, _ = hostile_site
    leaked = [p for p in site.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]
    leaked += [p for p in site.rglob("*.html") if TOKEN in page_text(p)]
    assert not leaked, f"the planted file's content was published in {leaked}"
    text = page_text(site / "book" / "results.html")
    assert "```{literalinclude} /secret.txt ```" in text and ":::{literalinclude} ../secret.txt :::" in text


def test_no_payload_runs_in_the_browser(browser, hostile_site):
    _, url = hostile_site
    page = browser.page(f"{url}/book/results.html")
    page.evaluate("new Promise(done => setTimeout(done, 500))")  # let a failed image fire its handler, if any
    assert page.evaluate("document.title").startswith("Results")
    ran = page.evaluate("['pwnedScript', 'pwnedImg', 'pwnedLink', 'pwnedB'].filter(name => name in window)")
    assert ran == []
    assert page.evaluate("document.querySelectorAll('[onerror], [onmouseover], a[href^=\"javascript:\"]').length") == 0
    assert page.evaluate("[...document.scripts].filter(s => s.text.includes('pwned')).length") == 0
    assert page.evaluate("document.querySelectorAll('article b').length") == 0


def test_the_payloads_are_shown_as_text(browser, hostile_site):
    _, url = hostile_site
    page = browser.page(f"{url}/book/results.html")
    # The text columns sit in the folded table (every column): opened, as a reader opens it, they show as text.
    shown = page.evaluate("document.querySelectorAll('article details').forEach(d => d.open = true), "
                          "document.querySelector('article').innerText")
    for payload in (SCRIPT, IMG, "[link](javascript:window.pwnedLink=1)", "{ref}`results-gpu-cpu`"):
        assert payload in shown, f"{payload!r} is not on the page as text"
    assert "rows are stale (source of cuda_x changed" in shown
    tables = page.evaluate("Object.fromEntries(['nvidia-h200', 'cpu'].map(s => "
                           "[s, document.querySelectorAll(`.lab-gpu-${s} table`).length]))")
    assert tables == {"nvidia-h200": 2, "cpu": 2}  # the table that fits the page, and every column folded


def test_a_malformed_csv_fails_the_strict_build_naming_file_and_line(tmp_path):
    root = scratch_checkout(tmp_path / "repo")
    path = root / "results" / "nvidia-h200" / "bench" / "01_vector_add.csv"
    write_rows(path, [dict(chapter="01_vector_add", variant="torch", backend="torch", shape="4096", dtype="float32",
                           status="ok", ms_median=1.0)])
    with open(path, "a") as handle:
        handle.write('01_vector_add,"cuda_naive,cuda\n')
    where = "results/nvidia-h200/bench/01_vector_add.csv, line 3: not a CSV row"
    with pytest.raises(LabError, match="jupyter-book build failed") as err:
        book.build(root, tmp_path / "out", quiet=True)
    assert where in str(err.value).splitlines()[0]
    page = page_text(book.html_dir(root, tmp_path / "out") / "book" / "results.html")
    assert f"The results could not be read: {where}" in page  # the page says so too, in place of the tables


def test_an_infinite_time_fails_the_strict_build_in_one_line_and_never_reaches_the_page(tmp_path):
    """It used to end the build in Sphinx's OverflowError traceback, naming neither file nor row."""
    root = scratch_checkout(tmp_path / "repo")
    row = dict(chapter="01_vector_add", backend="torch", shape="4096", dtype="float32", status="ok", ms_median=1.0)
    path = root / "results" / "nvidia-h200" / "bench" / "01_vector_add.csv"
    write_rows(path, [dict(row, variant="torch")])
    path.write_text(path.read_text() + path.read_text().splitlines()[1].replace("torch,torch,", "cuda_inf,cuda,")
                    .replace(",ok,,,1,", ",ok,,,inf,") + "\n")
    where = "results/nvidia-h200/bench/01_vector_add.csv, line 3: ms_median is 'inf' on an ok row"
    with pytest.raises(LabError) as err:
        book.build(root, tmp_path / "out", quiet=True)
    headline = str(err.value).splitlines()[0]
    assert headline.startswith("jupyter-book build failed (status 1): ") and where in headline
    assert "Traceback" not in err.value.detail and "OverflowError" not in err.value.detail
    page = page_text(book.html_dir(root, tmp_path / "out") / "book" / "results.html")
    page = page.replace("\u2018", "'").replace("\u2019", "'")  # Sphinx's smart quotes
    assert f"The results could not be read: {where}" in page and "cuda_inf" not in page
