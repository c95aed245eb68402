#!/usr/bin/env bash
# System packages the test suite needs beyond the venv: Debian's chromium, which the web-UI test
# drives through Playwright (its own browser download is not used), and a PostgreSQL server, which
# tests/postgres starts in a temporary folder (initdb as the postgres user), and nginx, the HTTP
# mirror behind the fault-injecting proxy of tests/cli/test_remote_sources.py. Installs what is
# missing when running as root (CI: a fresh Debian machine); otherwise says what to install.
set -euo pipefail
missing=()
if [ ! -x /usr/bin/chromium ]; then
  missing+=(chromium)
fi
if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  missing+=(postgresql)
fi
if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
  missing+=(nginx-light)
fi
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  # postgresql: Debian's server of the release (15 on bookworm), with the postgres user
  apt-get install -y "${missing[@]}"
else
  echo "test-deps: missing ${missing[*]}; run 'sudo apt-get install ${missing[*]}'" \
    "(the UI, PostgreSQL and HTTP-mirror tests fail without them when CI=true, and are skipped otherwise)" >&2
fi
