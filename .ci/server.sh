#!/usr/bin/env bash
# CI: end-to-end tests of `xinfer serve` through real HTTP (the openai npm SDK, LangChain JS,
# the AI SDK, and curl).
# Usage: .ci/server.sh [BINARY...]  (default build/xinfer; CI also passes build-asan/xinfer).
# Needs Node.js >= 20 with npm (openai 7 and the AI SDK declare >= 22 but pass on 20), curl,
# Chromium (installed here when missing), and the models under $XINFER_TEST_DATA (../shared/data).
set -euo pipefail
cd "$(dirname "$0")/.."

export XINFER_TEST_DATA="${XINFER_TEST_DATA:-$(cd .. && pwd)/shared/data}"
bins=("$@")
[ ${#bins[@]} -eq 0 ] && bins=(build/xinfer)

(cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error)

for b in "${bins[@]}"; do
    [ -x "$b" ] || { echo "server.sh: $b is not built" >&2; exit 1; }
    echo "== xinfer serve end-to-end tests: $b"
    # leaks are checked at exit of each server; halt_on_error keeps a failing ASan run loud
    (cd tests/e2e && XINFER_BIN="$(cd ../.. && pwd)/$b" \
        ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1}" \
        node --test --test-concurrency=1 ./*.test.mjs)
done

# The chat page and dashboard in a real browser: Debian's Chromium driven by playwright-core
# (never a browser download of its own). Screenshots land in build/webui-shots.
if ! command -v chromium >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
fi
(cd tests/webui && npm ci --no-audit --no-fund --loglevel=error)
for b in "${bins[@]}"; do
    echo "== web UI browser tests: $b"
    (cd tests/webui && XINFER_BIN="$(cd ../.. && pwd)/$b" \
        ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1}" \
        node --test --test-concurrency=1 ./*.test.mjs)
done
