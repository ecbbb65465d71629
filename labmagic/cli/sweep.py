"""``labmagic sweep``: execute chapters with papermill on this machine, one GPU per worker.

Each chapter ``book/NN_name.ipynb`` is executed (in its own kernel, with ``book/`` as the working directory) into
``results/<gpu>/notebooks/NN_name.ipynb``, next to the bench CSVs and plots that the chapter writes for that GPU;
without a GPU the slug is ``cpu``. Beside each executed notebook, ``NN_name.json`` records the outcome and the hash of
the chapter's sources (:mod:`labmagic.store.manifest`), and ``NN_name.log`` the cell output. A chapter whose sources
and size preset have not changed since its last successful run on this GPU is skipped unless ``--force``.

Chapters receive papermill parameters through their cell tagged ``parameters``: ``size = "full"`` (the book's
numbers) or ``size = "quick"`` (smoke runs, ``--quick``). ``--reference`` writes the executed notebook back into
``book/`` (outputs included) on the book's own GPU, which is how the stored outputs that the site shows are made.
"""

from __future__ import annotations

import os
import time

from ..errors import LabError
from ..execute.parallel import parse_gpus, slug_for, summary, sweep
from ..paths import CHAPTER_GLOB, book_dir, select_chapters
from ..store.manifest import stale_chapters, up_to_date

#: The GPU whose outputs the book shows (``--reference`` refuses other devices). ``LABMAGIC_BOOK_GPU`` overrides.
BOOK_GPU = "nvidia-h200"


def add_arguments(parser) -> None:
    parser.add_argument("chapters", nargs="*", metavar="CHAPTER",
                        help="chapters to run: number (01), stem (01_vector_add) or path; default all")
    parser.add_argument("--quick", action="store_true",
                        help="run with size='quick' (smoke-test shapes) instead of the chapter's default 'full'")
    parser.add_argument("--force", action="store_true", help="re-run chapters that are up to date on this GPU")
    parser.add_argument("--gpus", metavar="all|0,1,...",
                        help="one worker per listed GPU ordinal (CUDA_VISIBLE_DEVICES), chapters in parallel")
    parser.add_argument("--reference", action="store_true",
                        help=f"also write each passing executed notebook back into book/ (only on {BOOK_GPU})")
    parser.add_argument("--timeout", type=int, default=None, metavar="S", help="per-cell execution timeout")
    parser.add_argument("--list", action="store_true", help="list chapters and whether each is up to date; run none")


def run(args) -> int:
    chapters = select_chapters(args.chapters)
    if not chapters:
        raise LabError(f"no chapters ({CHAPTER_GLOB}) in {book_dir()}")
    size = "quick" if args.quick else "full"
    gpus = parse_gpus(args.gpus)
    book_gpu = os.environ.get("LABMAGIC_BOOK_GPU", BOOK_GPU)
    if args.reference:
        here = {slug_for(g) for g in gpus}
        if here != {book_gpu}:
            raise LabError(f"--reference writes the book's outputs, which come from {book_gpu}; this sweep runs on "
                           f"{', '.join(sorted(here))} (set LABMAGIC_BOOK_GPU to change the book's GPU)")
        if args.quick:
            raise LabError("--reference needs the book's full sizes: drop --quick")
    if args.list:
        slug = slug_for(gpus[0])
        for notebook in chapters:
            state = "up to date" if up_to_date(notebook, slug, size) else "to run"
            print(f"{notebook.stem}: {state} on {slug}")
        return 0
    started = time.monotonic()
    outcomes = sweep(chapters, size=size, inject_size=args.quick, force=args.force, gpus=gpus,
                     timeout=args.timeout, reference=args.reference)
    stale = sorted({c for slug in {o.slug for o in outcomes} for c in stale_chapters(slug)})
    print(summary(outcomes, stale, time.monotonic() - started))
    return 1 if any(o.status == "failed" for o in outcomes) else 0


