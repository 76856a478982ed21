#!/bin/sh
# Checks that every #include "..." under src/ points forward along the pipeline (issue 13's layout):
#
#   rank  part                                  may include
#   0     core     src/core/                    core
#   1     ops      src/ops/  (op math, op defs) core, ops
#   2     device   src/device/ (the contract)   core, ops, device
#   3     graph    src/graph/                   ranks 0-2, graph
#   4     clients of the graph, peers that do not include each other:
#                  src/train/, src/io/, src/data/ (except that data's sources read files through io's
#                  record readers: data may include io, never the reverse)
#   5     passes   src/passes/ (optimize: graph rewrites) ranks 0-4
#   6     place    src/place/ (constraints, HEFT)   ranks 0-5
#   7     lower    src/lower/ (kernel choice, plan) ranks 0-6
#   8     exec     src/exec/ (executor, trace)      ranks 0-7
#   9     session  src/session.c, src/session_internal.h, src/calibrate.c (calibration drives sessions)
#   10    clients of sessions, peers: src/model/, src/onnx/ (the exporter reads a session's variables)
#   plugin backends src/backends/<name>/         core, ops, device, and its own folder only
#
# So: no include from an earlier part into a later one, none between two different folders of the same
# rank, none from src/device/ into graph/, backends/, exec/, lower/, place/ or the session layer, and none
# from a backend into exec/, lower/, place/, graph/ or another backend. An include resolves like the
# compiler's: beside the including file, then under src/; anything else (weft/weft.h, system and
# generated headers) is not checked.
#
# Usage: scripts/check-layout.sh [SRC_DIR]   exits 1 with one line per offending include
#        scripts/check-layout.sh --self-test  builds a small tree with bad includes and checks that
#                                             each is reported and that the good ones are not
set -u

part_of() { # path relative to the src root -> "rank name"
    case $1 in
        core/*) echo "0 core" ;;
        ops/*) echo "1 ops" ;;
        device/*) echo "2 device" ;;
        graph/*) echo "3 graph" ;;
        train/*) echo "4 train" ;;
        io/*) echo "4 io" ;;
        data/*) echo "4 data" ;;
        passes/*) echo "5 passes" ;;
        place/*) echo "6 place" ;;
        lower/*) echo "7 lower" ;;
        exec/*) echo "8 exec" ;;
        session.c | session_internal.h | calibrate.c) echo "9 session" ;;
        model/*) echo "10 model" ;;
        onnx/*) echo "10 onnx" ;;
        backends/*/*) b=${1#backends/}; echo "P backends/${b%%/*}" ;;
        *) echo "? unknown" ;;
    esac
}

check_tree() { # src root -> prints offending includes, returns 1 if any
    root=$1
    bad=0
    out=$(
        cd "$root" || exit 2
        find . -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sed 's|^\./||' | sort |
        while read -r f; do
            from=$(part_of "$f"); fr=${from%% *}; fn=${from#* }
            dir=$(dirname "$f")
            grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | while IFS= read -r line; do
                ln=${line%%:*}
                inc=${line#*\"}; inc=${inc%%\"*}
                if [ -f "$dir/$inc" ]; then
                    to=$dir/$inc
                elif [ -f "$inc" ]; then
                    to=$inc
                else
                    continue
                fi
                # normalise "./x" and "a/../b" (one level is all the tree uses)
                to=$(echo "$to" | sed -e 's|^\./||' -e 's|[^/]*/\.\./||g')
                tp=$(part_of "$to"); tr=${tp%% *}; tn=${tp#* }
                [ "$fn" = "$tn" ] && continue
                why=""
                if [ "$fr" = "?" ] || [ "$tr" = "?" ]; then
                    why="a file outside the known parts (add it to part_of in scripts/check-layout.sh)"
                elif [ "$fr" = "P" ]; then
                    case $tn in
                        core | ops | device) ;;
                        *) why="a backend may include only core/, ops/, device/ and its own folder" ;;
                    esac
                elif [ "$tr" = "P" ]; then
                    why="only the plugin loader's table names a backend; nothing includes one"
                elif [ "$fn" = device ] && [ "$tr" -gt 1 ]; then
                    why="the device contract may include only core/ and ops/"
                elif [ "$tr" -gt "$fr" ]; then
                    why="$fn (rank $fr) includes the later $tn (rank $tr)"
                elif [ "$fn" = data ] && [ "$tn" = io ]; then
                    :
                elif [ "$tr" = "$fr" ]; then
                    why="$fn and $tn are peers of rank $fr and may not include each other"
                fi
                [ -n "$why" ] && echo "src/$f:$ln: #include \"$inc\": $why"
            done
        done
    )
    [ $? -eq 2 ] && { echo "check-layout: cannot read $root" >&2; return 2; }
    if [ -n "$out" ]; then
        echo "$out"
        bad=1
    fi
    return $bad
}

self_test() {
    t=$(mktemp -d "${TMPDIR:-/tmp}/weft-layout-XXXXXX") || exit 1
    trap 'rm -rf "$t"' EXIT
    mkdir -p "$t/core" "$t/ops" "$t/device" "$t/graph" "$t/train" "$t/io" "$t/lower" "$t/exec" \
        "$t/backends/cpu" "$t/backends/cuda"
    for h in core/core.h ops/op.h device/kernel.h graph/graph.h train/train.h io/io.h lower/plan.h \
        exec/exec.h backends/cpu/k.h backends/cuda/cu.h session_internal.h; do
        : >"$t/$h"
    done
    # good: forward arrows, a backend on the contract and its own folder, same-folder by relative path
    printf '#include "core/core.h"\n#include "ops/op.h"\n' >"$t/device/good.c"
    printf '#include "device/kernel.h"\n#include "graph/graph.h"\n#include "weft/weft.h"\n' >"$t/lower/good.c"
    printf '#include "device/kernel.h"\n#include "k.h"\n#include "backends/cpu/k.h"\n' >"$t/backends/cpu/good.c"
    printf '#include "exec/exec.h"\n#include "session_internal.h"\n' >"$t/session.c"
    printf '#include "graph/graph.h"\n' >"$t/train/good.c"
    mkdir -p "$t/data" && : >"$t/data/data.h"
    printf '#include "io/io.h"\n' >"$t/data/good.c"
    # bad, one per rule
    printf '#include "core/core.h"\n#include "graph/graph.h"\n' >"$t/device/bad_dev.c"
    printf '#include "device/kernel.h"\n' >"$t/ops/bad_ops.h"
    printf '#include "train/train.h"\n' >"$t/graph/bad_back.c"
    printf '#include "io/io.h"\n' >"$t/train/bad_peer.c"
    printf '#include "data/data.h"\n' >"$t/io/bad_io_data.c"
    printf '#include "exec/exec.h"\n' >"$t/lower/bad_lower.c"
    printf '#include "graph/graph.h"\n#include "lower/plan.h"\n' >"$t/backends/cuda/bad_be.c"
    printf '#include "backends/cuda/cu.h"\n' >"$t/backends/cpu/bad_cross.c"
    printf '#include "backends/cpu/k.h"\n' >"$t/exec/bad_exec.c"
    out=$(check_tree "$t")
    rc=$?
    fail=0
    [ $rc -eq 1 ] || { echo "FAIL self-test: exit $rc on a tree with bad includes, expected 1"; fail=1; }
    for want in "src/device/bad_dev.c:2: #include \"graph/graph.h\"" "src/ops/bad_ops.h:1:" \
        "src/graph/bad_back.c:1:" "src/train/bad_peer.c:1:" "src/lower/bad_lower.c:1:" \
        "src/backends/cuda/bad_be.c:1:" "src/backends/cuda/bad_be.c:2:" "src/backends/cpu/bad_cross.c:1:" \
        "src/exec/bad_exec.c:1:" "src/io/bad_io_data.c:1:"; do
        echo "$out" | grep -qF "$want" || { echo "FAIL self-test: not reported: $want"; fail=1; }
    done
    n=$(echo "$out" | grep -c .)
    [ "$n" -eq 10 ] || { echo "FAIL self-test: $n offending includes reported, expected 10:"; echo "$out"; fail=1; }
    # the good files alone pass
    rm -f "$t"/*/bad_* "$t"/backends/*/bad_*
    out=$(check_tree "$t")
    [ $? -eq 0 ] || { echo "FAIL self-test: good tree reported:"; echo "$out"; fail=1; }
    [ $fail -eq 0 ] && echo "check-layout self-test: 11 checks passed"
    return $fail
}

cd "$(dirname "$0")/.." || exit 1
if [ "${1:-}" = "--self-test" ]; then
    self_test
    exit $?
fi
src=${1:-src}
check_tree "$src"
rc=$?
[ $rc -eq 0 ] && echo "check-layout: every include under $src points forward"
exit $rc
