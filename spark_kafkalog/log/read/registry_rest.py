"""A schema registry's REST API, read-only, for the schemas a typed read needs.

Only the three calls the Confluent API defines for this (Karapace and Redpanda serve them
too): ``GET /schemas/ids/{id}``, ``GET /subjects/{subject}/versions/{version}`` (version
``latest``: the newest not soft-deleted) and ``GET /subjects/{subject}/versions?deleted=true``
(every version, soft-deleted too: records written with them are still in the log).
Answers are cached for the life of the object, which is one read's planning. Basic auth as
``user:password``. Errors: :class:`SchemaLookupError` (404: the registry's error code is
kept) and :class:`RegistryUnavailableError`, naming the URL.
"""
from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from spark_kafkalog.errors import KafkaLogError

__all__ = ["RestRegistry", "RestSchema", "SchemaLookupError", "RegistryUnavailableError"]


class SchemaLookupError(KafkaLogError, LookupError):
    """The registry answered 404: no such id, subject or version. ``error_code``: the
    registry's own (40401 subject, 40402 version, 40403 schema), None if it sent none."""

    def __init__(self, message: str, error_code: int | None = None):
        self.error_code = error_code
        super().__init__(message)

    def __reduce__(self):
        return (SchemaLookupError, (self.reason, self.error_code))


class RegistryUnavailableError(KafkaLogError):
    """The registry did not answer, or answered something that is not its JSON."""


@dataclass(frozen=True)
class RestSchema:
    """A schema as the registry serves it: ``references`` are ``(name, subject, version)``."""
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[tuple[str, str, int], ...] = ()
    subject: str | None = None
    version: int | None = None


class RestRegistry:
    """The schemas of one registry at ``url``, cached per instance. ``auth``:
    ``user:password`` for HTTP basic auth. Not picklable on purpose: it is the driver's."""

    def __init__(self, url: str, auth: str | None = None, *, timeout: float = 30.0):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._headers = {"Accept": "application/vnd.schemaregistry.v1+json, "
                                   "application/json"}
        if auth:
            token = base64.b64encode(auth.encode("utf-8")).decode("ascii")
            self._headers["Authorization"] = f"Basic {token}"
        self._cache: dict[str, object] = {}

    def __reduce__(self):
        raise TypeError("RestRegistry holds credentials and stays on the driver")

    def _get(self, path: str):
        if path in self._cache:
            return self._cache[path]
        url = self.url + path
        req = urllib.request.Request(url, headers=self._headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                body = resp.read()
        except urllib.error.HTTPError as err:
            text = err.read().decode("utf-8", "replace")
            code = None
            try:
                code = json.loads(text).get("error_code")
            except (ValueError, AttributeError):
                pass
            if err.code == 404:
                raise SchemaLookupError(f"schema registry {url}: not found ({text.strip()})",
                                        code) from None
            raise RegistryUnavailableError(f"schema registry {url}: HTTP {err.code} "
                                           f"({text.strip()[:200]})") from None
        except (urllib.error.URLError, OSError) as err:
            raise RegistryUnavailableError(f"schema registry {url}: {err}") from err
        try:
            value = json.loads(body)
        except ValueError as err:
            raise RegistryUnavailableError(f"schema registry {url}: the answer is not JSON "
                                           f"({body[:100]!r})") from err
        self._cache[path] = value
        return value

    @staticmethod
    def _schema(obj, url: str, schema_id: int | None = None) -> RestSchema:
        if not isinstance(obj, dict) or not isinstance(obj.get("schema"), str):
            raise RegistryUnavailableError(f"schema registry {url}: no schema in the answer "
                                           f"{str(obj)[:200]}")
        refs = tuple((r["name"], r["subject"], int(r["version"]))
                     for r in obj.get("references") or ())
        return RestSchema(int(obj.get("id", schema_id if schema_id is not None else -1)),
                          obj["schema"], obj.get("schemaType") or "AVRO", refs,
                          obj.get("subject"), obj.get("version"))

    def by_id(self, schema_id: int) -> RestSchema:
        path = f"/schemas/ids/{int(schema_id)}"
        return self._schema(self._get(path), self.url + path, schema_id)

    def version(self, subject: str, version: int | None, *, deleted: bool = False
                ) -> RestSchema:
        """``subject``'s ``version`` (None: latest not soft-deleted); ``deleted``: a
        soft-deleted version is found too."""
        v = "latest" if version is None else str(int(version))
        path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{v}"
        if deleted:
            path += "?deleted=true"
        return self._schema(self._get(path), self.url + path)

    def versions(self, subject: str) -> list[int]:
        """Every version of ``subject``, soft-deleted ones too; [] for no such subject."""
        path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions?deleted=true"
        try:
            got = self._get(path)
        except SchemaLookupError:
            return []
        if not isinstance(got, list):
            raise RegistryUnavailableError(f"schema registry {self.url + path}: expected a "
                                           f"list of versions, got {str(got)[:200]}")
        return sorted(int(v) for v in got)

    def describe(self) -> str:
        return f"schema registry {self.url}"
