"""The message store's arguments, checked once at the API's edge.

Every public method of :class:`~tieredstore.store.AsyncMessageStore` (and so
of the sync facade) calls one of the ``check_*`` functions here first, before
anything is read or written. A bad argument raises
:class:`~tieredstore.errors.InvalidArgumentType` (a ``TypeError``) or
:class:`~tieredstore.errors.InvalidArgument` (a ``ValueError``), both
:class:`~tieredstore.errors.TieredStoreError`; a message over
``max_message_size`` raises :class:`MessageTooLarge`. The message names the
argument, shows the value and says what is allowed.

What is allowed:

* ``body``: bytes-like (``bytes``, ``bytearray``, ``memoryview``);
* ``keys``: a sequence (list, tuple) of ``str``, never a bare ``str``;
* ``tags``: ``None`` or a ``str``;
* ``properties``: ``None`` or a mapping of ``str`` to ``str``;
* text: valid Unicode (no lone surrogates), names under 64 KiB in UTF-8;
* ``queue_id`` of an append: at most 2**32 - 1 (a log object's index holds it in
  a u32; reads take any queue id a name can carry);
* offsets, counts, timestamps: ``int`` (not ``bool``) in range;
* ``timestamp``: milliseconds since the epoch, within the store's window:
  no further in the future than ``timestamp_after_max`` and no further in
  the past than ``timestamp_before_max`` (0: the topic's retention time,
  which would delete it at once). A timestamp in seconds (or micro-, nano-
  seconds) is refused with a message that says so.

Over 400 lines because it is every argument check of the public API in one
place, each a few lines: what a user may pass is read here, and the store's
methods stay one ``check_*`` call long.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat
from typing import Any

from tieredstore.config import TieredStoreConfig, check_paths, human_seconds, human_size
from tieredstore.errors import ArgumentError, InvalidArgument, InvalidArgumentType
from tieredstore.log.format import MAX_QUEUE_ID
from tieredstore.names import MAX_OFFSET, validate_name, validate_offset
from tieredstore.store.base.errors import MessageTooLarge
from tieredstore.store.base.outgoing import Outgoing
from tieredstore.store.base.shown import about, iso, show, type_name
from tieredstore.store.formats.codec import sealing_framing
from tieredstore.store.formats.record import MIN_RECORD_SIZE, NO_TAGS

MAX_TIMESTAMP = 2**63 - 1  # a record stores an i64
MAX_TEXT = NO_TAGS - 1  # bytes of a tag, key or property name in UTF-8 (u16 length)
MAX_COUNT = NO_TAGS - 1  # keys or properties of one message (u16 count)
MAX_VALUE = 2**32 - 1  # bytes of a property value (u32 length)
# ``delete_expired(now)`` takes seconds; a value past this (year 5138) is milliseconds.
MAX_NOW_SECONDS = 1e11

BYTES_LIKE = "bytes-like (bytes, bytearray or memoryview)"
MS = " of milliseconds since the epoch"


# --- plain values ---------------------------------------------------------------------------


def check_int(name: str, value: Any, lo: int, hi: int, *, what: str = "") -> int:
    """An ``int`` (not a ``bool``) in ``[lo, hi]``."""
    if isinstance(value, bool) or not isinstance(value, int):
        hint = ""
        if isinstance(value, float) and value.is_integer():
            hint = f"; use int({value!r})"
        raise InvalidArgumentType(name, f"must be an int{what}, got {type_name(value)} "
                                        f"{show(value)}{hint}")
    if not lo <= value <= hi:
        raise InvalidArgument(name, f"must be in [{lo}, {hi}]{what}, got {show(value)}")
    return value


def check_text(name: str, value: Any, *, limit: int = MAX_TEXT, empty: str = "") -> int:
    """A ``str`` of valid Unicode, at most ``limit`` bytes in UTF-8; its UTF-8 size.
    ``empty``: what to say of an empty one, refused (no ``empty``: allowed)."""
    if not isinstance(value, str):
        raise InvalidArgumentType(name, f"must be a str, got {type_name(value)} {show(value)}")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidArgument(name, f"{show(value)} is not valid Unicode text: "
                                    f"{value[exc.start]!r} at index {exc.start} is a lone "
                                    "surrogate, which has no UTF-8 form") from None
    if size > limit:
        raise InvalidArgument(name, f"is {size} bytes in UTF-8, at most {limit} allowed")
    if empty and not size:
        raise InvalidArgument(name, empty)
    return size


def check_body(body: Any) -> int:
    """A bytes-like body; its size in bytes."""
    if isinstance(body, bytes | bytearray):
        return len(body)
    if isinstance(body, memoryview):
        try:
            return body.nbytes
        except ValueError:
            raise InvalidArgument("body", "is a released memoryview") from None
    hints = {
        str: "; encode text first, e.g. body.encode()",
        int: f"; bytes({body!r}) would be {body!r} zero bytes, the number as text is "
             f"str({body!r}).encode()" if isinstance(body, int) else "",
        list: "; a list is not bytes: for byte values use bytes(the_list)",
        tuple: "; a tuple is not bytes: for byte values use bytes(the_tuple)",
    }
    hint = hints.get(type(body), "") if not isinstance(body, bool) else ""
    raise InvalidArgumentType("body", f"must be {BYTES_LIKE}, got {type_name(body)} "
                                      f"{show(body)}{hint}")


def check_keys(keys: Any) -> int:
    """A sequence of ``str``; the bytes the keys take in a record."""
    if isinstance(keys, str | bytes | bytearray | memoryview):
        raise InvalidArgumentType("keys", f"must be a sequence of str (a list or tuple), not "
                                          f"a bare {type_name(keys)}: got {show(keys)}; for "
                                          f"one key write keys=[{show(keys)}]")
    if isinstance(keys, Mapping) or not isinstance(keys, Sequence):
        hint = "; use () for no keys" if keys is None else ""
        raise InvalidArgumentType("keys", f"must be a sequence of str (a list or tuple), got "
                                          f"{type_name(keys)} {show(keys)}{hint}")
    if len(keys) > MAX_COUNT:
        raise InvalidArgument("keys", f"{len(keys)} keys, at most {MAX_COUNT} allowed")
    return sum(2 + check_text(f"keys[{i}]", key) for i, key in enumerate(keys))


def check_tags(tags: Any) -> int:
    """``None`` or a ``str``; the bytes the tags take in a record (beyond their length)."""
    if tags is None:
        return 0
    if not isinstance(tags, str):
        raise InvalidArgumentType("tags", f"must be a str or None, got {type_name(tags)} "
                                          f"{show(tags)}")
    return check_text("tags", tags)


def check_properties(properties: Any) -> int:
    """``None`` or a mapping of ``str`` to ``str``; the bytes they take in a record."""
    if properties is None:
        return 0
    if not isinstance(properties, Mapping):
        raise InvalidArgumentType("properties", f"must be a mapping of str to str (a dict) or "
                                                f"None, got {type_name(properties)} "
                                                f"{show(properties)}")
    if len(properties) > MAX_COUNT:
        raise InvalidArgument("properties", f"{len(properties)} properties, at most "
                                            f"{MAX_COUNT} allowed")
    size = 0
    for name, value in properties.items():
        if not isinstance(name, str):
            raise InvalidArgumentType("properties", f"names must be str, got "
                                                    f"{type_name(name)} {show(name)}")
        size += 2 + check_text(f"properties name {show(name, 30)}", name)
        size += 4 + check_text(f"properties[{show(name, 30)}]", value, limit=MAX_VALUE)
    return size


# --- timestamps -------------------------------------------------------------------------------


def now_ms() -> int:
    """The store's clock, milliseconds since the epoch."""
    return int(time.time() * 1000)


def check_timestamp(timestamp: Any, *, config: TieredStoreConfig, retention: float,
                    retention_source: str) -> None:
    """A store timestamp: an int of milliseconds within the store's window.

    ``retention`` (seconds) is the topic's retention, the window's past edge
    when ``timestamp_before_max`` is 0; ``retention_source`` says where it is set.
    """
    check_int("timestamp", timestamp, 0, MAX_TIMESTAMP, what=MS)
    before = config.timestamp_before_max or retention
    after = config.timestamp_after_max
    if math.isinf(before) and math.isinf(after):
        return
    clock = now_ms()
    lo = -math.inf if math.isinf(before) else clock - before * 1000
    hi = math.inf if math.isinf(after) else clock + after * 1000

    def inside(ms: float) -> bool:
        return lo <= ms <= hi

    if inside(timestamp):
        return
    window = (f"allowed: {iso(int(lo)) if lo > 0 else 'any time'} to "
              f"{iso(int(hi)) if math.isfinite(hi) else 'any time'} by the store's clock")
    if timestamp < lo:
        if inside(timestamp * 1000):
            raise InvalidArgument("timestamp", f"{timestamp} looks like seconds since the epoch "
                                               f"({iso(timestamp * 1000)}); timestamps are "
                                               f"milliseconds: {timestamp * 1000}")
        source = ("timestamp_before_max allows" if config.timestamp_before_max
                  else f"the retention time ({retention_source}) allows: retention would "
                       "delete it at once")
        raise InvalidArgument(
            "timestamp", f"{timestamp} ({iso(timestamp)}) is {about(clock - timestamp)} "
                         f"before the store's clock, more than the {human_seconds(before)} "
                         f"{source}; {window}. To store older timestamps set "
                         "timestamp_before_max (inf: no limit)")
    for factor, unit in ((1000, "microseconds"), (1_000_000, "nanoseconds")):
        if inside(timestamp // factor):
            raise InvalidArgument("timestamp", f"{timestamp} looks like {unit} since the "
                                               f"epoch; timestamps are milliseconds: "
                                               f"{timestamp // factor}")
    raise InvalidArgument(
        "timestamp", f"{timestamp} ({iso(timestamp)}) is {about(timestamp - clock)} "
                     f"ahead of the store's clock, more than timestamp_after_max = "
                     f"{human_seconds(after)} allows; {window}")


# --- the API's methods ---------------------------------------------------------------------------


def check_queue(topic: Any, queue_id: Any) -> None:
    if type(topic) is str:
        _valid_topic(topic)
    else:
        validate_name("topic", topic)  # raises, naming the type
    validate_offset("queue_id", queue_id)


def check_queue_to_append(topic: Any, queue_id: Any) -> None:
    """:func:`check_queue`, and a queue id the narrowest field any format stores
    it in holds: a log object's index, u32 (a read takes any queue id)."""
    check_queue(topic, queue_id)
    if queue_id > MAX_QUEUE_ID:
        raise InvalidArgument("queue_id", f"{queue_id} is too large to append to: a queue id "
                                          f"must be in [0, {MAX_QUEUE_ID}] (a log object's "
                                          "index stores it in 4 bytes)")


@functools.lru_cache(maxsize=4096)
def _valid_topic(topic: str) -> str:
    """A topic name checked once (a refused one raises, and is not kept)."""
    return validate_name("topic", topic)


def check_append(topic: Any, queue_id: Any, body: Any, *, keys: Any, tags: Any,
                 properties: Any, timestamp: Any, offset: Any, config: TieredStoreConfig,
                 topic_reserved_time: Mapping[str, float]) -> Outgoing:
    """Every argument of ``append``, and the size of the record it would write;
    the message (its own copy of the properties)."""
    check_queue_to_append(topic, queue_id)
    return check_message(topic, queue_id, Outgoing(body, keys, tags, properties, timestamp),
                         offset=offset, config=config, topic_reserved_time=topic_reserved_time)


def check_batch(topic: Any, queue_id: Any, messages: Any, *, config: TieredStoreConfig,
                topic_reserved_time: Mapping[str, float]) -> list[Outgoing]:
    """Every message of ``append_batch`` (bytes, or :class:`Outgoing`), as Outgoing
    with bytes bodies; a bad one raises naming its index, before anything is written."""
    check_queue_to_append(topic, queue_id)
    if isinstance(messages, (str, bytes, bytearray, memoryview)) or \
            not isinstance(messages, Sequence):
        raise InvalidArgumentType("messages", f"must be a sequence (a list or tuple) of "
                                  f"bytes or Outgoing, got {type_name(messages)}")
    if messages and set(map(type, messages)) == {bytes} and \
            max(map(len, messages)) <= largest_record(config) - MIN_RECORD_SIZE:
        # Bodies alone, each small enough (check_message's common message): as
        # Outgoing, built in C.
        n = len(messages)
        return list(map(tuple.__new__, repeat(Outgoing, n),
                        zip(messages, repeat((), n), repeat(None, n), repeat(None, n),
                            repeat(None, n), strict=True)))
    out: list[Outgoing] = []
    for i, m in enumerate(messages):
        if not isinstance(m, Outgoing | bytes | bytearray | memoryview):
            raise InvalidArgumentType(f"messages[{i}]", f"must be bytes or Outgoing, got "
                                      f"{type_name(m)} {show(m)}")
        try:
            out.append(check_message(topic, queue_id, m if isinstance(m, Outgoing) else
                                     Outgoing(bytes(m)), offset=None, config=config,
                                     topic_reserved_time=topic_reserved_time))
        except (ArgumentError, MessageTooLarge) as exc:
            exc.add_note(f"in messages[{i}] of the batch; nothing of it was appended")
            raise
    return out


def topic_retention(config: TieredStoreConfig, topic_reserved_time: Mapping[str, float],
                    topic: str) -> tuple[float, str]:
    """``topic``'s retention in seconds and where it is set: the store's
    ``topic_reserved_time`` (code), else the topic's table, else
    ``file_reserved_time``. The one rule retention and the timestamp check share."""
    if topic in topic_reserved_time:
        return float(topic_reserved_time[topic]), f"topic_reserved_time[{topic!r}]"
    settings = config.for_topic(topic)
    return settings.file_reserved_time, settings.key("file_reserved_time")


def check_message(topic: Any, queue_id: Any, message: Outgoing, *, offset: Any,
                  config: TieredStoreConfig, topic_reserved_time: Mapping[str, float]
                  ) -> Outgoing:
    """One message's fields (its queue checked already) and its record's size; the
    message as stored: a ``bytes`` body, a tuple of keys, its own copy of the properties."""
    body, keys, tags, properties, timestamp = message
    if (type(body) is bytes and not keys and type(keys) in (tuple, list) and tags is None
            and properties is None and timestamp is None and offset is None
            and len(body) <= largest_record(config) - MIN_RECORD_SIZE):
        # the common message: a body alone, small enough
        return message if type(keys) is tuple else message._replace(keys=())
    sizes = {"body": check_body(body), "keys": check_keys(keys), "tags": check_tags(tags),
             "properties": check_properties(properties)}
    if offset is not None:
        check_int("offset", offset, 0, MAX_OFFSET)
    if timestamp is not None:
        retention, source = topic_retention(config, topic_reserved_time, topic)
        check_timestamp(timestamp, config=config, retention_source=source, retention=retention)
    total = MIN_RECORD_SIZE + sum(sizes.values())
    limit = largest_record(config)
    if total > limit:
        part, size = max(sizes.items(), key=lambda kv: kv[1])
        parts = ", ".join(f"{name} {human_size(n)}" for name, n in sizes.items())
        verb = "is" if part in ("body", "tags") else "are"
        sealing = config.max_message_size - limit
        less = f", less {sealing} B compression and encryption add" if sealing else ""
        raise MessageTooLarge(
            f"message too large: its {part} {verb} {human_size(size)}; the whole record is "
            f"{total} bytes, the limit is {limit} bytes (max_message_size = "
            f"{human_size(config.max_message_size)}{less}): {parts}, "
            f"framing {MIN_RECORD_SIZE} B",
            topic=topic, queue_id=queue_id)
    return Outgoing(bytes(body), tuple(keys), tags,
                    None if properties is None else dict(properties), timestamp)


def largest_record(config: TieredStoreConfig) -> int:
    """The largest plain record a message may make: ``max_message_size`` bounds
    the record as stored, after compression and encryption framing."""
    return config.max_message_size - sealing_framing(config)


def check_get(topic: Any, queue_id: Any, offset: Any, max_count: Any, max_bytes: Any) -> None:
    check_queue(topic, queue_id)
    check_int("offset", offset, 0, MAX_OFFSET)
    check_int("max_count", max_count, 1, MAX_OFFSET)
    check_int("max_bytes", max_bytes, 1, 2**63 - 1)


def tag_filter(topic: Any, queue_id: Any, offset: Any, tags: Any, *, max_count: Any,
               max_bytes: Any, max_scan: Any) -> frozenset[str]:
    """``get_by_tags``'s arguments; the tags wanted (one ``str``, or a non-empty
    collection of them)."""
    check_get(topic, queue_id, offset, max_count, max_bytes)
    check_int("max_scan", max_scan, 1, MAX_OFFSET)
    wanted = [tags] if isinstance(tags, str) else tags
    if not isinstance(wanted, Iterable) or isinstance(wanted, (bytes, Mapping)):
        raise InvalidArgumentType("tags", f"must be a str or a collection of str, got "
                                          f"{type_name(tags)} {show(tags)}")
    items = list(wanted)
    if not items:
        raise InvalidArgument("tags", "must name at least one tag")
    for tag in items:
        check_text("tags", tag, empty="a tag must not be empty (messages without tags have "
                                      "none to match)")
    return frozenset(items)


def check_query_by_key(topic: Any, key: Any, begin_ms: Any, end_ms: Any,
                       max_count: Any) -> None:
    """``query_by_key``'s arguments: a topic, a non-empty key, a time range."""
    validate_name("topic", topic)
    check_text("key", key, empty="must not be empty")
    check_int("begin_ms", begin_ms, 0, MAX_TIMESTAMP, what=MS)
    check_int("end_ms", end_ms, 0, MAX_TIMESTAMP, what=MS)
    if end_ms < begin_ms:
        raise InvalidArgument("end_ms", f"{end_ms} is before begin_ms {begin_ms}")
    check_int("max_count", max_count, 1, MAX_OFFSET)


def check_offset_for_time(topic: Any, queue_id: Any, timestamp_ms: Any) -> None:
    check_queue(topic, queue_id)
    check_int("timestamp_ms", timestamp_ms, 0, MAX_TIMESTAMP, what=MS)


def check_now(now: Any) -> None:
    """``delete_expired``'s clock: seconds since the epoch, or None."""
    if now is None:
        return
    if isinstance(now, bool) or not isinstance(now, int | float):
        raise InvalidArgumentType("now", f"must be a number of seconds since the epoch or "
                                          f"None, got {type_name(now)} {show(now)}")
    if not math.isfinite(now) or now < 0:
        raise InvalidArgument("now", f"must be a finite number of seconds since the epoch, "
                                     f"at least 0, got {now!r}")
    if now > MAX_NOW_SECONDS:
        raise InvalidArgument("now", f"{now!r} looks like milliseconds; now is seconds since "
                                     f"the epoch: {now / 1000!r}")


def check_open(config: Any, store: Any, topic_reserved_time: Any, writer_id: Any,
               take_over: Any = True) -> None:
    """``open``'s arguments (the configuration validated itself when built)."""
    from tieredstore.objectstore import ObjectStore

    if not isinstance(take_over, bool):
        raise InvalidArgumentType("take_over", f"must be a bool, got {type_name(take_over)} "
                                               f"{show(take_over)}")
    if config is not None and not isinstance(config, TieredStoreConfig):
        hint = "; build one with load_config(**settings)" if isinstance(config, Mapping) else ""
        raise InvalidArgumentType("config", f"must be a TieredStoreConfig or None, got "
                                            f"{type_name(config)}{hint}")
    if store is not None and not isinstance(store, ObjectStore):
        raise InvalidArgumentType("store", f"must be an ObjectStore or None, got "
                                           f"{type_name(store)}")
    if store is not None and not store.supports_writes:
        raise InvalidArgument("store", "is open for reading only; a writing store needs one "
                                       "that writes (open_read_only reads through this one)")
    if topic_reserved_time is not None:
        if not isinstance(topic_reserved_time, Mapping):
            raise InvalidArgumentType("topic_reserved_time", f"must be a mapping of topic to "
                                                             f"seconds, got "
                                                             f"{type_name(topic_reserved_time)}")
        for topic, seconds in topic_reserved_time.items():
            validate_name("topic", topic)
            if isinstance(seconds, bool) or not isinstance(seconds, int | float) or \
                    not 0 <= seconds < math.inf:
                raise InvalidArgument(f"topic_reserved_time[{topic!r}]",
                                      f"must be a finite number of seconds, at least 0, got "
                                      f"{show(seconds)}")
    if config is not None:
        check_paths(config, backend=store is None)
    if writer_id is not None:
        check_text("writer_id", writer_id)
        if not writer_id.strip():
            raise InvalidArgument("writer_id", "must not be empty")


def check_key_provider(key_provider: Any) -> None:
    if key_provider is not None and not callable(key_provider):
        raise InvalidArgumentType("key_provider", f"must be a callable of a key id that "
                                                  f"returns its key, or None, got "
                                                  f"{type_name(key_provider)}")

