#!/usr/bin/env bash
# gpu.sh - the GPU bench of issue #12; see scripts/gpu-check.sh.
exec "$(dirname "${BASH_SOURCE[0]}")/../scripts/gpu-check.sh" "$@"
