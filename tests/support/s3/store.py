"""One warehouse on one kind of store, so a behaviour test runs unchanged on each."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import fsspec

import paimon_core as pc
from tests.support.s3.servers import BUCKET, S3Server

STORE_KINDS = ("local", "seaweed", "moto")


@dataclass
class Store:
    """A fresh, empty warehouse: a temp folder, or a fresh prefix of the test bucket."""

    kind: str
    warehouse: str
    storage_options: dict[str, Any] | None = None
    server: S3Server | None = None
    _fs: fsspec.AbstractFileSystem | None = field(default=None, repr=False)

    @classmethod
    def local(cls, root: str) -> Store:
        return cls("local", root)

    @classmethod
    def on(cls, server: S3Server, endpoint: str | None = None) -> Store:
        """A warehouse on ``server``; ``endpoint`` routes requests through e.g. a fault proxy."""
        prefix = f"{BUCKET}/{uuid.uuid4().hex[:12]}/warehouse"
        return cls(server.name, f"s3://{prefix}", server.storage_options(endpoint), server)

    def catalog(self) -> pc.Catalog:
        return pc.Catalog(self.warehouse, storage_options=self.storage_options)

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        """A raw filesystem for assertions (no caches, independent of the code under test)."""
        if self._fs is None:
            options = dict(self.storage_options or {})
            if self.kind != "local":
                options.update(skip_instance_cache=True, use_listings_cache=False)
            self._fs, _ = fsspec.core.url_to_fs(self.warehouse, **options)
        return self._fs

    @property
    def root(self) -> str:
        return self.warehouse.removeprefix("s3://")

    def files(self, under: str = "") -> dict[str, int]:
        """Every object/file below the warehouse (or ``under`` it): relative path -> size."""
        base = f"{self.root}/{under}".rstrip("/")
        try:
            found = self.fs.find(base, detail=True)
        except FileNotFoundError:
            return {}
        return {name[len(self.root) + 1:]: int(info.get("size") or 0) for name, info in found.items()
                if info.get("type") != "directory"}

    def write(self, relative: str, data: bytes) -> None:
        self.fs.pipe_file(f"{self.root}/{relative}", data)

    def read(self, relative: str) -> bytes:
        return bytes(self.fs.cat_file(f"{self.root}/{relative}"))
