#!/bin/sh
# Rebuilds the prebuilt extension that the wheel ships, labmagic/labextension/ (commit the result): users need no
# Node. Needs Node >= 18 and the jupyterlab Python package (pip install -e ".[jupyterlab]"). Run: sh labextension/build.sh
set -e
cd "$(dirname "$0")"
out=../labmagic/labextension
npm ci --no-audit --no-fund
npx tsc
# The build empties its output folder: keep the package's __init__.py (the editable-install command) across it.
keep=$(mktemp)
cp "$out/__init__.py" "$keep"
# Build against the installed JupyterLab's core package list (its singletons); package.json's sharedPackages
# widen the required versions to ^4.0.0 so one build serves every JupyterLab 4.
core=$(python -c 'import jupyterlab, pathlib; print(pathlib.Path(jupyterlab.__file__).parent / "staging" / "package.json")')
jupyter labextension build . --core-package-file "$core"
mv "$keep" "$out/__init__.py"
cp install.json "$out/"  # `jupyter labextension list` then names the Python package that ships the extension
# tests/test_layout.py wants every folder of the package to be a package.
printf '"""Prebuilt JupyterLab extension assets (labextension/build.sh): data, no Python."""\n' > "$out/static/__init__.py"
