#!/usr/bin/env bash
# System packages the test suite needs beyond the venv: none yet.
set -euo pipefail
exit 0
