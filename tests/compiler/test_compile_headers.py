"""The compiler knows its headers (issue #48; issue #56, item 1): the book's include folder is on NVRTC's path, the
compile-cache key covers the text of every header a compile reads, transitively, so an edited header never serves
a stale CUBIN from memory or from disk; and an error inside a header names the header, its line and the cell line
that includes it."""

from __future__ import annotations

import numpy as np
import pytest

from labmagic.compiler import cache, nvrtc
from labmagic.errors import CompileError, LabError


def _unique(body: str) -> str:
    """The source made unique per test run, so every cache assertion starts cold."""
    return f"// {np.random.default_rng().integers(1 << 62)}\n{body}"


@pytest.fixture
def book_include(tmp_path, monkeypatch):
    """A book include folder of this test's own (``lab/`` in it), and a cache folder of its own."""
    folder = tmp_path / "include"
    (folder / "lab").mkdir(parents=True)
    monkeypatch.setenv("LABMAGIC_INCLUDE_DIR", str(folder))
    monkeypatch.setenv("LABMAGIC_CACHE_DIR", str(tmp_path / "cache"))
    return folder


def _header(folder, name: str, text: str):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


SCALE = '#include <lab/scale.cuh>\nextern "C" __global__ void k(float* x) {\n    x[threadIdx.x] = scale(x[threadIdx.x]);\n}\n'


def _scale_header(factor: str) -> str:
    return f'#pragma once\n#include "factor.cuh"\n__device__ float scale(float v) {{ return v * FACTOR; }}\n' \
           f"// {factor}\n"


def test_a_cell_includes_the_books_headers_and_knows_which_it_read(shell, book_include):
    _header(book_include, "lab/scale.cuh", _scale_header("a"))
    _header(book_include, "lab/factor.cuh", "#define FACTOR 3.0f\n")
    shell.cell_magic("cuda_kernel", "--as scaled", SCALE)
    result = shell.ns["scaled"].result
    assert [(h.name, h.cell_line, h.project) for h in result.headers] == [
        ("lab/scale.cuh", 1, True), ("lab/factor.cuh", 1, True)]
    assert "sha256:" in shell.ns["k"].__labmagic_source__  # a benchmark's source hash follows the headers


def test_an_edited_header_recompiles_from_memory_and_from_disk(shell, book_include):
    _header(book_include, "lab/scale.cuh", _scale_header("a"))
    factor = _header(book_include, "lab/factor.cuh", "#define FACTOR 3.0f\n")
    src = _unique(SCALE)
    first = nvrtc.compile(src)
    assert (first.origin, nvrtc.compile(src).origin) == ("compiled", "memory")
    factor.write_text("#define FACTOR 5.0f\n")  # two levels down: scale.cuh includes it
    second = nvrtc.compile(src)
    assert second.origin == "compiled" and second.key != first.key and second.cubin != first.cubin
    cache.forget()  # a new session: only the disk copies are left
    assert nvrtc.compile(src).cubin == second.cubin
    factor.write_text("#define FACTOR 3.0f\n")
    cache.forget()
    back = nvrtc.compile(src)
    assert back.origin == "disk" and back.cubin == first.cubin  # the first text's CUBIN, from its own entry
    factor.write_text('#error "FACTOR is being rewritten"\n')
    cache.forget()
    with pytest.raises(CompileError, match=r'^lab/factor.cuh:1 \(included at line 3\): #error directive: '
                                           r'"FACTOR is being rewritten"$'):
        nvrtc.compile(src, first_line=2)


def test_a_header_edited_while_the_chapter_is_open_is_recompiled_in_the_cell(shell, book_include):
    header = _header(book_include, "lab/scale.cuh", _scale_header("a"))
    _header(book_include, "lab/factor.cuh", "#define FACTOR 3.0f\n")
    body = _unique(SCALE)
    shell.cell_magic("cuda_kernel", "--as scaled", body)
    before = shell.ns["scaled"].result
    header.write_text(_scale_header("b").replace("v * FACTOR", "v * FACTOR + 1.0f"))
    shell.cell_magic("cuda_kernel", "--as scaled", body)
    after = shell.ns["scaled"].result
    assert after.origin == "compiled" and after.cubin != before.cubin


def test_a_user_include_folder_and_a_quoted_include_are_in_the_key(tmp_path, monkeypatch):
    """Issue #56's case: ``-I<dir>`` and ``#include "val.cuh"``."""
    monkeypatch.setenv("LABMAGIC_CACHE_DIR", str(tmp_path / "cache"))
    own = tmp_path / "own"
    val = _header(own, "val.cuh", "#define VAL 1\n")
    src = _unique('#include "val.cuh"\nextern "C" __global__ void k(int* x) { x[0] = VAL; }\n')
    first = nvrtc.compile(src, options=(f"-I{own}",))
    val.write_text("#define VAL 2\n")
    second = nvrtc.compile(src, options=(f"-I{own}",))
    assert second.origin == "compiled" and second.cubin != first.cubin
    val.write_text("#error stale\n")
    cache.forget()
    with pytest.raises(CompileError, match=r"^compile failed: val.cuh\(1\): catastrophic error: #error directive: "
                                           r"stale \(included at line 2\)$"):
        nvrtc.compile(src, options=(f"-I{own}",))


def test_a_header_that_appears_in_an_earlier_folder_changes_the_key(tmp_path, monkeypatch):
    monkeypatch.setenv("LABMAGIC_CACHE_DIR", str(tmp_path / "cache"))
    early, late = tmp_path / "early", tmp_path / "late"
    early.mkdir()
    _header(late, "v.cuh", "#define V 1\n")
    options = (f"-I{early}", f"-I{late}")
    src = _unique('#include <v.cuh>\nextern "C" __global__ void k(int* x) { x[0] = V; }\n')
    first = nvrtc.compile(src, options=options)
    _header(early, "v.cuh", "#define V 7\n")  # now NVRTC opens this one
    second = nvrtc.compile(src, options=options)
    assert second.origin == "compiled" and second.cubin != first.cubin


def test_an_include_the_scan_cannot_follow_is_never_served_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LABMAGIC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    val = _header(tmp_path, "val.cuh", "#define VAL 1\n")
    src = _unique('#define WHICH "val.cuh"\n#include WHICH\nextern "C" __global__ void k(int* x) { x[0] = VAL; }\n')
    first = nvrtc.compile(src)
    val.write_text("#define VAL 2\n")
    second = nvrtc.compile(src)
    assert (first.origin, second.origin) == ("compiled", "compiled") and second.cubin != first.cubin
    assert not list((tmp_path / "cache").glob("*.cubin"))


def test_an_error_in_a_header_names_it_its_line_and_the_including_line(shell, book_include):
    _header(book_include, "lab/bad.cuh", "#pragma once\n__device__ int bad() {\n    return undefined_thing;\n}\n")
    body = '#include <lab/bad.cuh>\nextern "C" __global__ void k(int* x) { x[0] = bad(); }\n'
    with pytest.raises(CompileError) as info:
        shell.cell_magic("cuda_kernel", "", body)
    assert str(info.value) == 'lab/bad.cuh:3 (included at line 2): identifier "undefined_thing" is undefined'
    detail = info.value.detail
    assert 'lab/bad.cuh(3): error: identifier "undefined_thing" is undefined' in detail
    assert "return undefined_thing;" in detail  # the project's own header: its line is quoted
    assert "lab/bad.cuh is included at line 2: #include <lab/bad.cuh>" in detail
    assert str(book_include) not in str(info.value)


@pytest.mark.parametrize(("header", "expected"), [
    ("missing", r'^line 2: cannot open source file "lab/nowhere.cuh" \(include folders searched: {folder}\)$'),
    ("nested_missing", r'^lab/outer.cuh:2 \(included at line 2\): cannot open source file "inner.cuh" '
                       r"\(include folders searched: {folder}\)$"),
    ("itself", r'^lab/self.cuh:1 \(included at line 2\): #include file "lab/self.cuh" includes itself$'),
])
def test_bad_includes_are_one_clear_line(shell, book_include, header, expected):
    _header(book_include, "lab/outer.cuh", '#pragma once\n#include "inner.cuh"\n')
    _header(book_include, "lab/self.cuh", "#include <lab/self.cuh>\n")
    name = {"missing": "lab/nowhere.cuh", "nested_missing": "lab/outer.cuh", "itself": "lab/self.cuh"}[header]
    with pytest.raises(CompileError) as info:
        shell.cell_magic("cuda_kernel", "", f'#include <{name}>\nextern "C" __global__ void k(int* x) {{}}\n')
    assert "\n" not in str(info.value)
    import re

    assert re.match(expected.format(folder=re.escape(str(book_include))), str(info.value)), str(info.value)


def test_a_book_include_folder_that_is_not_one_is_said_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("LABMAGIC_INCLUDE_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(LabError, match=r"^LABMAGIC_INCLUDE_DIR='.*nowhere' is not a folder"):
        nvrtc.compile('extern "C" __global__ void k() {}', use_cache=False)


def test_the_same_source_for_another_first_line_gets_its_own_line_labels(tmp_path, monkeypatch):
    """Issue #56: ``first_line`` was not in the key, so a second caller got the first caller's line labels."""
    monkeypatch.setenv("LABMAGIC_CACHE_DIR", str(tmp_path / "cache"))
    src = _unique('#warning "look here"\nextern "C" __global__ void k(int* x) { x[0] = 1; }\n')
    one, two = nvrtc.compile(src, first_line=1), nvrtc.compile(src, first_line=5)
    assert "cell(2): warning" in one.log and "cell(6): warning" in two.log
    assert two.first_line == 5 and two.origin == "compiled"
    cache.forget()
    again = nvrtc.compile(src, first_line=5)
    assert again.origin == "disk" and again.first_line == 5 and "cell(6): warning" in again.log
