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
