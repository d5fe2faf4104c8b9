"""Apache Paimon's Java core (0.9.0) as an engine: its jars, its compiled step program, its JVM.

The jars are the Java oracle's (``make java-oracle``: Paimon from the PyPI sdist pypaimon==0.2.0,
Hadoop's client from the sdist pyspark==3.5.3). The step program,
``benchmarks/engines/java/PaimonBench.java``, is compiled here into a folder named by its source's
digest, so an edit recompiles it and parallel runs share one build.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
JAVA_ORACLE = Path(os.environ.get("PAIMON_JAVA_ORACLE", REPO / ".java-oracle"))
JARS = ("paimon-python-java-bridge-0.9.0.jar", "hadoop-client-api-3.3.4.jar", "hadoop-client-runtime-3.3.4.jar",
        "commons-logging-1.1.3.jar", "netty-common-4.1.96.Final.jar")
PAIMON_JAVA_VERSION = "0.9.0"
BENCH_SOURCE = REPO / "benchmarks" / "engines" / "java" / "PaimonBench.java"
# Arrow's Java memory needs java.nio opened on JDK 17; UTC makes TIMESTAMP WITH LOCAL TIME ZONE
# columns cross as Arrow timestamps in UTC, as ours are. Every JVM here runs with these.
ARROW_FLAGS = ("--add-opens=java.base/java.nio=ALL-UNNAMED", "-Duser.timezone=UTC")
# A benchmark step runs the full JIT (C2) and the default collector, as a Flink job would; the
# heap is sized for the largest step (1M rows in memory plus Paimon's write buffer).
BENCH_FLAGS = (*ARROW_FLAGS, "-Xmx6g")


class JavaUnavailable(Exception):
    """Why the Java engine cannot run here (no JDK, or the jars were not fetched)."""


def jar_classpath(oracle: Path = JAVA_ORACLE) -> str:
    """The jars' classpath; raises :class:`JavaUnavailable` naming what is missing."""
    jars = [oracle / "jars" / name for name in JARS]
    absent = [str(jar) for jar in jars if not jar.is_file()]
    if absent:
        raise JavaUnavailable(f"{', '.join(absent)} missing (run `make java-oracle`)")
    return ":".join(str(jar) for jar in jars)


def compiled(source: Path, classpath: str, cache: Path) -> Path:
    """The folder of ``source``'s classes, compiled against ``classpath`` unless already there.

    Raises :class:`JavaUnavailable` without a JDK, and ``RuntimeError`` when the source does not
    compile (our own code: a failure, never a reason to skip).
    """
    javac = shutil.which("javac")
    if javac is None or shutil.which("java") is None:
        raise JavaUnavailable("no java/javac on PATH (install a JDK 17, e.g. Debian openjdk-17-jdk-headless)")
    classes = cache / hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    if (classes / f"{source.stem}.class").is_file():
        return classes
    partial = Path(f"{classes}.partial-{os.getpid()}")
    partial.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([javac, "-nowarn", "-d", str(partial), "-cp", classpath, str(source)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        raise RuntimeError(f"{source} does not compile:\n{proc.stderr[-3000:]}")
    try:
        partial.rename(classes)
    except OSError:  # compiled at the same time by another process: the same source
        shutil.rmtree(partial, ignore_errors=True)
    return classes


def bench_launcher(oracle: Path = JAVA_ORACLE) -> list[str]:
    """``java ... PaimonBench``: the command that runs a step of the Java engine (arguments follow)."""
    jars = jar_classpath(oracle)
    classes = compiled(BENCH_SOURCE, jars, oracle / "bench-classes")
    return [shutil.which("java") or "java", *BENCH_FLAGS, "-cp", f"{jars}:{classes}", BENCH_SOURCE.stem]


def java_version() -> str:
    """The JVM's version line (``java -version`` prints it on stderr)."""
    probe = subprocess.run([shutil.which("java") or "java", "-version"], capture_output=True, text=True, check=False)
    return (probe.stderr.splitlines() or ["unknown"])[0]
