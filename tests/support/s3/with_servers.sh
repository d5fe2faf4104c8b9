#!/usr/bin/env bash
# Run a command with SeaweedFS and moto (locked) serving S3 on 127.0.0.1; both are stopped by PID
# on any exit. Usage: tests/support/s3/with_servers.sh PYTHON COMMAND [ARGS...]
set -euo pipefail
python=$1; shift
state=$(mktemp -d)
stop_servers() {
    if [[ -s "$state/pids" ]]; then
        for pid in $(cat "$state/pids"); do kill -TERM -- "-$pid" 2>/dev/null || true; done
        for _ in $(seq 1 100); do
            alive=0
            for pid in $(cat "$state/pids"); do kill -0 "$pid" 2>/dev/null && alive=1; done
            [[ $alive == 0 ]] && break
            sleep 0.1
        done
        for pid in $(cat "$state/pids"); do kill -KILL -- "-$pid" 2>/dev/null || true; done
    fi
    if [[ -s "$state/workdirs" ]]; then
        while read -r dir; do [[ -n "$dir" ]] && rm -rf "$dir"; done < "$state/workdirs"
    fi
    rm -rf "$state"
}
trap stop_servers EXIT
"$python" -m tests.support.s3.servers start "$state"
# shellcheck disable=SC1091
source "$state/env"
"$@"
