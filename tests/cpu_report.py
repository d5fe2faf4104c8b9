"""``--cpu-top=N``: the N tests that cost the most CPU, with the suite's total.

On a machine with two cores ``make test`` is bound by CPU, not by waiting, so ``--durations`` (wall
time under load) says little about what to cut. Each test's CPU is that of the process running it
plus the children it started and reaped (writers, oracle steps, Dagster webservers and daemons),
from setup to teardown. A module or session fixture's processes count for the test whose teardown
reaps them (a module's webserver for its last test); S3 servers started by make test count for none.
It works under xdist: workers attach the figure to the teardown report and the controller adds up.
"""

from __future__ import annotations

import resource
from collections.abc import Generator

import pytest

CPU_KEY = "cpu_s"
_START = pytest.StashKey[float]()


def _cpu_now() -> float:
    """CPU seconds (user + system) of this process and its reaped children so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cpu-top", type=int, default=0, metavar="N",
                     help="report the N tests that used the most CPU (own and reaped children's)")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--cpu-top"):
        config.pluginmanager.register(CpuReport(config.getoption("--cpu-top")), "cpu-report")


class CpuReport:
    """Measures each test where it runs and adds the figures up where the reports arrive."""

    def __init__(self, top: int) -> None:
        self.top = top
        self.spent: dict[str, float] = {}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        item.stash[_START] = _cpu_now()
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, None, None]:
        if call.when == "teardown" and _START in item.stash:
            item.user_properties.append((CPU_KEY, round(_cpu_now() - item.stash[_START], 2)))
        yield

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown":
            for key, value in report.user_properties:
                if key == CPU_KEY:
                    self.spent[report.nodeid] = float(value)  # type: ignore[arg-type]

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.spent:
            return
        total = sum(self.spent.values())
        terminalreporter.write_sep(
            "=", f"top {self.top} CPU (own + reaped children): {len(self.spent)} tests, {total:,.0f} CPU s in all")
        for nodeid, seconds in sorted(self.spent.items(), key=lambda kv: -kv[1])[:self.top]:
            terminalreporter.write_line(f"{seconds:8.1f}s  {seconds / total:5.1%}  {nodeid}")
