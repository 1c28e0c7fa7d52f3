"""Lines of an input stream for a command that stores each one as it comes
(``produce`` from standard input or a file), read off the event loop.

Waiting for input must never hold up the loop: the store's group commit runs
on it, so a line piped in slowly would otherwise stay in memory until the
input ends (or the process is killed). A daemon thread reads (``os.read`` on
the stream's descriptor: a pipe answers with what has arrived, and no lock of
the ``sys.stdin`` object is held when the interpreter exits under a read that
never returns) and hands each chunk to the loop; the command appends each
line as it is complete, and the store's own timer makes it durable within
``group_commit_interval``, as any appended message.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from collections.abc import AsyncIterator, Callable
from typing import BinaryIO

from tieredstore.sizes import KiB

CHUNK = 64 * KiB  # the most one read asks for
AHEAD = 4  # chunks read before the command has taken them: what input may wait in memory


def raw_reads(stream: BinaryIO) -> Callable[[int], bytes]:
    """``read(n)``: at most ``n`` bytes of ``stream``, as soon as any are there; b"" at
    its end. ``os.read`` on its descriptor, else (a stream with none, such as
    ``io.BytesIO``) the stream's own ``read1``."""
    try:
        fd = stream.fileno()
    except (OSError, AttributeError):  # io.UnsupportedOperation is an OSError
        read1: Callable[[int], bytes] = getattr(stream, "read1", stream.read)
        return read1
    return functools.partial(os.read, fd)


async def lines(stream: BinaryIO) -> AsyncIterator[bytes]:
    """One message per line of ``stream``, without its line ending (``\\n`` or
    ``\\r\\n``; the last line may have none), each yielded once it is complete."""
    read = raw_reads(stream)
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[bytes | OSError] = asyncio.Queue()
    credits = threading.Semaphore(AHEAD)  # one per chunk the loop may hold unread
    stopped = threading.Event()

    def reader() -> None:
        while credits.acquire() and not stopped.is_set():
            try:
                chunk: bytes | OSError = read(CHUNK)
            except OSError as exc:
                chunk = exc
            try:
                loop.call_soon_threadsafe(chunks.put_nowait, chunk)
            except RuntimeError:  # the loop is closed: nobody takes it
                return
            if not chunk or isinstance(chunk, OSError):
                return

    threading.Thread(target=reader, name="tieredstore-input", daemon=True).start()
    parts: list[bytes] = []  # the line being read, so far
    try:
        while True:
            chunk = await chunks.get()
            credits.release()
            if isinstance(chunk, OSError):
                raise chunk
            if not chunk:
                break
            if b"\n" not in chunk:
                parts.append(chunk)
                continue
            first, *whole, rest = chunk.split(b"\n")
            for line in (b"".join([*parts, first]), *whole):
                yield line.removesuffix(b"\r")
            parts = [rest] if rest else []
        if parts:
            yield b"".join(parts)
    finally:
        stopped.set()
        credits.release()

