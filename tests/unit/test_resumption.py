"""Which dead run's unfinished chunked write a fresh materialization resumes (pure decision)."""

from __future__ import annotations

from pipelines.ingestion.resumption import EarlierRun, to_resume

PROGRESS = {"a": (2, False), "b": (4, True), "c": (0, False), "d": (1, False)}


def progress(root: str) -> tuple[int, bool]:
    return PROGRESS[root]


def run(root: str, *, succeeded: bool = False, running: bool = False) -> EarlierRun:
    return EarlierRun(f"run-of-{root}", root, succeeded, running)


def test_the_newest_unfinished_write_is_resumed() -> None:
    assert to_resume([run("c"), run("a"), run("d")], progress) == ("a", 2)


def test_a_finished_write_or_a_success_after_it_ends_the_search() -> None:
    assert to_resume([run("b"), run("a")], progress) is None  # b's final chunk landed after a died
    assert to_resume([run("c", succeeded=True), run("a")], progress) is None


def test_a_run_group_still_running_is_left_alone() -> None:
    assert to_resume([run("a", running=True), run("d")], progress) == ("d", 1)
    assert to_resume([], progress) is None
