"""The prebuilt JupyterLab 4 extension that highlights ``%%cuda_kernel`` cells as CUDA C++ (data, built by
labextension/build.sh), and the setuptools command that installs it on ``pip install -e .``.

A normal install copies ``package.json`` and ``static/`` into ``share/jupyter/labextensions/`` from pyproject.toml's
``[tool.setuptools.data-files]``. setuptools' ``editable_wheel`` means to do the same, but asks the distribution for
``has_data`` where distutils spells it ``has_data_files`` (pypa/setuptools#3399), so an editable install silently
dropped the extension; pyproject.toml's ``cmdclass`` names :class:`EditableWheel`, which installs them. It lives
in the package, not beside it, so that a wheel built from the sdist finds it too.
"""

from __future__ import annotations


def __getattr__(name: str):
    # Built on demand: only a build needs setuptools, which a runtime environment may lack.
    if name != "EditableWheel":
        raise AttributeError(name)
    from setuptools.command.editable_wheel import editable_wheel

    class EditableWheel(editable_wheel):
        def _run_install(self, category: str) -> None:
            super()._run_install(category)
            if category == "data" and self.distribution.has_data_files():
                self.run_command("install_data")  # a no-op when setuptools already ran it: commands run once

    return EditableWheel
