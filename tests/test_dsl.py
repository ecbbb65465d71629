"""labmagic.dsl: which DSLs can run here, the stand-ins for those that cannot, and the rows they give in a race."""

from __future__ import annotations

import importlib.util

import pytest

import labmagic
from labmagic import dsl
from labmagic.errors import LabError, NoGPUError
from labmagic.store.schema import OK, PREDICTED, SKIPPED


@pytest.fixture
def missing(monkeypatch):
    """A DSL whose module is not installed anywhere: the real import machinery says so."""
    monkeypatch.setitem(dsl.DSLS, "nosuch", dsl.DSL("nosuch", "labmagic_test_no_such_dsl", "nosuch", interpret=True))
    return "nosuch"


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(LabError, match="unknown DSL 'gluten'.*gluon, helion, tilelang, cutedsl"):
        dsl.get("gluten")


def test_not_installed_is_a_skip_with_the_install_line(missing):
    error = dsl.why_not(missing)
    assert isinstance(error, dsl.DSLUnavailable)
    assert "pip install 'labmagic[nosuch]'" in str(error)


def test_installed_but_failing_import_is_a_skip_with_the_error(monkeypatch, tmp_path):
    (tmp_path / "labmagic_test_broken_dsl.py").write_text("raise ImportError('built against another torch')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(dsl.DSLS, "broken", dsl.DSL("broken", "labmagic_test_broken_dsl", "broken", interpret=True))
    error = dsl.why_not("broken")
    assert isinstance(error, dsl.DSLUnavailable)
    assert str(error) == "broken - does not import here: ImportError: built against another torch"


@pytest.mark.skipif(labmagic.has_gpu(), reason="the no-GPU verdict")
def test_a_dsl_without_interpreter_needs_a_gpu_and_helion_runs_eagerly():
    assert isinstance(dsl.why_not("gluon"), NoGPUError)  # triton is installed: gluon imports, but cannot run
    if importlib.util.find_spec("helion") is not None:
        assert dsl.why_not("helion") is None
        assert dsl.header("helion").endswith("(eager, on the CPU)")
    # Gluon compiles for a GPU it does not see; Helion runs instead, and a DSL that is not there does neither.
    assert dsl.compiles_here("gluon") and not dsl.compiles_here("helion")
    assert dsl.header("gluon", compile_only=True).endswith("(compile only: no GPU here)")


def test_a_dsl_that_is_missing_or_fails_to_import_does_not_compile_here(missing, monkeypatch, tmp_path):
    (tmp_path / "labmagic_test_broken_dsl.py").write_text("raise ImportError('built against another torch')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(dsl.DSLS, "broken", dsl.DSL("broken", "labmagic_test_broken_dsl", "broken", interpret=False,
                                                    compiles=True))
    monkeypatch.setitem(dsl.DSLS, missing, dsl.DSL(missing, "labmagic_test_no_such_dsl", missing, interpret=False,
                                                   compiles=True))
    assert not dsl.compiles_here("broken") and not dsl.compiles_here(missing)


def test_stand_in_raises_the_verdicts_kind_naming_the_variant(missing):
    stand_in = dsl.unavailable(dsl.why_not(missing), "nosuch_softmax")
    assert stand_in.__name__ == "nosuch_softmax" and dsl.is_stand_in(stand_in) and not dsl.is_stand_in(print)
    with pytest.raises(dsl.DSLUnavailable, match="^nosuch_softmax: nosuch is not installed"):
        stand_in(1, out=None)
    with pytest.raises(NoGPUError, match="^gluon_gemm: no GPU"):
        dsl.unavailable(NoGPUError("no GPU"), "gluon_gemm")()


def test_race_row_of_a_missing_dsl_is_skipped_with_the_reason(missing):
    import torch

    race = labmagic.Race(
        chapter="test_dsl", ref="torch", make_inputs=lambda n: (torch.randn(n),), shapes=[(64,)], check_shapes=[(5,)],
        variants={"torch": torch.exp, "nosuch_exp": dsl.unavailable(dsl.why_not(missing), "nosuch_exp")},
        nbytes=lambda n: 8 * n, dtype="float32")
    rows = {row.variant: row for row in labmagic.bench(race, plot=False).rows}
    assert rows["nosuch_exp"].status == SKIPPED
    assert rows["nosuch_exp"].error == "nosuch_exp: nosuch is not installed (pip install 'labmagic[nosuch]')"
    assert rows["torch"].status in (OK, PREDICTED) and rows["torch"].error == ""  # the reference still ran


def test_a_peer_is_installed_by_the_peers_extra_runs_on_a_gpu_only_and_has_its_own_backend(monkeypatch, tmp_path):
    """torchao and gemlite (chapter 08's W8A8 peers) are %%dsl entries installed by one extra, .[peers]; a race files
    their variants under their own backend, and without a GPU they need one, whatever interpreter torch has."""
    monkeypatch.setitem(dsl.DSLS, "nopeer", dsl.DSL("nopeer", "labmagic_test_no_such_peer", "nopeer",
                                                    interpret=False, extra="peers", peer=True))
    assert str(dsl.why_not("nopeer")) == "nopeer is not installed (pip install 'labmagic[peers]')"
    (tmp_path / "labmagic_test_fake_peer.py").write_text("VERSION = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(dsl.DSLS, "fakepeer", dsl.DSL("fakepeer", "labmagic_test_fake_peer", "fakepeer",
                                                      interpret=False, extra="peers", peer=True))
    verdict = dsl.why_not("fakepeer")
    if labmagic.has_gpu():
        assert verdict is None
    else:
        assert isinstance(verdict, NoGPUError) and str(verdict) == "fakepeer runs on a GPU only: its variants need one"
    assert dsl.get("torchao").extra == dsl.get("gemlite").extra == "peers"
    race = labmagic.Race(chapter="08_int8", ref="torch_w", make_inputs=lambda n: (n,),
                         variants={"torch_w": abs, "torchao_w8a8": abs, "gemlite_w8a8": abs, "quack_softmax": abs,
                                   "liger_rmsnorm": abs, "fa3_prefill": abs})
    assert [race.backend(n) for n in race.variants] == ["torch", "torchao", "gemlite", "quack", "liger", "fa3"]


def test_the_peers_extra_pins_each_peer_and_ci_does_not_install_it():
    from pathlib import Path

    import tomllib

    extras = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert extras["peers"] == ["torchao==0.18.0", "gemlite==0.6.0.post2", "flashinfer-python==0.5.0",
                               "quack-kernels==0.6.5", "liger-kernel==0.8.5", "fa3-fwd==0.0.3",
                               "flash-attn-4==4.0.0b40"]
    assert {d.dist for d in dsl.DSLS.values() if d.peer} == {dep.split("==")[0] for dep in extras["peers"]}
    assert not any("peers" in dep for name in ("test", "dsls", "cpu") for dep in extras[name])


def test_helion_environment_swaps_the_interpreters_and_restores(monkeypatch):
    if labmagic.has_gpu():
        pytest.skip("the no-GPU environment")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.delenv("HELION_INTERPRET", raising=False)
    import os

    with dsl.environment("helion"):
        assert os.environ.get("HELION_INTERPRET") == "1" and "TRITON_INTERPRET" not in os.environ
    assert os.environ.get("TRITON_INTERPRET") == "1" and "HELION_INTERPRET" not in os.environ
    with dsl.environment("gluon"):
        assert os.environ.get("TRITON_INTERPRET") == "1"


def test_tilelang_environment_points_cuda_home_at_the_toolkit_of_nvcc(monkeypatch, tmp_path):
    import os

    toolkit = tmp_path / "cuda-13.0"
    (toolkit / "bin").mkdir(parents=True)
    (toolkit / "include").mkdir()
    (toolkit / "include" / "cuda.h").write_text("")
    nvcc = toolkit / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\n")
    nvcc.chmod(0o755)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvcc").symlink_to(nvcc)  # a link on PATH, as /usr/local/cuda/bin often is
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("CUDA_HOME", "")  # recorded, so the value the test leaves is undone after it
    monkeypatch.delenv("CUDA_HOME")
    with dsl.environment("helion"):
        assert "CUDA_HOME" not in os.environ  # only TileLang needs it
    with dsl.environment("tilelang"):
        assert os.environ["CUDA_HOME"] == str(toolkit)
    assert os.environ["CUDA_HOME"] == str(toolkit)  # kept: TileLang's later compiles use it too
    monkeypatch.setenv("CUDA_HOME", "/opt/my-cuda")
    with dsl.environment("tilelang"):
        assert os.environ["CUDA_HOME"] == "/opt/my-cuda"  # the user's choice stands


def test_tilelang_environment_silences_the_progress_bar_widget_warning():
    """TileLang imports ``tqdm.auto``, which under a Jupyter kernel without ipywidgets warns into the cell's output
    (the H200's chapter 03 showed it). Only that warning goes: others still reach the cell."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with dsl.environment("tilelang"):
            warnings.warn("IProgress not found. Please update jupyter and ipywidgets.", UserWarning, stacklevel=1)
            warnings.warn("a TileLang warning the reader should see", UserWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["a TileLang warning the reader should see"]


def test_cutedsl_environment_keeps_its_kept_artifacts_out_of_the_working_directory(monkeypatch, tmp_path):
    import os

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUTE_DSL_DUMP_DIR", "")  # recorded, so the value the test leaves is undone after it
    monkeypatch.delenv("CUTE_DSL_DUMP_DIR")
    with dsl.environment("cutedsl"):
        dump = os.environ["CUTE_DSL_DUMP_DIR"]
        assert os.path.isdir(dump) and not dump.startswith(str(tmp_path))
    assert os.environ["CUTE_DSL_DUMP_DIR"] == dump  # kept: CuTeDSL reads it once, when imported
    monkeypatch.setenv("CUTE_DSL_DUMP_DIR", str(tmp_path / "mine"))
    with dsl.environment("cutedsl"):
        assert os.environ["CUTE_DSL_DUMP_DIR"] == str(tmp_path / "mine")


def test_a_dsls_chatty_loggers_are_kept_at_warning_once_it_imports(monkeypatch):
    import logging

    monkeypatch.setitem(dsl.DSLS, "chatty", dsl.DSL("chatty", "json", "json", interpret=True,
                                                     loggers=("labmagic-test-chatty",)))
    logger = logging.getLogger("labmagic-test-chatty")
    logger.setLevel(logging.INFO)  # as a DSL's import leaves it
    assert dsl.why_not("chatty") is None
    assert logger.level == logging.WARNING


def test_the_environment_a_dsl_reads_at_import_is_set_before_anything_imports_it(monkeypatch):
    """Finding ``cutlass.cute`` imports ``cutlass``, whose settings read CUTE_DSL_DUMP_DIR then: set it first."""
    import importlib.util
    import os

    monkeypatch.setenv("CUTE_DSL_DUMP_DIR", "")  # recorded, so the value the test leaves is undone after it
    monkeypatch.delenv("CUTE_DSL_DUMP_DIR")
    seen = []
    find_spec = importlib.util.find_spec

    def spy(module, *args):
        seen.append((module, os.environ.get("CUTE_DSL_DUMP_DIR")))
        return find_spec(module, *args)

    monkeypatch.setattr(importlib.util, "find_spec", spy)
    dsl.why_not("cutedsl")
    assert [m for m, _ in seen] == ["cutlass.cute"] and seen[0][1]
