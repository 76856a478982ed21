# The start every CLI test script shares, sourced after setting T (the script's name, for messages and
# the temporary folder): the repository root as working folder, WEFT (the first argument, default
# build/weft, which must exist), PY (Debian's python3, which sees numpy and onnx), the counters and the
# ok / bad / skip reporters, and a temporary folder D removed on exit. A script ends with
# `summary`, which prints "N passed, N failed, N skipped" (the line run-tests.sh reads; it counts the
# "SKIP name: why" lines too) and exits non-zero when anything failed.
set -u
cd "$(dirname "$0")/../.."
WEFT=${1:-build/weft}
PY=/usr/bin/python3
PASS=0
FAIL=0
SKIP=0
D=$(mktemp -d "${TMPDIR:-/tmp}/weft-$T-XXXXXX")
trap 'rm -rf "$D"' EXIT
: >"$D/err"

ok() { PASS=$((PASS + 1)); echo "ok   $1"; }
# bad NAME WHY: a failed check, with the start of the stderr it kept in $D/err
bad() { FAIL=$((FAIL + 1)); echo "FAIL $1: $2"; sed 's/^/       | /' "$D/err" | head -30; }
skip() { SKIP=$((SKIP + 1)); echo "SKIP $1: $2"; }
summary() { echo "$PASS passed, $FAIL failed, $SKIP skipped"; [ "$FAIL" -eq 0 ]; exit $?; }

if [ ! -x "$WEFT" ]; then echo "$T: $WEFT not found"; echo "0 passed, 1 failed"; exit 1; fi
