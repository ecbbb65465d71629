"""``%ncu`` / ``%sanitize`` refuse names that would run as code or write outside results/, on any machine, before
a child is started."""

from __future__ import annotations

import pytest

from labmagic.errors import LabError


@pytest.mark.parametrize("magic", ["ncu", "sanitize"])
def test_a_parameter_name_that_is_code_is_refused_and_nothing_runs(shell, tmp_path, magic):
    marker = tmp_path / "X"
    for name in (f"__import__('os').system('touch {marker}')", f"globals()[__import__('os').system('touch {marker}')]"):
        with pytest.raises(LabError, match="is not a parameter name") as caught:
            shell.run(f'%{magic} torch --chapter 01 -p "{name}=1"')
        assert "\n" not in str(caught.value)
    assert not marker.exists()


@pytest.mark.parametrize("magic", ["ncu", "sanitize"])
def test_a_variant_name_that_is_a_path_is_refused(shell, magic):
    with pytest.raises(LabError, match="'../../outside' is not a variant name"):
        shell.run(f"%{magic} ../../outside --chapter 01")


@pytest.mark.parametrize(("magic", "runner"), [("ncu", "labmagic.child.ncu_run.profile_variant"),
                                                ("sanitize", "labmagic.child.sanitizer_run.sanitize_variant")])
def test_the_named_race_reaches_the_child(shell, monkeypatch, magic, runner):
    # A chapter with two races: the child must replay the one --race names, not the first %bench race.
    shell.run("import labmagic\n"
              "first = labmagic.Race(chapter='99_two', variants={'v': abs}, ref='v', make_inputs=lambda n: (n,), shapes=[(4,)])\n"
              "second = labmagic.Race(chapter='99_two', variants={'v': abs}, ref='v', make_inputs=lambda n: (n,), shapes=[(8,)])")
    calls = []
    monkeypatch.setattr(runner, lambda chapter, variant, shape, **kw: calls.append((chapter, variant, kw["race"])))
    monkeypatch.setattr("labmagic.magics.tool_magics.ExplainMagics._no_gpu", staticmethod(lambda what: False))
    shell.run(f"%{magic} v --race second")
    assert calls == [("99_two", "v", "second")]


def test_the_child_command_names_the_race_and_refuses_a_name_that_is_not_one():
    from labmagic.child.protocol import child_command

    assert child_command("08", "cuda_quant", None, "ncu", race="race_quant_bf16")[-2:] == ["--race", "race_quant_bf16"]
    with pytest.raises(LabError, match="is not a Python name"):
        child_command("08", "cuda_quant", None, "ncu", race="x; rm -rf /")
