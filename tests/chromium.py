"""Headless Chromium driven over the DevTools protocol, with nothing but the standard library.

Chromium is started with ``--remote-debugging-pipe``: it reads protocol messages from fd 3 and writes them to fd 4,
each a JSON object ended by a NUL byte. No websocket client, no Playwright or Selenium download: Debian's
``chromium`` package is all the browser tests need. :func:`find_chromium` finds it (or installs it with apt-get
when running as root), and says why not when it cannot.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
    "--disable-quic", "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
]


def find_chromium(install: bool = True) -> tuple[str | None, str]:
    """(path to the browser, '') or (None, why not). ``$CHROMIUM`` wins; apt-get installs it as root."""
    env = os.environ.get("CHROMIUM")
    if env:
        return (env, "") if shutil.which(env) else (None, f"CHROMIUM={env} is not an executable")
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path, ""
    if not install:
        return None, "no chromium on PATH"
    if not shutil.which("apt-get"):
        return None, "no chromium on PATH and no apt-get to install Debian's chromium package"
    if os.geteuid() != 0:
        return None, ("no chromium on PATH; installing Debian's chromium package needs root "
                      "(sudo apt-get install chromium)")
    for cmd in (["apt-get", "install", "-y", "--no-install-recommends", "chromium"],
                ["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]):
        try:
            subprocess.run(cmd, check=False, capture_output=True, timeout=900,
                           env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"installing chromium failed: {exc}"
        path = shutil.which("chromium")
        if path:
            return path, ""
    return None, "apt-get could not install Debian's chromium package (no network to the package mirror?)"


def _high(fd: int) -> int:
    """The same pipe end at a descriptor >= 10, so the shell's 3/4 redirections cannot clobber it."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return high


class Chromium:
    """One headless browser; ``page(url)`` opens a tab and returns a :class:`Page`."""

    def __init__(self, executable: str, width: int = 1280, height: int = 1000, timeout: float = 60.0):
        self.timeout = timeout
        self.width, self.height = width, height
        self._profile = tempfile.mkdtemp(prefix="labmagic-chromium-")
        to_browser_r, to_browser_w = (_high(fd) for fd in os.pipe())
        from_browser_r, from_browser_w = (_high(fd) for fd in os.pipe())
        # A small trampoline puts the pipe ends at fds 3 and 4, where Chromium looks for them, then execs it.
        trampoline = (f"import os, sys; os.dup2({to_browser_r}, 3); os.dup2({from_browser_w}, 4); "
                      f"os.close({to_browser_r}); os.close({from_browser_w}); os.execv(sys.argv[1], sys.argv[1:])")
        args = [executable, *FLAGS, "--remote-debugging-pipe", f"--user-data-dir={self._profile}",
                f"--window-size={width},{height}", "about:blank"]
        self._log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-c", trampoline, *args], pass_fds=(to_browser_r, from_browser_w),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._out = os.fdopen(to_browser_w, "wb", buffering=0)
        self._in = os.fdopen(from_browser_r, "rb", buffering=0)
        self._next_id = 0
        self._lock = threading.Condition()
        self._responses: dict[int, dict] = {}
        self._events: list[dict] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.send("Browser.getVersion")  # fails fast when the browser did not start

    def _read(self):
        buffer = b""
        while True:
            try:
                chunk = self._in.read(65536)
            except OSError:
                chunk = b""
            if not chunk:
                with self._lock:
                    self._events.append({"method": "_closed"})
                    self._lock.notify_all()
                return
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                with self._lock:
                    if "id" in message:
                        self._responses[message["id"]] = message
                    else:
                        self._events.append(message)
                    self._lock.notify_all()

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        with self._lock:
            self._next_id += 1
            ident = self._next_id
        message = {"id": ident, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self._out.write(json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        with self._lock:
            while ident not in self._responses:
                if any(e.get("method") == "_closed" for e in self._events):
                    raise RuntimeError(f"chromium exited: {self._stderr_tail()}")
                if not self._lock.wait(timeout=max(0.0, deadline - time.monotonic())):
                    raise TimeoutError(f"no answer to {method} within {self.timeout} s")
            response = self._responses.pop(ident)
        if "error" in response:
            raise RuntimeError(f"{method}: {response['error']}")
        return response.get("result", {})

    def wait_event(self, method: str, session: str | None, since: int) -> dict:
        deadline = time.monotonic() + self.timeout
        with self._lock:
            while True:
                for event in self._events[since:]:
                    if event.get("method") == method and event.get("sessionId") == session:
                        return event
                if not self._lock.wait(timeout=max(0.0, deadline - time.monotonic())):
                    raise TimeoutError(f"no {method} within {self.timeout} s")

    def _stderr_tail(self) -> str:
        try:
            self.proc.wait(timeout=5)
            self._log.seek(0)
            lines = self._log.read().decode(errors="replace").splitlines()
            return "\n".join(line for line in lines if "dbus" not in line)[-2000:]
        except Exception:  # noqa: BLE001
            return "(no stderr)"

    def page(self, url: str) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        self.send("Page.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
                  session=session)
        page.goto(url)
        return page

    def close(self):
        try:
            self.send("Browser.close")
        except Exception:  # noqa: BLE001 - closing a browser that already died
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        for handle in (self._out, self._in, self._log):
            try:
                handle.close()
            except OSError:
                pass
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Page:
    def __init__(self, browser: Chromium, session: str):
        self.browser, self.session = browser, session

    def goto(self, url: str):
        with self.browser._lock:
            since = len(self.browser._events)
        result = self.browser.send("Page.navigate", {"url": url}, session=self.session)
        if result.get("errorText"):
            raise RuntimeError(f"could not open {url}: {result['errorText']}")
        self.browser.wait_event("Page.loadEventFired", self.session, since)

    def evaluate(self, expression: str):
        """The value of a JavaScript expression (promises awaited), returned by value."""
        result = self.browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                        "awaitPromise": True}, session=self.session)
        if "exceptionDetails" in result:
            raise RuntimeError(f"JavaScript error: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path, full_page: bool = True) -> bytes:
        params = {"format": "png"}
        if full_page:
            size = self.evaluate("({w: document.documentElement.scrollWidth, "
                                 "h: document.documentElement.scrollHeight})")
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size["w"], "height": min(size["h"], 12000), "scale": 1})
        data = base64.b64decode(self.browser.send("Page.captureScreenshot", params, session=self.session)["data"])
        with open(path, "wb") as handle:
            handle.write(data)
        return data
