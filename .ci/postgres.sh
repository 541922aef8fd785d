#!/usr/bin/env bash
# Start a throwaway PostgreSQL server on 127.0.0.1 for the service tests (sourced by .ci/run).
# Installs Debian's postgresql package when its binaries are missing; runs the server as user
# postgres (when we are root) with its own data directory; exports COHABIT_TEST_PG_URL and
# COHABIT_PG_PID; `pg_stop` stops it by pid and removes the data directory.
set -euo pipefail

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }

pg_start() {
  if [ -z "$(pg_bin)" ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  fi
  local bin; bin="$(pg_bin)"
  [ -n "$bin" ] || { echo "postgresql binaries not found after install" >&2; return 1; }
  COHABIT_PG_DATA="$(mktemp -d /tmp/cohabit-pg.XXXXXX)"
  local port; port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  local as=()
  if [ "$(id -u)" = 0 ]; then
    chown postgres "$COHABIT_PG_DATA"
    as=(runuser -u postgres --)
  fi
  "${as[@]}" "$bin/initdb" -D "$COHABIT_PG_DATA/data" -U postgres -A trust >/dev/null
  "${as[@]}" "$bin/pg_ctl" -D "$COHABIT_PG_DATA/data" -l "$COHABIT_PG_DATA/log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $COHABIT_PG_DATA -c fsync=off -c max_connections=200" start >/dev/null
  COHABIT_PG_PID="$(head -1 "$COHABIT_PG_DATA/data/postmaster.pid")"
  export COHABIT_PG_DATA COHABIT_PG_PID
  export COHABIT_TEST_PG_URL="postgresql://postgres@127.0.0.1:$port/postgres"
  echo "postgresql $($bin/postgres --version | awk '{print $3}') on 127.0.0.1:$port (pid $COHABIT_PG_PID)"
}

pg_stop() {
  if [ -n "${COHABIT_PG_PID:-}" ] && kill -0 "$COHABIT_PG_PID" 2>/dev/null; then
    kill -INT "$COHABIT_PG_PID"   # fast shutdown of the postmaster we started
    for _ in $(seq 100); do kill -0 "$COHABIT_PG_PID" 2>/dev/null || break; sleep 0.1; done
  fi
  [ -n "${COHABIT_PG_DATA:-}" ] && rm -rf "$COHABIT_PG_DATA"
  return 0
}
