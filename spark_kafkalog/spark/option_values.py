"""The generic option-value parsers shared by the read options (``options.py``) and the
write options (``write_options.py``): booleans, integers, byte sizes, durations, choices,
JSON objects, log-dir paths, ``fs.*`` options, and the rejection of unknown or
broker-only option names. Each raises :class:`InvalidOptionError` whose message starts
with the option's name as the user spelled it.
"""
from __future__ import annotations

import difflib
import json
import re
from typing import Mapping

from spark_kafkalog.errors import InvalidOptionError

# Options of Spark's Kafka source that only make sense with a broker: rejected with why.
_BROKER_ONLY = {
    "kafka.bootstrap.servers": "there is no broker: this source reads the log files under "
                               "'path' directly",
    "groupidprefix": "no consumer group is used: offsets come from the options, not a group",
    "kafka.group.id": "no consumer group is used: offsets come from the options, not a group",
    "kafkaconsumer.polltimeoutms": "there is no Kafka consumer to poll",
    "fetchoffset.numretries": "offsets are read from local index and checkpoint files; "
                              "there is no broker request to retry",
    "fetchoffset.retryintervalms": "offsets are read from local index and checkpoint files; "
                                   "there is no broker request to retry",
    "kafka.auto.offset.reset": "set 'startingOffsets' to 'earliest' or 'latest' instead",
    "kafka.key.deserializer": "keys are always returned as binary; use DataFrame "
                              "operations to deserialize them",
    "kafka.value.deserializer": "values are always returned as binary; use DataFrame "
                                "operations to deserialize them",
}

_BROKER_ONLY_CANONICAL = {
    "groupidprefix": "groupIdPrefix", "kafkaconsumer.polltimeoutms": "kafkaConsumer.pollTimeoutMs",
    "fetchoffset.numretries": "fetchOffset.numRetries",
    "fetchoffset.retryintervalms": "fetchOffset.retryIntervalMs",
}


def unknown_option(key: str, known: list[str], where: str) -> InvalidOptionError:
    """An unknown option, with the nearest known name when one is close (a typo) or the
    list of known names; one line, starting with the key as Spark passed it."""
    by_lower = {name.lower(): name for name in known}
    close = difflib.get_close_matches(key.lower(), list(by_lower), n=1, cutoff=0.75)
    if close:
        return InvalidOptionError(f"{key}: unknown option for the kafkalog {where}; did you "
                                  f"mean '{by_lower[close[0]]}'?")
    return InvalidOptionError(f"{key}: unknown option for the kafkalog {where} (known: "
                              f"{', '.join(sorted(set(known), key=str.lower))}, fs.*)")


# -- value parsers ------------------------------------------------------------------------

def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in options.items():
        low = str(key).lower()
        if low in out:
            raise InvalidOptionError(f"{key}: option given twice (option names are "
                                     f"case-insensitive); keep one")
        out[low] = "" if value is None else str(value)
    return out


def parse_bool(name: str, value: str) -> bool:
    # Scala's String.toBoolean: "true"/"false", any case, nothing else.
    v = value.strip().lower()
    if v == "true":
        return True
    if v == "false":
        return False
    raise InvalidOptionError(f"{name} must be 'true' or 'false', got {value!r}")


def parse_int(name: str, value: str, *, minimum: int | None = None) -> int:
    text = value.strip()
    try:
        n = int(text, 10)
    except ValueError:
        raise InvalidOptionError(f"{name} must be an integer, got {value!r}") from None
    if not -(1 << 63) <= n < (1 << 63):
        raise InvalidOptionError(f"{name} does not fit a 64-bit long: {value!r}")
    if minimum is not None and n < minimum:
        raise InvalidOptionError(f"{name} must be >= {minimum}, got {n}")
    return n


_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20,
               "mb": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}


def parse_bytes(name: str, value: str, *, minimum: int = 1) -> int:
    """A byte size: a plain integer or with a binary unit (``64m``, ``16MiB``) as Spark's
    byte-size configs accept."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", value)
    if not m or m.group(2).lower() not in _SIZE_UNITS:
        raise InvalidOptionError(f"{name} must be a byte size such as 16777216 or 16m, "
                                 f"got {value!r}")
    n = int(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]
    if n < minimum:
        raise InvalidOptionError(f"{name} must be at least {minimum} bytes, got {value!r}")
    if n >= 1 << 63:
        raise InvalidOptionError(f"{name} is too large: {value!r}")
    return n


def parse_choice(name: str, value: str, choices: tuple[str, ...]) -> str:
    v = value.strip().lower()
    if v not in choices:
        raise InvalidOptionError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
    return v


def parse_json_object(name: str, value: str, example: str) -> dict:
    try:
        obj = json.loads(value)
    except ValueError as err:
        raise InvalidOptionError(f"{name} is not valid JSON ({err.msg} at character "
                                 f"{err.pos}); expected e.g. {example}, got {value!r}") from None
    if not isinstance(obj, dict):
        raise InvalidOptionError(f"{name} must be a JSON object, expected e.g. {example}, "
                                 f"got {value!r}")
    return obj


def json_int(v) -> int | None:
    # JSON numbers only: bool is an int subclass in Python and is not a number here.
    if isinstance(v, bool) or not isinstance(v, int):
        return None
    return v


_DURATION_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000,
                "h": 3_600_000, "d": 86_400_000}


def duration_ms(name: str, value: str) -> int:
    """A duration as Spark's ``timeStringAsMs`` reads it (``15m``, ``30s``, ``500ms``,
    ``2h``; a bare number is milliseconds), in milliseconds."""
    m = re.fullmatch(r"\s*(\d+)\s*(us|ms|s|m|min|h|d)?\s*", value or "", re.IGNORECASE)
    if not m:
        raise InvalidOptionError(f"{name} must be a duration such as 15m or 30s, got "
                                 f"{value!r}")
    return int(int(m.group(1)) * _DURATION_MS[(m.group(2) or "ms").lower()])


def parse_fs_options(opts: dict[str, str]) -> dict[str, str]:
    """The ``fs.*`` options, keys kept as given (``fs.s3.endpoint``): the log layer's
    ``resolve_filesystem`` validates them and names the user's key in its errors."""
    out = {}
    for key, value in opts.items():
        if key.startswith("fs."):
            if not key[3:]:
                raise InvalidOptionError("fs.: a filesystem option needs a name after 'fs.'")
            out[key] = value
    return out


def parse_paths(opts: dict[str, str], *, many: bool) -> tuple[str, ...]:
    """``path`` (comma-separated) and/or ``paths`` (what ``load(["a", "b"])`` sets: a JSON
    array) -> the log-dir URIs."""
    found: list[str] = []
    if "path" in opts:
        found += [p.strip() for p in opts["path"].split(",") if p.strip()]
    if "paths" in opts:
        try:
            arr = json.loads(opts["paths"])
        except ValueError:
            arr = None
        if not isinstance(arr, list) or not all(isinstance(p, str) for p in arr):
            raise InvalidOptionError(f"paths must be a JSON array of log-dir paths, got "
                                     f"{opts['paths']!r}")
        for p in arr:
            found += [q.strip() for q in p.split(",") if q.strip()]
    found = list(dict.fromkeys(found))
    if not found:
        raise InvalidOptionError("path: no log dir given; use load('/path/to/kafka-logs') or "
                                 ".option('path', ...) (several log dirs comma-separated)")
    if not many and len(found) != 1:
        raise InvalidOptionError(f"path: writes go to exactly one log dir, got {len(found)}: "
                                 f"{', '.join(found)}")
    return tuple(found)


def reject_broker_only(opts: dict[str, str], allowed_kafka: tuple[str, ...]) -> None:
    for key in opts:
        if key in _BROKER_ONLY:
            name = _BROKER_ONLY_CANONICAL.get(key, key)
            raise InvalidOptionError(f"{name} is a Kafka client option with no meaning for "
                                     f"kafkalog: {_BROKER_ONLY[key]}")
        if key.startswith("kafka.") and key not in allowed_kafka:
            raise InvalidOptionError(f"{key} is a Kafka client option with no meaning for "
                                     f"kafkalog: there is no broker or consumer; only "
                                     f"{', '.join(allowed_kafka)} is supported")
