"""Running the page: open the session as its writer, serve until Ctrl-C (or SIGTERM),
then checkpoint and release the session."""

import ipaddress
import secrets
import signal

from ..errors import ParameterError
from ..session import Session
from .app import Guard, create_app
from .labeler import Labeler

DEFAULT_PORT = 8765


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


def serve(directory, *, host="127.0.0.1", port=DEFAULT_PORT, budget=None, store=None, prefetch=True,
          threads=4, echo=print):
    """Serve the labelling page for the session in ``directory`` until interrupted.

    Any ``host`` that is not a loopback address requires the access token this prints."""
    import waitress
    if not 0 <= port <= 65535:
        raise ParameterError(f"port {port} is not in 0..65535")
    if budget is not None and budget < 1:
        raise ParameterError(f"the budget must be a positive number of labels, got {budget}")
    token = None if is_loopback(host) else secrets.token_urlsafe(24)
    session = Session.open(directory, store=store)
    labeler = None
    try:
        labeler = Labeler(session, budget=budget, prefetch=prefetch)
        app = create_app(labeler, Guard(host, token))
        try:
            server = waitress.create_server(app, host=host, port=port, threads=threads, ident="bigsearch")
        except OSError as e:
            raise OSError(e.errno, f"cannot listen on {host}:{port}: {e.strerror}"
                          + ("; choose another port" if e.errno == 98 else "")) from None
        except ValueError:                        # waitress: not an address it can parse
            raise ParameterError(f"host {host!r} is not an address to listen on; give an IP address or a "
                                 "name of this machine, e.g. 127.0.0.1") from None
        url = url_of(host, server.effective_port)
        st = session.status()
        echo(f"serving session {directory} ({st['method']}, {st['n']:,} points, {st['labels']} labels) "
             f"at {url}" + (f"?token={token}" if token else ""))
        if token:
            echo(f"access token: {token} (needed from every machine; {host} is not a loopback address)")
        echo("keys: a positive, x negative, space skip, backspace undo; Ctrl-C to stop")
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            server.run()                          # returns on KeyboardInterrupt
        finally:
            signal.signal(signal.SIGTERM, previous)
            server.close()
    finally:
        if labeler is not None:
            labeler.close()
        session.close()
    echo(f"stopped; session {directory} has {session.n_labels} labels")


def _interrupt(signum, frame):
    raise KeyboardInterrupt
