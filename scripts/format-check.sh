#!/usr/bin/env bash
# format-check.sh — checks that every C and CUDA file of the tree is formatted
# as .clang-format says (clang-format 14, Debian 12's). With --fix, formats them.
#
# Not formatted: tests/hostile/, tests/candidates/ and tests/fixtures/, the inputs of the
# tests, whose messages name their lines (and fixtures built from them).
#
#   scripts/format-check.sh          exit 1 naming each file that differs
#   scripts/format-check.sh --fix    format them in place
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0
case "${1:-}" in
  --fix) fix=1 ;;
  "") ;;
  *) echo "format-check.sh: unknown option '$1' (--fix formats)" >&2; exit 2 ;;
esac
command -v clang-format >/dev/null 2>&1 || { echo "format-check.sh: no clang-format (scripts/setup.sh installs it)" >&2; exit 1; }
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cu' '*.cuh' | grep -v -e '^tests/hostile/' -e '^tests/candidates/' -e '^tests/fixtures/')
if [ "$fix" = 1 ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "format-check.sh: $f differs from .clang-format (scripts/format-check.sh --fix)" >&2
    bad=1
  fi
done
[ "$bad" = 0 ] && echo "format-check.sh: ${#files[@]} files formatted"
exit "$bad"
