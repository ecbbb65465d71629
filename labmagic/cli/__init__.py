"""``labmagic`` command line: each subcommand lives in its own module.

A subcommand module exposes ``add_arguments(parser)`` and ``run(args) -> int``; this file only wires
them up, so ``labmagic --help`` stays cheap (modules are imported when their command runs).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ..errors import LabError, one_line

#: name -> (module, one-line help)
COMMANDS = {
    "sweep": ("labmagic.cli.sweep", "execute chapters with papermill on this machine into results/<gpu>/notebooks"),
    "cluster": ("labmagic.cli.cluster",
                "print (or run) the commands that start Dask workers, one per GPU, for sweep --scheduler"),
    "book": ("labmagic.cli.book", "build the static site with jupyter-book from the stored notebook outputs"),
    "calibrate": ("labmagic.cli.calibrate", "measure this GPU's copy bandwidth and matmul throughput (ceilings.json)"),
    "new": ("labmagic.cli.new", "scaffold a chapter notebook book/NN_NAME.ipynb that runs as it is (race, checks, "
            "sweep parameter, CUDA and Triton kernels, its CSV)"),
    "test": ("labmagic.cli.test", "check every variant of a chapter against its reference on the check shapes; "
             "no timing"),
    "bench": ("labmagic.cli.bench", "check and time a chapter's race from a terminal (its %bench, without papermill); "
              "one Markdown table per shape"),
    "profile": ("labmagic.cli.profile", "profile a chapter's variants with Nsight Compute"),
    "sanitize": ("labmagic.cli.sanitize", "run a chapter's variants under compute-sanitizer"),
    "exercise": ("labmagic.cli.exercise",
                 "grade the book's exercises (a chapter's, one, or --all; --solution grades book/solutions/)"),
    "results": ("labmagic.cli.results",
                "what results/ holds; --stale lists stale rows; --readme regenerates README's table"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(prog="labmagic", description="Kernel Lab: compile, check, bench and profile.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # Only the chosen command's module is imported: a broken or heavy module cannot take the others down.
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    module = None
    for name, (module_name, help_text) in COMMANDS.items():
        # argparse %-formats help strings (not descriptions): '%bench' in a help line must not crash --help.
        command_parser = sub.add_parser(name, help=help_text.replace("%", "%%"), description=help_text)
        if name == chosen:
            module = importlib.import_module(module_name)
            module.add_arguments(command_parser)
    args = parser.parse_args(argv)
    try:
        return int(module.run(args) or 0)
    except LabError as exc:
        print(one_line(exc), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
