"""Warnings shown in a notebook are one line without a path (:mod:`labmagic.display.warning_line`)."""

from __future__ import annotations

import io
import warnings

import torch.profiler.profiler as torch_profiler

from labmagic.display import warning_line


def test_a_library_warning_names_its_module_not_its_file():
    stream = io.StringIO()
    hook = warning_line.WarningLines()
    message = ("\nOnline softmax is disabled on the fly since Inductor decides to\nsplit the reduction. Cut an "
               "issue to PyTorch if this is an\nimportant use case.\n")
    hook(UserWarning(message), UserWarning, torch_profiler.__file__, 224, stream)
    assert stream.getvalue() == ("UserWarning (torch.profiler.profiler): Online softmax is disabled on the fly since "
                                 "Inductor decides to split the reduction. Cut an issue to PyTorch if this is an "
                                 "important use case.\n")
    hook(UserWarning(message), UserWarning, torch_profiler.__file__, 224, stream)  # the same one again: not repeated
    assert stream.getvalue().count("\n") == 1


def test_a_file_no_module_was_loaded_from_is_named_by_its_package_path():
    name = warning_line.module_of("/opt/venv/lib/python3.12/site-packages/somelib/sub/__init__.py")
    assert name == "somelib.sub"
    assert warning_line.module_of("/home/someone/scratch/helper.py") == "helper"


def test_installed_it_shows_every_warning_as_one_line(capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warning_line.install()
        warnings.warn("first line\n  second line", DeprecationWarning, stacklevel=1)
    err = capsys.readouterr().err
    assert err == f"DeprecationWarning ({__name__}): first line second line\n"


def test_in_a_kernel_a_warning_reaches_the_notebook_as_one_line_without_a_path(tmp_path):
    """A real kernel under papermill, as a sweep runs a chapter: the warning's stderr output is one line, and no
    path of this machine is in the executed notebook."""
    import json

    import papermill
    from sitebuild import write_chapter

    chapter = write_chapter(tmp_path / "01_warns.ipynb", "%load_ext labmagic", (
        "import json.decoder, warnings\n"
        "for _ in range(2):\n"
        "    warnings.warn_explicit('disabled on the fly\\n  since it splits', UserWarning, json.decoder.__file__, 7)"))
    out = tmp_path / "executed.ipynb"
    papermill.execute_notebook(str(chapter), str(out), cwd=str(tmp_path), kernel_name="python3", progress_bar=False)
    outputs = [o for cell in json.loads(out.read_text())["cells"] for o in cell.get("outputs", [])]
    stderr = "".join("".join(o["text"]) for o in outputs if o.get("name") == "stderr")
    assert stderr == "UserWarning (json.decoder): disabled on the fly since it splits\n"
    shown = json.dumps(outputs)
    assert str(tmp_path) not in shown and "/lib/python" not in shown
