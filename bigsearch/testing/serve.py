"""Driving the labelling page for tests and benchmarks: `bigsearch serve` in a
subprocess and a headless Chromium (Selenium) pointed at the system's browser."""

import json as _json  # PageClient.post takes json= as Flask's client does
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from http.cookiejar import CookieJar

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1200,860"]


def chromium(profile_dir):
    """A Selenium driver for the system's headless Chromium with a fresh profile."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS + [f"--user-data-dir={profile_dir}"]:
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """`bigsearch serve` in a subprocess, on a fixed port so the page can reconnect."""

    def __init__(self, directory, *args, port=None, timeout=60, env=None, forked=None):
        """``env``: the server's environment (this process's by default); ``forked``: a
        ForkedCli (forked_cli.py) to fork the server from where it can."""
        self.directory, self.args, self.port = directory, args, port or free_port()
        self.timeout, self.env, self.forked = timeout, dict(env or os.environ), forked
        self.proc = None

    def start(self):
        args = ["serve", str(self.directory), "--port", str(self.port), *self.args]
        self.proc = self.forked.popen(args, os.getcwd(), self.env) if self.forked else None
        if self.proc is None:  # not forked, or it could not be: a fresh start
            self.proc = subprocess.Popen([sys.executable, "-m", "bigsearch", *args], stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True, env=self.env)
        self.banner = [self.proc.stdout.readline() for _ in range(2)]
        if "serving session" not in self.banner[0]:
            self.proc.kill()
            raise RuntimeError(f"the server did not start: {self.banner}{self.proc.communicate(timeout=60)[1]}")
        self.url = re.search(r"at (http://\S+)", self.banner[0]).group(1)
        return self

    def stop(self, sig=signal.SIGINT):
        """Stop it with ``sig``; returns (exit status, stdout, stderr)."""
        self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=self.timeout)
        return self.proc.returncode, out, err

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Response:
    """A response of ``PageClient``, read the way Flask's test responses are."""

    def __init__(self, status, headers, body):
        self.status_code, self.headers, self.body = status, headers, body

    def get_data(self, as_text=False):
        return self.body.decode() if as_text else self.body

    def get_json(self):
        return _json.loads(self.body)

    @property
    def mimetype(self):
        """The content type without its parameters (``text/html``), as Flask's."""
        return self.headers.get("Content-Type", "").split(";")[0].strip()


class PageClient:
    """HTTP requests to a running `bigsearch serve` (the real server, over a socket), with
    its cookies kept and redirects returned, not followed: the part of Flask's test
    client's interface the tests use (``get``, ``post``)."""

    def __init__(self, url):
        parts = urllib.parse.urlsplit(url)
        self.base = f"http://127.0.0.1:{parts.port}"
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()), _NoRedirect)

    def open(self, method, path, body=None, headers=None):
        request = urllib.request.Request(self.base + path, data=body, method=method, headers=headers or {})
        try:
            with self.opener.open(request, timeout=60) as r:
                return Response(r.status, r.headers, r.read())
        except urllib.error.HTTPError as e:
            return Response(e.code, e.headers, e.read())

    def get(self, path, headers=None):
        return self.open("GET", path, headers=headers)

    def post(self, path, json=None, data=None, headers=None, content_type=None):
        if json is not None:
            body, content_type = _json.dumps(json).encode(), "application/json"
        else:
            body = data.encode()
        return self.open("POST", path, body, {**(headers or {}), "Content-Type": content_type})


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None
