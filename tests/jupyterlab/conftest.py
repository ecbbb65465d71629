"""A real JupyterLab server (a subprocess, on a free loopback port, with a token) and headless Chromium, shared by
the tests of this folder. The server runs in a temporary root with its own settings, workspaces and runtime
folders, so neither the user's JupyterLab state nor an earlier run leaks in."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from chromium import Chromium, find_chromium

ARTIFACTS_ENV = "LABMAGIC_ARTIFACTS"
START_TIMEOUT_S = 45


class Lab:
    """The server's root folder, and a JupyterLab page in Chromium once :meth:`open_lab` ran."""

    def __init__(self, root: Path, url: str, token: str, browser: Chromium):
        self.root, self.url, self.token, self.browser = root, url, token, browser
        self.page = None

    def open_lab(self):
        self.page = self.browser.page(f"{self.url}/lab?token={self.token}")
        self.wait("window.jupyterapp && window.jupyterapp.shell && document.querySelector('.jp-LabShell') !== null",
                  what="JupyterLab to start")
        self.page.evaluate("window.jupyterapp.restored.then(() => true)")
        return self.page

    def wait(self, expression: str, what: str, timeout: float = 30.0):
        """The first truthy value of ``expression`` (promises awaited), polled until ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.page.evaluate(f"(async () => {{ try {{ return await ({expression}); }} "
                                       f"catch (e) {{ return null; }} }})()")
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(0.1)

    def open_notebook(self, path: str) -> None:
        """Open ``path`` (relative to the root) as the current document, and wait for its content and kernel."""
        self.page.evaluate(f"window.jupyterapp.commands.execute('docmanager:open', {{path: {json.dumps(path)}}})"
                           ".then(() => true)")
        self.wait(f"(() => {{ const w = window.jupyterapp.shell.currentWidget;"
                  f" return w && w.context && w.context.path === {json.dumps(path)} && w.context.isReady; }})()",
                  what=f"{path} to load")

    def screenshot(self, name: str) -> Path | None:
        """A PNG of the page under ``$LABMAGIC_ARTIFACTS`` when that is set."""
        folder = os.environ.get(ARTIFACTS_ENV)
        if not folder:
            return None
        Path(folder).mkdir(parents=True, exist_ok=True)
        shot = Path(folder) / name
        self.page.screenshot(shot, full_page=False)
        return shot


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM first: the server then shuts its kernels down; killed if it does not exit."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory):
    """(root, url, token) of a running JupyterLab; stopped at the end, also when a test or the start failed."""
    pytest.importorskip("jupyterlab", reason="JupyterLab is not installed (pip install -e '.[jupyterlab]')")
    base = tmp_path_factory.mktemp("jupyterlab")
    root, home = base / "root", base / "home"
    root.mkdir()
    # No news prompt over the notebook (it would also cover the cells in the screenshot).
    settings = home / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_RUNTIME_DIR=str(home / "runtime"))
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={root}", f"--LabApp.user_settings_dir={home / 'settings'}",
           f"--LabApp.workspaces_dir={home / 'workspaces'}", "--LabApp.expose_app_in_browser=True",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    log = open(base / "server.log", "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {proc.returncode}:\n{_tail(base / 'server.log')}")
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"jupyter lab did not answer within {START_TIMEOUT_S} s:\n"
                                       f"{_tail(base / 'server.log')}") from None
                time.sleep(0.2)
        yield root, url, token
    finally:
        _stop(proc)
        log.close()


def _tail(path: Path, chars: int = 3000) -> str:
    return path.read_text(errors="replace")[-chars:]


@pytest.fixture(scope="module")
def lab(lab_server):
    """A JupyterLab page in headless Chromium, one per test module."""
    executable, why = find_chromium(install=True)
    if executable is None:
        pytest.skip(f"headless Chromium unavailable: {why}")
    root, url, token = lab_server
    with Chromium(executable) as browser:
        lab = Lab(root, url, token, browser)
        lab.open_lab()
        yield lab
