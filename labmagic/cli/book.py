"""``labmagic book``: build the static site with jupyter-book 1.x from the stored notebook outputs.

Nothing is executed (``execute_notebooks: "off"`` in ``_config.yml``): each chapter page shows the outputs saved in
``book/NN_name.ipynb``. The Results page is generated from ``results/*/bench/*.csv`` by the
:mod:`labmagic.sphinx.fill_results` Sphinx extension during the same build. Warnings are errors, so a broken link, a
missing image or a notebook the toc does not list fails the build instead of publishing a quietly broken page. The
build needs no network.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ..errors import LabError
from ..paths import CHAPTER_GLOB, repo_root
from ..store.fingerprint import read_notebook

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


def check_chapters(root: Path) -> None:
    """Every chapter notebook in ``<root>/book`` is a notebook: a truncated one would otherwise stop the build with
    a traceback from deep inside myst-nb."""
    for notebook in sorted((root / "book").glob(CHAPTER_GLOB)):
        read_notebook(notebook)


def build(root: Path | None = None, output: Path | None = None, *, strict: bool = True, full: bool = True,
          quiet: bool = False) -> Path:
    """Build the book; return the folder holding ``index.html``. Raises LabError with the build's own log tail."""
    root = Path(root or repo_root()).resolve()
    try:
        import jupyter_book  # noqa: F401
    except ImportError:
        raise LabError('jupyter-book is not installed: python -m pip install -e ".[book]"') from None
    if not (root / "_toc.yml").exists():
        raise LabError(f"{root} has no _toc.yml: run `labmagic book` inside a Kernel Lab checkout")
    check_chapters(root)
    env = dict(os.environ, LABMAGIC_ROOT=str(root), PYDEVD_DISABLE_FILE_VALIDATION="1")
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


def run(args) -> int:
    root = Path(args.root or repo_root()).resolve()
    if args.clean:
        shutil.rmtree(Path(args.output or root) / "_build", ignore_errors=True)
    site = build(root, args.output, strict=not args.no_strict, full=not args.incremental, quiet=args.quiet)
    print(f"site: {site / 'index.html'}")
    return 0
