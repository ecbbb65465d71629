"""``%%dsl NAME``: a cell of variants written in one of the Python kernel DSLs (:mod:`labmagic.dsl`).

Where the DSL can run, the cell runs as a normal cell, under a first line that records which version runs. Where it
cannot (not installed, it fails to import, or no GPU for a DSL without an interpreter), the cell is skipped with one
line saying why, and each name given with ``--defines`` becomes a stand-in whose call raises that reason, so the
chapter's checks and races record the variant as ``skipped`` (or ``needs_gpu``) instead of failing.

``--compile``: on a machine without a GPU, a DSL that compiles for a GPU it does not see (Gluon) still runs the
cell, so that its kernels are compiled and their panels shown; the cell guards its launches with
``labmagic.has_gpu()``, and its variants become the stand-ins all the same.
"""

from __future__ import annotations

import itertools
import linecache

from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from .. import dsl as dsls
from ..errors import LabError

_cells = itertools.count(1)


@magics_class
class DSLMagics(Magics):
    @magic_arguments()
    @argument("name", help=f"the DSL: {', '.join(dsls.DSLS)}")
    @argument("--defines", "-d", action="append", default=[], metavar="VARIANT",
              help="a variant the cell defines; a stand-in where the DSL cannot run (repeatable)")
    @argument("--compile", action="store_true",
              help="without a GPU, still run the cell where the DSL compiles for a GPU it does not see (gluon), to "
                   "show its kernels' compile panels; guard launches with labmagic.has_gpu()")
    @cell_magic
    def dsl(self, line: str, cell: str):
        """Run the cell where the DSL can run; elsewhere skip it, say why, and define its variants as stand-ins."""
        args = parse_argstring(self.dsl, line)
        for name in args.defines:
            if not name.isidentifier():
                raise LabError(f"--defines takes a Python name, got {name!r}")
        error = dsls.why_not(args.name)
        compile_only = error is not None and args.compile and dsls.compiles_here(args.name)
        stand_ins = f"; {', '.join(args.defines)}: stand-ins" if args.defines else ""
        if error is not None and not compile_only:
            print(f"{args.name}: skipped, {error}{stand_ins}")
            self._stand_ins(args.defines, error)
            return
        print(dsls.header(args.name, compile_only) + (stand_ins if compile_only else ""))
        with dsls.environment(args.name):
            self._run(cell, args.name)
        # A stand-in left by an earlier run of the cell is not a definition.
        ns = self.shell.user_ns
        missing = [name for name in args.defines if name not in ns or dsls.is_stand_in(ns[name])]
        if missing:
            raise LabError(f"the %%dsl {args.name} cell ran but did not define {', '.join(missing)}")
        if compile_only:  # the kernels compiled; running them needs the GPU this machine lacks
            self._stand_ins(args.defines, error)

    def _stand_ins(self, names: list[str], error: LabError) -> None:
        for name in names:
            self.shell.user_ns[name] = dsls.unavailable(error, name)

    def _run(self, cell: str, name: str) -> None:
        """Execute the cell's Python in the notebook's namespace, with its own file name for tracebacks."""
        code = self.shell.transform_cell(cell)
        filename = f"<%%dsl {name} cell {next(_cells)}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
        exec(compile(code, filename, "exec"), self.shell.user_ns)  # noqa: S102 - the reader's own cell


def register(ipython) -> None:
    ipython.register_magics(DSLMagics)
