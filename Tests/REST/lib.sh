# Shared by Tests/REST/contract and Tests/REST/interop (sourced, not run).
#   rest_venv    — .venv with the REST checks' Python packages (pinned); exits 77 (skip) with the
#                  reason when a venv cannot be made or PyPI cannot be reached.
#   rest_ferry   — the ferry binary to test, copied to a temp folder so a rebuild cannot swap it
#                  mid-run: $FERRY_BIN, else `swift build --product ferry` (incremental after
#                  `swift test`).
#   rest_daemon  — starts `ferry serve` with the given arguments and sets REST_URL from its
#                  first line (ferry: serving … at http://127.0.0.1:PORT/ …) and REST_PID.
# 77 is the conventional "skipped" exit status (automake); scripts/test reports it as SKIPPED.

REST_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
REST_SKIP=77
REST_PACKAGES=(
  'schemathesis==4.32.5'
  'openapi-spec-validator==0.9.0'
  'requests==2.34.2'
  'httpx==0.28.1'
  'websockets>=14'
)

rest_venv() {
  local venv="$REST_ROOT/.venv" python=${PYTHON:-python3}
  REST_PYTHON="$venv/bin/python"
  if "$REST_PYTHON" - <<'PY' 2>/dev/null; then return 0; fi
import importlib.metadata as m
want = {"schemathesis": "4.32.5", "openapi-spec-validator": "0.9.0", "requests": None, "httpx": None}
for name, version in want.items():
    if version is not None and m.version(name) != version:
        raise SystemExit(1)
    m.version(name)
PY
  if [ ! -x "$REST_PYTHON" ]; then
    if ! "$python" -m venv "$venv" >/dev/null 2>&1; then
      echo "SKIPPED: cannot make a Python venv ($python -m venv failed; apt-get install python3-venv)."
      exit $REST_SKIP
    fi
  fi
  local log
  log=$(mktemp)
  if ! "$venv/bin/pip" install --quiet --disable-pip-version-check --timeout 30 --retries 2 "${REST_PACKAGES[@]}" >"$log" 2>&1; then
    echo "SKIPPED: pip could not install the REST checks' packages (PyPI unreachable?):"
    tail -5 "$log" | sed 's/^/  /'
    rm -f "$log"
    exit $REST_SKIP
  fi
  rm -f "$log"
}

rest_ferry() {
  REST_TMP=${REST_TMP:-$(mktemp -d)}
  local bin=${FERRY_BIN:-}
  if [ -z "$bin" ]; then
    (cd "$REST_ROOT" && swift build --product ferry >/dev/null) || { echo "swift build --product ferry failed"; exit 1; }
    bin="$(cd "$REST_ROOT" && swift build --show-bin-path)/ferry"
  fi
  cp "$bin" "$REST_TMP/ferry"
  REST_FERRY="$REST_TMP/ferry"
}

rest_daemon() {
  local out="$REST_TMP/daemon.out"
  "$REST_FERRY" serve --port 0 "$@" >"$out" 2>"$REST_TMP/daemon.err" &
  REST_PID=$!
  REST_URL=
  for _ in $(seq 100); do
    REST_URL=$(sed -n '1s|.* at \(http://127\.0\.0\.1:[0-9]*\)/.*|\1|p' "$out" 2>/dev/null)
    [ -n "$REST_URL" ] && return 0
    kill -0 "$REST_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "ferry serve did not start:"; cat "$out" "$REST_TMP/daemon.err"
  exit 1
}

# Stops the daemon started by rest_daemon (by its pid) and removes the temp folder.
rest_cleanup() {
  [ -n "${REST_PID:-}" ] && kill "$REST_PID" 2>/dev/null && wait "$REST_PID" 2>/dev/null
  [ -n "${REST_TMP:-}" ] && rm -rf "$REST_TMP"
  return 0
}
