#!/usr/bin/env bash
# Keeps the front page and docs/ honest:
#  1. every `xhc <command>` that a ```sh block of README.md or docs/*.md runs (as `xhc`,
#     `bazel run //:xhc -- <command>` or `bazel-bin/xhc <command>`) is a command the binary
#     has: `xhc <command> --help` prints its usage and exits 0;
#  2. README.md's command table and docs/commands.md list exactly the commands `xhc --help`
#     lists;
#  3. every relative markdown link in README.md and docs/**/*.md names a file that exists
#     (http(s) and mailto links and pure #anchors are skipped; a #anchor after a path is
#     dropped, the file is checked).
#
# Usage: readme_test.sh [XHC_BINARY [REPO_ROOT]], or $XHC_BIN and $XHC_REPO_ROOT. Defaults:
# ./xhc (the runfiles' binary under `bazel test`, else bazel-bin/xhc) and the source tree that
# ./README.md links to. Links point anywhere in the tree while the runfiles hold only the
# declared data (README.md, docs/), and a runfiles file is a symlink into the tree it came
# from, so the links are resolved there. A test result cached by Bazel does not notice a
# deleted link target elsewhere in the tree; .ci/run runs with --nocache_test_results.
set -uo pipefail

xhc=${1:-${XHC_BIN:-}}
if [[ -z "$xhc" ]]; then
  if [[ -x ./xhc && ! -d ./xhc ]]; then xhc=./xhc; else xhc=bazel-bin/xhc; fi
fi
root=${2:-${XHC_REPO_ROOT:-}}
if [[ -z "$root" ]]; then
  readme=$(readlink -f README.md 2>/dev/null) || readme=
  root=$(dirname "${readme:-./README.md}")
fi

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

if [[ ! -f "$root/README.md" || ! -f "$root/WORKSPACE" ]]; then
  echo "FAIL: $root is not the source tree (no README.md and WORKSPACE there);" \
    "pass the repository root as the second argument"
  exit 1
fi
if [[ ! -x "$xhc" ]]; then
  echo "FAIL: no xhc binary at $xhc; pass its path as the first argument"
  exit 1
fi
[[ $xhc == /* ]] || xhc=$PWD/${xhc#./}  # the checks below run in the tree
echo "readme_test: binary $xhc, tree $root"

cd "$root" || exit 1
docs_top=(README.md)
docs_all=(README.md)
while IFS= read -r f; do docs_top+=("$f"); done < <(find docs -maxdepth 1 -name '*.md' | sort)
while IFS= read -r f; do docs_all+=("$f"); done < <(find docs -name '*.md' | sort)

# FILE:LINE:COMMAND for every xhc invocation inside ```sh (or bash, shell) fences.
invocations() {
  awk '
    /^[ \t]*```/ {
      if (fence) { fence = 0; sh = 0; next }
      fence = 1
      sh = ($0 ~ /^[ \t]*```(sh|bash|shell)[ \t]*$/)
      next
    }
    sh {
      rest = $0
      while (match(rest, /(^|[ \t\/:])xhc( --)?[ \t]+[a-z][a-z-]*/)) {
        m = substr(rest, RSTART, RLENGTH)
        n = split(m, words, /[ \t]+/)
        print FILENAME ":" FNR ":" words[n]
        rest = substr(rest, RSTART + RLENGTH)
      }
    }
  ' "$@"
}

# 1. Each distinct command once with --help, reported at its first use.
#    runtime/control/cli/main.cc dispatches the command; the flag parser of every command
#    (cli_util.cc ParseFlagsOrHelp, cmd_ckpt.cc, scheduler/schedule_cli.cc) prints
#    "usage: xhc <command> ..." and exits 0; an unknown command prints "xhc: unknown command"
#    and the general usage, which no check below accepts.
declare -A seen=()
num_commands=0
while IFS=: read -r file line cmd; do
  [[ -n "${seen[$cmd]:-}" ]] && continue
  seen[$cmd]=1
  num_commands=$((num_commands + 1))
  out=$("$xhc" "$cmd" --help 2>&1)
  rc=$?
  if ! grep -q "^usage: xhc $cmd\b" <<<"$out"; then
    fail "$file:$line: 'xhc $cmd --help' (exit $rc) printed no 'usage: xhc $cmd':" \
      "$(head -n 1 <<<"$out")"
  elif [[ $rc -eq 0 ]]; then
    echo "ok: $file:$line: xhc $cmd --help"
  else
    fail "$file:$line: 'xhc $cmd --help' exited $rc"
  fi
done < <(invocations "${docs_top[@]}")
[[ $num_commands -gt 0 ]] || fail "no xhc invocation found in the sh blocks of ${docs_top[*]}"

# 2. The command tables against `xhc --help` (main.cc's Usage: "  name   what it does").
listed=$("$xhc" --help 2>&1 | awk '/^  [a-z]/ { print $1 }' | sort)
[[ -n "$listed" ]] || fail "'xhc --help' listed no commands"
# table_commands FILE SECTION: the first word of each table row's first cell, from the
# heading that starts with SECTION to the next heading of that level ("" = the whole file).
table_commands() {
  awk -v section="$2" '
    /^#/ && section != "" { inside = (index($0, section) == 1); next }
    (section == "" || inside) && /^\| `[a-z]/ {
      cell = $0; sub(/^\| `/, "", cell); split(cell, w, /[ `]/); print w[1]
    }
  ' "$1" | sort -u
}
check_table() {
  local file=$1 section=$2 tabled missing extra
  tabled=$(table_commands "$file" "$section")
  missing=$(comm -23 <(echo "$listed") <(echo "$tabled") | tr '\n' ' ')
  extra=$(comm -13 <(echo "$listed") <(echo "$tabled") | tr '\n' ' ')
  [[ -z "$missing" ]] || fail "$file: the command table lacks: $missing(xhc --help lists them)"
  [[ -z "$extra" ]] || fail "$file: the command table has commands xhc does not: $extra"
  [[ -n "$missing$extra" ]] ||
    echo "ok: $file: the command table lists the $(wc -l <<<"$listed") commands of xhc --help"
}
check_table README.md "## Commands"
check_table docs/commands.md ""

# 3. Relative links: [text](target) and reference definitions "[label]: target", outside
#    code fences, resolved against the linking file's folder ("/..." against the tree root).
links() {
  awk '
    /^[ \t]*```/ { fence = !fence; next }
    fence { next }
    {
      rest = $0
      while (match(rest, /\]\([^)]*\)/)) {
        print FILENAME ":" FNR ":" substr(rest, RSTART + 2, RLENGTH - 3)
        rest = substr(rest, RSTART + RLENGTH)
      }
      if (match($0, /^ *\[[^]]+\]: *[^ ]+/)) {
        def = substr($0, RSTART, RLENGTH); sub(/^ *\[[^]]+\]: */, "", def)
        print FILENAME ":" FNR ":" def
      }
    }
  ' "$@"
}
num_links=0
while IFS=: read -r file line target; do
  target=${target%% *}  # drop a "title"
  target=${target#<}
  target=${target%>}
  case "$target" in
    "" | http://* | https://* | mailto:* | \#*) continue ;;
  esac
  path=${target%%#*}
  if [[ $path == /* ]]; then resolved=".$path"; else resolved="$(dirname "$file")/$path"; fi
  num_links=$((num_links + 1))
  if [[ -e "$resolved" ]]; then
    echo "ok: $file:$line: $target"
  else
    fail "$file:$line: link to $target: no such file ($resolved)"
  fi
done < <(links "${docs_all[@]}")

echo "readme_test: ran --help for $num_commands commands from the sh blocks of" \
  "${#docs_top[@]} files, checked 2 command tables and $num_links relative links in" \
  "${#docs_all[@]} files: $failures failures"
[[ $failures -eq 0 ]] && echo PASS || echo FAIL
[[ $failures -eq 0 ]]
