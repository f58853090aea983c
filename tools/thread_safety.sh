#!/usr/bin/env bash
# Clang's thread-safety analysis over every non-test .cc of the project: a
# member marked ABSL_GUARDED_BY(mu) is read or written only with mu held, a
# function marked ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) is called only with it,
# one marked ABSL_LOCKS_EXCLUDED(mu) only without it, every lock taken is
# released, and (-Wthread-safety-beta) mutexes marked ABSL_ACQUIRED_BEFORE /
# ABSL_ACQUIRED_AFTER are taken in that order. Any finding is an error.
#
#   bash tools/thread_safety.sh                   # every non-test .cc
#   bash tools/thread_safety.sh rpc/admission.cc  # only the files named
#   bash tools/thread_safety.sh --check           # only: is clang++-14 installed?
#
# Syntax only (no code is generated), with each file's flags from
# build/compile_commands.json (configure build/ first: tools/build.sh);
# gcc's warning, optimisation and debug flags are left out, and so are the
# gcc-only ones. Files run JOBS at a time (default: the number of CPUs).
# Exit status: 0 clean, 1 findings (or a file that does not compile under
# clang), 2 clang++-14 or the compile database missing.
set -euo pipefail
cd "$(dirname "$0")/.."

CXX_TS=${THREAD_SAFETY_CXX:-clang++-14}
if [ "${1:-}" = "--check" ]; then
  command -v "$CXX_TS" >/dev/null 2>&1
  exit
fi
if ! command -v "$CXX_TS" >/dev/null 2>&1; then
  echo "thread-safety: $CXX_TS is missing (apt-get install clang-14)" >&2
  exit 2
fi
db=build/compile_commands.json
if [ ! -f "$db" ]; then
  echo "thread-safety: $db is missing: configure build/ first (tools/build.sh)" >&2
  exit 2
fi
jobs=${JOBS:-$(nproc)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One clang response file per translation unit.
python3 - "$db" "$work" "$PWD" "$@" <<'EOF'
import json, os, re, shlex, sys

db, work, root, only = sys.argv[1], sys.argv[2], os.path.realpath(sys.argv[3]), sys.argv[4:]
only = {os.path.realpath(f) for f in only}
# Kept: what decides how the code parses. Everything else (warnings,
# optimisation, debug info, output) is dropped.
KEEP_WITH_ARG = {"-isystem", "-iquote", "-idirafter", "-include", "-imacros"}
KEEP_PREFIX = ("-I", "-D", "-U", "-std=", "-m", "-f", "-isystem", "-iquote", "-pthread")
# gcc-only options clang rejects or ignores with a warning.
GCC_ONLY = re.compile(r"^-(f(no-)?(ipa-|tree-|gcse|var-tracking|opt-info|semantic-interposition|"
                      r"concepts|coroutines|ext-numeric-literals|max-errors|diagnostics-color|"
                      r"lto-|fat-lto|reorder-blocks-and-partition|prefetch-loop-arrays|"
                      r"sanitize=|sanitize-recover|no-sanitize))")
ANALYSIS = ["-fsyntax-only", "-Wno-everything", "-Wthread-safety", "-Wthread-safety-beta", "-Werror=thread-safety", "-Werror=thread-safety-beta"]
# Sources clang-14 cannot parse, and why (they take no locks).
SKIP = {
    # __builtin_cpu_supports("f16c"): clang-14 knows no such feature string.
    "kernels/cpu_matmul_packed_avx2.cc",
}

def is_project_source(path):
    rel = os.path.relpath(path, root)
    if rel.startswith("..") or not rel.endswith(".cc"):
        return False
    top = rel.split(os.sep)[0]
    # Generated code (build*/), tests and fuzz harnesses are not checked.
    return not (top.startswith("build") or top in ("tests", "fuzz", "third_party") or rel in SKIP)

def quote(a):
    return '"' + a.replace("\\", "\\\\").replace('"', '\\"') + '"'

seen = set()
n = 0
for entry in json.load(open(db)):
    path = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
    if not is_project_source(path) or path in seen or (only and path not in only):
        continue
    seen.add(path)
    args = entry.get("arguments") or shlex.split(entry["command"])
    kept, i = [], 1
    while i < len(args):
        a = args[i]
        if a in KEEP_WITH_ARG and i + 1 < len(args):
            kept += [a, args[i + 1]]
            i += 2
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            i += 2
            continue
        if a.startswith(KEEP_PREFIX) and not GCC_ONLY.match(a):
            kept.append(a)
        i += 1
    with open(os.path.join(work, "%04d.rsp" % n), "w") as f:
        f.write("\n".join(quote(a) for a in ["-working-directory", entry["directory"]] + kept + ANALYSIS
                          + [path]) + "\n")
    with open(os.path.join(work, "%04d.name" % n), "w") as f:
        f.write(os.path.relpath(path, root) + "\n")
    n += 1
missing = only - seen
if missing:
    sys.exit("thread-safety: not in %s (or not a project source): %s" % (db, " ".join(sorted(missing))))
if n == 0:
    sys.exit("thread-safety: no project sources in %s" % db)
EOF

count=$(find "$work" -name '*.rsp' | wc -l)
start=$(date +%s)
# shellcheck disable=SC2016
if find "$work" -name '*.rsp' -print0 | sort -z |
  xargs -0 -n 1 -P "$jobs" sh -c '"$0" @"$1" >"${1%.rsp}.log" 2>&1 || { touch "${1%.rsp}.failed"; exit 1; }' \
    "$CXX_TS"; then
  echo "thread-safety: $count files clean ($(($(date +%s) - start)) s, $jobs jobs)"
  exit 0
fi
failed=0
for f in "$work"/*.failed; do
  [ -e "$f" ] || continue
  failed=$((failed + 1))
  echo "thread-safety: $(cat "${f%.failed}.name"):" >&2
  cat "${f%.failed}.log" >&2
done
echo "thread-safety: $failed of $count files have findings" >&2
exit 1
