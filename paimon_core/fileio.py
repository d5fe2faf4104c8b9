"""Storage access over fsspec, with a real atomic create-if-absent for committing snapshots.

Local files use ``os`` directly: a temp file is written and fsynced, then hard-linked to its
final name (``link`` fails with EEXIST and never replaces), so readers never see a torn file and
two writers can never both create ``snapshot-N``. S3 (s3fs) uses a conditional PUT
(``If-None-Match: *``). Any other fsspec backend is refused for commits rather than silently
falling back to check-then-write.
"""

from __future__ import annotations

import errno
import functools
import inspect
import logging
import os
import re
import shutil
import sys
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import fsspec
import pyarrow as pa
import pyarrow.fs as pafs

from paimon_core.errors import FileIOError, InvalidURIError, UnsupportedFeatureError
from paimon_core.metadata_cache import MetadataCache

log = logging.getLogger(__name__)

OBJECT_STORE_PROTOCOLS = ("s3", "s3a")
_ONE_SLASH = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):/(?!/)")
DELETE_BATCH = 1000  # S3's DeleteObjects limit
# Filesystems whose conditional create was probed (fsspec caches instances, so once per process).
_VERIFIED_STORES: weakref.WeakSet[fsspec.AbstractFileSystem] = weakref.WeakSet()


@dataclass(frozen=True, slots=True)
class FileStatus:
    """One directory entry."""

    path: str
    name: str
    size: int
    is_dir: bool
    mtime_ms: int | None


def _is_precondition_failure(exc: BaseException) -> bool:
    """Whether an s3fs/botocore error is an HTTP 412 (the key already exists)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        response = getattr(current, "response", None)
        if isinstance(response, dict):
            error = response.get("Error", {})
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if error.get("Code") in ("PreconditionFailed", "412") or status == 412:
                return True
        current = current.__cause__ or current.__context__
    return False


def _remote_error_types() -> tuple[type[BaseException], ...]:
    """Errors the S3 client stack raises that are not OSError (connection lost or timed out once
    its retries are spent): botocore's and aiohttp's.

    Taken from the modules already imported: a client library that was never imported raised
    nothing, and importing botocore and aiohttp would cost every process that only touches local
    files half a second.
    """
    found: list[type[BaseException]] = []
    botocore = sys.modules.get("botocore.exceptions")
    if botocore is not None:
        found += [botocore.BotoCoreError, botocore.ClientError]
    aiohttp = sys.modules.get("aiohttp")
    if aiohttp is not None:
        found.append(aiohttp.ClientError)
    return tuple(found)


_Method = TypeVar("_Method", bound=Callable[..., Any])


def _storage_call(method: _Method) -> _Method:
    """Storage failures surface as :class:`FileIOError` (an OSError) naming the path, whatever
    client library raised them, so callers tell "failed" from "unknown" by one type."""

    @functools.wraps(method)
    def call(self: FileIO, target: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, target, *args, **kwargs)
        except OSError as exc:
            if not _is_untyped_storage_error(exc):
                raise  # missing, existing, no permission ... and our own errors keep their type
            failure: BaseException = exc
        except Exception as exc:
            if not isinstance(exc, _remote_error_types()):
                raise
            failure = exc
        where = target if isinstance(target, str) else (f"{target[0]} (+{len(target) - 1} more)" if target else "")
        raise FileIOError(f"{method.__name__.strip('_')} {self.uri(where)} failed: "
                          f"{type(failure).__name__}: {failure}") from failure

    return call  # type: ignore[return-value]


def _is_untyped_storage_error(exc: OSError) -> bool:
    """A bare OSError (s3fs's for 5xx and throttling), a lost connection or a timeout."""
    return type(exc) is OSError or isinstance(exc, ConnectionError | TimeoutError)


class FileIO:
    """A filesystem rooted nowhere in particular: every method takes a full path.

    Paths are what fsspec calls "stripped" paths: absolute local paths, or ``bucket/key`` for
    object stores. :meth:`for_uri` turns a user URI into a FileIO and such a path.
    """

    def __init__(self, fs: fsspec.AbstractFileSystem) -> None:
        self.fs = fs
        # decoded manifests read through this FileIO (their files are immutable)
        self.metadata_cache = MetadataCache()
        protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
        self.protocol: str = protocols[0]
        self.is_local = "file" in protocols or "local" in protocols
        self.arrow_fs: pafs.FileSystem = (
            pafs.LocalFileSystem() if self.is_local else pafs.PyFileSystem(pafs.FSSpecHandler(fs))
        )
        # s3fs, gcsfs and adlfs open a file of a given size without asking the store for it
        self._opens_sized = "size" in inspect.signature(fs._open).parameters
        # s3fs asks a whole-file read for the object's size first (to split big objects into
        # concurrent ranges); metadata files are small, so one GET reads them
        cat = getattr(fs, "_cat_file", None)
        self._cat_options: dict[str, Any] = (
            {"max_concurrency": 1} if cat is not None and "max_concurrency" in inspect.signature(cat).parameters
            else {})

    @classmethod
    def for_uri(cls, uri: str, storage_options: Mapping[str, Any] | None = None) -> tuple[FileIO, str]:
        """Resolve ``uri`` (a local path, ``file://`` or any fsspec URL) to a FileIO and path.

        Raises:
            InvalidURIError: a scheme with one slash (``s3:/bucket``, which would otherwise be a
                local directory named ``s3:``), or a protocol fsspec does not know.
        """
        one_slash = _ONE_SLASH.match(uri)
        if one_slash and len(one_slash.group(1)) > 1:  # C:/ on Windows is a drive, not a scheme
            raise InvalidURIError(f"{uri!r} has one slash after '{one_slash.group(1)}:'; write "
                                  f"{one_slash.group(1)}://{uri[one_slash.end():]}")
        if "://" in uri:
            protocol = uri.split("://", 1)[0].rsplit("::", maxsplit=1)[-1]
            try:
                fsspec.get_filesystem_class(protocol)
            except (ValueError, ImportError) as exc:
                raise InvalidURIError(f"{uri!r}: fsspec cannot open protocol {protocol!r} ({exc}); use a local "
                                      "path, file://, s3:// or another installed fsspec protocol") from None
        if "://" not in uri:
            uri = os.path.abspath(os.path.expanduser(uri))
        options = dict(storage_options or {})
        if uri.split("://", 1)[0] in OBJECT_STORE_PROTOCOLS:
            # A cached listing would hide snapshots and files other writers just created.
            options["use_listings_cache"] = False
        fs, path = fsspec.core.url_to_fs(uri, **options)
        return cls(fs), path.rstrip("/") or "/"

    def to_path(self, uri: str) -> str:
        """The path of a full URI (e.g. a file's external path) on this filesystem."""
        return str(self.fs._strip_protocol(uri))

    def uri(self, path: str) -> str:
        """A full URI for ``path`` (for display and for other engines)."""
        return f"file://{path}" if self.is_local else f"{self.protocol}://{path}"

    # ----------------------------------------------------------------------------------
    # reads
    # ----------------------------------------------------------------------------------

    @_storage_call
    def exists(self, path: str) -> bool:
        if self.is_local:
            return os.path.exists(path)
        return bool(self.fs.exists(path))

    @_storage_call
    def file_exists(self, path: str) -> bool:
        """Whether a file (not a directory) exists: one HEAD on S3, where :meth:`exists` also
        lists the prefix when the object is missing (the common case when probing for the
        next snapshot)."""
        if self.is_local:
            return os.path.isfile(path)
        if self.protocol not in OBJECT_STORE_PROTOCOLS:
            return bool(self.fs.isfile(path))
        bucket, key, _ = self.fs.split_path(path)
        try:
            self.fs.call_s3("head_object", Bucket=bucket, Key=key)
        except FileNotFoundError:
            return False
        return True

    @_storage_call
    def read_bytes(self, path: str) -> bytes:
        """Read a whole file; raises FileNotFoundError when it does not exist."""
        if self.is_local:
            with open(path, "rb") as f:
                return f.read()
        return bytes(self.fs.cat_file(path, **self._cat_options))

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")

    @_storage_call
    def file_size(self, path: str) -> int:
        if self.is_local:
            return os.stat(path).st_size
        return int(self.fs.size(path))

    @_storage_call
    def list_dir(self, path: str) -> list[FileStatus]:
        """Entries of a directory; an absent directory lists as empty."""
        if self.is_local:
            return self._list_local(path)
        try:
            entries = self.fs.ls(path, detail=True)
        except FileNotFoundError:
            return []
        out = []
        for entry in entries:
            full = entry["name"].rstrip("/")
            if full == path.rstrip("/"):
                continue
            mtime = entry.get("LastModified") or entry.get("mtime")
            mtime_ms = int(mtime.timestamp() * 1000) if hasattr(mtime, "timestamp") else None
            out.append(FileStatus(full, full.rsplit("/", 1)[-1], int(entry.get("size") or 0),
                                  entry.get("type") == "directory", mtime_ms))
        return out

    @staticmethod
    def _list_local(path: str) -> list[FileStatus]:
        try:
            scan = os.scandir(path)
        except FileNotFoundError:
            return []
        with scan:
            out = []
            for entry in scan:
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue  # removed while listing (e.g. another writer's temp file)
                out.append(FileStatus(entry.path, entry.name, st.st_size, entry.is_dir(),
                                      int(st.st_mtime * 1000)))
            return out

    def open_input(self, path: str, size: int | None = None) -> pa.NativeFile:
        """A random-access Arrow file (for Parquet/ORC readers).

        ``size``, when the caller knows it (a data file's manifest entry does), spares an object
        store the two HEAD requests Arrow's fsspec bridge sends before a read (one to check the
        file exists, one for its size); a missing file then fails at the first read instead.
        """
        if self.is_local or size is None or not self._opens_sized:
            return self.arrow_fs.open_input_file(path)
        handle = self.fs.open(path, mode="rb", size=size)
        if isinstance(handle, fsspec.spec.AbstractBufferedFile):
            # what the file's first range read would otherwise HEAD for (its ETag, to notice a
            # change between reads): data files are never rewritten in place
            handle.details = {"name": path, "size": size, "type": "file"}
        return pa.PythonFile(handle, mode="r")

    # ----------------------------------------------------------------------------------
    # writes
    # ----------------------------------------------------------------------------------

    @_storage_call
    def mkdirs(self, path: str) -> None:
        """A directory that exists even while empty (object stores get a ``path/`` marker, as
        Hadoop's S3A and pyarrow write, so an empty database is still listed)."""
        if self.is_local:
            os.makedirs(path, exist_ok=True)
        elif not self.fs.exists(path):
            self.fs.pipe_file(path.rstrip("/") + "/", b"")

    def open_output(self, path: str) -> pa.NativeFile:
        """A new file to stream into (local parent directories are created)."""
        if self.is_local:
            os.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        return self.arrow_fs.open_output_stream(path)

    @_storage_call
    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a whole file, replacing it if present; readers never see partial content."""
        parent = path.rsplit("/", 1)[0]
        if not self.is_local:
            self.fs.pipe_file(path, data)
            return
        os.makedirs(parent, exist_ok=True)
        tmp = self._temp_path(path)
        try:
            self._write_local_file(tmp, data)
            os.replace(tmp, path)
        finally:
            _unlink_quietly(tmp)

    @_storage_call
    def create_if_absent(self, path: str, data: bytes) -> bool:
        """Atomically create ``path`` with ``data`` unless it exists.

        Returns:
            True when the file now holds ``data`` because of this call (or an earlier attempt of
            it whose answer was lost: a create retried by the S3 client finds its own object and
            gets 412), False when another writer's file is there.

        Raises:
            FileIOError: the storage failed; the file may or may not exist afterwards.
            UnsupportedFeatureError: the backend has no atomic create.
        """
        if self.is_local:
            return self._create_local(path, data)
        if self.protocol in OBJECT_STORE_PROTOCOLS:
            return self._create_s3(path, data)
        raise UnsupportedFeatureError(
            f"storage protocol {self.protocol!r} offers no atomic create-if-absent; commits to "
            f"{path} would not be safe (supported: local files, s3)")

    def _create_local(self, path: str, data: bytes) -> bool:
        parent = path.rsplit("/", 1)[0]
        tmp = self._temp_path(path)
        try:
            os.makedirs(parent, exist_ok=True)
            self._write_local_file(tmp, data)
            os.link(tmp, path)
        except FileExistsError as exc:
            if path in (exc.filename, exc.filename2):
                return self._holds(path, data)
            raise FileIOError(f"creating {path} failed: {exc}") from exc
        except OSError as exc:
            if exc.errno in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                raise UnsupportedFeatureError(
                    f"the filesystem holding {parent} does not support hard links, which "
                    f"atomic commits need ({exc})") from exc
            raise FileIOError(f"creating {path} failed: {exc}") from exc
        finally:
            _unlink_quietly(tmp)
        _fsync_dir(parent)
        return True

    def _create_s3(self, path: str, data: bytes) -> bool:
        """One conditional PUT. A 412 is a conflict only if the object holds other bytes: a
        request retried after its response was lost finds its own object and reports 412."""
        self._verify_atomic_create(path.rsplit("/", 1)[0])
        return self._put_if_absent(path, data) or self._holds(path, data)

    def _holds(self, path: str, data: bytes) -> bool:
        """After a refused create: whether the file has our bytes (an earlier attempt of ours)."""
        try:
            return self.read_bytes(path) == data
        except FileNotFoundError:
            return False  # deleted since (expiry): someone else's, long settled
        except OSError as exc:
            raise FileIOError(f"creating {self.uri(path)}: reading it back after a conflict failed: "
                              f"{exc}") from exc

    def _put_if_absent(self, path: str, data: bytes) -> bool:
        """False on 412, whatever exception type the server's reply makes s3fs raise."""
        try:
            self.fs.pipe_file(path, data, mode="create")
        except OSError as exc:
            if isinstance(exc, FileExistsError) or _is_precondition_failure(exc):
                return False
            raise FileIOError(f"creating {self.uri(path)} failed: {exc}") from exc
        return True

    def _verify_atomic_create(self, directory: str) -> None:
        """Once per filesystem: refuse to commit to a store that ignores ``If-None-Match``
        (it would silently overwrite a concurrent writer's snapshot)."""
        if self.fs in _VERIFIED_STORES:
            return
        probe = f"{directory}/.create-probe-{uuid.uuid4()}"
        try:
            first = self._put_if_absent(probe, b"1")
            second = self._put_if_absent(probe, b"2")
        finally:
            self.delete_quietly(probe)
        if not first or second:
            raise UnsupportedFeatureError(
                f"the object store behind {self.uri(directory)} does not honour conditional writes "
                "(If-None-Match: *): a second create of the same key "
                f"{'succeeded' if second else 'failed before the first'}; committing there could "
                "silently lose concurrent commits, so it is refused")
        _VERIFIED_STORES.add(self.fs)

    @staticmethod
    def _temp_path(path: str) -> str:
        parent, name = path.rsplit("/", 1)
        return f"{parent}/.{name}.{uuid.uuid4()}.tmp"

    @staticmethod
    def _write_local_file(path: str, data: bytes) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)

    # ----------------------------------------------------------------------------------
    # deletes
    # ----------------------------------------------------------------------------------

    @_storage_call
    def delete(self, path: str) -> None:
        """Delete one file; absent files are fine."""
        self.metadata_cache.forget(path)
        if self.is_local:
            _unlink_quietly(path)
            return
        try:
            self.fs.rm_file(path)
        except FileNotFoundError:
            pass

    @_storage_call
    def delete_many(self, paths: Sequence[str]) -> None:
        """Delete files in no particular order; absent ones are fine. On S3 a request per 1,000
        (DeleteObjects) instead of one each.

        Raises:
            FileIOError: naming the first file the store refused to delete (the others of its
                request may be gone).
        """
        if self.protocol not in OBJECT_STORE_PROTOCOLS:
            for path in paths:
                self._delete_one(path)
            return
        for path in paths:
            self.metadata_cache.forget(path)
        by_bucket: dict[str, list[str]] = {}
        for path in paths:
            bucket, key, _ = self.fs.split_path(path)
            by_bucket.setdefault(bucket, []).append(key)
        for bucket, keys in by_bucket.items():
            for start in range(0, len(keys), DELETE_BATCH):
                batch = [{"Key": key} for key in keys[start:start + DELETE_BATCH]]
                try:
                    out = self.fs.call_s3("delete_objects", Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
                except OSError as exc:
                    raise FileIOError(f"deleting {len(batch)} files from {self.uri(bucket)} failed: {exc}") from exc
                errors = out.get("Errors") or []
                if errors:
                    first = errors[0]
                    raise FileIOError(f"deleting {self.uri(bucket + '/' + first.get('Key', '?'))} failed: "
                                      f"{first.get('Code')} {first.get('Message', '')} "
                                      f"({len(errors)} of {len(batch)} files not deleted)")

    def _delete_one(self, path: str) -> None:
        try:
            self.delete(path)
        except FileIOError:
            raise
        except OSError as exc:  # e.g. no write permission: typed, naming the file
            raise FileIOError(f"deleting {self.uri(path)} failed: {exc}") from exc

    def delete_quietly(self, path: str) -> None:
        """Best-effort delete used in cleanup paths: failures are logged, not raised."""
        try:
            self.delete(path)
        except OSError as exc:
            log.warning("could not delete %s: %s", path, exc)

    @_storage_call
    def delete_dir(self, path: str) -> None:
        """Delete a directory tree; an absent directory is fine."""
        if self.is_local:
            try:
                shutil.rmtree(path)
            except FileNotFoundError:
                pass
            return
        try:
            dirs = [d for d, info in self.fs.find(path, withdirs=True, detail=True).items()
                    if info.get("type") == "directory"]
            self.fs.rm(path, recursive=True)
        except FileNotFoundError:
            return
        # Stores with real directories (SeaweedFS) keep the emptied ones: remove them deepest first.
        for directory in sorted({*dirs, path}, key=len, reverse=True):
            try:
                self.fs.rm_file(directory.rstrip("/") + "/")
            except FileNotFoundError:
                pass


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except (FileNotFoundError, NotADirectoryError):
        pass


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
