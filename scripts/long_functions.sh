#!/usr/bin/env bash
# Lists the functions of the library and app folders longer than N lines (default 80), longest
# first: "lines file:line name". Uses universal-ctags' end-of-scope field. Tests are left out.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=${1:-80}
dirs=()
for d in io core kernels nn data comm parallel report apps; do [[ -d $d ]] && dirs+=("$d"); done
ctags -x --_xformat='%{end} %n %F %N' --kinds-c++=f --language-force=c++ -R "${dirs[@]}" |
  awk -v limit="$limit" '{n = $1 - $2 + 1; if (n > limit) print n, $3 ":" $2, $4}' | sort -rn
