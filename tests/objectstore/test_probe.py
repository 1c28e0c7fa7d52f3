"""A server that ignores ``If-None-Match: *`` is refused at the first open (issue 39).

The server here is moto behind a proxy that drops the header, as some
S3-compatible servers do (ceph/s3-tests#583): every create is then stored
over whatever is at its key, which would void every fence in silence. The
first writer's open probes the key prefix once and refuses such a server,
naming it; ``s3_accept_ignored_if_none_match`` lets the operator accept the
risk. A server that honours the header is probed once (five requests) and
remembered in the bucket: later opens cost one HEAD.
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.conftest import make_s3_store
from tests.servers import ACCESS_KEY, SECRET_KEY, S3Server
from tieredstore.config import TieredStoreConfig, load_config
from tieredstore.objectstore import ConditionalWritesIgnored, S3ObjectStore, S3Settings
from tieredstore.store import AsyncMessageStore

pytestmark = pytest.mark.s3


@contextlib.contextmanager
def dropping_if_none_match(upstream: S3Server) -> Iterator[str]:
    """An HTTP proxy on 127.0.0.1 to ``upstream`` that forwards every request
    without its ``If-None-Match`` header; yields the proxy's endpoint."""
    target = urllib.parse.urlsplit(upstream.endpoint_url)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() != "if-none-match"}
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                self.send_response(answer.status, answer.reason)
                for key, value in answer.getheaders():
                    if key.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
            finally:
                conn.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def s3_config(endpoint: str, bucket: str, **overrides: Any) -> TieredStoreConfig:
    return load_config(env={}, backend="s3", s3_bucket=bucket, s3_endpoint_url=endpoint,
                       s3_region="us-east-1", s3_addressing_style="path",
                       s3_access_key_id=ACCESS_KEY, s3_secret_access_key=SECRET_KEY,
                       gc_interval=0, retention_interval=0, heartbeat_interval=0,
                       **overrides)


async def bucket_keys(moto: S3Server, bucket: str) -> list[str]:
    async with S3ObjectStore(S3Settings(
            bucket=bucket, endpoint_url=moto.endpoint_url, region="us-east-1",
            addressing_style="path", access_key_id=ACCESS_KEY,
            secret_access_key=SECRET_KEY)) as store:
        return sorted(o.key for o in await store.list_all(""))


async def test_a_server_ignoring_if_none_match_is_refused_naming_it(moto: S3Server) -> None:
    bucket = await _new_bucket(moto)
    with dropping_if_none_match(moto) as proxy:
        config = s3_config(proxy, bucket)
        with pytest.raises(ConditionalWritesIgnored) as refused:
            await AsyncMessageStore.open(config)
        message = str(refused.value)
        assert proxy in message and "If-None-Match" in message
        assert "s3_accept_ignored_if_none_match" in message
        assert SECRET_KEY not in message
        # Nothing of a store was written: no metadata, no log, no marker.
        assert await bucket_keys(moto, bucket) == []


async def test_the_operator_may_accept_the_risk(moto: S3Server,
                                                caplog: pytest.LogCaptureFixture) -> None:
    bucket = await _new_bucket(moto)
    with dropping_if_none_match(moto) as proxy:
        config = s3_config(proxy, bucket, s3_accept_ignored_if_none_match=True)
        with caplog.at_level(logging.WARNING, logger="tieredstore"):
            store = await AsyncMessageStore.open(config)
        try:
            assert await store.append("t", 0, b"m") == 0
            await store.flush()
        finally:
            await store.close()
    assert any("ignores If-None-Match" in r.getMessage() for r in caplog.records)
    assert not any(k.endswith("conditional-writes-checked") for k in
                   await bucket_keys(moto, bucket))  # not remembered: probed at every open


async def test_a_server_honouring_it_is_probed_once_and_remembered(moto: S3Server) -> None:
    bucket = await _new_bucket(moto)
    config = s3_config(moto.endpoint_url, bucket)
    first = await AsyncMessageStore.open(config)
    first_requests = first.ctx.store.metrics.snapshot()["requests"]
    await first.close()
    keys = await bucket_keys(moto, bucket)
    assert "tieredstore/conditional-writes-checked" in keys
    assert not [k for k in keys if "conditional-writes-probe-" in k]  # the probe deleted
    second = await AsyncMessageStore.open(config)
    second_requests = second.ctx.store.metrics.snapshot()["requests"]
    await second.close()
    # The probe: HEAD marker, PUT probe, PUT refused, DELETE probe, PUT marker; then
    # one HEAD per open. Compare the two opens' counts: the difference is the probe.
    def count(requests: dict[str, int], op: str) -> int:
        return int(requests.get(op, 0))
    assert count(first_requests, "put") - count(second_requests, "put") == 3
    assert count(first_requests, "delete") - count(second_requests, "delete") == 1


async def _new_bucket(moto: S3Server) -> str:
    store = await make_s3_store(moto)
    try:
        return store.bucket
    finally:
        await store.close()
