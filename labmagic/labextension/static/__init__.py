"""Prebuilt JupyterLab extension assets (labextension/build.sh): data, no Python."""
