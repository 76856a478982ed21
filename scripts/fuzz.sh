#!/bin/sh
# Fuzzes what reads untrusted input: the ONNX importer (tests/fuzz/fuzz_onnx.c), the .npy reader
# (fuzz_npy.c), the safetensors reader (fuzz_safetensors.c), the graph builder's attribute and
# shape-inference paths (fuzz_attrs.c), the TFRecord reader (fuzz_tfrecord.c), the CSV and text-line
# readers (fuzz_csv.c), the JPEG and PNG decoders (fuzz_image.c) and the input pipeline's cache files
# (fuzz_cache.c). Builds each target with clang's libFuzzer, ASan and UBSan,
# compiling the library's sources straight into the binaries (no cmake), into build-fuzz/, and runs them.
#   scripts/fuzz.sh short      per target: its seed corpus, the inputs that once crashed it
#                              (tests/fuzz/regress/TARGET) plus FUZZ_RUNS (20000) fixed-seed mutations,
#                              at most FUZZ_SHORT_SECONDS (25) s each: make test
#   scripts/fuzz.sh long       per target: FUZZ_SECONDS (default 600) of fuzzing, growing
#                              build-fuzz/corpus/TARGET: make fuzz
#   scripts/fuzz.sh build      only build build-fuzz/fuzz_TARGET
#   scripts/fuzz.sh [TARGET] FILE...   re-run inputs (crash reproducers) through a target (default onnx)
# FUZZ_TARGETS="npy attrs" picks targets. Crashes land in build-fuzz/crashes/TARGET-*. Ends with the
# line "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
MODE=${1:-short}
ALL_TARGETS="onnx npy safetensors attrs tfrecord csv image cache"
TARGETS=${FUZZ_TARGETS:-$ALL_TARGETS}
case " $ALL_TARGETS " in *" $MODE "*) TARGETS=$MODE; shift; MODE=repro ;; esac
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
    newest_h=$(find include src tests/fuzz -name '*.h' -newer "$OUT/built.stamp" 2>/dev/null | head -n 1)
    [ -f "$OUT/built.stamp" ] || newest_h=always
    # the core library as CMakeLists.txt builds it: device backends other than the CPU are plugins
    lib="$(find src -name '*.c' | grep -vE '^src/backends/(opencl|cuda)/' | sort) $OUT/proto/onnx.pb-c.c"
    srcs="$lib"
    for t in $ALL_TARGETS; do srcs="$srcs tests/fuzz/fuzz_$t.c"; done
    todo=""
    objs=""
    for s in $srcs; do
        o="$OUT/obj/$(echo "$s" | tr '/' '_').o"
        case "$s" in tests/fuzz/*) ;; *) objs="$objs $o";; esac
        if [ ! -f "$o" ] || [ "$s" -nt "$o" ] || [ -n "$newest_h" ]; then todo="$todo $s"; fi
    done
    if [ -n "$todo" ]; then
        echo "fuzz: compiling $(echo $todo | wc -w) files"
        # coverage only for what a model file can reach; the kernels are not run by the target
        echo $todo | tr ' ' '\n' | xargs -P "$JOBS" -I{} sh -c '
            s={}; o="'"$OUT"'/obj/$(echo "$s" | tr / _).o"
            case "$s" in src/backends/cpu/k_image_io.c) cov="-fsanitize=fuzzer-no-link";;
                src/backends/*|src/exec/*|src/lower/*|src/place/*) cov="";; *) cov="-fsanitize=fuzzer-no-link";; esac
            '"$CC"' '"$CFLAGS $SAN"' $cov -w -c "$s" -o "$o" || { rm -f "$o"; exit 255; }' || return 1
    fi
    for t in $ALL_TARGETS; do
        $CC $SAN -fsanitize=fuzzer -fopenmp $objs "$OUT/obj/tests_fuzz_fuzz_$t.c.o" -o "$OUT/fuzz_$t" \
            -ldnnl -lprotobuf-c -ljpeg -lpng -lz -lpthread -lm -ldl || return 1
    done
    touch "$OUT/built.stamp"
}

seeds() {
    rm -rf "$OUT/seeds"
    $PY tests/fuzz/make_seeds.py "$OUT/seeds" >/dev/null || return 1
    mkdir -p "$OUT/seeds/attrs"
    WEFT_FUZZ_WRITE_SEEDS="$OUT/seeds/attrs" "$OUT/fuzz_attrs" >/dev/null 2>&1
}

# Per-target options: the dictionary and the largest input worth trying.
flags() { # target
    case "$1" in
    onnx) echo "-max_len=65536 -dict=tests/fuzz/onnx.dict" ;;
    npy) echo "-max_len=4096 -dict=tests/fuzz/npy.dict" ;;
    safetensors) echo "-max_len=8192 -dict=tests/fuzz/safetensors.dict" ;;
    attrs) echo "-max_len=1024" ;;
    tfrecord) echo "-max_len=4096 -dict=tests/fuzz/tfrecord.dict" ;;
    csv) echo "-max_len=4096 -dict=tests/fuzz/csv.dict" ;;
    image) echo "-max_len=16384" ;;
    cache) echo "-max_len=4096" ;;
    esac
}

export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
FLAGS="-rss_limit_mb=4096 -malloc_limit_mb=4096 -timeout=20 -print_final_stats=1"

build; rc=$?
result fuzz:build $rc
[ $rc -ne 0 ] && finish
mkdir -p "$OUT/crashes"
case "$MODE" in
build) ;;
short)
    seeds || { result fuzz:seeds 1; finish; }
    for t in $TARGETS; do
        # the seeds stay fixed: new inputs go to a scratch folder that is emptied each time; inputs that once
        # crashed a target (tests/fuzz/regress/TARGET, one file each, named for the bug) run first every time
        rm -rf "$OUT/corpus-short/$t" && mkdir -p "$OUT/corpus-short/$t"
        regress=""
        [ -d "tests/fuzz/regress/$t" ] && regress="tests/fuzz/regress/$t"
        "$OUT/fuzz_$t" $FLAGS $(flags $t) -artifact_prefix="$OUT/crashes/$t-" -seed=1 -runs="${FUZZ_RUNS:-20000}" \
            -max_total_time="${FUZZ_SHORT_SECONDS:-25}" "$OUT/corpus-short/$t" "$OUT/seeds/$t" $regress \
            >"$OUT/short-$t.log" 2>&1
        rc=$?
        echo "fuzz_$t: $(grep -E '^stat::number_of_executed_units' "$OUT/short-$t.log" | head -1) $(grep -E '^#[0-9]+ +DONE' "$OUT/short-$t.log" | head -1)"
        [ $rc -ne 0 ] && grep -E -A30 'ERROR|runtime error|bad error|left [0-9]+ nodes|failed' "$OUT/short-$t.log" | head -60
        result "fuzz:short:$t" $rc
    done
    ;;
long)
    seeds || { result fuzz:seeds 1; finish; }
    for t in $TARGETS; do
        mkdir -p "$OUT/corpus/$t"
        touch "$OUT/long.start"
        # fork mode carries on after a crash, so one run collects every bug it can reach
        echo "fuzz_$t: ${FUZZ_SECONDS:-600} s, log in $OUT/long-$t.log"
        "$OUT/fuzz_$t" $FLAGS $(flags $t) -artifact_prefix="$OUT/crashes/$t-" -fork=1 -ignore_crashes=1 -ignore_ooms=1 \
            -ignore_timeouts=1 -max_total_time="${FUZZ_SECONDS:-600}" "$OUT/corpus/$t" "$OUT/seeds/$t" \
            >"$OUT/long-$t.log" 2>&1
        grep -E '^#[0-9]+: cov' "$OUT/long-$t.log" | tail -n 1
        new=$(find "$OUT/crashes" -type f -name "$t-*" -newer "$OUT/long.start" | sort)
        # one line per kind of crash (first frame in weft's sources and the report, paths and numbers
        # blanked), with a count and one reproducer
        for f in $new; do
            "$OUT/fuzz_$t" $FLAGS "$f" >"$OUT/repro.log" 2>&1
            what=$(grep -a -E -m1 'runtime error|bad error|left [0-9]+ nodes|failed|out-of-memory|ERROR: AddressSanitizer' "$OUT/repro.log" |
                   sed -E "s/.*(runtime error|bad error message|ERROR: AddressSanitizer|libFuzzer)/\\1/; s#'[^ ]*/(model.onnx|input.npy|input.safetensors|input.tfrecord|input.csv|input.cache)#'\\1#; s/'[^']*'/''/g; s/0x[0-9a-f]+|[0-9]+/N/g" | cut -c1-120)
            frame=$(grep -a -E -m1 '#[0-9]+ 0x[0-9a-f]+ in [a-z_0-9]+ .*/src/' "$OUT/repro.log" |
                    sed -E 's/.* in ([a-z_0-9]+) .*\/(src\/[^ :]+:[0-9]+).*/\1 \2/')
            echo "$frame | $what	$f"
        done | sort | awk -F'\t' '{ if ($1 != last) { if (n) printf "%5d  %s  e.g. %s\n", n, last, ex; last = $1; ex = $2; n = 0 } n++ }
                                   END { if (n) printf "%5d  %s  e.g. %s\n", n, last, ex }'
        result "fuzz:long:$t" "$(echo "$new" | grep -cE "crash|oom" || true)"
    done
    ;;
*)
    [ "$MODE" = repro ] || TARGETS=onnx
    for f in "$@"; do
        "$OUT/fuzz_$TARGETS" $FLAGS "$f" >"$OUT/repro.log" 2>&1
        rc=$?
        [ $rc -ne 0 ] && grep -E -A30 'ERROR|runtime error|bad error|left [0-9]+ nodes|failed' "$OUT/repro.log" | head -50
        result "fuzz:$TARGETS:$f" $rc
    done
    ;;
esac
finish
