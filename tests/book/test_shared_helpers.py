"""The book's CUDA as one library (#48): a device helper is written once, in a header of ``book/include/lab/``, once
a second chapter needs it, and a ``%%cuda_kernel`` cell holds one rung, not a chapter.

The census parses every chapter's ``%%cuda_kernel`` cells and every header, and lists the device helpers (``__device__``
functions and function templates, at file scope) each defines. A helper defined in two or more chapters must be on
:data:`SHARED_ALLOWED`, and every entry there must still be such a helper: a new duplicate fails, and so does one
that moved to a header while its entry stayed. The same for cells over :data:`MAX_CELL_LINES` lines and
:data:`LONG_CELLS_ALLOWED`. When a chapter moves onto the headers, delete its entries (one a line, for easy merges).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "book"
HEADERS = BOOK / "include" / "lab"
MAX_CELL_LINES = 250

#: Helpers defined in two or more chapters (the chapters that define each, and why): since chapter 07 moved onto the
#: headers (#48), only a name two rungs teach, each its own function. Chapter 02 still writes the cp_async helpers
#: in its cells and chapter 03 the mbarrier and softmax ones, each the only chapter that does; a second one fails here.
SHARED_ALLOWED = {
    "load_tile",  # 07, 08: each chapter's own tile load (07's attention, 08's int8 GEMM), two functions of one name
}

#: Chapters whose longest ``%%cuda_kernel`` cell is still over MAX_CELL_LINES lines, not yet split into one rung a
#: cell: chapter 03's split (one cell a rung, with quack and Liger in its race) waits for its sweep on a branch.
LONG_CELLS_ALLOWED = {
    "03_online_softmax",
}

_NOISE = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/|^[ \t]*#[^\n]*', re.S | re.M)
_NAME = re.compile(r"(\w+)\s*$")


def chapters() -> dict[str, list[str]]:
    """{chapter: [body of each ``%%cuda_kernel`` cell]} for every chapter notebook of the book."""
    out = {}
    for path in sorted(BOOK.glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        sources = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                   for c in cells if c["cell_type"] == "code"]
        out[path.stem] = [s.partition("\n")[2] for s in sources if s.startswith("%%cuda_kernel")]
    return out


def device_helpers(source: str) -> set[str]:
    """The names of the ``__device__`` functions and function templates ``source`` defines at file scope (not a
    struct's members, not kernels); string literals, comments and preprocessor lines are dropped first (asm text
    holds braces, a ``#define`` has no semicolon)."""
    text = _NOISE.sub('""', source)
    names, depth, start = set(), 0, 0
    for i, ch in enumerate(text):
        if ch == "{":
            if depth == 0:
                head = text[start:i]
                if "__device__" in head and "__global__" not in head and "(" in head:
                    match = _NAME.search(head[:head.index("(")])
                    if match:
                        names.add(match.group(1))
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                start = i + 1
        elif ch == ";" and depth == 0:
            start = i + 1
    return names


def census() -> dict[str, set[str]]:
    """{helper: chapters defining it} for the helpers defined in two or more chapters."""
    where = defaultdict(set)
    for chapter, cells in chapters().items():
        for name in set().union(*map(device_helpers, cells)) if cells else ():
            where[name].add(chapter[:2])
    return {name: found for name, found in where.items() if len(found) > 1}


def test_the_parser_finds_file_scope_helpers_and_nothing_else():
    source = '''
template <int N> __device__ __forceinline__ void wait() { asm volatile("{ wait %0; }" :: "n"(N)); }
__device__ __forceinline__ unsigned smem_u32(const void* p) { return 0; }  // a comment { with a brace
__device__ int counter;
struct Tile { __device__ void run() {} };
__global__ void kernel(float* x) { x[0] = 1.f; }
#define NEG_INF __int_as_float(0xff800000)
__host__ __device__ inline float twice(float v) { return 2 * v; }
'''
    assert device_helpers(source) == {"wait", "smem_u32", "twice"}


def test_a_helper_is_defined_in_one_chapter_or_is_on_the_allow_list():
    found = census()
    new = {name: sorted(c) for name, c in found.items() if name not in SHARED_ALLOWED}
    gone = SHARED_ALLOWED - set(found)
    assert not new, (f"device helpers defined in two or more chapters: {new}; move each into a header of "
                     "book/include/lab/ (or, if a rung teaches it, add it to SHARED_ALLOWED saying why)")
    assert not gone, f"no longer defined in two chapters, take them off SHARED_ALLOWED: {sorted(gone)}"


def test_no_header_defines_what_another_header_does():
    where = defaultdict(set)
    for header in sorted(HEADERS.glob("*.cuh")):
        for name in device_helpers(header.read_text(encoding="utf-8")):
            where[name].add(header.name)
    assert {name: sorted(h) for name, h in where.items() if len(h) > 1} == {}


@pytest.mark.parametrize("header", sorted(p.name for p in HEADERS.glob("*.cuh")))
def test_a_header_opens_with_what_it_offers_and_which_chapter_explains_it(header):
    text = (HEADERS / header).read_text(encoding="utf-8")
    assert text.startswith(f"// lab/{header}: "), f"{header} does not open with its name and what it offers"
    opening = text[: text.index("#pragma once")]
    assert re.search(r"Chapter \d\d explains", opening), f"{header}: its opening names no chapter that explains it"


def test_no_cuda_kernel_cell_is_longer_than_a_rung_but_in_the_chapters_not_yet_split():
    longest = {chapter: max((len(body.splitlines()) for body in cells), default=0)
               for chapter, cells in chapters().items()}
    long = {chapter for chapter, lines in longest.items() if lines > MAX_CELL_LINES}
    assert long - LONG_CELLS_ALLOWED == set(), {c: longest[c] for c in long - LONG_CELLS_ALLOWED}
    assert LONG_CELLS_ALLOWED - long == set(), (f"split now, take them off LONG_CELLS_ALLOWED: "
                                                f"{sorted(LONG_CELLS_ALLOWED - long)}")
