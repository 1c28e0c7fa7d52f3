"""Does the server honour ``If-None-Match: *``? Checked once per key prefix
(docs/writers.md, Conditional writes: the bucket is checked once).

Every fence, the settling of lost replies and the log series rest on a
conditional create answering 412 when its key is taken. A server that accepts
the header and ignores it would void them all in silence, so the first writer
that opens a prefix on S3 creates a probe object, creates it again with other
bytes, and requires the second create to be refused. The answer is remembered
in a marker object: every later open costs one HEAD.
"""

from __future__ import annotations

import json
import logging
import time
import uuid

from tieredstore.errors import ObjectNotFound, PreconditionFailed, TieredStoreError
from tieredstore.objectstore.base import ObjectStore
from tieredstore.objectstore.conditional import create_once

log = logging.getLogger(__name__)

MARKER = "conditional-writes-checked"
PROBE = "conditional-writes-probe-"


class ConditionalWritesIgnored(TieredStoreError):
    """The server stored a create with ``If-None-Match: *`` over an existing key."""


def _key(prefix: str, name: str) -> str:
    return f"{prefix}/{name}" if prefix else name


async def check_conditional_writes(store: ObjectStore, prefix: str, server: str, *,
                                   accept_ignored: bool = False) -> None:
    """Make sure ``store`` (at ``server``) refuses a conditional create over an
    existing key, once per ``prefix``; raise :class:`ConditionalWritesIgnored`
    if it does not, unless ``accept_ignored`` (then a warning)."""
    marker = _key(prefix, MARKER)
    try:
        await store.head(marker)
        return
    except ObjectNotFound:
        pass
    probe = _key(prefix, PROBE + uuid.uuid4().hex)
    await create_once(store, probe, b"first")  # a fresh key: lands (a lost reply: settled)
    try:
        await store.put(probe, b"second", if_none_match=True)
    except PreconditionFailed:
        honoured = True
    else:
        honoured = False
    await store.delete(probe)
    if not honoured:
        message = (f"the S3 server {server} ignores If-None-Match: * (a conditional create "
                   f"over an existing key was stored): fencing of writers and settling of "
                   f"lost replies would not hold")
        if not accept_ignored:
            raise ConditionalWritesIgnored(
                f"{message}; use a server that supports conditional writes, or set "
                "s3_accept_ignored_if_none_match = true to accept the risk")
        log.warning("%s; going on as s3_accept_ignored_if_none_match = true says", message)
        return
    body = json.dumps({"checked_ms": int(time.time() * 1000), "server": server}).encode()
    await create_once(store, marker, body)  # another open's marker is as good as ours
