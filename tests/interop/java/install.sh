#!/usr/bin/env bash
# Builds the Java oracle's jar cache: Apache Paimon 0.9.0's Java core from the PyPI sdist
# pypaimon==0.2.0; the Hadoop 3.3.4 client jars and netty-common (Arrow's Java vectors need it) from
# the sdist pyspark==3.5.3; nothing else.
# Usage: tests/interop/java/install.sh PIP CACHE_DIR. The tests compile the driver themselves.
set -euo pipefail
pip=$1
cache=$2
jars="$cache/jars"
wanted=(paimon-python-java-bridge-0.9.0.jar hadoop-client-api-3.3.4.jar hadoop-client-runtime-3.3.4.jar
        commons-logging-1.1.3.jar netty-common-4.1.96.Final.jar)
missing=0
for jar in "${wanted[@]}"; do [[ -s "$jars/$jar" ]] || missing=1; done
if [[ $missing == 0 ]]; then exit 0; fi
command -v javac >/dev/null || { echo "no javac on PATH (JDK 17: Debian openjdk-17-jdk-headless)" >&2; exit 1; }
download=$(mktemp -d)
trap 'rm -rf "$download"' EXIT
"$pip" download --quiet --no-deps --no-binary :all: --dest "$download" pypaimon==0.2.0 pyspark==3.5.3
mkdir -p "$jars.partial"
tar -xzf "$download"/pypaimon-0.2.0.tar.gz -C "$jars.partial" --strip-components=3 \
    pypaimon-0.2.0/deps/jars/paimon-python-java-bridge-0.9.0.jar
tar -xzf "$download"/pyspark-3.5.3.tar.gz -C "$jars.partial" --strip-components=3 \
    pyspark-3.5.3/deps/jars/hadoop-client-api-3.3.4.jar pyspark-3.5.3/deps/jars/hadoop-client-runtime-3.3.4.jar \
    pyspark-3.5.3/deps/jars/commons-logging-1.1.3.jar pyspark-3.5.3/deps/jars/netty-common-4.1.96.Final.jar
rm -rf "$jars"
mv "$jars.partial" "$jars"
