#!/bin/sh
# Fuzzes the ONNX importer: builds tests/fuzz/fuzz_onnx.c with clang's libFuzzer, ASan and UBSan,
# compiling the library's sources straight into the binary (no cmake), into build-fuzz/, and runs it.
#   scripts/fuzz.sh short      the generated seed corpus plus 20000 fixed-seed mutations (<= 30 s): make test
#   scripts/fuzz.sh long       FUZZ_SECONDS (default 600) of fuzzing, growing build-fuzz/corpus: make fuzz
#   scripts/fuzz.sh build      only build build-fuzz/fuzz_onnx
#   scripts/fuzz.sh FILE...    re-run inputs (crash reproducers) through the target
# Crashes land in build-fuzz/crashes/. Ends with the line "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
MODE=${1:-short}
OUT=${FUZZ_DIR:-build-fuzz}
PY=/usr/bin/python3
CC=${FUZZ_CC:-clang}
JOBS=${JOBS:-2}
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
# WEFT_NO_MULTIVERSION: no target_clones, whose ifunc resolvers run before the sanitizer runtime is up.
CFLAGS="-std=gnu11 -O1 -g -fno-omit-frame-pointer -fopenmp -DWEFT_NO_MULTIVERSION -Iinclude -Isrc -I$OUT/proto"
PASS=0
FAIL=0

result() { # name rc
    if [ "$2" -eq 0 ]; then PASS=$((PASS + 1)); echo "PASS $1"; else FAIL=$((FAIL + 1)); echo "FAIL $1 (exit $2)"; fi
}
finish() { echo "$PASS passed, $FAIL failed"; [ "$FAIL" -eq 0 ]; exit $?; }

# protobuf-c bindings of the onnx.proto that Debian's python3-onnx ships, as the cmake build does.
gen_proto() {
    proto=$($PY -c "import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), 'onnx.proto'))") || return 1
    mkdir -p "$OUT/proto"
    if [ ! -f "$OUT/proto/onnx.pb-c.c" ] || [ "$proto" -nt "$OUT/proto/onnx.pb-c.c" ]; then
        cp "$proto" "$OUT/proto/onnx.proto" &&
        protoc-c --proto_path="$OUT/proto" --c_out="$OUT/proto" "$OUT/proto/onnx.proto" || return 1
    fi
}

# One object per source; rebuilt when its source, or any header of the library, is newer.
build() {
    command -v "$CC" >/dev/null || { echo "fuzz: $CC not found (apt-get install clang)"; return 1; }
    gen_proto || { echo "fuzz: cannot generate the protobuf-c sources"; return 1; }
    mkdir -p "$OUT/obj"
    newest_h=$(find include src -name '*.h' -newer "$OUT/fuzz_onnx" 2>/dev/null | head -n 1)
    [ -f "$OUT/fuzz_onnx" ] || newest_h=always
    # the core library as CMakeLists.txt builds it: device backends other than the CPU are plugins
    srcs="$(find src -name '*.c' | grep -vE '^src/backends/(opencl|cuda)/' | sort) $OUT/proto/onnx.pb-c.c tests/fuzz/fuzz_onnx.c"
    todo=""
    objs=""
    for s in $srcs; do
        o="$OUT/obj/$(echo "$s" | tr '/' '_').o"
        objs="$objs $o"
        if [ ! -f "$o" ] || [ "$s" -nt "$o" ] || [ -n "$newest_h" ]; then todo="$todo $s"; fi
    done
    if [ -n "$todo" ]; then
        echo "fuzz: compiling $(echo $todo | wc -w) files"
        # coverage only for what a model file can reach; the kernels are not run by the target
        echo $todo | tr ' ' '\n' | xargs -P "$JOBS" -I{} sh -c '
            s={}; o="'"$OUT"'/obj/$(echo "$s" | tr / _).o"
            case "$s" in src/backends/*|src/exec/*|src/lower/*) cov="";; *) cov="-fsanitize=fuzzer-no-link";; esac
            '"$CC"' '"$CFLAGS $SAN"' $cov -w -c "$s" -o "$o" || { rm -f "$o"; exit 255; }' || return 1
    fi
    $CC $SAN -fsanitize=fuzzer -fopenmp $objs -o "$OUT/fuzz_onnx" -ldnnl -lprotobuf-c -lz -lpthread -lm -ldl ||
        return 1
    touch "$OUT/fuzz_onnx"
}

seeds() {
    rm -rf "$OUT/seeds"
    $PY tests/fuzz/make_seeds.py "$OUT/seeds" >/dev/null
}

export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
FLAGS="-rss_limit_mb=4096 -malloc_limit_mb=4096 -timeout=20 -max_len=65536 -artifact_prefix=$OUT/crashes/ \
       -dict=tests/fuzz/onnx.dict -print_final_stats=1"

build; rc=$?
result fuzz:build $rc
[ $rc -ne 0 ] && finish
mkdir -p "$OUT/crashes"
case "$MODE" in
build) ;;
short)
    seeds || { result fuzz:seeds 1; finish; }
    # the seeds stay fixed: new inputs go to a scratch folder that is emptied each time
    rm -rf "$OUT/corpus-short" && mkdir -p "$OUT/corpus-short"
    "$OUT/fuzz_onnx" $FLAGS -seed=1 -runs="${FUZZ_RUNS:-20000}" -max_total_time=30 "$OUT/corpus-short" "$OUT/seeds" \
        >"$OUT/short.log" 2>&1
    rc=$?
    grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units)' "$OUT/short.log" | head -2
    [ $rc -ne 0 ] && grep -E -A30 'ERROR|runtime error|bad error|left [0-9]+ nodes' "$OUT/short.log" | head -60
    result fuzz:short $rc
    ;;
long)
    seeds || { result fuzz:seeds 1; finish; }
    mkdir -p "$OUT/corpus"
    touch "$OUT/long.start"
    # fork mode carries on after a crash, so one run collects every bug it can reach
    echo "fuzz: ${FUZZ_SECONDS:-600} s, log in $OUT/long.log"
    "$OUT/fuzz_onnx" $FLAGS -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
        -max_total_time="${FUZZ_SECONDS:-600}" "$OUT/corpus" "$OUT/seeds" >"$OUT/long.log" 2>&1
    grep -E '^#[0-9]+: cov' "$OUT/long.log" | tail -n 1
    new=$(find "$OUT/crashes" -type f -newer "$OUT/long.start" | sort)
    # one line per kind of crash (first frame in weft's sources and the report, paths and numbers
    # blanked), with a count and one reproducer
    for f in $new; do
        "$OUT/fuzz_onnx" $FLAGS "$f" >"$OUT/repro.log" 2>&1
        what=$(grep -a -E -m1 'runtime error|bad error|left [0-9]+ nodes|out-of-memory|ERROR: AddressSanitizer' "$OUT/repro.log" |
               sed -E "s/.*(runtime error|bad error message|ERROR: AddressSanitizer|libFuzzer)/\\1/; s#'[^ ]*/model.onnx#'model.onnx#; s/'[^']*'/''/g; s/0x[0-9a-f]+|[0-9]+/N/g" | cut -c1-120)
        frame=$(grep -a -E -m1 '#[0-9]+ 0x[0-9a-f]+ in [a-z_0-9]+ .*/src/' "$OUT/repro.log" |
                sed -E 's/.* in ([a-z_0-9]+) .*\/(src\/[^ :]+:[0-9]+).*/\1 \2/')
        echo "$frame | $what	$f"
    done | sort | awk -F'\t' '{ if ($1 != last) { if (n) printf "%5d  %s  e.g. %s\n", n, last, ex; last = $1; ex = $2; n = 0 } n++ }
                               END { if (n) printf "%5d  %s  e.g. %s\n", n, last, ex }'
    result fuzz:long "$(echo "$new" | grep -c crash || true)"
    ;;
*)
    for f in "$@"; do
        "$OUT/fuzz_onnx" $FLAGS "$f" >"$OUT/repro.log" 2>&1
        rc=$?
        [ $rc -ne 0 ] && grep -E -A30 'ERROR|runtime error|bad error|left [0-9]+ nodes' "$OUT/repro.log" | head -50
        result "fuzz:$f" $rc
    done
    ;;
esac
finish
