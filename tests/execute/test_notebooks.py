"""Chapters execute with papermill on a CPU; ``labmagic sweep`` runs, resumes and reports; the book builds.

These drive the real things: papermill and a real kernel, the sweep's own command-line entry, and jupyter-book
building the repository's book with warnings as errors.
"""

from __future__ import annotations

import json
import re

import pytest
from sitebuild import (
    BOOK,
    CHAPTERS,
    ROOT,
    build_site,
    contains,
    page_text,
    run_command,
    scratch_checkout,
    signature_lines,
    title_of,
    write_chapter,
)

from labmagic import paths
from labmagic.cli import sweep as sweep_cmd
from labmagic.errors import LabError
from labmagic.store import manifest
from labmagic.store.fingerprint import chapter_hash

pytestmark = pytest.mark.slow

CHAPTER_01 = BOOK / "01_vector_add.ipynb"


def _outputs_text(notebook) -> str:
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    parts = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            text = out.get("text") or out.get("data", {}).get("text/plain") or ""
            parts.append("".join(text) if isinstance(text, list) else text)
            if out.get("output_type") == "error":
                parts.append(f"{out['ename']}: {out['evalue']}")
    return "\n".join(parts)


def _errors(notebook) -> list[str]:
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    return [f"{o['ename']}: {o['evalue']}" for c in nb["cells"] for o in c.get("outputs", [])
            if o.get("output_type") == "error"]


# ---------------------------------------------------------------------------------------------------- chapter 01


def test_chapter_01_executes_on_cpu_with_papermill(tmp_path, monkeypatch):
    """Chapter 01, top to bottom, in CPU mode, at the quick size: no cell raises, every code cell ran."""
    import papermill

    assert CHAPTER_01.exists(), "chapter 01 (book/01_vector_add.ipynb) is missing"
    monkeypatch.setenv("LABMAGIC_FORCE_CPU", "1")
    monkeypatch.setenv("LABMAGIC_ROOT", str(scratch_checkout(tmp_path / "repo", with_chapters=False)))
    out = tmp_path / "01_vector_add.ipynb"
    papermill.execute_notebook(str(CHAPTER_01), str(out), parameters={"size": "quick"}, cwd=str(BOOK),
                               kernel_name="python3", progress_bar=False)
    nb = json.loads(out.read_text(encoding="utf-8"))
    assert not _errors(out)
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c.get("execution_count") for c in code), "a code cell did not run"
    assert nb["metadata"]["papermill"]["parameters"] == {"size": "quick"}
    tags = [c.get("metadata", {}).get("tags", []) for c in nb["cells"]]
    assert any("parameters" in t for t in tags), "chapter 01 has no cell tagged 'parameters'"
    assert any("injected-parameters" in t for t in tags)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_every_chapter_has_a_size_parameter(chapter):
    nb = json.loads(chapter.read_text(encoding="utf-8"))
    params = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(params) == 1, f"{chapter.name}: exactly one cell must be tagged 'parameters'"
    assert "size" in "".join(params[0]["source"]) and '"full"' in "".join(params[0]["source"])


# ---------------------------------------------------------------------------------------------------- the sweep


def _manifest(root, chapter):
    return json.loads((root / "results" / "cpu" / "notebooks" / f"{chapter}.json").read_text())


def test_sweep_runs_a_size_preset_a_chapter_names_and_refuses_a_name_that_is_not_one(tiny_repo, capsys):
    """--size passes any preset (chapter 09's 'smoke'); --quick is --size quick; the name becomes a parameter and
    part of the run record, so it must be a word."""
    assert run_command(sweep_cmd, ["--size", "smoke", "01"]) == 0
    notebooks = tiny_repo / "results" / "cpu" / "notebooks"
    assert "alpha size=smoke" in _outputs_text(notebooks / "01_alpha.ipynb")
    assert _manifest(tiny_repo, "01_alpha")["size"] == "smoke"
    with pytest.raises(LabError, match=r"--size '../x': a preset's name is a word"):
        run_command(sweep_cmd, ["--size", "../x", "01"])
    with pytest.raises(LabError, match="--quick is --size quick"):
        run_command(sweep_cmd, ["--quick", "--size", "smoke", "01"])


def test_sweep_reports_failures_and_keeps_going(tiny_repo, capsys):
    assert run_command(sweep_cmd, ["--quick"]) == 1  # one chapter failed
    report = capsys.readouterr().out
    assert "sweep: 2 passed, 1 failed, 0 skipped" in report
    notebooks = tiny_repo / "results" / "cpu" / "notebooks"
    assert "alpha size=quick" in _outputs_text(notebooks / "01_alpha.ipynb")  # the parameter reached the chapter
    assert "gamma 45" in _outputs_text(notebooks / "03_gamma.ipynb")  # ran after the failing chapter
    beta = notebooks / "02_beta.ipynb"  # the error notebook is kept, with the error in it
    assert _errors(beta) == ["ValueError: beta is broken on purpose"]
    assert "ValueError: beta is broken on purpose" in report and str(beta) in report
    assert _manifest(tiny_repo, "01_alpha")["status"] == "passed"
    assert _manifest(tiny_repo, "02_beta")["status"] == "failed"
    assert _manifest(tiny_repo, "01_alpha")["input_hash"] == chapter_hash(tiny_repo / "book" / "01_alpha.ipynb")


def test_sweep_sanitize_reaches_every_bench_of_the_chapters(tiny_repo, monkeypatch, capsys):
    from labmagic.magics.bench_magic import SANITIZE_ENV

    monkeypatch.setenv(SANITIZE_ENV, "")  # restored after the test: the sweep sets it in this process
    write_chapter(tiny_repo / "book" / "04_delta.ipynb", "%load_ext labmagic", (
        "import torch, labmagic.benchmark\n"
        "race = labmagic.benchmark.Race(chapter='04_delta', variants={'torch': torch.add}, ref='torch',\n"
        "    make_inputs=lambda n: (torch.randn(n), torch.randn(n)), shapes=[16], check_shapes=[3])"),
        "r = %bench race --no-plot --no-save\nprint('notes:', r.notes)", title="Delta")
    assert run_command(sweep_cmd, ["--quick", "04"]) == 0
    text = _outputs_text(tiny_repo / "results" / "cpu" / "notebooks" / "04_delta.ipynb")
    assert "notes:" in text and "sanitize" not in text
    assert run_command(sweep_cmd, ["--quick", "--force", "--sanitize", "04"]) == 0
    text = _outputs_text(tiny_repo / "results" / "cpu" / "notebooks" / "04_delta.ipynb")
    assert "sanitize needs a GPU: nothing ran under memcheck" in text  # %bench got sanitize=True from the sweep


def test_sweep_resumes_and_force_reruns(tiny_repo, capsys):
    book = tiny_repo / "book"
    assert run_command(sweep_cmd, ["--quick", "01", "03"]) == 0
    first = _manifest(tiny_repo, "01_alpha")["started"], _manifest(tiny_repo, "03_gamma")["started"]
    capsys.readouterr()

    assert run_command(sweep_cmd, ["--quick", "01", "03"]) == 0  # nothing changed: both skipped
    assert "0 passed, 0 failed, 2 skipped" in capsys.readouterr().out

    write_chapter(book / "03_gamma.ipynb", "print('gamma', sum(range(11)))", title="Gamma")  # edit one chapter
    assert run_command(sweep_cmd, ["--quick", "01"]) == 0
    assert "1 stale" in capsys.readouterr().out and "03_gamma" in manifest.stale_chapters("cpu")
    assert run_command(sweep_cmd, ["--quick", "01", "03"]) == 0
    assert "1 passed, 0 failed, 1 skipped" in capsys.readouterr().out
    assert "gamma 55" in _outputs_text(tiny_repo / "results" / "cpu" / "notebooks" / "03_gamma.ipynb")

    assert run_command(sweep_cmd, ["01"]) == 0  # another size preset is not up to date
    assert "1 passed" in capsys.readouterr().out
    assert "alpha size=quick" not in _outputs_text(tiny_repo / "results" / "cpu" / "notebooks" / "01_alpha.ipynb")

    assert run_command(sweep_cmd, ["--force", "01"]) == 0
    assert "1 passed, 0 failed, 0 skipped" in capsys.readouterr().out
    assert _manifest(tiny_repo, "01_alpha")["started"] >= first[0]


def test_a_failed_rerun_remembers_the_run_the_results_came_from(tiny_repo, capsys):
    assert run_command(sweep_cmd, ["--quick", "03"]) == 0
    passed = _manifest(tiny_repo, "03_gamma")
    write_chapter(tiny_repo / "book" / "03_gamma.ipynb", 'raise ValueError("gamma broke")', title="Gamma")
    assert run_command(sweep_cmd, ["--quick", "03"]) == 1
    failed = _manifest(tiny_repo, "03_gamma")
    assert failed["status"] == "failed"
    assert failed["last_passed"] == {k: passed[k] for k in ("input_hash", "size", "started")}
    assert manifest.passed_run(failed) == failed["last_passed"] and manifest.passed_run(passed) == passed
    assert manifest.stale_chapters("cpu") == ["03_gamma"]  # the stored results predate the edit
    assert manifest.passed_run(None) is None


def test_parallel_workers_give_the_same_notebooks_as_a_serial_run(tiny_repo, tmp_path, capsys):
    assert run_command(sweep_cmd, ["--quick", "01", "03"]) == 0
    notebooks = tiny_repo / "results" / "cpu" / "notebooks"
    serial = {n: _outputs_text(notebooks / f"{n}.ipynb") for n in ("01_alpha", "03_gamma")}
    assert run_command(sweep_cmd, ["--quick", "--force", "--gpus", "0,0", "01", "03"]) == 0  # two workers
    assert "2 passed" in capsys.readouterr().out
    parallel = {n: _outputs_text(notebooks / f"{n}.ipynb") for n in ("01_alpha", "03_gamma")}
    assert parallel == serial
    assert _manifest(tiny_repo, "01_alpha")["cuda_visible_devices"] == "0"


def test_reference_writes_outputs_back_only_on_the_books_gpu(tiny_repo, monkeypatch):
    with pytest.raises(LabError, match="nvidia-h200"):
        run_command(sweep_cmd, ["--reference", "01"])
    monkeypatch.setenv("LABMAGIC_BOOK_GPU", "cpu")
    with pytest.raises(LabError, match="--quick"):
        run_command(sweep_cmd, ["--reference", "--quick", "01"])
    chapter = tiny_repo / "book" / "01_alpha.ipynb"
    before = chapter_hash(chapter)
    assert run_command(sweep_cmd, ["--reference", "01"]) == 0
    nb = json.loads(chapter.read_text(encoding="utf-8"))
    assert "alpha size=full" in _outputs_text(chapter)  # outputs stored in the book's notebook
    assert "papermill" not in nb["metadata"]
    assert not any("injected-parameters" in c.get("metadata", {}).get("tags", []) for c in nb["cells"])
    assert chapter_hash(chapter) == before  # outputs do not change what the chapter's results depend on


def test_sweep_names_unknown_chapters(tiny_repo):
    with pytest.raises(LabError, match="01_alpha, 02_beta, 03_gamma"):
        paths.select_chapters(["07"])
    assert [p.stem for p in paths.select_chapters(["gamma", "01"])] == ["03_gamma", "01_alpha"]


# ---------------------------------------------------------------------------------------------------- the book


@pytest.fixture(scope="module")
def book_site(tmp_path_factory):
    return build_site(ROOT, tmp_path_factory.mktemp("book"))


def test_book_builds_with_chapter_01_page(book_site):
    page = book_site / "book" / "01_vector_add.html"
    assert page.exists(), "the built site has no page for chapter 01"
    text = page_text(page)
    assert contains(text, title_of(CHAPTER_01))
    for line in signature_lines(CHAPTER_01):
        assert contains(text, line), f"chapter 01's page lacks its code: {line!r}"
    assert (book_site / "book" / "results.html").exists()


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_every_chapter_has_a_page_with_its_code(book_site, chapter):
    text = page_text(book_site / "book" / f"{chapter.stem}.html")
    assert contains(text, title_of(chapter))
    missing = [line for line in signature_lines(chapter) if not contains(text, line)]
    assert not missing


def test_book_build_fails_on_a_warning(tmp_path):
    """Warnings are errors: a chapter with a broken cross-reference must fail the build, not publish."""
    root = scratch_checkout(tmp_path / "repo", with_chapters=False)
    notebook = write_chapter(root / "book" / "01_alpha.ipynb", "1 + 1")
    nb = json.loads(notebook.read_text())
    nb["cells"][0]["source"] += "\n\nSee {doc}`no_such_page`."
    notebook.write_text(json.dumps(nb))
    from labmagic.cli import book as site

    with pytest.raises(LabError, match="warnings count as errors"):
        site.build(root, tmp_path / "out", quiet=True)


def test_site_command_builds_without_executing(tmp_path):
    """A chapter whose code would fail is not run by the build: the page shows the stored source and no output."""
    root = scratch_checkout(tmp_path / "repo", with_chapters=False)
    write_chapter(root / "book" / "01_alpha.ipynb", 'raise SystemExit("executed at build time")')
    from labmagic.cli import book as site

    html_dir = site.build(root, tmp_path / "out", quiet=True)
    page = (html_dir / "book" / "01_alpha.html").read_text(encoding="utf-8")
    assert contains(page_text(html_dir / "book" / "01_alpha.html"), 'raise SystemExit("executed at build time")')
    assert 'class="cell_output' not in page  # no output area: nothing ran


def test_book_builds_with_no_network(tmp_path):
    """The site build reaches for nothing outside this machine: built in a network namespace with no interfaces up."""
    import shutil
    import subprocess
    import sys

    if not shutil.which("unshare"):
        pytest.skip("no unshare(1) to take the network away")
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot create a network namespace here (needs root): {probe.stderr.decode().strip()}")
    code = ("import sys; from labmagic.cli import book as site; "
            f"site.build({str(ROOT)!r}, {str(tmp_path)!r}, quiet=True); print('built')")
    proc = subprocess.run(["unshare", "-n", sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "built" in proc.stdout, proc.stderr[-2000:]
    assert (tmp_path / "_build" / "html" / "book" / "01_vector_add.html").exists()


# ------------------------------------------------------------------------------- run records are this machine's own


def test_a_record_from_another_machine_or_unreadable_is_run_again_and_the_summary_says_why(tiny_repo, capsys):
    """A clone's committed record (another machine's), one without a machine, a corrupt one: each chapter runs
    again; one up to date here is skipped, and the summary names it and why."""
    assert run_command(sweep_cmd, ["--quick", "01", "03"]) == 0
    record = _manifest(tiny_repo, "01_alpha")
    assert record["machine"] == manifest.machine_id() and len(record["machine"]) == 16
    capsys.readouterr()
    assert run_command(sweep_cmd, ["--quick", "01", "03"]) == 0
    out = capsys.readouterr().out
    assert "0 passed, 0 failed, 2 skipped" in out
    assert "  skipped 01_alpha: up to date: passed here at " in out and "  skipped 03_gamma: up to date" in out

    path = tiny_repo / "results" / "cpu" / "notebooks" / "01_alpha.json"
    for why, text in (("its record comes from another machine", json.dumps({**record, "machine": "0123456789abcdef"})),
                      ("its record names no machine", json.dumps({k: v for k, v in record.items() if k != "machine"})),
                      ("its record cannot be read", json.dumps(record)[:40])):
        path.write_text(text)
        assert manifest.freshness(tiny_repo / "book" / "01_alpha.ipynb", "cpu", "quick") == (False, why)
        assert run_command(sweep_cmd, ["--list", "--quick", "01"]) == 0
        assert f"01_alpha: to run on cpu ({why})" in capsys.readouterr().out
    assert run_command(sweep_cmd, ["--quick", "01"]) == 0
    assert "sweep: 1 passed" in capsys.readouterr().out  # run again, not trusted
    assert _manifest(tiny_repo, "01_alpha")["machine"] == manifest.machine_id()


def test_sweep_timer_graph_reaches_every_bench_and_its_record_and_freshness_say_so(tiny_repo, capsys, monkeypatch):
    """`labmagic sweep --timer graph`: the chapter's kernel is told (every %bench in it then times with the graph
    timer, its rows labelled cuda_graph on a GPU), its record says graph, and a later events sweep runs it again,
    since its rows in the CSV are graph rows; --reference, which writes the book's events tables, refuses it."""
    from labmagic.magics.bench_magic import TIMER_ENV

    monkeypatch.setenv(TIMER_ENV, "")  # the sweep sets it for its chapters; restored after the test
    write_chapter(tiny_repo / "book" / "04_delta.ipynb",
                  "from labmagic.magics.bench_magic import timer_from_env\nprint('delta timer', timer_from_env())",
                  title="Delta")
    assert run_command(sweep_cmd, ["--quick", "--timer", "graph", "04"]) == 0
    notebooks = tiny_repo / "results" / "cpu" / "notebooks"
    assert "delta timer graph" in _outputs_text(notebooks / "04_delta.ipynb")
    assert _manifest(tiny_repo, "04_delta")["timer"] == "graph"
    capsys.readouterr()
    assert run_command(sweep_cmd, ["--list", "--quick", "04"]) == 0
    assert "04_delta: to run on cpu (its last run here timed its races with 'graph', not 'events')" in \
        capsys.readouterr().out
    assert run_command(sweep_cmd, ["--quick", "04"]) == 0
    assert "delta timer None" in _outputs_text(notebooks / "04_delta.ipynb")
    assert _manifest(tiny_repo, "04_delta")["timer"] == "events"
    monkeypatch.setenv("LABMAGIC_BOOK_GPU", "cpu")  # so that --reference gets as far as the timer
    with pytest.raises(LabError, match="whose tables are timed with events: drop --timer graph"):
        run_command(sweep_cmd, ["--reference", "--timer", "graph", "04"])


def test_the_record_counts_what_the_races_found_and_results_lists_this_machines_run(tiny_repo, capsys):
    """A chapter's race on CPU: the reference passes its check, a CUDA variant needs a GPU; the run's record counts
    them and `labmagic results` shows this machine's run beside the GPU rows (none here)."""
    from labmagic.cli import results as results_cmd

    write_chapter(tiny_repo / "book" / "04_delta.ipynb", "%load_ext labmagic", (
        "import torch, labmagic, labmagic.benchmark\n"
        "def cuda_add(a, b):\n"
        "    raise labmagic.NoGPUError('add_kernel needs a CUDA GPU to run; this machine has none')\n"
        "race = labmagic.benchmark.Race(chapter='04_delta', variants={'torch': torch.add, 'cuda_add': cuda_add},\n"
        "    ref='torch', make_inputs=lambda n: (torch.randn(n), torch.randn(n)), shapes=[16], check_shapes=[3])"),
        "r = %bench race --no-plot --no-save", title="Delta")
    assert run_command(sweep_cmd, ["--quick", "02", "04"]) == 1  # 02_beta fails on purpose
    assert _manifest(tiny_repo, "04_delta")["variants"] == {"pass": 1, "skipped": 0, "needs_gpu": 1, "fail": 0}
    capsys.readouterr()
    assert run_command(results_cmd, []) == 0
    out = capsys.readouterr().out
    assert "this machine (cpu), its own sweep (results/cpu/notebooks): 1 passed, 1 failed, 2 not run here; " \
           "variants: 1 pass, 0 fail, 1 needs a GPU, 0 skipped" in out
    assert re.search(r"04_delta +passed +\d{4}-\d\d-\d\d  1 pass, 0 fail, 1 needs a GPU, 0 skipped", out)
    assert re.search(r"02_beta +failed .*ValueError: beta is broken on purpose", out)
    assert re.search(r"01_alpha +not run here", out)


def test_the_book_builds_from_this_machines_own_run(tiny_repo, tmp_path, capsys):
    """`labmagic book --executed`: a chapter this machine ran shows that run (its output, no papermill paths), one it
    did not keeps the book's stored outputs, and each chapter without outputs is named in one line."""
    from labmagic.cli import book as site

    assert run_command(sweep_cmd, ["--quick", "01"]) == 0
    capsys.readouterr()
    html_dir = site.build(tiny_repo, tmp_path / "out", quiet=True, executed="cpu")
    err = capsys.readouterr().err.splitlines()
    assert "alpha size=quick" in page_text(html_dir / "book" / "01_alpha.html")  # this machine's output
    page = (html_dir / "book" / "01_alpha.html").read_text(encoding="utf-8")
    assert str(tiny_repo) not in page and str(tmp_path) not in page  # papermill's paths stay out
    assert "labmagic book: 02_beta: not run on this machine (cpu): its page shows the book's stored outputs" in err
    assert ("labmagic book: book/03_gamma.ipynb: no stored outputs: its page shows the code alone (run it: "
            "`labmagic sweep 03`, then `labmagic book --executed`)") in err
    assert not any("01_alpha" in line for line in err)
