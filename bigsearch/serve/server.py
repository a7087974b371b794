"""Running the page: open the session as its writer, serve until Ctrl-C (or SIGTERM),
then checkpoint and release the session."""

import ipaddress
import os
import secrets
import signal
import socket

from ..errors import ParameterError
from ..session import Session
from ..storage.atomic import atomic_path
from .app import COOKIE, Guard, create_app
from .labeler import Labeler, label_kind

DEFAULT_PORT = 8765
TOKEN_FILE = "serve-token"     # in the session directory, mode 0600: the same address after a restart


def is_loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def url_of(host, port):
    host = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{host}:{port}/"


def reachable_host(host):
    """An address another machine can use for ``host``: a wildcard (0.0.0.0, ::) is
    replaced by the address of this machine's outgoing interface (no packet is sent),
    else its name."""
    if host not in ("0.0.0.0", "::", "[::]", ""):
        return host
    family, probe = (socket.AF_INET6, "2001:db8::1") if ":" in host else (socket.AF_INET, "192.0.2.1")
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((probe, 9))
            address = s.getsockname()[0]
        if not ipaddress.ip_address(address).is_loopback:
            return address
    except OSError:
        pass
    return socket.gethostname()


def session_token(directory, rotate=False):
    """The session's access token, kept in ``TOKEN_FILE`` (mode 0600) so that a page
    opened with it works after the server restarts; ``rotate``: replace it (the old
    address stops working)."""
    path = directory / TOKEN_FILE
    if not rotate:
        try:
            token = path.read_text().strip()
            if token:
                return token
        except FileNotFoundError:
            pass
    token = secrets.token_urlsafe(24)
    with atomic_path(path) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(token + "\n")
    return token


def serve(directory, *, host="127.0.0.1", port=DEFAULT_PORT, budget=None, store=None, prefetch=True,
          threads=4, question=None, hide=(), count_start=False, new_token=False, token=True, highlight=(),
          echo=print):
    """Serve the labelling page for the session in ``directory`` until interrupted.

    Every request needs the access token this prints (the same at every start of this
    session until ``new_token``): any local user can reach a loopback address, so only
    ``token=False`` on a loopback ``host`` serves without it. ``question``, ``hide``,
    ``budget``, ``count_start`` and ``highlight``: see :class:`Labeler`."""
    import waitress
    if not 0 <= port <= 65535:
        raise ParameterError(f"port {port} is not in 0..65535")
    if budget is not None and budget < 1:
        raise ParameterError(f"the budget must be a positive number of labels, got {budget}")
    loopback = is_loopback(host)
    if not token and not loopback:
        raise ParameterError(f"token=False is only for a loopback host: {host} is not one, and every request "
                             "to it needs the access token")
    session = Session.open(directory, store=store)
    labeler = None
    try:
        token = session_token(session.directory, rotate=new_token) if token else None
        labeler = Labeler(session, budget=budget, prefetch=prefetch, question=question, hide=tuple(hide),
                          count_start=count_start, highlight=highlight)
        guard = Guard(host, token, loopback=loopback)
        app = create_app(labeler, guard)
        try:
            server = waitress.create_server(app, host=host, port=port, threads=threads, ident="bigsearch")
        except OSError as e:
            raise OSError(e.errno, f"cannot listen on {host}:{port}: {e.strerror}"
                          + ("; choose another port" if e.errno == 98 else "")) from None
        except ValueError:                        # waitress: not an address it can parse
            raise ParameterError(f"host {host!r} is not an address to listen on; give an IP address or a "
                                 "name of this machine, e.g. 127.0.0.1") from None
        guard.cookie = f"{COOKIE}_{server.effective_port}"    # one per port (app.py, Guard)
        url = url_of(reachable_host(host), server.effective_port)
        # The stop signals before the banner, which tells a caller the server is up. SIGINT
        # too: a shell's background job (`bigsearch serve ... &`) inherits it ignored, and
        # then neither Ctrl-C nor `kill -INT` would stop the server.
        previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            _announce(echo, directory, session, host, loopback, token, url)
            server.run()                          # returns on KeyboardInterrupt
        except KeyboardInterrupt:                 # a stop before the server ran
            pass
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            server.close()
    finally:
        if labeler is not None:
            labeler.close()
        session.close()
    echo(f"stopped; session {directory} has {session.n_labels} labels")


def _announce(echo, directory, session, host, loopback, token, url):
    """What `serve` says at start: where, the access token, the keys."""
    st = session.status(estimate=False)
    echo(f"serving session {directory} ({st['method']}, {st['n']:,} points, {st['labels']} labels) "
         f"at {url}" + (f"?token={token}" if token else ""))
    if token:
        who = (f"needed from every machine; {host} is not a loopback address" if not loopback else
               "needed by every browser and program, since any user of this machine can reach a loopback "
               f"address; `bigsearch serve {directory} --no-token` serves without one")
        echo(f"access token: {token} ({who}; kept in {session.directory / TOKEN_FILE} for the next start; "
             f"`bigsearch serve {directory} --new-token` replaces it)")
    echo("keys: a positive, x negative, space skip, backspace undo; " + NUMBER_FIELD[label_kind(session.search)]
         + "Ctrl-C to stop")
    if session.blind:
        echo("blind start: the session has no start (`bigsearch session new ... --start-from`) and no positive "
             "answer yet, so its first points are about as good as any; the page says so until the first "
             "positive (docs/sessions.md, \"Starting from what you know\")")


# What the page's number field takes, said at start (none: the method takes 0 or 1 only).
NUMBER_FIELD = {"binary": "", "grade": "or type a grade in [0, 1] and Enter; ",
                "number": "or type a measurement or score and Enter; "}


def _interrupt(signum, frame):
    raise KeyboardInterrupt
