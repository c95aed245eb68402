#!/usr/bin/env bash
# System packages the test suite needs beyond the venv: Debian's chromium, which the web-UI test
# drives through Playwright (its own browser download is not used). Installs it when missing and
# running as root (CI: a fresh Debian machine); otherwise says what to install.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y chromium
else
  echo "test-deps: /usr/bin/chromium is missing; run 'sudo apt-get install chromium'" \
    "(the UI test fails without it when CI=true, and is skipped otherwise)" >&2
fi
