"""create_if_absent on a real disk: one winner per race, never torn, errors never "exists"."""

from __future__ import annotations

import multiprocessing as mp
import os
from pathlib import Path

import pytest

from paimon_core.errors import FileIOError
from paimon_core.fileio import FileIO


def _race(path: str, payload: bytes, barrier: object, rounds: int, queue: object) -> None:
    file_io, _ = FileIO.for_uri("/")
    wins = []
    for i in range(rounds):
        barrier.wait()  # type: ignore[attr-defined]
        if file_io.create_if_absent(f"{path}/key-{i}", payload):
            wins.append(i)
    queue.put((payload, wins))  # type: ignore[attr-defined]


def test_exactly_one_winner_per_key_among_processes(tmp_path: Path) -> None:
    workers, rounds = 6, 120
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(workers), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(str(tmp_path), f"writer-{w}".encode() * 50, barrier,
                                             rounds, queue)) for w in range(workers)]
    for proc in procs:
        proc.start()
    results = [queue.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    winners: dict[int, bytes] = {}
    for payload, wins in results:
        for i in wins:
            assert i not in winners, f"key-{i} created twice"
            winners[i] = payload
    assert sorted(winners) == list(range(rounds))
    for i, payload in winners.items():
        assert (tmp_path / f"key-{i}").read_bytes() == payload
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")], "temp files left behind"


def test_existing_file_is_kept(tmp_path: Path) -> None:
    file_io, _ = FileIO.for_uri(str(tmp_path))
    target = f"{tmp_path}/snapshot-1"
    assert file_io.create_if_absent(target, b"first")
    assert not file_io.create_if_absent(target, b"second")
    assert file_io.read_bytes(target) == b"first"


def test_io_errors_are_not_reported_as_exists(tmp_path: Path) -> None:
    file_io, _ = FileIO.for_uri(str(tmp_path))
    (tmp_path / "not-a-dir").write_bytes(b"x")
    with pytest.raises(FileIOError) as info:
        file_io.create_if_absent(f"{tmp_path}/not-a-dir/snapshot-1", b"data")
    assert not isinstance(info.value, FileExistsError)


def test_write_bytes_replaces_atomically(tmp_path: Path) -> None:
    file_io, _ = FileIO.for_uri(str(tmp_path))
    file_io.write_bytes(f"{tmp_path}/LATEST", b"1")
    file_io.write_bytes(f"{tmp_path}/LATEST", b"22")
    assert file_io.read_bytes(f"{tmp_path}/LATEST") == b"22"
    assert sorted(os.listdir(tmp_path)) == ["LATEST"]


def test_listing_and_deleting(tmp_path: Path) -> None:
    file_io, root = FileIO.for_uri(f"file://{tmp_path}")
    assert root == str(tmp_path)
    file_io.write_bytes(f"{root}/a/b/c.txt", b"hello")
    assert [s.name for s in file_io.list_dir(f"{root}/a")] == ["b"]
    assert file_io.list_dir(f"{root}/missing") == []
    assert file_io.file_size(f"{root}/a/b/c.txt") == 5
    file_io.delete_dir(f"{root}/a")
    assert not file_io.exists(f"{root}/a")
    file_io.delete(f"{root}/never-existed")


def test_unsupported_protocol_refuses_commit() -> None:
    file_io, root = FileIO.for_uri("memory://warehouse")
    from paimon_core.errors import UnsupportedFeatureError

    with pytest.raises(UnsupportedFeatureError, match="atomic create-if-absent"):
        file_io.create_if_absent(f"{root}/snapshot-1", b"x")
    assert FileIOError.__mro__[1].__name__ == "PaimonError"
