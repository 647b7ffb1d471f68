#!/usr/bin/env bash
# The style checks .ci/test runs before it builds (they fail in seconds): no function of the
# library and app folders over 80 lines (scripts/long_functions.sh, universal-ctags) and no
# clang-format difference (the repository's .clang-format) in any tracked C++ or CUDA file.
# Prints what is wrong and exits 1; exits 0 when both hold.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
long=$(bash scripts/long_functions.sh 80)
if [[ -n $long ]]; then
  echo "check_style: functions over 80 lines (lines file:line name); split them:" >&2
  echo "$long" >&2
  status=1
fi
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
if ! clang-format --dry-run --Werror "${files[@]}"; then
  echo "check_style: the files above differ from clang-format's layout: clang-format -i FILE" >&2
  status=1
fi
((status == 0)) && echo "check_style: no function over 80 lines, clang-format clean (${#files[@]} files)"
exit "$status"
