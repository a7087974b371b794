"""A real S3-compatible server for tests and benchmarks: moto's standalone server, on a free port of
127.0.0.1, in a subprocess (moto[server] is in the test extra)."""

import os
import re
import subprocess
import sys
import time

ACCESS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}
# Without credentials, AWS clients ask the instance metadata service: point it at a closed
# local port, so no test ever sends a request off this machine.
NO_METADATA = {"AWS_METADATA_ENDPOINT": "http://127.0.0.1:9", "AWS_EC2_METADATA_DISABLED": "true"}


class S3Server:
    """``S3Server(port=0).start()``; ``.endpoint``; ``.stop()``. ``env`` goes to the
    server process (e.g. INITIAL_NO_AUTH_ACTION_COUNT to enforce IAM)."""

    def __init__(self, port=0, env=None):
        self.port, self.env, self.proc = port, env or {}, None

    def start(self, timeout=30):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **self.env},
        )
        deadline = time.monotonic() + timeout
        for line in self.proc.stdout:
            match = re.search(r"Running on http://127\.0\.0\.1:(\d+)", line)
            if match:
                self.port = int(match.group(1))
                break
            if time.monotonic() > deadline:
                break
        else:
            raise RuntimeError("moto server did not start")
        self._drain()
        return self

    def _drain(self):
        import threading  # keep reading the log so the server never blocks on a full pipe

        threading.Thread(target=lambda: [None for _ in self.proc.stdout], daemon=True).start()

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def client(self, service="s3", **credentials):
        import boto3

        creds = {
            "aws_access_key_id": ACCESS["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": ACCESS["AWS_SECRET_ACCESS_KEY"],
            **credentials,
        }
        return boto3.client(service, endpoint_url=self.endpoint, region_name="us-east-1", **creds)

    def create_bucket(self, name, **credentials):
        self.client(**credentials).create_bucket(Bucket=name)
        return name
