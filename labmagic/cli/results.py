"""``labmagic results``: what ``results/`` holds, which rows are stale, and the README's headline table.

    labmagic results                 # one line per GPU and chapter: rows, stale rows, last measured; then this
                                     # machine's own sweep: chapters passed, failed, not run; variants that passed,
                                     # failed, needed a GPU
    labmagic results --stale         # every stale row and why; exits 1 when there is any
    labmagic results --readme        # rewrite README.md's generated tables (headline, chapters) from results/
    labmagic results --check-readme  # exit 1 when README.md's generated tables are not what the data gives
    labmagic results --bars          # rewrite each exercise statement's speed bar from the H200's rows
    labmagic results --plots         # redraw every results/<gpu>/bench/<chapter>*.png from its CSV
    labmagic results --upgrade       # rewrite CSVs an earlier labmagic wrote with today's columns
    labmagic results --compare REV   # rows slower or faster beyond their noise than at git revision REV
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from ..display import results_page as pages
from ..display.chapters import chapter_names, with_block
from ..errors import LabError
from ..paths import repo_root
from ..runtime import device_slug
from ..store.bench_csv import upgrade
from ..store.catalog import csv_paths, distinct, load
from ..store.compare import THRESHOLD, compare, plain, rows_at
from ..store.manifest import machine_id
from ..store.staleness import with_staleness


def add_arguments(parser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--stale", action="store_true", help="list stale rows (exit status 1 when there are any)")
    group.add_argument("--readme", action="store_true",
                       help="regenerate README.md's generated tables (headline, chapters) from results/ and book/")
    group.add_argument("--check-readme", action="store_true",
                       help="exit 1 when README.md's generated tables differ from what results/ and book/ give")
    group.add_argument("--bars", action="store_true",
                       help="rewrite the speed bar in each exercise statement (book/exercises/) from the chapters' "
                            "rows on nvidia-h200, as the judge computes it")
    group.add_argument("--plots", action="store_true",
                       help="redraw each chapter's plots (results/<gpu>/bench/<chapter>*.png) from its CSV")
    group.add_argument("--upgrade", action="store_true",
                       help="rewrite bench CSVs written by an earlier labmagic with today's columns (new ones empty)")
    group.add_argument("--compare", metavar="REV",
                       help="list rows that got slower or faster beyond their noise than the rows committed at git "
                            "revision REV (HEAD, main, a commit), per GPU")
    parser.add_argument("--threshold", type=float, default=THRESHOLD, metavar="FRACTION",
                        help=f"with --compare: the smallest relative change that counts (default {THRESHOLD})")
    parser.add_argument("--root", type=Path, default=None, help="the checkout (default: this one)")


def _readme(root: Path) -> tuple[Path, str, str]:
    """README.md, its text, and its text with every generated block (:func:`results_page.readme_blocks`) redone."""
    path = root / "README.md"
    old = text = path.read_text(encoding="utf-8")
    for (begin, end), table in pages.readme_blocks(root).items():
        try:
            text = with_block(text, begin, end, table)
        except ValueError:
            raise LabError(f"{path} has no generated block {begin} ... {end}") from None
    return path, old, text


def redraw_plots(root: Path) -> list[Path]:
    """Each chapter CSV's plots drawn anew from its rows (what ``%bench`` saves after a run), judged against the
    spec of the GPU the CSV names and that GPU's measured ceilings where ``labmagic calibrate`` stored them. Every
    CSV is read with the catalog's checks first: a row the page would refuse is not drawn either."""
    from ..benchmark import load_result
    from ..benchmark.roofline import load_ceilings
    from ..display.plots import save_chapter_pngs

    load(root)
    written = []
    for path in csv_paths(root):
        slug = path.parent.parent.name
        whole = load_result(path, ceilings=load_ceilings(slug, root / "results" / slug / "ceilings.json"))
        if whole.rows:
            written.extend(save_chapter_pngs(whole).values())
    return written


def run(args) -> int:
    root = Path(args.root or repo_root()).resolve()
    if args.compare:
        result = compare(rows_at(root, args.compare), load(root), f"the rows at {args.compare}", args.threshold)
        print(result.text())
        return 0
    if args.upgrade:
        for path in csv_paths(root):
            if upgrade(path):
                print(f"{path.relative_to(root).as_posix()}: upgraded")
        return 0
    if args.plots:
        for png in redraw_plots(root):
            print(png.relative_to(root).as_posix())
        return 0
    if args.readme:
        path, old, new = _readme(root)
        if new != old:
            path.write_text(new, encoding="utf-8")
        print(f"{path}: generated tables {'updated' if new != old else 'already current'}")
        return 0
    if args.bars:
        from ..exercises.bars import restate_statements

        changed = restate_statements()
        for path in changed:
            print(f"{path}: bars restated")
        print(f"{len(changed)} exercise notebook(s) changed")
        return 0
    if args.check_readme:
        path, old, new = _readme(root)
        if new != old:
            print(f"{path}: the generated tables are out of date: run `labmagic results --readme`")
            return 1
        print(f"{path}: the generated tables match results/ and book/")
        return 0
    df = load(root)
    if df.empty:
        print(f"no bench results under {root / 'results'}")
        if not args.stale:
            print("\n".join(this_machine(root)))
        return 0
    df = with_staleness(df, root)
    if args.stale:
        stale = df[df["stale"] != ""]
        for _, row in stale.iterrows():
            print("  ".join(plain(row.get(c, "?")) for c in ("gpu_slug", "chapter", "variant", "shape", "dtype"))
                  + f": {plain(row['stale'])}")
        print(f"{len(stale)} stale row(s) of {len(df)}")
        return 1 if len(stale) else 0
    for (slug, chapter), rows in sorted(df.groupby(["gpu_slug", "chapter"])):
        last = max((v[:10] for v in distinct(rows, "timestamp")), default="-")
        print(f"{slug:24s} {chapter:28s} {len(rows):4d} rows  {int((rows['stale'] != '').sum()):4d} stale  "
              f"last measured {last}")
    print("\n".join(this_machine(root)))
    return 0


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def this_machine(root: Path) -> list[str]:
    """Lines for this machine's own sweep (its records under ``results/<this device>/notebooks``, those this machine
    wrote): each chapter passed, failed or not run here, with what its races found (variants that passed, failed,
    needed a GPU or were skipped). A machine without a GPU saves no rows, so this is where its run shows."""
    slug = device_slug()
    folder = root / "results" / slug / "notebooks"
    here, runs = machine_id(), {}
    for chapter in chapter_names(root):
        try:
            record = json.loads((folder / f"{chapter}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get("machine") == here:
            runs[chapter] = record
    title = f"this machine ({slug}), its own sweep (results/{slug}/notebooks):"
    if not runs:
        return ["", f"{title} none yet: `labmagic sweep` runs the book here"]
    statuses = Counter(str(r.get("status")) for r in runs.values())
    totals = Counter()
    for record in runs.values():
        totals.update({k: int(v) for k, v in (record.get("variants") or {}).items() if str(v).isdigit()})
    lines = ["", f"{title} {statuses['passed']} passed, {statuses['failed']} failed, "
                 f"{len(chapter_names(root)) - len(runs)} not run here; variants: {_found(totals)}"]
    for chapter in chapter_names(root):
        record = runs.get(chapter)
        if record is None:
            lines.append(f"  {chapter:28s} not run here")
            continue
        found = _found(Counter(record.get("variants") or {})) if record.get("variants") else "no races"
        error = f": {plain(record.get('error'))[:100]}" if record.get("status") == "failed" else ""
        lines.append(f"  {chapter:28s} {plain(record.get('status')):7s} {plain(record.get('started'))[:10]}  "
                     f"{found}{error}")
    return lines


def _found(counts: Counter) -> str:
    """'3 pass, 0 fail, 2 need a GPU, 1 skipped'."""
    needs = _plural(int(counts.get("needs_gpu", 0)), "needs a GPU", "need a GPU")
    return f"{counts.get('pass', 0)} pass, {counts.get('fail', 0)} fail, {needs}, {counts.get('skipped', 0)} skipped"
