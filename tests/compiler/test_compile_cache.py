"""The disk cache vouches for what it serves (issue #56, item 2): a truncated, empty or swapped ``.cubin`` and an
edited ``.json`` are each a miss that recompiles and says so once, in one line, with real files on disk."""

from __future__ import annotations

import json

import numpy as np
import pytest

from labmagic.compiler import cache, nvrtc


def _source(name: str = "k") -> str:
    tag = np.random.default_rng().integers(1 << 62)
    return f'// {tag}\nextern "C" __global__ void {name}(float* x) {{ x[threadIdx.x] *= 2.0f; }}\n'


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("LABMAGIC_CACHE_DIR", str(tmp_path))
    return tmp_path


def _recompiled(src: str, capsys) -> tuple:
    """Compile ``src`` as a new session would (memory cache empty); the result and what it said on stderr."""
    capsys.readouterr()
    cache.forget()
    result = nvrtc.compile(src)
    return result, capsys.readouterr().err


def _edit_json(path, edit) -> None:
    meta = json.loads(path.read_text())
    edit(meta)
    path.write_text(json.dumps(meta))


@pytest.mark.parametrize("damage", ["truncated", "empty", "missing"])
def test_a_damaged_cubin_is_a_miss_that_recompiles_and_says_so(folder, capsys, damage):
    src = _source()
    first = nvrtc.compile(src)
    cubin = folder / f"{first.key}.cubin"
    if damage == "missing":
        cubin.unlink()
    else:
        cubin.write_bytes(first.cubin[: len(first.cubin) // 2] if damage == "truncated" else b"")
    result, said = _recompiled(src, capsys)
    assert result.origin == "compiled" and result.cubin == first.cubin
    assert said.count("\n") == 1 and said.startswith(f"labmagic: compile cache entry {first.key} in {folder} ")
    assert said.rstrip().endswith(": not used, compiling again")
    assert cubin.read_bytes() == first.cubin  # the entry is whole again: the next session reads it, silently
    again, said = _recompiled(src, capsys)
    assert (again.origin, said) == ("disk", "")


def test_another_kernels_cubin_under_this_key_is_not_served(folder, capsys):
    mine, other = _source("mine"), _source("other")
    ours, theirs = nvrtc.compile(mine), nvrtc.compile(other)
    (folder / f"{ours.key}.cubin").write_bytes(theirs.cubin)
    result, said = _recompiled(mine, capsys)
    assert result.origin == "compiled" and result.cubin == ours.cubin and result.lowered == {"mine": "mine"}
    assert "has a .cubin that is not the one compiled (empty, truncated or replaced)" in said


def test_a_swapped_entry_both_files_is_not_served(folder, capsys):
    mine, other = _source("mine"), _source("other")
    ours, theirs = nvrtc.compile(mine), nvrtc.compile(other)
    for suffix in (".cubin", ".json"):
        (folder / f"{ours.key}{suffix}").write_bytes((folder / f"{theirs.key}{suffix}").read_bytes())
    result, said = _recompiled(mine, capsys)
    assert result.origin == "compiled" and result.lowered == {"mine": "mine"}
    assert "was written for other inputs" in said


@pytest.mark.parametrize("field", ["source", "log", "lowered"])
def test_an_edited_json_is_not_trusted(folder, capsys, field):
    src = _source()
    first = nvrtc.compile(src)
    edits = {"source": lambda m: m["result"].update(source=m["result"]["source"].replace("2.0f", "3.0f")),
             "log": lambda m: m["result"].update(log="ptxas info    : Used 1 registers"),
             "lowered": lambda m: m["result"].update(lowered={"k": "not_k"})}
    _edit_json(folder / f"{first.key}.json", edits[field])
    result, said = _recompiled(src, capsys)
    assert result.origin == "compiled" and result.resources == first.resources and result.lowered == {"k": "k"}
    assert "has a .json edited since it was written" in said and said.count("\n") == 1


def test_a_json_that_is_not_an_entry_is_a_miss_that_says_so(folder, capsys):
    src = _source()
    first = nvrtc.compile(src)
    (folder / f"{first.key}.json").write_text("{not json")
    result, said = _recompiled(src, capsys)
    assert result.origin == "compiled" and "has a .json that is not a cache entry" in said


def test_a_refused_entry_is_said_once_even_where_it_cannot_be_repaired(folder, capsys, monkeypatch):
    src = _source()
    first = nvrtc.compile(src)
    (folder / f"{first.key}.cubin").write_bytes(b"\x7fELF and nothing else")

    def read_only(path, data):  # what a full or read-only cache folder does to the write
        raise OSError(30, "Read-only file system", str(path))

    monkeypatch.setattr(cache, "atomic_write", read_only)
    _, said = _recompiled(src, capsys)
    again, said_again = _recompiled(src, capsys)
    assert again.origin == "compiled" and again.cubin == first.cubin
    assert said.count("compile cache entry") == 1 and said_again == ""
