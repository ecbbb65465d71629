"""How the include scan reads NVRTC's options and the preprocessor's ways of reaching a file."""

from __future__ import annotations

import numpy as np

from labmagic.compiler import nvrtc
from labmagic.compiler.includes import SearchPath, include_options, scan


def test_every_spelling_of_an_include_folder_and_a_pre_include_is_read():
    options = ["-DX=1", "-Ia", "-I", "b", "--include-path=c", "--include-path", "d", "-include", "p.h",
               "--pre-include=q.h", "-use_fast_math"]
    assert include_options(options) == (["a", "b", "c", "d"], ["p.h", "q.h"])


def test_a_header_that_exists_only_for_has_include_changes_the_key(tmp_path, monkeypatch):
    monkeypatch.setenv("LABMAGIC_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "inc").mkdir()
    src = (f"// {np.random.default_rng().integers(1 << 62)}\n"
           "#if __has_include(<optional_tuning.cuh>)\n#define V 2\n#else\n#define V 1\n#endif\n"
           'extern "C" __global__ void k(int* x) { x[0] = V; }\n')
    options = (f"-I{tmp_path / 'inc'}",)
    first = nvrtc.compile(src, options=options)
    (tmp_path / "inc" / "optional_tuning.cuh").write_text("")
    second = nvrtc.compile(src, options=options)
    assert second.origin == "compiled" and second.cubin != first.cubin


def test_includes_under_if_0_and_in_comments_are_read_and_a_hash_inside_a_line_is_not(tmp_path):
    (tmp_path / "a.cuh").write_text("")
    (tmp_path / "b.cuh").write_text("")
    (tmp_path / "c.cuh").write_text("")
    text = '#if 0\n#include "a.cuh"\n#endif\n/*\n  # include "b.cuh"\n*/\nint x; // #include "c.cuh"\n'
    found = scan(text, SearchPath(cwd=str(tmp_path)))
    assert [h.name for h in found.headers] == ["a.cuh", "b.cuh"] and found.complete
