"""A process that forks a child per request, so that what every child would import or warm
up is paid once: the suite's CLI commands (forked_cli.py) and the crash test's drivers
(session_crash.py) start so.

The forking process reads one JSON request a line on stdin and answers one JSON line each
on stdout: ``{"ready": true}`` once it has prepared, then per request the child's
``{"pid": ...}`` and, once it has ended, its ``{"status": ...}`` (an exit status, or minus
the signal that ended it, as subprocess gives). It forks only while it runs no other
thread (fork copies the calling thread alone: another's locks would stay held)."""

import json
import os
import select
import subprocess
import sys
import threading
import traceback


def serve(run_child):
    """The forking process's loop: ``run_child(request)`` in a forked child per request;
    it must end the child (os._exit)."""
    ready = threading.active_count() == 1
    _say(ready=ready)
    if not ready:
        return
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                run_child(request)
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(70)  # reached only where the child did not end itself
        _say(pid=pid)
        _, status = os.waitpid(pid, 0)
        _say(status=os.waitstatus_to_exitcode(status))


def _say(**reply):
    print(json.dumps(reply), flush=True)


class Forker:
    """The forking process started with ``argv`` and ``env``; ``start`` forks a child and
    ``wait`` gives its status. One child at a time."""

    def __init__(self, argv, env, ready_timeout=120):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, bufsize=0)
        self.replies = select.poll()  # not select(): a test process may hold more than 1,024 files
        self.replies.register(self.proc.stdout, select.POLLIN)
        self.ready = self._reply(ready_timeout) == {"ready": True}

    def alive(self):
        return self.ready and self.proc.poll() is None

    def start(self, request, timeout=60):
        """Fork a child for ``request``; its pid. OSError where the forking process is gone."""
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        reply = self._reply(timeout)
        if not reply or "pid" not in reply:
            raise OSError(f"the forking process did not fork (it said {reply})")
        return reply["pid"]

    def wait(self, timeout=None):
        """The child's status once it has ended; None if it runs on after ``timeout`` s."""
        reply = self._reply(timeout)
        return None if reply is None else reply["status"]

    def _reply(self, timeout):
        line = b""
        while not line.endswith(b"\n"):
            if not self.replies.poll(None if timeout is None else timeout * 1000):
                return None
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                raise OSError(f"the forking process is gone (exit status {self.proc.poll()})")
            line += chunk
        return json.loads(line)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
