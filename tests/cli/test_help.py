"""``labmagic --help`` and every command's ``--help`` print their usage and exit 0."""

import pytest

from labmagic.cli import COMMANDS, main


def test_the_top_level_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert name in out
    assert "(its %bench," in out and "%%" not in out  # help text is shown literally, not %-formatted


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_command_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert f"usage: labmagic {command}" in capsys.readouterr().out
