"""Filesystems: URIs and options to ``pyarrow.fs`` (``resolve_filesystem``), and the I/O
primitives the rest of ``log/`` uses: ranged reads, size-capped small files, full and
atomic writes, deletes, directory fsync.
"""
from __future__ import annotations

import contextlib
import os
import posixpath
from typing import Callable, Mapping
from urllib.parse import urlsplit

import pyarrow.fs as pafs

from spark_kafkalog.errors import (
    InvalidOptionError,
    LogLayoutError,
    StorageError,
    as_storage_error,
    storage_errors,
)
from spark_kafkalog.log.io import sysio
from spark_kafkalog.log.io.sysio import WRITE_PIECE_BYTES, fsync_dir, write_fully

__all__ = [
    "FILESYSTEM_OPTIONS", "resolve_filesystem", "read_range", "read_small_file",
    "write_atomic", "write_fully", "list_dir", "join", "file_size", "fsync_dir",
    "delete_file", "WRITE_PIECE_BYTES",
]

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _bool(name: str, value) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise InvalidOptionError(f"option {name}: expected true or false, got {value!r}")


def _float(name: str, value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InvalidOptionError(f"option {name}: expected a number, got {value!r}") from None


def _int(name: str, value) -> int:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        raise InvalidOptionError(f"option {name}: expected an integer, got {value!r}") from None


def _str(name: str, value) -> str:
    return str(value)


# Per scheme family: option name (as the user spells it, lower case) ->
# (constructor keyword, converter). Several spellings may map to one keyword. Entries
# that repeat across families stay in each: a table lists what its own constructor takes.
_S3_OPTIONS = {
    "endpoint": ("endpoint_override", _str),
    "endpoint_override": ("endpoint_override", _str),
    "region": ("region", _str),
    "access_key": ("access_key", _str),
    "secret_key": ("secret_key", _str),
    "session_token": ("session_token", _str),
    "scheme": ("scheme", _str),
    "anonymous": ("anonymous", _bool),
    "role_arn": ("role_arn", _str),
    "session_name": ("session_name", _str),
    "external_id": ("external_id", _str),
    "load_frequency": ("load_frequency", _int),
    "request_timeout": ("request_timeout", _float),
    "connect_timeout": ("connect_timeout", _float),
    "proxy": ("proxy_options", _str),
    "proxy_options": ("proxy_options", _str),
    "force_virtual_addressing": ("force_virtual_addressing", _bool),
    "tls_ca_file_path": ("tls_ca_file_path", _str),
    "allow_bucket_creation": ("allow_bucket_creation", _bool),
    # attempts per request (the first included) on a retryable error (5xx, 503
    # SlowDown, a reset or cut-short response), with the AWS SDK's standard backoff
    "retry_max_attempts": ("retry_max_attempts", _int),
}
#: attempts per S3 request by default (the AWS SDK's standard strategy's, as pyarrow's)
S3_RETRY_ATTEMPTS = 3
#: the most ``s3.retry_max_attempts`` may ask for: a read against a failing store fails
#: within a bounded time instead of retrying without end
S3_RETRY_ATTEMPTS_MAX = 20
_GCS_OPTIONS = {
    "endpoint": ("endpoint_override", _str),
    "endpoint_override": ("endpoint_override", _str),
    "scheme": ("scheme", _str),
    "anonymous": ("anonymous", _bool),
    "access_token": ("access_token", _str),
    "target_service_account": ("target_service_account", _str),
    "project_id": ("project_id", _str),
    "default_bucket_location": ("default_bucket_location", _str),
}
_HDFS_OPTIONS = {
    "host": ("host", _str),
    "port": ("port", _int),
    "user": ("user", _str),
    "replication": ("replication", _int),
    "buffer_size": ("buffer_size", _int),
    "default_block_size": ("default_block_size", _int),
    "kerb_ticket": ("kerb_ticket", _str),
}
_AZURE_OPTIONS = {
    "account_name": ("account_name", _str),
    "account_key": ("account_key", _str),
    "sas_token": ("sas_token", _str),
    "blob_storage_authority": ("blob_storage_authority", _str),
    "blob_storage_scheme": ("blob_storage_scheme", _str),
    "dfs_storage_authority": ("dfs_storage_authority", _str),
    "dfs_storage_scheme": ("dfs_storage_scheme", _str),
    "client_id": ("client_id", _str),
    "client_secret": ("client_secret", _str),
    "tenant_id": ("tenant_id", _str),
}
_LOCAL_OPTIONS = {
    "use_mmap": ("use_mmap", _bool),
}

#: option family -> known options; the family is the first component of the option name
#: (``s3.endpoint``; ``fs.s3.endpoint`` is accepted too).
FILESYSTEM_OPTIONS: dict[str, dict] = {
    "s3": _S3_OPTIONS,
    "gcs": _GCS_OPTIONS,
    "hdfs": _HDFS_OPTIONS,
    "azure": _AZURE_OPTIONS,
    "local": _LOCAL_OPTIONS,
}
_SCHEME_FAMILY = {
    "s3": "s3", "s3a": "s3", "s3n": "s3",
    "gs": "gcs", "gcs": "gcs",
    "hdfs": "hdfs", "viewfs": "hdfs",
    "abfs": "azure", "abfss": "azure", "az": "azure",
    "file": "local", "": "local",
}
_FAMILY_ALIASES = {"gs": "gcs", "abfs": "azure", "file": "local"}


def _parse_options(options: Mapping[str, object] | None) -> dict[str, dict[str, object]]:
    """Group options by family, validating every name. Returns family -> {kwarg: value}."""
    grouped: dict[str, dict[str, object]] = {}
    for raw_name, value in (options or {}).items():
        name = str(raw_name).strip().lower()
        bare = name[3:] if name.startswith("fs.") else name
        family, _, opt = bare.partition(".")
        family = _FAMILY_ALIASES.get(family, family)
        known = FILESYSTEM_OPTIONS.get(family)
        if known is None or not opt:
            raise InvalidOptionError(
                f"unknown filesystem option {raw_name!r}: expected <family>.<name> with family "
                f"one of {sorted(FILESYSTEM_OPTIONS)} (an optional 'fs.' prefix is accepted)")
        if opt not in known:
            raise InvalidOptionError(
                f"unknown filesystem option {raw_name!r}; known {family} options: "
                f"{', '.join(sorted(known))}")
        kwarg, convert = known[opt]
        grouped.setdefault(family, {})[kwarg] = convert(raw_name, value)
    return grouped


def _split_endpoint(kwargs: dict[str, object]) -> None:
    """``http://127.0.0.1:5000`` as an endpoint sets the scheme too (Arrow wants host:port)."""
    endpoint = kwargs.get("endpoint_override")
    if isinstance(endpoint, str) and "://" in endpoint:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InvalidOptionError(f"option s3.endpoint: cannot parse {endpoint!r}")
        kwargs["endpoint_override"] = parts.netloc
        kwargs.setdefault("scheme", parts.scheme)


def _retry_strategy(kwargs: dict[str, object]) -> None:
    """``s3.retry_max_attempts`` as pyarrow's retry strategy (bounded)."""
    attempts = kwargs.pop("retry_max_attempts", None)
    if attempts is None:
        return
    if not 1 <= int(attempts) <= S3_RETRY_ATTEMPTS_MAX:
        raise InvalidOptionError(f"option s3.retry_max_attempts: expected 1 to "
                                 f"{S3_RETRY_ATTEMPTS_MAX}, got {attempts}")
    kwargs["retry_strategy"] = pafs.AwsStandardS3RetryStrategy(max_attempts=int(attempts))


def resolve_filesystem(uri: str, options: Mapping[str, object] | None = None
                       ) -> tuple[pafs.FileSystem, str]:
    """Resolve a log-dir URI to ``(filesystem, path inside it)``.

    ``options`` are strings keyed ``<family>.<name>`` or ``fs.<family>.<name>`` (case
    insensitive), family one of ``s3``, ``gcs``, ``hdfs``, ``azure``, ``local``; e.g.
    ``s3.endpoint`` (``http://127.0.0.1:5000`` sets scheme and host), ``s3.region``,
    ``s3.access_key``, ``s3.secret_key``, ``s3.session_token``, ``s3.scheme``,
    ``s3.anonymous``, ``s3.retry_max_attempts`` (attempts per request on a retryable
    error, default :data:`S3_RETRY_ATTEMPTS`, at most :data:`S3_RETRY_ATTEMPTS_MAX`;
    ``s3.request_timeout`` bounds each attempt). Options of a family other than the URI's
    are validated and ignored. Unknown names raise :class:`InvalidOptionError` naming the option.
    Without options for its family a URI is resolved by ``pyarrow.fs.FileSystem.from_uri``
    (so query-string options such as ``?endpoint_override=`` keep working).
    """
    if not isinstance(uri, str) or not uri.strip():
        raise InvalidOptionError(f"path: expected a log directory URI, got {uri!r}")
    uri = uri.strip()
    grouped = _parse_options(options)
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if len(scheme) == 1 and os.name == "nt":       # a Windows drive letter, not a scheme
        scheme = ""
    family = _SCHEME_FAMILY.get(scheme)
    if family is None:
        raise InvalidOptionError(f"path: unsupported filesystem scheme {scheme!r} in {uri!r}")
    kwargs = dict(grouped.get(family, {}))
    try:
        if family == "local":
            path = parts.path if scheme == "file" else uri
            path = os.path.abspath(os.path.expanduser(path))
            return pafs.LocalFileSystem(**kwargs), path.replace(os.sep, "/")
        if not kwargs:
            fs, path = pafs.FileSystem.from_uri(uri)
            return fs, path.rstrip("/") or path
        path = (parts.netloc + parts.path).rstrip("/")
        if family == "s3":
            _split_endpoint(kwargs)
            _retry_strategy(kwargs)
            return pafs.S3FileSystem(**kwargs), path
        if family == "gcs":
            _split_endpoint(kwargs)
            return pafs.GcsFileSystem(**kwargs), path
        if family == "hdfs":
            kwargs.setdefault("host", parts.hostname or "default")
            if parts.port is not None:
                kwargs.setdefault("port", parts.port)
            return pafs.HadoopFileSystem(**kwargs), parts.path.rstrip("/") or "/"
        # azure: abfs://container@account.dfs.core.windows.net/path
        if "@" in parts.netloc:
            container, _, host = parts.netloc.partition("@")
            kwargs.setdefault("account_name", host.split(".")[0])
            path = (container + parts.path).rstrip("/")
        return pafs.AzureFileSystem(**kwargs), path
    except InvalidOptionError:
        raise
    except (TypeError, ValueError, OSError, ImportError, AttributeError) as err:
        raise InvalidOptionError(f"path: cannot open filesystem for {uri!r}: {err}") from err


# ---- I/O primitives ---------------------------------------------------------------------

def join(*parts: str) -> str:
    """Join path components the way every pyarrow filesystem spells paths ('/')."""
    return posixpath.join(*parts)


def list_dir(fs: pafs.FileSystem, path: str) -> list[pafs.FileInfo]:
    """Direct children of ``path`` (not recursive). LogLayoutError when it is not a dir."""
    try:
        return fs.get_file_info(pafs.FileSelector(path, allow_not_found=False, recursive=False))
    except FileNotFoundError as err:
        raise LogLayoutError("log directory does not exist", path=path) from err
    except OSError as err:
        raise (as_storage_error(err, path, "list")
               or LogLayoutError(f"cannot list directory: {err}", path=path)) from err


def file_size(fs: pafs.FileSystem, path: str) -> int | None:
    """Size of a file, or None when it does not exist."""
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        return None
    return info.size


def read_range(fs: pafs.FileSystem, path: str, position: int, length: int) -> bytes:
    """Bytes ``[position, position + length)`` of a file (fewer at its end)."""
    if length <= 0:
        return b""
    try:
        with fs.open_input_file(path) as f:
            want = max(min(length, f.size() - position), 0)
            data = f.read_at(want, position) if want else b""
    except OSError as err:
        raise (as_storage_error(err, path, "read", position)
               or LogLayoutError(f"cannot read {length} bytes: {err}", path=path,
                                 position=position)) from err
    if len(data) != want:
        raise LogLayoutError(f"short read: {len(data)} of {want} bytes", path=path,
                             position=position)
    return data


def read_small_file(fs: pafs.FileSystem, path: str, limit: int) -> bytes | None:
    """The whole content of a control file (checkpoint, index, snapshot), or None when the
    file does not exist. Files over ``limit`` bytes raise LogLayoutError rather than being
    loaded (a damaged or foreign file must not exhaust memory)."""
    try:
        with fs.open_input_file(path) as f:
            size = f.size()
            if size > limit:
                raise LogLayoutError(f"file is {size} bytes, more than the {limit} allowed "
                                     "for this kind of file", path=path)
            data = f.read_at(size, 0) if size else b""
            if len(data) != size:
                raise LogLayoutError(f"short read: {len(data)} of {size} bytes", path=path)
            return data
    except FileNotFoundError:
        return _replacement(fs, path, limit)
    except LogLayoutError:
        raise
    except OSError as err:
        storage = as_storage_error(err, path, "read")
        if storage is not None:
            raise storage from err
        if file_size(fs, path) is None:
            return _replacement(fs, path, limit)
        raise LogLayoutError(f"cannot read file: {err}", path=path) from err


def _replacement(fs: pafs.FileSystem, path: str, limit: int) -> bytes | None:
    """A missing file's complete replacement ``path.new`` (a :func:`write_atomic` on a
    rename filesystem interrupted between its delete and its rename), or None."""
    if isinstance(fs, pafs.LocalFileSystem) or fs.type_name in _ATOMIC_PUT_FILESYSTEMS:
        return None
    if file_size(fs, path + NEW_SUFFIX) is None:
        return None
    return read_small_file(fs, path + NEW_SUFFIX, limit)


# Object stores make an object visible only once its upload completes: one PUT is atomic.
_ATOMIC_PUT_FILESYSTEMS = {"s3", "gcs", "abfs"}
#: suffix of the temporary file :func:`write_atomic` writes first (Kafka's own for checkpoints)
TMP_SUFFIX = ".tmp"
#: suffix of a complete replacement waiting to be renamed into place (rename filesystems)
NEW_SUFFIX = ".new"


def is_local(fs: pafs.FileSystem) -> bool:
    """True when paths in ``fs`` are plain OS paths (POSIX locks, fsync, pread, append)."""
    return isinstance(fs, pafs.LocalFileSystem)


def delete_file(fs: pafs.FileSystem, path: str, *, missing_ok: bool = False) -> bool:
    """Delete one file; False when it did not exist and ``missing_ok``."""
    try:
        if is_local(fs):
            sysio.unlink(path)
        else:
            fs.delete_file(path)
        return True
    except FileNotFoundError:
        if missing_ok:
            return False
        raise
    except OSError as err:
        if missing_ok and file_size(fs, path) is None:
            return False
        if isinstance(err, StorageError):
            raise
        raise LogLayoutError(f"cannot delete file: {err}", path=path) from err


def write_local_atomic(path: str, write: Callable[[str], None]) -> None:
    """:func:`write_atomic` of a local file that ``write(tmp_path)`` writes (a writer
    that streams, e.g. Parquet's or a CSV's): ``tmp_path`` fsynced, renamed over
    ``path``, the directory fsynced; a failure or a kill leaves the old ``path``."""
    def write_synced(tmp: str) -> None:
        # the caller's writer is not ours (pyarrow's, open/write): its disk-full or I/O
        # error is the one rule's StorageError naming the file
        with storage_errors("write", tmp):
            write(tmp)
        fsync_file(tmp)
    _replace_local(path, write_synced)


def fsync_file(path: str) -> None:
    """fsync a local file another writer wrote and closed (Parquet's, a CSV's)."""
    fd = sysio.open_fd(path, os.O_RDONLY)
    try:
        sysio.fsync(fd, path)
    finally:
        os.close(fd)


def _replace_local(path: str, write_synced: Callable[[str], None]) -> None:
    tmp = path + TMP_SUFFIX
    try:
        write_synced(tmp)
        sysio.replace(tmp, path)
    except BaseException:
        # a half-written or unsynced replacement is never left behind (disk full)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(os.path.dirname(path) or ".")


def write_atomic(fs: pafs.FileSystem, path: str, data) -> None:
    """Replace ``path`` with ``data`` so that readers (and a crash at any point) see the
    old or the new content, never a mix. The one atomic write of the package:

    - local disk: write ``path.tmp``, fsync it, rename it over ``path``, fsync the
      directory (as Kafka's checkpoint files are written);
    - object stores (s3, gcs, abfs): one upload, visible only once complete;
    - filesystems with rename semantics (HDFS, and any other): write and close
      ``path.tmp``, rename it to ``path.new`` (now known complete), delete ``path``,
      rename ``path.new`` to ``path``. HDFS's rename does not replace an existing file,
      so there is a moment with no ``path``: :func:`read_small_file` then reads
      ``path.new``, which is whole by construction, and the next write first finishes
      that rename (or drops a ``path.new`` no reader ever saw, when ``path`` stands).
    """
    if isinstance(fs, pafs.LocalFileSystem):
        def write(tmp: str) -> None:
            fd = sysio.open_fd(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            try:
                sysio.write_fully(fd, data, path=tmp)
                sysio.fsync(fd, tmp)
            finally:
                os.close(fd)
        _replace_local(path, write)
        return
    if fs.type_name in _ATOMIC_PUT_FILESYSTEMS:
        with sysio.remote("write", path), fs.open_output_stream(path) as out:
            out.write(data)
        return
    tmp, new = path + TMP_SUFFIX, path + NEW_SUFFIX
    with sysio.remote("rename", new):
        if file_size(fs, new) is not None:
            if file_size(fs, path) is None:
                fs.move(new, path)          # finish the replacement a crash interrupted
            else:
                delete_file(fs, new)        # a replacement that never became the file
    with sysio.remote("write", tmp), fs.open_output_stream(tmp) as out:
        out.write(data)
    with sysio.remote("rename", tmp):
        fs.move(tmp, new)
    delete_file(fs, path, missing_ok=True)
    with sysio.remote("rename", new):
        fs.move(new, path)
