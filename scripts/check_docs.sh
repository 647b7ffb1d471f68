#!/usr/bin/env bash
# scripts/check_docs.sh: every command that README.md and docs/*.md show runs as written, in order,
# and every relative link in them resolves.
#
#   scripts/check_docs.sh                  # from anywhere; BUILD_DIR defaults to build/
#   BUILD_DIR=build-asan TIMEOUT=120 scripts/check_docs.sh
#   LIST=1 scripts/check_docs.sh           # print what would run (and what is skipped), run nothing
#
# What counts as a command: every line of a fenced block whose info string is sh, bash, shell or
# console (```sh ... ```), and every line of an indented block (four spaces, after a blank line,
# outside a fence). A line ending in a backslash continues on the next; lines starting with # are
# comments. Blocks fenced as text (or anything else) are output, never run.
#
# The convention for commands that must not run here (too slow, or needing a GPU, PyTorch, Open
# MPI, Slurm, root, or the network):
#   - a line <!-- no-check: REASON --> right before a block skips the whole block;
#   - a trailing comment that starts with "slow" or "needs" skips that one command, e.g.
#       build/apps/bench_kernels --threads 2   # slow: every case
#       build/apps/train --precision bf16      # needs AVX512_BF16
# Everything else must finish within TIMEOUT seconds (default 60) with exit status 0.
#
# How it runs: a scratch copy of the repository (its tracked and not-ignored files) in a temporary
# folder, with build/ there a symlink to BUILD_DIR, so that what the examples write (under out/)
# starts empty and never touches the checkout. The commands of README.md run first, then those of
# docs/*.md in name order, each in its own `bash -e -o pipefail -c` from the copy's root. The first
# failure stops the run: it prints the file, the line and the command with the end of its output,
# and exits 1. A relative link ([text](path) or ![alt](path), optionally path#anchor) that names no
# file, or an anchor that names no heading of a markdown file, is a failure too.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$repo/build}
timeout_s=${TIMEOUT:-60}
list_only=${LIST:-0}
case $build in /*) ;; *) build=$repo/$build ;; esac

docs=("$repo/README.md")
for f in "$repo"/docs/*.md; do [[ -e $f ]] && docs+=("$f"); done

# The extractor and the link checker: python3 (Debian's, which the test suite needs anyway).
extract() {
  python3 - "$repo" "$@" <<'PY'
import os, re, sys, unicodedata

repo, files = sys.argv[1], sys.argv[2:]
SHELL = {'sh', 'bash', 'shell', 'console'}
SKIP_COMMENT = re.compile(r'\s#\s*(slow|needs)\b')
LINK = re.compile(r'!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+"[^"]*")?\)')

def slug(heading):
    # GitHub's anchors: lower case, punctuation dropped (but - and _), spaces to hyphens.
    s = re.sub(r'`|\*\*|\*', '', heading.strip()).lower()
    s = ''.join(c for c in s if c.isalnum() or c in ' -_')
    return s.replace(' ', '-')

def anchors(path):
    out, fence = set(), False
    for line in open(path, encoding='utf-8'):
        if line.lstrip().startswith('```'):
            fence = not fence
        elif not fence:
            m = re.match(r'#{1,6}\s+(.*?)\s*#*\s*$', line)
            if m:
                out.add(slug(m.group(1)))
    return out

bad = 0
for path in files:
    rel = os.path.relpath(path, repo)
    lines = open(path, encoding='utf-8').read().split('\n')
    fence = None          # the fence's info string while inside one
    skip_block = False    # a no-check marker came right before this block
    pending_skip = False
    cmd, cmd_line = '', 0
    prev_blank = True
    in_indented = False

    def emit(kind, lineno, text):
        print(f'{kind}\t{rel}\t{lineno}\t{text}')

    def take(lineno, raw, skip):
        global cmd, cmd_line
        line = raw.rstrip()
        if not cmd:
            if not line.strip() or line.lstrip().startswith('#'):
                return
            cmd_line = lineno
        if line.endswith('\\'):
            cmd += line[:-1] + ' '
            return
        cmd += line
        text = cmd.strip()
        cmd = ''
        if skip:
            emit('SKIP', cmd_line, text + '   [block marked no-check]')
        elif SKIP_COMMENT.search(text):
            emit('SKIP', cmd_line, text)
        else:
            emit('RUN', cmd_line, text)

    for i, line in enumerate(lines, 1):
        stripped = line.strip()
        if fence is None and re.match(r'<!--\s*no-check\b.*-->', stripped):
            pending_skip = True
            continue
        m = re.match(r'\s*```+\s*([\w+-]*)', line)
        if m and fence is None:
            fence = m.group(1).lower() or 'none'
            skip_block = pending_skip
            pending_skip = False
            in_indented = False
            continue
        if fence is not None:
            if re.match(r'\s*```+\s*$', line):
                fence = None
                continue
            if fence in SHELL:
                take(i, line, skip_block)
            continue
        # outside fences: indented code blocks (four spaces after a blank line)
        if line.startswith('    ') and (prev_blank or in_indented) and stripped:
            if not in_indented:
                skip_block = pending_skip
                pending_skip = False
            in_indented = True
            take(i, line[4:], skip_block)
        elif stripped:
            in_indented = False
            pending_skip = False if not stripped.startswith('<!--') else pending_skip
            # links, outside code blocks
            for target in LINK.findall(re.sub(r'`[^`]*`', '', line)):
                if re.match(r'[a-z][a-z0-9+.-]*:', target):   # http:, https:, mailto:
                    continue
                file_part, _, frag = target.partition('#')
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                if not os.path.exists(dest):
                    emit('BADLINK', i, f'{target}: no such file {os.path.relpath(dest, repo)}')
                    bad += 1
                elif frag and dest.endswith('.md') and frag not in anchors(dest):
                    emit('BADLINK', i, f'{target}: no heading #{frag} in {os.path.relpath(dest, repo)}')
                    bad += 1
        prev_blank = not stripped
    if cmd:
        emit('RUN', cmd_line, cmd.strip())
sys.exit(0)
PY
}

plan=$(extract "${docs[@]}")

if [[ $list_only != 0 ]]; then
  printf '%s\n' "$plan" | awk -F'\t' '{printf "%-7s %s:%s  %s\n", $1, $2, $3, $4}'
  exit 0
fi

if grep -q '^BADLINK' <<<"$plan"; then
  grep '^BADLINK' <<<"$plan" | awk -F'\t' '{printf "check_docs: %s:%s: broken link %s\n", $2, $3, $4}' >&2
  exit 1
fi

[[ -x $build/apps/train ]] || {
  echo "check_docs: no build at $build (build/apps/train missing): build first, or set BUILD_DIR" >&2
  exit 1
}

scratch=$(mktemp -d "${TMPDIR:-/tmp}/check_docs.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
# The repository as a user has it: tracked files and new ones git does not ignore (without git:
# everything but the build folders and out/).
if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$repo" && git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done |
    tar --null -T - -cf -) | tar -xf - -C "$scratch/"
else
  (cd "$repo" && tar --exclude='./build*' --exclude=./out -cf - .) | tar -xf - -C "$scratch/"
fi
rm -rf "$scratch/build"
ln -s "$build" "$scratch/build"

start=$SECONDS
ran=0 skipped=0
while IFS=$'\t' read -r kind file line cmd; do
  case $kind in
    SKIP) skipped=$((skipped + 1)); continue ;;
    RUN) ;;
    *) continue ;;
  esac
  ran=$((ran + 1))
  t0=$SECONDS
  if (cd "$scratch" && timeout -k 5 "$timeout_s" bash -e -o pipefail -c "$cmd") \
    >"$scratch/.check_docs.log" 2>&1 </dev/null; then
    printf 'check_docs: ok %3ds  %s:%s  %s\n' $((SECONDS - t0)) "$file" "$line" "$cmd"
  else
    rc=$?
    why="exit $rc"
    ((rc == 124 || rc == 137)) && why="timed out after ${timeout_s}s"
    {
      echo "check_docs: FAILED ($why): $file:$line: $cmd"
      echo "check_docs: the end of its output:"
      tail -n 20 "$scratch/.check_docs.log" | sed 's/^/    /'
    } >&2
    exit 1
  fi
done <<<"$plan"
echo "check_docs: $ran commands ran, $skipped skipped (marked slow, needs or no-check); links resolve; $((SECONDS - start)) s"
