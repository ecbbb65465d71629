"""Parsing compute-sanitizer's reports, on literal samples of each tool's output."""

from __future__ import annotations

from labmagic.child import sanitizer_report, sanitizer_run

# memcheck on a vector add whose guard is `i <= n`: one report per faulting thread, then the host
# API error the fault causes, then the summary.
MEMCHECK = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at vecadd_oob+0xb0 in cell:6
=========     by thread (3,0,0) in block (3,0,0)
=========     Address 0x7f3c2a000ffc is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f3c2a000000 of size 4092 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2f5e2f] in libcuda.so.1
=========         Host Frame: cupy_backends.cuda.api.driver.launchKernel [0x2a1d1] in driver.cpython-311-x86_64-linux-gnu.so
=========
========= Invalid __global__ write of size 4 bytes
=========     at vecadd_oob+0xb0 in cell:6
=========     by thread (4,0,0) in block (3,0,0)
=========     Address 0x7f3c2a001000 is out of bounds
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2f5e2f] in libcuda.so.1
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cudaStreamSynchronize.
=========     Saved host backtrace up to driver entry point at error
=========         Host Frame: [0x4a7e3b] in libcudart.so.12
=========
========= ERROR SUMMARY: 3 errors
"""

# Older compute-sanitizer (CUDA 11) location form: offset, file:line:function.
MEMCHECK_OLD = """\
========= COMPUTE-SANITIZER
========= Invalid __shared__ read of size 4 bytes
=========     at 0x00000150 in /tmp/build/cell:12:transpose_tile
=========     by thread (31,7,0) in block (0,1,0)
=========     Address 0x4100 is out of bounds
=========
========= ERROR SUMMARY: 1 error
"""

RACECHECK = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at void reverse<256>(float *, const float *)+0x120 in cell:5
=========     and Read access at void reverse<256>(float *, const float *)+0x1a0 in cell:7 [248 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""

INITCHECK = """\
========= COMPUTE-SANITIZER
========= Uninitialized __global__ memory read of size 4 bytes
=========     at sum_rows+0x70 in cell:4
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7fa3b6a00400
=========
========= ERROR SUMMARY: 1 error
"""

SYNCCHECK = """\
========= COMPUTE-SANITIZER
========= Barrier error detected. Divergent thread(s) in warp
=========     at half_sync+0x90 in cell:9
=========     by thread (0,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 1 error
"""

CLEAN = """\
========= COMPUTE-SANITIZER
========= ERROR SUMMARY: 0 errors
"""

NO_LINEINFO = """\
========= Invalid __global__ write of size 4 bytes
=========     at vecadd_oob+0xb0
=========     by thread (3,0,0) in block (3,0,0)
=========
========= ERROR SUMMARY: 1 error
"""


def test_memcheck_merges_threads_and_keeps_the_line():
    findings, errors = sanitizer_report.parse_output(MEMCHECK, "memcheck")
    assert errors == 3
    oob, api = findings
    assert oob.kind == "Invalid __global__ write of size 4 bytes"
    assert (oob.kernel, oob.offset, oob.file, oob.line) == ("vecadd_oob", "0xb0", "cell", 6)
    assert oob.count == 2 and (oob.thread, oob.block) == ("3,0,0", "3,0,0")  # the first faulting thread
    assert any("out of bounds" in d for d in oob.details)
    assert not any("Host Frame" in d for d in oob.details)
    assert api.severity == "api" and "cudaErrorLaunchFailure" in api.kind and api.line is None


# What the judge's memcheck run printed on an H100 (driver 580) before any kernel of the submission's: the CUDA
# runtime and torch asking the driver for entry points it does not have, 34 of them, each counted in the summary.
PROBES = """\
========= COMPUTE-SANITIZER
========= Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to "invalid argument" on CUDA API call to cuGetProcAddress_v2.
=========     Saved host backtrace up to driver entry point at error
=========         Host Frame: [0x2f5e2f] in libcuda.so.1
=========
========= Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to "invalid argument" on CUDA API call to cuGetProcAddress_v2.
=========     Saved host backtrace up to driver entry point at error
=========
========= Program hit cudaErrorInvalidValue (error 1) due to "invalid argument" on CUDA API call to cudaFuncGetAttributes.
=========     Saved host backtrace up to driver entry point at error
=========
========= ERROR SUMMARY: 3 errors
"""


def test_driver_entry_point_probes_are_not_errors_but_other_failed_calls_are():
    (api,), errors = sanitizer_report.parse_output(PROBES, "memcheck")
    assert errors == 1
    assert api.severity == "api" and api.kind.endswith("cudaFuncGetAttributes.") and api.count == 1
    only_probes = PROBES.replace("cudaFuncGetAttributes", "cuGetProcAddress_v2")
    assert sanitizer_report.parse_output(only_probes, "memcheck") == ([], 0)


def test_old_location_format():
    (f,), errors = sanitizer_report.parse_output(MEMCHECK_OLD, "memcheck")
    assert errors == 1
    assert (f.kernel, f.file, f.line, f.offset) == ("transpose_tile", "cell", 12, "0x00000150")
    assert f.kind == "Invalid __shared__ read of size 4 bytes"


def test_racecheck_both_lines_and_hazard_count():
    (f,), errors = sanitizer_report.parse_output(RACECHECK, "racecheck")
    assert errors == 1
    assert f.kind == "Race reported between Write access"
    assert f.kernel == "void reverse<256>(float *, const float *)" and f.line == 5
    assert f.count == 248
    assert any("Read access" in d and "cell:7" in d for d in f.details)


def test_initcheck_and_synccheck():
    (f,), _ = sanitizer_report.parse_output(INITCHECK, "initcheck")
    assert f.kind.startswith("Uninitialized __global__ memory read") and f.line == 4 and f.kernel == "sum_rows"
    (g,), _ = sanitizer_report.parse_output(SYNCCHECK, "synccheck")
    assert g.kind == "Barrier error detected. Divergent thread(s) in warp" and g.line == 9


def test_clean_and_missing_lineinfo():
    findings, errors = sanitizer_report.parse_output(CLEAN)
    assert findings == [] and errors == 0
    result = sanitizer_run.SanitizeResult("01_vector_add", "cuda_naive", "1048583", "memcheck", findings, errors)
    assert result.clean and repr(result).endswith("clean (0 errors)")
    (f,), _ = sanitizer_report.parse_output(NO_LINEINFO)
    assert f.line is None and "compile with -lineinfo" in f.where


def test_findings_quote_the_cell_line():
    findings, errors = sanitizer_report.parse_output(MEMCHECK)
    source = 'extern "C" __global__ void vecadd_oob(float* c, int n) {\n  int i = threadIdx.x;\n' \
             '  if (i <= n)\n    c[i] = 1.0f;\n}\n'
    # first_line=3: the cell's source starts on line 3, so line 6 is the source's 4th line.
    sanitizer_report.attach_sources(findings, {"vecadd_oob": (source, 3)})
    assert findings[0].source_line == "c[i] = 1.0f;"
    result = sanitizer_run.SanitizeResult("ch", "oob", "1023", "memcheck", findings, errors, exit_code=1,
                                     child_error="CUDARuntimeError: unspecified launch failure")
    assert not result.clean
    text = repr(result)
    assert "3 error(s) in 1 place(s)" in text
    assert "vecadd_oob+0xb0 at cell:6" in text and "   6 | c[i] = 1.0f;" in text
    assert "(x2)" in text and "API: Program hit cudaErrorLaunchFailure" in text
    assert "color:#b00020" in result._repr_html_()


def test_template_kernel_sources_match_by_bare_name():
    findings, _ = sanitizer_report.parse_output(RACECHECK)
    src = "\n".join(f"line {n}" for n in range(2, 12))
    sanitizer_report.attach_sources(findings, {"reverse<256>": (src, 2)})
    assert findings[0].source_line == "line 5"


def test_kernel_sources_from_a_namespace():
    class Result:
        source, first_line = "a\nb\n", 2

    class Module:
        result = Result()

    class Kernel:
        module, symbol, name = Module(), "_Z3fooPf", "foo"

    ns = {"foo": Kernel(), "x": 3, "s": "text"}
    assert sanitizer_run.kernel_sources(ns) == {"_Z3fooPf": ("a\nb\n", 2), "foo": ("a\nb\n", 2)}


def test_sanitizer_command_wraps_the_child():
    cmd = sanitizer_run.sanitizer_command("compute-sanitizer", "racecheck", ["python", "-m", "labmagic.child"])
    assert cmd[:3] == ["compute-sanitizer", "--tool", "racecheck"] and cmd[-1] == "labmagic.child"
    assert "--padding" not in cmd


def test_memcheck_pads_every_allocation_so_a_far_write_cannot_land_in_a_neighbour():
    cmd = sanitizer_run.sanitizer_command("compute-sanitizer", "memcheck", ["python", "-m", "labmagic.child"])
    padding = int(cmd[cmd.index("--padding") + 1])
    assert padding >= 64 * 1024  # the judge's planted cheat writes 16 KB past its output
    assert cmd.index("--padding") < cmd.index("python")  # the sanitizer's option, not the child's


def test_sanitize_variant_wiring_with_a_scripted_sanitizer(tmp_path, monkeypatch):
    """The whole path on CPU: the child replays a chapter with a CUDA cell, the sanitizer's report
    (scripted here: the real tool needs a GPU) is parsed, and the finding quotes the cell's line from
    the sources the child sent back. The child's environment must disable the caching allocators."""
    import json
    import stat

    cuda = ('%%cuda_kernel\nextern "C" __global__ void poke(float* c, int n) {\n'
            '  int i = threadIdx.x;\n  if (i <= n) c[i] = 1.0f;  // line 4 of the cell\n}')
    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": s} for s in (
        "%load_ext labmagic\nimport torch, labmagic.benchmark", cuda,
        "race = labmagic.benchmark.Race(chapter='97_poke', variants={'torch': torch.neg}, ref='torch',\n"
        "    make_inputs=lambda n: (torch.ones(n),), check_shapes=[(7,)])", "%bench race")]
    nb = tmp_path / "97_poke.ipynb"
    nb.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    env_file = tmp_path / "env.txt"
    fake = tmp_path / "compute-sanitizer"
    fake.write_text(f"""#!/bin/sh
echo "$PYTORCH_NO_CUDA_MEMORY_CACHING $XLA_PYTHON_CLIENT_ALLOCATOR" > {env_file}
while [ "${{1#--}}" != "$1" ]; do shift 2; done  # the sanitizer's own options, each with its value
"$@"
echo "========= COMPUTE-SANITIZER"
echo "========= Invalid __global__ write of size 4 bytes"
echo "=========     at poke+0x80 in cell:4"
echo "=========     by thread (7,0,0) in block (0,0,0)"
echo "========="
echo "========= ERROR SUMMARY: 1 error"
""")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr("labmagic.runtime.has_gpu", lambda: True)
    monkeypatch.setenv("LABMAGIC_COMPUTE_SANITIZER", str(fake))
    result = sanitizer_run.sanitize_variant(str(nb), "torch")
    assert env_file.read_text().split() == ["1", "platform"]
    assert result.shape == "7" and result.child_error is None and result.errors == 1
    (f,) = result.findings
    assert (f.kernel, f.line) == ("poke", 4)
    assert f.source_line == "if (i <= n) c[i] = 1.0f;  // line 4 of the cell"


def test_a_variant_that_faults_under_the_sanitizer_is_named_with_the_shape_it_ran_at(tmp_path, monkeypatch):
    """A faulting kernel stops the child before its success record: the error record must still name the shape,
    or the header reads "cuda_oob at : 3 error(s)" (the race's default, its largest check shape, was never said)."""
    import json
    import stat

    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": s} for s in (
        "%load_ext labmagic\nimport torch, labmagic.benchmark",
        "def cuda_oob(x):\n    raise RuntimeError('CUDA error: an illegal memory access was encountered')",
        "race = labmagic.benchmark.Race(chapter='97_oob', variants={'torch': torch.neg, 'cuda_oob': cuda_oob},\n"
        "    ref='torch', make_inputs=lambda n: (torch.ones(n),), shapes=[64], check_shapes=[(3,), (7,)])",
        "%bench race")]
    nb = tmp_path / "97_oob.ipynb"
    nb.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    fake = tmp_path / "compute-sanitizer"
    fake.write_text("""#!/bin/sh
while [ "${1#--}" != "$1" ]; do shift 2; done
"$@"
echo "========= Invalid __global__ write of size 4 bytes"
echo "=========     at oob+0x80 in cell:4"
echo "========= ERROR SUMMARY: 3 errors"
""")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr("labmagic.runtime.has_gpu", lambda: True)
    monkeypatch.setenv("LABMAGIC_COMPUTE_SANITIZER", str(fake))
    result = sanitizer_run.sanitize_variant(str(nb), "cuda_oob")
    assert result.child_error.startswith("RuntimeError: CUDA error: an illegal memory access")
    assert result.shape == "7"  # the largest check shape, which the child chose
    assert repr(result).splitlines()[0] == "compute-sanitizer memcheck: 97_oob / cuda_oob at 7: 3 error(s) in 1 place(s)"
    explicit = sanitizer_run.sanitize_variant(str(nb), "cuda_oob", "2**5")
    assert explicit.shape == "32"
