#!/bin/sh
# ONNX backend node tests through weft's importer (`make conformance`).
#   sh scripts/conformance.sh                   build (Release, build/), make the venv, generate the tests,
#                                               run them on every device; writes build/conformance-failures.txt
#                                               and prints passed/failed/unsupported/excluded and coverage
#   sh scripts/conformance.sh --write-pass-list the same, and rewrites tests/onnx/node_tests_pass.txt (CPU)
#   sh scripts/conformance.sh --check [BUILD]   for `make test`: no build; fails if a test listed in
#                                               tests/onnx/node_tests_pass.txt no longer passes
# BUILD (default build), BUILD_TYPE (default Release) and DATA (default build/onnx-node-tests) may be
# set in the environment.
# Exits 0 unless the runner itself failed (or, with --check, a listed test regressed).
set -u
cd "$(dirname "$0")/.."
MODE=report
case "${1:-}" in
    --write-pass-list) MODE=write ;;
    --check) MODE=check; [ -n "${2:-}" ] && BUILD=$2 ;;
    "") ;;
    *) echo "usage: $0 [--write-pass-list | --check [BUILD]]" >&2; exit 2 ;;
esac
BUILD=${BUILD:-build}
DATA=${DATA:-build/onnx-node-tests}
PASS_LIST=tests/onnx/node_tests_pass.txt
FAILURES=$BUILD/conformance-failures.txt
RUNNER=$BUILD/conformance

if [ "$MODE" != check ]; then
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" >/dev/null || exit 2
    cmake --build "$BUILD" -j"$(nproc)" >"$BUILD/conformance.build.log" 2>&1 ||
        { grep -E 'error|Error' "$BUILD/conformance.build.log" | head -20; exit 2; }
fi
[ -x "$RUNNER" ] || { echo "conformance: $RUNNER is not built (is tools/conformance in CMakeLists.txt?)" >&2; exit 2; }

PY=$(sh scripts/venv.sh) || { echo "conformance: cannot create the Python venv (scripts/venv.sh)" >&2; exit 2; }
"$PY" tests/onnx/gen_node_tests.py "$DATA" || { echo "conformance: generating the node tests failed" >&2; exit 2; }

if [ "$MODE" = check ]; then
    # The runner's own check first: altered copies of real cases, selftest_pass_* must pass and
    # selftest_fail_* must fail, else a broken comparison could hide every regression.
    "$RUNNER" "$DATA/selftest" >"$BUILD/conformance.selftest.log" 2>&1
    if [ $? -ne 0 ] || grep -Eq '^(FAIL|UNSUPPORTED|EXCLUDED) selftest_pass_|^(PASS|UNSUPPORTED|EXCLUDED) selftest_fail_' \
            "$BUILD/conformance.selftest.log" || [ "$(grep -c '^[A-Z]* selftest_' "$BUILD/conformance.selftest.log")" -lt 7 ]; then
        echo "conformance: the runner's self-test failed:" >&2
        cat "$BUILD/conformance.selftest.log" >&2
        exit 1
    fi
    # at the default optimisation level, without passes and with level 3's layouts: each must give
    # the expected outputs
    "$RUNNER" --quiet --expect-pass "$PASS_LIST" "$DATA/node" || exit 1
    "$RUNNER" --quiet --opt-level 0 --expect-pass "$PASS_LIST" "$DATA/node" || exit 1
    "$RUNNER" --quiet --opt-level 3 --expect-pass "$PASS_LIST" "$DATA/node"
    exit $?
fi

# One run per device type weft reports (the runner requests the device for every node).
DEVICES=$("$BUILD/weft" devices | sed -n 's/.*type=\([A-Za-z]*\).*/\1/p' | sort -u)
[ -n "$DEVICES" ] || DEVICES=CPU
: >"$FAILURES"
TABLE=""
RC=0
for dev in $DEVICES; do
    extra=""
    [ "$MODE" = write ] && [ "$dev" = CPU ] && extra="--write-pass-list $PASS_LIST"
    # shellcheck disable=SC2086
    "$RUNNER" --quiet --device "$dev" --list-out "$FAILURES.$dev" $extra "$DATA/node" >"$BUILD/conformance.$dev.log" 2>&1
    rc=$?
    cat "$BUILD/conformance.$dev.log"
    if [ $rc -ne 0 ]; then
        echo "conformance: the runner failed on $dev (exit $rc)" >&2
        RC=1
        continue
    fi
    sed "s/^/$dev /" "$FAILURES.$dev" >>"$FAILURES"
    rm -f "$FAILURES.$dev"
    counts=$(sed -n 's/^passed \([0-9]*\), failed \([0-9]*\), unsupported \([0-9]*\), excluded \([0-9]*\)$/\1 \2 \3 \4/p' \
             "$BUILD/conformance.$dev.log")
    TABLE="$TABLE$dev $counts
"
done

echo
printf '%-8s %7s %7s %12s %9s %7s %9s\n' device passed failed unsupported excluded total coverage
printf '%s' "$TABLE" | while read -r dev p f u e; do
    [ -n "$dev" ] || continue
    total=$((p + f + u + e))
    scope=$((total - e))
    cov=$(awk -v s=$((p + f)) -v n=$scope 'BEGIN { printf "%.1f%%", n ? 100 * s / n : 0 }')
    printf '%-8s %7d %7d %12d %9d %7d %9s\n' "$dev" "$p" "$f" "$u" "$e" "$total" "$cov"
done
echo "coverage = (passed + failed) / (total - excluded); failures and unsupported tests: $FAILURES"
[ "$MODE" = write ] && echo "wrote $PASS_LIST ($(grep -vc '^#' "$PASS_LIST") tests)"
exit $RC
