#!/usr/bin/env bash
# Builds tests/native/test_core.cc in three flavours with g++ and runs each one:
#   plain  -O2
#   asan   -O1, AddressSanitizer + UndefinedBehaviorSanitizer (leaks checked at exit)
#   tsan   -O1, ThreadSanitizer
# Any sanitizer report fails the run. Builds go in parallel; runs go one after another, so each
# gets the machine's cores to itself.
#
# Usage: tests/native/build_and_run.sh [BUILD_DIR] [FLAVOUR...]
#   BUILD_DIR defaults to build/native-tests under the repository root; FLAVOUR is any of
#   plain, asan, tsan (default: all three). CXX overrides the compiler; extra arguments for
#   the test binary (a test-name filter) go in TEST_ARGS.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/build/native-tests}"
shift || true
flavours=("$@")
[ ${#flavours[@]} -eq 0 ] && flavours=(plain asan tsan)
cxx="${CXX:-g++}"
src="$here/test_core.cc"

common=(-std=c++20 -g -fno-omit-frame-pointer -ffp-contract=off -pthread -Wall)
flags_for() {
  case "$1" in
    plain) echo "-O2" ;;
    asan) echo "-O1 -fsanitize=address,undefined -fno-sanitize-recover=all" ;;
    tsan) echo "-O1 -fsanitize=thread" ;;
    *) echo "unknown flavour '$1', expected plain, asan or tsan" >&2; return 2 ;;
  esac
}

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"

mkdir -p "$out"

# Build every flavour in parallel; report each compiler's output only if it fails.
pids=()
for f in "${flavours[@]}"; do
  flags="$(flags_for "$f")"
  # shellcheck disable=SC2086  # $flags is a list of flags
  "$cxx" "${common[@]}" $flags "$src" -o "$out/test_core_$f" >"$out/build_$f.log" 2>&1 &
  pids+=($!)
done
failed=0
for i in "${!flavours[@]}"; do
  if ! wait "${pids[$i]}"; then
    echo "build failed: ${flavours[$i]} (compiler output below)" >&2
    cat "$out/build_${flavours[$i]}.log" >&2
    failed=1
  fi
done
[ "$failed" -eq 0 ] || exit 1

# Run each flavour; fail on a non-zero exit, a sanitizer report, or a missing closing line.
for f in "${flavours[@]}"; do
  log="$out/run_$f.log"
  echo "== $f"
  start=$(date +%s.%N)
  status=0
  # shellcheck disable=SC2086  # TEST_ARGS is a word list
  "$out/test_core_$f" ${TEST_ARGS:-} 2>&1 | tee "$log" || status=$?
  elapsed=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  if [ "$status" -ne 0 ]; then
    echo "FAILED: $f exited with status $status after ${elapsed} s (log: $log)" >&2
    exit 1
  fi
  if grep -qE "ThreadSanitizer|AddressSanitizer|LeakSanitizer|runtime error:" "$log"; then
    echo "FAILED: $f printed a sanitizer report (log: $log)" >&2
    exit 1
  fi
  if ! grep -qE "^native: [0-9]+ passed, 0 failed$" "$log"; then
    echo "FAILED: $f did not print its closing line (log: $log)" >&2
    exit 1
  fi
  echo "== $f passed in ${elapsed} s"
done
