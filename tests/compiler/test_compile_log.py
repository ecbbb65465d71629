"""A compile error quotes the cell, never a file the cell included (issue #13, item 9a): an ``#include`` of a key or
of /etc/passwd must not carry its lines into the error, the notebook's output or its logs."""

from __future__ import annotations

import re

import pytest

from labmagic.compiler import nvrtc
from labmagic.errors import CompileError

SECRET = "secret_token_4711"


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


@pytest.fixture
def secret_header(tmp_path):
    path = tmp_path / "credentials.h"
    path.write_text(f"// a key\n__device__ int leak = {SECRET};  // hunter2\n")
    return path


def test_an_included_files_lines_and_words_are_not_shown(shell, capsys, secret_header):
    body = f'#include "{secret_header}"\nextern "C" __global__ void k(float* a) {{\n    a[0] = undefined_here;\n}}'
    with pytest.raises(CompileError) as info:
        shell.cell_magic("cuda_kernel", "", body)
    error = info.value
    shown = _plain(capsys.readouterr().out)
    assert SECRET not in str(error) and SECRET not in error.detail and SECRET not in shown
    assert "hunter2" not in error.detail and "hunter2" not in shown
    # Where the errors are stays visible, and the cell's own lines are quoted as before.
    assert str(error) == 'line 4: identifier "undefined_here" is undefined'
    assert f'{secret_header}(2): error: identifier "..." is undefined' in error.detail
    assert "a[0] = undefined_here;" in error.detail
    assert "files other than the cell are not shown" in error.detail


def test_the_headline_of_an_error_in_an_included_file_is_redacted(secret_header):
    with pytest.raises(CompileError) as info:
        nvrtc.compile(f'#include "{secret_header}"\n', use_cache=False)
    assert str(info.value).startswith(f"compile failed: {secret_header}(2): error: ")
    assert SECRET not in str(info.value) and SECRET not in info.value.detail


def test_etc_passwd_is_not_echoed():
    with pytest.raises(CompileError) as info:
        nvrtc.compile('#include "/etc/passwd"\nextern "C" __global__ void k() {}', use_cache=False)
    assert "root:" not in str(info.value) and "root:" not in info.value.detail
    assert "/etc/passwd(1): error" in info.value.detail


def test_cuda_headers_keep_their_messages_but_not_their_lines():
    body = '#include <cuda_fp16.h>\nextern "C" __global__ void k(__half* h) { h[0] = __hadd(h[0], 1, 2); }'
    with pytest.raises(CompileError) as info:
        nvrtc.compile(body, use_cache=False)
    detail = info.value.detail
    assert 'number of parameters of function "__hadd(__half, __half)" does not match the call' in detail
    assert "__CUDA_HOSTDEVICE_FP16_DECL__" not in detail  # the header's own line
    assert "h[0] = __hadd(h[0], 1, 2);" in detail
