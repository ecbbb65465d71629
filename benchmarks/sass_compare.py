"""Machine code of every kernel of some chapters, at a git revision against the working tree: SASS and resources.

A change that only moves a chapter's CUDA around (a cell split in two, helpers moved into ``book/include/lab/``, a
template in place of two near-copies) must not change what runs. This compiles every ``%%cuda_kernel`` cell of each
chapter twice, as the cell magic does (NVRTC through labmagic, the cell's name expressions and options, line info,
on the CPU), once from the chapter at ``--base`` and once from the working tree, and compares each kernel's SASS
instruction by instruction and its ptxas report (registers, static shared memory, stack, spills, barriers). A magic
line's ``{name}`` is expanded from the chapter's cell that assigns it, run alone (chapter 06's decode instantiations).
Kernels are matched by their name expression (``rmsnorm_bulk<float, 16>``) or, for non-templates, their name, so a
kernel may move to another cell.

A kernel whose SASS differs is shown with its first differing instructions, and with whether the difference is only
register numbering (the same instructions with registers renamed). Each side compiles in a child process with its
own empty compile cache and ``LABMAGIC_ROOT`` at that side's tree, so a header edited on one side is never served
from the other's cache and each side includes its own ``book/include``.

    python benchmarks/sass_compare.py book/04_rmsnorm.ipynb book/05_fused_softmax_rmsnorm.ipynb [--base HEAD]
        [--arch sm_90a] [--json out.json] [--rename 'OLD<4>=NEW<4, 2>' ...]

Exit status 0 when every kernel's SASS and resources match, 1 otherwise.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESOURCE_FIELDS = ("registers", "smem_static", "stack_frame", "spill_stores", "spill_loads", "barriers")
_REGISTER = re.compile(r"\b(U?R\d+|U?P\d+)\b")
_LABEL = re.compile(r"\.L_x_\d+|\$__internal_\d+_\$")


def numbered_labels(texts: list[str]) -> list[str]:
    """Branch labels (``.L_x_1542``) and internal subroutines (``$__internal_7_$__cuda_sm3x_div_rn...``) are
    numbered over the whole CUBIN, so a kernel moved to another cell gets new numbers: number them by first use
    within the kernel instead."""
    names: dict[str, str] = {}
    return [_LABEL.sub(lambda m: names.setdefault(m.group(0), f"<{len(names)}>"), t) for t in texts]


_EXPANDED = re.compile(r"\{(\w+)\}")


def expand_line(line: str, sources: list[str]) -> str:
    """A magic line's ``{name}``, as IPython expands it in the notebook, from ``sources`` (the code cells before
    it): the last one that assigns ``name`` at its top level, run alone with nothing but the builtins and ``labmagic``,
    which every chapter imports (chapter 06's ``decode_flags``, the instantiations its decode cell names; chapter 10's
    ``rung1_flags``, whose cell also asks ``labmagic.runtime`` for the SM count). A name no such cell gives stops the
    script."""
    def value(match: re.Match) -> str:
        name = match.group(1)
        for source in reversed(sources):
            try:
                tree = ast.parse(source)
            except SyntaxError:  # a magic cell
                continue
            if any(isinstance(t, ast.Name) and t.id == name for node in tree.body if isinstance(node, ast.Assign)
                   for t in node.targets):
                import labmagic  # noqa: PLC0415 (only where a cell needs it; the dump children import it anyway)

                namespace: dict = {"labmagic": labmagic}
                try:
                    exec(compile(tree, f"<cell defining {name}>", "exec"), namespace)  # noqa: S102 (the chapter's own)
                except Exception as exc:  # noqa: BLE001 (said, with the name)
                    raise SystemExit(f"{line!r}: the cell defining {name} does not run alone ({exc!r}), so this "
                                     "script cannot expand it") from None
                return str(namespace[name])
        raise SystemExit(f"{line!r}: uses the notebook variable {name}, which no cell before it assigns")

    line = _EXPANDED.sub(value, line)
    if "{" in line:
        raise SystemExit(f"{line!r}: uses notebook expressions ({{...}}), which this script cannot expand")
    return line


def cuda_cells(notebook: Path) -> list[tuple[int, str, str]]:
    """(cell index, magic line with its ``{name}`` expanded, body) of each ``%%cuda_kernel`` cell."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    out, before = [], []
    for index, cell in enumerate(cells):
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] != "code":
            continue
        if source.startswith("%%cuda_kernel"):
            line, _, body = source.partition("\n")
            out.append((index, expand_line(line, before) if "{" in line else line, body))
        before.append(source)
    return out


def _magic_args(line: str) -> argparse.Namespace:
    """The cell magic's own arguments (what it compiles with), from its first line."""
    from IPython.core.magic_arguments import parse_argstring

    from labmagic.magics.cuda_kernel import CudaKernelMagics

    rest = line.removeprefix("%%cuda_kernel")
    return parse_argstring(CudaKernelMagics.cuda_kernel, rest)


def _unquote(text: str) -> str:
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text


def dump(notebook: Path, arch: str | None) -> dict:
    """{kernel: {cell, symbol, sass: [instruction text], resources: {...}}} for one chapter, compiled here."""
    from labmagic.analysis.sass import disassemble
    from labmagic.compiler.kernel import compile_module

    kernels: dict[str, dict] = {}
    for index, line, body in cuda_cells(notebook):
        args = _magic_args(line)
        options = list(args.options)
        if args.maxrregcount is not None:
            options.append(f"--maxrregcount={args.maxrregcount}")
        module = compile_module(body, arch=args.arch or arch, options=options,
                                name_expressions=[_unquote(e) for e in args.name_expr],
                                lineinfo=not args.no_lineinfo, first_line=2)
        sass = disassemble(module.result.cubin)
        for expression, kernel in module.kernels.items():
            res = module.result.resources.get(kernel.symbol)
            kernels[expression] = {
                "cell": index, "symbol": kernel.symbol, "arch": module.result.arch,
                "sass": numbered_labels([i.text for i in sass.get(kernel.symbol, [])]),
                "resources": {f: getattr(res, f) for f in RESOURCE_FIELDS} if res else None,
            }
    return kernels


def _tree_at(repo: Path, rev: str, into: Path) -> Path:
    """``repo``'s book/ at ``rev``, extracted under ``into`` (a LABMAGIC_ROOT for the child)."""
    archive = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", rev, "book"],
                             check=True, capture_output=True).stdout
    tar_path = into / "book.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into, filter="data")
    return into


def _dump_in_child(root: Path, notebooks: list[str], arch: str | None, out: Path, cache: Path) -> subprocess.Popen:
    """Compile ``root``'s chapters in a child process (with ``root`` as LABMAGIC_ROOT and its own compile cache)."""
    env = dict(os.environ, LABMAGIC_ROOT=str(root), LABMAGIC_CACHE_DIR=str(cache))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, __file__, "--dump", str(out), *(["--arch", arch] if arch else []),
           *[str(root / nb) for nb in notebooks]]
    return subprocess.Popen(cmd, env=env)


def _renamed_only(a: list[str], b: list[str]) -> bool:
    norm = lambda text: _REGISTER.sub(lambda m: re.sub(r"\d+", "#", m.group(1)), text)  # noqa: E731
    return len(a) == len(b) and all(norm(x) == norm(y) for x, y in zip(a, b))


def renamed(before: dict, renames: list[str]) -> tuple[dict, dict[str, str]]:
    """``before`` with each ``OLD=NEW`` of ``renames`` (a kernel whose name expression changed, e.g. into another
    template's instantiation) filed under NEW, and {NEW: OLD} for the report."""
    before, was = dict(before), {}
    for pair in renames:
        old, sep, new = pair.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise SystemExit(f"--rename {pair!r}: give OLD=NEW, two name expressions")
        if old.strip() in before:
            before[new.strip()] = before.pop(old.strip())
            was[new.strip()] = old.strip()
    return before, was


def compare(before: dict, after: dict, context: int, was: dict[str, str] | None = None) -> tuple[list[str], int]:
    """Report lines and the number of kernels that differ (SASS, resources, or present on one side only); ``was``
    names the kernels compared under a new name (:func:`renamed`)."""
    lines, differ, was = [], 0, was or {}
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name), after.get(name)
        if a is None or b is None:
            differ += 1
            lines.append(f"ONLY {'AFTER' if a is None else 'BEFORE'}  {name}")
            continue
        same_sass = a["sass"] == b["sass"]
        same_res = a["resources"] == b["resources"]
        res = b["resources"] or {}
        summary = (f"{res.get('registers', '?')} reg, {res.get('smem_static', '?')} B smem, "
                   f"{res.get('stack_frame', '?')} B stack, "
                   f"{res.get('spill_stores', '?')}/{res.get('spill_loads', '?')} B spill")
        if same_sass and same_res:
            lines.append(f"same   {name}{f' (was {was[name]})' if name in was else ''}: {len(b['sass'])} "
                         f"instructions, {summary}")
            continue
        differ += 1
        what = []
        if not same_sass:
            kind = "register numbering only" if _renamed_only(a["sass"], b["sass"]) else "instructions"
            what.append(f"SASS differs ({kind}: {len(a['sass'])} -> {len(b['sass'])} instructions)")
        if not same_res:
            what.append("resources " + ", ".join(f"{f} {a['resources'].get(f)} -> {b['resources'].get(f)}"
                                                  for f in RESOURCE_FIELDS
                                                  if (a["resources"] or {}).get(f) != (b["resources"] or {}).get(f)))
        lines.append(f"DIFF   {name}: {'; '.join(what)}")
        if not same_sass and context:
            diff = list(difflib.unified_diff(a["sass"], b["sass"], "before", "after", n=2, lineterm=""))
            lines += ["         " + d for d in diff[2:2 + context]]
    return lines, differ


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", help="chapters, as paths relative to --root (book/04_rmsnorm.ipynb)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this script's)")
    parser.add_argument("--base", default="HEAD", help="the git revision to compare the working tree against")
    parser.add_argument("--arch", default=None, help="target architecture (default: the cells' own, else labmagic's)")
    parser.add_argument("--json", type=Path, default=None, help="also write both sides' SASS and resources here")
    parser.add_argument("--context", type=int, default=12, help="diff lines shown per differing kernel (0: none)")
    parser.add_argument("--rename", action="append", default=[], metavar="OLD=NEW",
                        help="compare the kernel named OLD at --base with NEW now, e.g. "
                             "'wgmma_cluster<4, 16>=wgmma_ws<256, 4, 16, 2>' (repeatable)")
    parser.add_argument("--dump", type=Path, default=None, help=argparse.SUPPRESS)  # the child's side
    args = parser.parse_args(argv)

    if args.dump is not None:  # a missing notebook (a chapter new since --base) has no kernels
        result = [dump(Path(nb), args.arch) if Path(nb).is_file() else {} for nb in args.notebooks]  # in order
        args.dump.write_text(json.dumps(result), encoding="utf-8")
        return 0

    root = args.root.resolve()
    notebooks = []
    for nb in args.notebooks:
        path = (root / nb).resolve()
        if not path.is_file() or not path.is_relative_to(root / "book"):
            parser.error(f"{nb}: not a chapter under {root / 'book'}")
        notebooks.append(path.relative_to(root).as_posix())
    with tempfile.TemporaryDirectory(prefix="sass-compare-") as tmp:
        tmp = Path(tmp)
        (tmp / "base").mkdir()
        sides = {"before": _tree_at(root, args.base, tmp / "base"), "after": root}
        children = {}
        for side, root in sides.items():
            (tmp / f"cache-{side}").mkdir()
            children[side] = _dump_in_child(root, notebooks, args.arch, tmp / f"{side}.json", tmp / f"cache-{side}")
        if any(child.wait() != 0 for child in children.values()):
            print("a compile failed (above)", file=sys.stderr)
            return 2
        dumps = {side: json.loads((tmp / f"{side}.json").read_text(encoding="utf-8")) for side in sides}

    if args.json:
        args.json.write_text(json.dumps(dumps, indent=1), encoding="utf-8")
    total_differ = 0
    for nb_rel, before, after in zip(notebooks, dumps["before"], dumps["after"]):
        before, was = renamed(before, args.rename)
        lines, differ = compare(before, after, args.context, was)
        total_differ += differ
        archs = sorted({k["arch"] for k in (*before.values(), *after.values())})
        print(f"== {nb_rel}: {len(after)} kernels now, {len(before)} at {args.base} ({', '.join(archs)}); "
              f"{differ} differ")
        print("\n".join(lines))
    print(f"{'all kernels identical' if total_differ == 0 else f'{total_differ} kernel(s) differ'} "
          f"(SASS instruction by instruction, and {', '.join(RESOURCE_FIELDS)})")
    return 0 if total_differ == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
