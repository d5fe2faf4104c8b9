"""Typed errors raised by paimon_core; every one derives from :class:`PaimonError`.

Messages name the table, field and value involved so a user can act on them without
reading a stack trace.
"""

from __future__ import annotations


class PaimonError(Exception):
    """Root of every error paimon_core raises on purpose."""


class InvalidNameError(PaimonError, ValueError):
    """A database, table or column name that cannot be stored safely."""


class DatabaseNotFoundError(PaimonError, LookupError):
    """The database does not exist in the warehouse."""


class WarehouseNotFoundError(DatabaseNotFoundError):
    """The warehouse path does not exist (a typo, or nothing was created in it yet)."""


class InvalidURIError(PaimonError, ValueError):
    """A warehouse or table URI that cannot be opened: ``s3:/bucket`` with one slash, or a
    protocol fsspec does not know."""


class DatabaseExistsError(PaimonError):
    """The database already exists and ``exist_ok`` was false."""


class DatabaseNotEmptyError(PaimonError):
    """Dropping a database that still holds tables without ``cascade``."""


class TableNotFoundError(PaimonError, LookupError):
    """The table does not exist in the warehouse."""


class TableExistsError(PaimonError):
    """The table already exists and ``exist_ok`` was false."""


class SchemaError(PaimonError, ValueError):
    """Input data or a schema change that does not fit the table schema."""


class OptionError(PaimonError, ValueError):
    """A table option with a value that cannot be parsed or is out of range."""


class SnapshotNotFoundError(PaimonError, LookupError):
    """Time travel to a snapshot, timestamp or tag that does not exist."""


class ExpiredStartWarning(UserWarning):
    """A stream asked to start at a snapshot that has expired starts at the earliest retained one
    (as Paimon does); the changes in between are not read."""


class InvalidArgumentError(PaimonError, ValueError):
    """An API argument that is out of range or conflicts with another (not a schema problem)."""


class WriterClosedError(PaimonError):
    """A writer used after it committed, prepared or aborted; open a new one with ``new_write``."""


class SnapshotExpiredError(SnapshotNotFoundError):
    """A read lost its snapshot to expiry (or rollback) while it ran; nothing partial is returned."""


class TagExistsError(PaimonError):
    """A tag of that name already exists (tags are never overwritten)."""


class CommitConflictError(PaimonError):
    """The commit lost every race it was allowed to retry; nothing of it landed.

    Attributes:
        snapshot_id: the snapshot id the last attempt raced for.
    """

    def __init__(self, message: str, *, snapshot_id: int | None = None) -> None:
        super().__init__(message)
        self.snapshot_id = snapshot_id


class CommitStateUnknownError(PaimonError):
    """The outcome of publishing a snapshot is unknown; no file was cleaned up.

    Re-running the same commit (same commit user and identifier) is safe: the
    committer detects a commit that did land and does not apply it twice.
    """


class CorruptMetadataError(PaimonError):
    """A metadata file (schema, snapshot, manifest, index) that cannot be decoded."""


class MissingFileError(CorruptMetadataError, FileNotFoundError):
    """A file a snapshot references is gone (expired under a running read, or lost)."""


class UnsupportedFeatureError(PaimonError, NotImplementedError):
    """A Paimon feature this implementation does not provide (yet)."""


class FileIOError(PaimonError, OSError):
    """A storage operation failed for a reason other than the target already existing."""


class RowKindError(PaimonError, ValueError):
    """A retraction (-U/-D) the table's merge engine does not accept without more options."""


class AggregationOverflowError(PaimonError, ArithmeticError):
    """An aggregate (sum, product) left the range of its column type, as Paimon refuses too."""


class CorruptDataFileError(CorruptMetadataError):
    """A data file (Parquet/ORC) a snapshot references that cannot be decoded (truncated,
    overwritten with other bytes). A subclass of CorruptMetadataError so callers that stop on
    corrupt tables catch both; the message names the file and the table."""


class SystemTableNotFoundError(PaimonError, LookupError):
    """A system table name (``$snapshots``, ``$files``, ...) that Paimon does not define; the
    message names the table, the name asked for and the valid names."""
