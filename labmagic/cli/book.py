"""``labmagic book``: build the static site with jupyter-book 1.x from the stored notebook outputs.

Nothing is executed (``execute_notebooks: "off"`` in ``_config.yml``): each chapter page shows the outputs saved in
``book/NN_name.ipynb``, or, with ``--executed``, those of this machine's own sweep (``results/<device>/notebooks/``,
the runs whose records this machine wrote; a chapter it has not run keeps the book's outputs, said in one line). A
chapter with no outputs at all is built as its code and named in one line. The Results page is generated from
``results/*/bench/*.csv`` by the :mod:`labmagic.sphinx.fill_results` Sphinx extension during the same build.
Warnings are errors, so a broken link, a missing image or a notebook the toc does not list fails the build instead of
publishing a quietly broken page. The build needs no network.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ..errors import LabError
from ..paths import CHAPTER_GLOB, repo_root
from ..runtime import device_slug
from ..store.fingerprint import read_notebook
from ..store.manifest import machine_id, published_by

#: The environment variable that carries the pages to swap for this machine's runs (read by
#: :mod:`labmagic.sphinx.executed`): {"book/01_vector_add": "/.../results/cpu/notebooks/01_vector_add.ipynb"}.
EXECUTED_ENV = "LABMAGIC_EXECUTED"

#: The jupyter-book 1.x command line, run with this interpreter (no reliance on PATH).
_JB = "import sys; from jupyter_book.cli.main import main; sys.exit(main())"

#: Sphinx colours its log even into a pipe; the one-line error drops the escapes.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def build_command(root: Path, output: Path | None = None, *, strict: bool = True, full: bool = False) -> list[str]:
    cmd = [sys.executable, "-c", _JB, "build", str(root), "--builder", "html"]
    if strict:
        cmd += ["-W", "-n", "--keep-going"]
    if output is not None:
        cmd += ["--path-output", str(output)]
    if full:
        cmd.append("--all")
    return cmd


def html_dir(root: Path | None = None, output: Path | None = None) -> Path:
    """Where the built site lands: ``<output or root>/_build/html``."""
    return Path(output or root or repo_root()) / "_build" / "html"


def check_chapters(root: Path, executed: dict[str, Path] | None = None) -> list[str]:
    """Every chapter notebook in ``<root>/book`` (or the executed one that replaces it) is a notebook: a truncated
    one would otherwise stop the build with a traceback from deep inside myst-nb. Returns a line for each chapter that
    has no stored outputs (its page shows the code alone)."""
    notes = []
    for notebook in sorted((root / "book").glob(CHAPTER_GLOB)):
        shown = (executed or {}).get(notebook.stem, notebook)
        nb = read_notebook(shown)
        if not any(cell.get("outputs") for cell in nb.get("cells", []) if cell.get("cell_type") == "code"):
            where = shown.relative_to(root).as_posix() if shown.is_relative_to(root) else shown.name
            notes.append(f"{where}: no stored outputs: its page shows the code alone (run it: `labmagic sweep "
                         f"{notebook.stem[:2]}`, then `labmagic book --executed`)")
    return notes


def executed_chapters(root: Path, slug: str) -> tuple[dict[str, Path], list[str]]:
    """The chapters this machine ran (``results/<slug>/notebooks/<chapter>.ipynb`` whose record this machine wrote
    and vouches for), and a line for each chapter of the book it did not."""
    found, notes = {}, []
    folder = root / "results" / slug / "notebooks"
    here = machine_id()
    for notebook in sorted((root / "book").glob(CHAPTER_GLOB)):
        executed = folder / notebook.name
        try:
            record = json.loads(executed.with_suffix(".json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            record = None
        if isinstance(record, dict) and record.get("machine") == here and published_by(record, executed):
            found[notebook.stem] = executed
            if record.get("status") != "passed":
                notes.append(f"{notebook.stem}: this machine's run failed; its page shows that run, error included")
        else:
            notes.append(f"{notebook.stem}: not run on this machine ({slug}): its page shows the book's stored outputs")
    return found, notes


def build(root: Path | None = None, output: Path | None = None, *, strict: bool = True, full: bool = True,
          quiet: bool = False, executed: str | None = None) -> Path:
    """Build the book; return the folder holding ``index.html``. Raises LabError with the build's own log tail.
    ``executed``: a device slug (``cpu``) whose runs on this machine replace the book's stored outputs."""
    root = Path(root or repo_root()).resolve()
    try:
        import jupyter_book  # noqa: F401
    except ImportError:
        raise LabError('jupyter-book is not installed: python -m pip install -e ".[book]"') from None
    if not (root / "_toc.yml").exists():
        raise LabError(f"{root} has no _toc.yml: run `labmagic book` inside a Kernel Lab checkout")
    swapped, notes = executed_chapters(root, executed) if executed else ({}, [])
    notes += check_chapters(root, swapped)
    for note in notes:
        print(f"labmagic book: {note}", file=sys.stderr)
    pages = {f"book/{chapter}": str(path) for chapter, path in swapped.items()}
    env = dict(os.environ, LABMAGIC_ROOT=str(root), PYDEVD_DISABLE_FILE_VALIDATION="1",
               **{EXECUTED_ENV: json.dumps(pages)})
    proc = subprocess.run(build_command(root, output, strict=strict, full=full), cwd=root, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if not quiet:
        print(proc.stdout, end="")
    if proc.returncode != 0:
        problems = [_ANSI.sub("", line) for line in proc.stdout.splitlines() if "WARNING" in line or "ERROR" in line]
        detail = "\n".join(problems[-20:]) or proc.stdout[-3000:]
        errors = [line for line in problems if "ERROR" in line]  # an error is the cause, not a warning beside it
        if errors:
            why = f": {errors[0].strip()}"
        else:
            why = "; warnings count as errors" + (f": {problems[0].strip()}" if problems else "")
        raise LabError(f"jupyter-book build failed (status {proc.returncode}){why}", detail)
    site = html_dir(root, output)
    if not (site / "index.html").exists():
        raise LabError(f"jupyter-book reported success but wrote no {site / 'index.html'}")
    return site


def add_arguments(parser) -> None:
    parser.add_argument("--root", type=Path, default=None, help="the checkout to build (default: this one)")
    parser.add_argument("--output", type=Path, default=None,
                        help="folder that receives _build/html (default: the checkout)")
    parser.add_argument("--no-strict", action="store_true", help="do not treat Sphinx warnings as errors")
    parser.add_argument("--incremental", action="store_true",
                        help="reuse the previous build's environment instead of rebuilding every page")
    parser.add_argument("--clean", action="store_true", help="remove _build first")
    parser.add_argument("--quiet", action="store_true", help="print only where the site is")
    parser.add_argument("--executed", nargs="?", const="", default=None, metavar="DEVICE",
                        help="show this machine's own runs (labmagic sweep) in place of the book's stored outputs: "
                             "results/<device>/notebooks/, this machine's device unless named (cpu, nvidia-h200)")


def run(args) -> int:
    root = Path(args.root or repo_root()).resolve()
    if args.clean:
        shutil.rmtree(Path(args.output or root) / "_build", ignore_errors=True)
    executed = (args.executed or device_slug()) if args.executed is not None else None
    site = build(root, args.output, strict=not args.no_strict, full=not args.incremental, quiet=args.quiet,
                 executed=executed)
    print(f"site: {site / 'index.html'}")
    return 0
