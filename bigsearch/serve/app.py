"""The labelling page's web application (Flask, served by waitress).

Routes: ``/`` the page (static HTML/JS/CSS from package data); ``/api/state`` what to
show; ``/api/answer``, ``/api/skip``, ``/api/undo``, ``/api/correct`` (POST, JSON) change
the session; ``/api/export.csv`` the labels.

Safety (docs/serve.md): on a loopback address only requests naming that address in
``Host`` are served (a DNS-rebinding page cannot reach the server under its own name);
every request must carry the access token printed at start (in ``?token=``, which sets
a cookie, in the cookie, or as ``Authorization: Bearer``), on any address unless the
server runs with ``--no-token`` on a loopback one. State-changing requests must be JSON
POSTs carrying the page's CSRF token in ``X-CSRF-Token``, from the page's own origin
when the browser says where it comes from. ``/api/ping`` tells the page the server is
there (it checks every few seconds, and shows when it is not).
"""

import hmac
import html
import secrets
from importlib import resources
from urllib.parse import urlsplit

from flask import Flask, Response, jsonify, redirect, request

from ..errors import BigsearchError, LabelError
from .labeler import Conflict

COOKIE = "bigsearch_token"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]", "::1")


class Guard:
    """Who may use the page: the access token (None: none asked, only with ``--no-token``
    on a loopback address), the host names it answers (``loopback``: only loopback
    names), and the CSRF token the page sends back with every change."""

    def __init__(self, host, access_token=None, loopback=None):
        self.host = host
        self.loopback = access_token is None if loopback is None else loopback
        self.access_token = access_token
        self.csrf_token = secrets.token_urlsafe(32)
        # serve() names it after the port: browsers keep cookies by host name, not port,
        # and two sessions served on one machine must not overwrite each other's token
        self.cookie = COOKIE

    def check(self, req):
        """None when the request may proceed, else (status, message, code)."""
        if self.loopback and _host_name(req.host) not in LOOPBACK_NAMES:
            return 403, f"this server answers only at a loopback address, not {req.host!r}", "host"
        if self.access_token is not None and not self._has_token(req):
            return 403, "a valid access token is required: open the address the server printed at start", "token"
        if req.method == "POST":
            origin = req.headers.get("Origin")
            if origin is not None and urlsplit(origin).netloc != req.host:
                return 403, f"cross-site request from {origin} refused", "origin"
            if not hmac.compare_digest(req.headers.get("X-CSRF-Token", ""), self.csrf_token):
                # "csrf": the page fetches a fresh token and the current item, then goes on
                return 403, "missing or wrong CSRF token (the server restarted?): reload the page", "csrf"
            if not req.is_json:
                return 415, "send JSON (Content-Type: application/json)", "json"
        return None

    def _has_token(self, req):
        auth = req.headers.get("Authorization", "")
        given = [req.args.get("token"), req.cookies.get(self.cookie), auth[7:] if auth.startswith("Bearer ") else None]
        return any(g is not None and hmac.compare_digest(g, self.access_token) for g in given)


def _host_name(host):
    if host.startswith("["):
        return host[: host.index("]") + 1]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def create_app(labeler, guard):
    app = Flask(__name__, static_folder=None)
    app.json.sort_keys = False            # a record's fields in the source's order

    @app.before_request
    def _guard():
        refused = guard.check(request)
        if refused:
            status, message, code = refused
            if not request.path.startswith("/api/"):        # a person at the address: a page, not JSON
                return Response(REFUSED_PAGE.format(message=html.escape(message)), status=status,
                                mimetype="text/html")
            return jsonify(error=message, code=code), status
        return None

    @app.after_request
    def _headers(response):
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["Content-Security-Policy"] = (
            "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'")
        return response

    @app.get("/")
    def page():
        if "token" in request.args:       # keep the token in a cookie, not in the address bar
            response = redirect("/", code=303)
            response.set_cookie(guard.cookie, request.args["token"], httponly=True, samesite="Strict")
            return response
        html = _static("index.html").replace("{{CSRF}}", guard.csrf_token)
        return Response(html, mimetype="text/html")

    @app.get("/static/<name>")
    def static_file(name):
        kinds = {"app.js": "text/javascript", "style.css": "text/css"}
        if name not in kinds:
            return jsonify(error=f"no file {name}"), 404
        return Response(_static(name), mimetype=kinds[name])

    @app.get("/api/ping")
    def ping():
        # cheap (no lock): the page asks every few seconds whether the server is there
        return jsonify(ok=True)

    @app.get("/api/state")
    def state():
        # The CSRF token rides along so that a page outliving a restarted server can go on;
        # only the page's own origin can read this (the Host check above stops rebinding).
        return jsonify({**labeler.view(), "csrf": guard.csrf_token})

    @app.post("/api/answer")
    def answer():
        body = _body()
        return _change(lambda: labeler.answer(body.get("index"), body.get("label")))

    @app.post("/api/skip")
    def skip():
        return _change(lambda: labeler.skip(_body().get("index")))

    @app.post("/api/undo")
    def undo():
        body = _body()
        return _change(lambda: labeler.undo(body.get("index"), skip=body.get("skip") is True))

    @app.post("/api/correct")
    def correct():
        body = _body()
        return _change(lambda: labeler.correct(body.get("index"), body.get("label")))

    @app.get("/api/export.csv")
    def export():
        name = labeler.session.directory.name or "session"
        return Response(labeler.export_csv(), mimetype="text/csv",
                        headers={"Content-Disposition": f'attachment; filename="{name}-labels.csv"'})

    def _change(action):
        try:
            return jsonify(action())
        except Conflict as e:
            return jsonify(error=str(e), state=labeler.view()), 409
        except LabelError as e:
            return jsonify(error=str(e)), 400
        except BigsearchError as e:
            return jsonify(error=str(e)), 500

    return app


REFUSED_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>bigsearch: access refused</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 36em; margin: 2em auto; padding: 0 1em">
<h1 style="font-size: 1.3em">bigsearch: access refused</h1>
<p>{message}.</p>
<p>The address with its token is printed by <code>bigsearch serve</code> when it starts
(<code>http://HOST:PORT/?token=...</code>); ask the person who runs it.</p>
</body></html>
"""


def _body():
    body = request.get_json(silent=True)
    return body if isinstance(body, dict) else {}


def _static(name):
    return resources.files(__package__).joinpath("static", name).read_text(encoding="utf-8")
