"""Values from results/ CSVs are untrusted text: wherever one lands on the Results page or in the README's headline
table, MyST (and GitHub's Markdown) must read it as text, never as HTML, a role, a directive, a link or a new line.

Each check renders the place twice, once with an ordinary value and once with a hostile one, parses both with the
parser the book uses, and asserts the two have the same structure (the hostile value changed only text) and that
the hostile value is there, as text.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML

pytest.importorskip("myst_parser", reason="MyST's own parser comes with the [book] extra")
from myst_parser.config.main import MdParserConfig  # noqa: E402
from myst_parser.parsers.mdit import create_md_parser  # noqa: E402

from labmagic.display import results_page  # noqa: E402
from labmagic.display.markdown import Markup, md_table, text  # noqa: E402
from labmagic.errors import LabError  # noqa: E402
from labmagic.store import catalog  # noqa: E402
from labmagic.store.bench_csv import write_rows  # noqa: E402

HOSTILE = {
    "script": "<script>document.title='pwned'</script>",
    "img": '<img src=x onerror="window.pwned=1">',
    "literalinclude": "x\n```{literalinclude} /etc/hostname\n```\n",
    "colon-directive": "x\n:::{literalinclude} /etc/hostname\n:::",
    "role": "{ref}`results-gpu-cpu`",
    "pipe": "a | b",
    "markdown": "[link](javascript:alert(1)) ![i](x.png) **b** _i_ *e* ~~s~~ $x$ {{ sub }} <http://x> &amp; \\*",
    "leading": "# not a heading",
    "target": "(results-gpu-cpu)=",
}
PLAIN = "plain value"

_MYST = create_md_parser(MdParserConfig(enable_extensions={"colon_fence", "dollarmath", "substitution"}),
                         RendererHTML)
_GFM = MarkdownIt("commonmark").enable(["table", "strikethrough"])  # how GitHub reads the README, near enough


def _tokens(markdown: str, parser=_MYST):
    """Every token of ``markdown``, inline ones included, and the tokens of each directive's body."""
    for token in parser.parse(markdown):
        yield token
        yield from token.children or []
        if token.type in ("fence", "colon_fence") and token.info.startswith("{"):
            yield from _tokens(token.content, parser)


def _structure(markdown: str, parser=_MYST) -> list[tuple]:
    return [(t.type, t.tag, t.info if t.type != "text" else "", t.meta.get("name")) for t in _tokens(markdown, parser)]


def _texts(markdown: str, parser=_MYST) -> list[str]:
    return [t.content for t in _tokens(markdown, parser) if t.type == "text"]


def assert_inert(render, hostile: str, parser=_MYST):
    """``render(value)`` with ``hostile`` parses like with an ordinary value, and shows ``hostile`` as its text."""
    plain, bad = render(PLAIN), render(hostile)
    assert _structure(bad, parser) == _structure(plain, parser), f"{hostile!r} changed the structure:\n{bad}"
    shown = " ".join(hostile.splitlines()).strip()
    assert any(shown in t for t in _texts(bad, parser)), f"{shown!r} is not text in:\n{bad}"
    assert "<script" not in bad and "<img" not in bad and "\n```{literalinclude" not in bad


@pytest.mark.parametrize("hostile", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_table_cell_and_header_is_text(hostile):
    assert_inert(lambda v: md_table(["variant", v], [["x", v], [v, "y"]]), hostile)


@pytest.mark.parametrize("hostile", HOSTILE.values(), ids=HOSTILE.keys())
def test_the_readme_headline_cells_are_text_on_github(hostile):
    assert_inert(lambda v: md_table(["chapter", "best variant"], [["01_vector_add", v]]), hostile, parser=_GFM)


def _provenance_rows(value: str) -> pd.DataFrame:
    fields = ("gpu", "driver", "cuda", "torch", "triton", "jax", "git_commit")
    return pd.DataFrame([{**{f: f"{value} {f}" for f in fields}, "timestamp": f"2026-11-29{value}"}])


@pytest.mark.parametrize("hostile", HOSTILE.values(), ids=HOSTILE.keys())
def test_the_provenance_line_is_text(hostile):
    assert_inert(lambda v: results_page.provenance(_provenance_rows(v)), hostile)


def _bench_rows(value: str) -> list[dict]:
    """Two GPUs measured the same variant from different sources: the older row is stale. ``value`` is in every
    text column the page shows (names and statuses are checked instead: see test_csv_values.py)."""
    rows = []
    for slug, when, source in (("nvidia-h200", "2026-11-29T10:00:00+00:00", "new"),
                               ("nvidia-a100", "2026-11-20T10:00:00+00:00", "old")):
        for variant, status in (("cuda_x", "ok"), ("torch", "error")):
            rows.append((slug, dict(chapter="01_vector_add", variant=variant, backend=value, shape="4096",
                                    dtype=value, status=status, ms_median=1.0, ms_min=0.9, ms_max=1.1, sol_pct=50.0,
                                    source_hash=source, gpu=value, driver=value, cuda=value, timestamp=when)))
    return rows


def _page(tmp_path, value: str) -> str:
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    (root / "book").mkdir()
    (root / "book" / "01_vector_add.ipynb").write_text('{"cells": []}')
    for slug, row in _bench_rows(value):
        write_rows(root / "results" / slug / "bench" / "01_vector_add.csv", [row])
    return results_page.render(root)


@pytest.mark.parametrize("hostile", HOSTILE.values(), ids=HOSTILE.keys())
def test_every_value_on_the_results_page_is_text(tmp_path, hostile):
    """Tables, provenance, the stale warning (its reason names the variant), the across-GPU table."""
    page = _page(tmp_path, hostile)
    assert "rows are stale (source of" in page
    assert_inert(lambda v: _page(tmp_path, v), hostile)


def test_the_stale_warning_shows_the_hostile_reason_as_text():
    """A reason names a variant (checked on read) or a sweep record's date (not checked): escaped either way."""
    reason = f"source of {HOSTILE['literalinclude']} changed since it was measured"
    page = "\n".join(results_page._stale_warning(pd.DataFrame({"stale": [reason, ""]}), "01_vector_add", "cpu"))
    warning = next(t for t in _tokens(page) if t.type == "fence" and t.info == "{warning}")
    assert "\n" not in warning.content.strip()
    shown = re.sub(r"\s+", " ", " ".join(_texts(warning.content)))
    assert "source of x ```{literalinclude} /etc/hostname ``` changed" in shown


@pytest.mark.parametrize("slug", ["nvidia h200", "x`{ref}`y", "<img src=x onerror=alert(1)>", "a\n:::{note}",
                                  "Nvidia-H200", "gpu--2", "-gpu"])
def test_a_gpu_folder_that_is_not_a_slug_is_refused(tmp_path, slug):
    """The slug names a heading, an anchor, a CSS class and a path: it is checked, not escaped."""
    path = tmp_path / "results" / slug / "bench" / "01_vector_add.csv"
    write_rows(path, [dict(chapter="01_vector_add", variant="v", backend="b", shape="1", dtype="f", status="ok")])
    with pytest.raises(LabError, match="is not a device slug") as err:
        results_page.render(tmp_path)
    assert repr(slug) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("chapter", ["01_x`{doc}`", "01_<b>", "01_a b", "01_A", "_x", "01-x", "01_x.old"])
def test_a_csv_not_named_for_a_chapter_is_refused(tmp_path, chapter):
    path = tmp_path / "results" / "nvidia-h200" / "bench" / f"{chapter}.csv"
    write_rows(path, [dict(chapter="01_vector_add", variant="v", backend="b", shape="1", dtype="f", status="ok")])
    with pytest.raises(LabError, match="is not a chapter name"):
        catalog.load(tmp_path)


def test_a_race_named_by_a_script_is_read(tmp_path):
    write_rows(tmp_path / "results" / "cpu" / "bench" / "timer_agreement.csv",
               [dict(chapter="timer_agreement", variant="v", backend="b", shape="1", dtype="f", status="ok")])
    assert list(catalog.load(tmp_path)["chapter"]) == ["timer_agreement"]


def _with_plot(tmp_path, name: str, target=None):
    bench = tmp_path / "results" / "nvidia-h200" / "bench"
    write_rows(bench / "01_vector_add.csv", [dict(chapter="01_vector_add", variant="v", backend="b", shape="1",
                                                   dtype="f", status="ok", ms_median=1.0)])
    if target is None:
        (bench / name).write_bytes(b"\x89PNG\r\n\x1a\n")
    else:
        os.symlink(target, bench / name)
    return tmp_path


@pytest.mark.parametrize("name", ["01_vector_add (x).png", "01_vector_add<img>.png", "01_vector_add`x`.png"])
def test_a_plot_with_a_crafted_name_is_refused(tmp_path, name):
    with pytest.raises(LabError, match="a plot must be a file named"):
        results_page.render(_with_plot(tmp_path, name))


def test_a_plot_that_links_out_of_results_is_refused(tmp_path):
    """A symlinked plot would copy any file of the build machine into the published site."""
    with pytest.raises(LabError, match="links out of results/"):
        results_page.render(_with_plot(tmp_path, "01_vector_add.png", target="/etc/hostname"))


def test_a_csv_that_links_out_of_results_is_refused(tmp_path):
    """Its first line would be quoted in the header error, and that error is shown on the page."""
    (tmp_path / "results" / "cpu" / "bench").mkdir(parents=True)
    os.symlink("/etc/hostname", tmp_path / "results" / "cpu" / "bench" / "01_vector_add.csv")
    with pytest.raises(LabError, match="^'results/cpu/bench/01_vector_add.csv' links out of results/"):
        catalog.load(tmp_path)


def test_a_plain_plot_is_shown(tmp_path):
    page = results_page.render(_with_plot(tmp_path, "01_vector_add.float32.png"))
    assert "![01_vector_add on nvidia-h200: 01_vector_add.float32](../results/nvidia-h200/bench/" in page


@pytest.mark.parametrize("value", ["cuda_float4", "NVIDIA H200", "580.159.04", "2026-11-29", "01_vector_add",
                                   "nvidia-h200 (268435456)", "92.2%", "4,425", "1.00x", "8192x8192x8192", "-", ""])
def test_ordinary_values_are_written_as_they_are(value):
    assert text(value) == value


def test_markup_written_by_the_page_is_kept():
    assert text(Markup("**stale**")) == "**stale**"
    assert md_table(["a"], [[Markup("{ref}`x <y>`")]]).endswith("| {ref}`x <y>` |")
