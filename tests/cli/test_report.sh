#!/bin/sh
# `weft run --report` rendered in headless Chromium: a small model split across CPU:0 and OPENCL:0
# (its MatMuls forced there; CPU only, with the split checks skipped, without an OpenCL device), one
# of its nodes named <script>alert(1)</script>, is run with --profile and --report, so the Chrome
# trace and the HTML report come from one traced run. Then
#  (a) chromium --dump-dom: the sections are there, the page's script ran (it fills #js-status and
#      draws an SVG box per event, a node per event and an edge per dependency), the device names,
#      the top-op rows (count, total, mean, share) and the copies per link match the trace JSON, and
#      the hostile node name is text, never markup;
#  (b) chromium --screenshot (1400x1800): the PNG, decoded here with zlib, is not blank and holds the
#      colours the report gives each device.
# Without chromium (Debian package 'chromium', scripts/setup.sh installs it) it prints
# "SKIP test_report: chromium not installed". The screenshot is kept at build/report-screenshot.png.
# Usage: tests/cli/test_report.sh [path/to/weft] (default build/weft).
# Ends with the line "N passed, N failed, N skipped".
T=test_report
. "$(dirname "$0")/common.sh"
: "${WEFT_PLUGIN_PATH:=$(dirname "$WEFT")}"
: "${POCL_CACHE_DIR:=$PWD/build/pocl-cache}"
: "${WEFT_CACHE_DIR:=$PWD/build/cl-cache}"
export WEFT_PLUGIN_PATH POCL_CACHE_DIR WEFT_CACHE_DIR

CHROME=""
for c in chromium chromium-browser; do command -v "$c" >/dev/null 2>&1 && { CHROME=$c; break; }; done
if [ -z "$CHROME" ]; then skip test_report "chromium not installed"; summary; fi

# y = tanh(relu(x @ w1 + b1) @ w2) + sigmoid(x @ w1) @ w3: three MatMuls, two branches, one Relu
# named as markup.
$PY - "$D" <<'EOF' || { echo "test_report: making the model failed"; FAIL=1; summary; }
import sys
import numpy as np
from onnx import TensorProto, helper, numpy_helper
out = sys.argv[1]
rng = np.random.default_rng(7)
w1 = (rng.standard_normal((256, 256)) * 0.05).astype(np.float32)
b1 = rng.standard_normal((256,)).astype(np.float32)
w2 = (rng.standard_normal((256, 128)) * 0.05).astype(np.float32)
w3 = (rng.standard_normal((256, 128)) * 0.05).astype(np.float32)
x = rng.standard_normal((64, 256)).astype(np.float32)
nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
         helper.make_node("Add", ["h", "b1"], ["hb"], name="add_bias"),
         helper.make_node("Relu", ["hb"], ["r"], name="<script>alert(1)</script>"),
         helper.make_node("MatMul", ["r", "w2"], ["z"], name="mm2"),
         helper.make_node("Tanh", ["z"], ["t"], name="tanh"),
         helper.make_node("Sigmoid", ["h"], ["sg"], name="sig"),
         helper.make_node("MatMul", ["sg", "w3"], ["u"], name="mm3"),
         helper.make_node("Add", ["t", "u"], ["y"], name="sum")]
g = helper.make_graph(nodes, "report", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 256])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                      initializer=[numpy_helper.from_array(a, n) for a, n in
                                   ((w1, "w1"), (b1, "b1"), (w2, "w2"), (w3, "w3"))])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 7
open(out + "/m.onnx", "wb").write(m.SerializeToString())
np.save(out + "/x.npy", x)
EOF

HAVE_OCL=0
"$WEFT" devices --match OPENCL:0 >/dev/null 2>&1 && HAVE_OCL=1
PLACE=""
if [ $HAVE_OCL = 1 ]; then PLACE="--place op:MatMul=OPENCL:0"
else skip report_split "no OPENCL:0 (weft devices --match OPENCL:0 finds none): a CPU-only report, no links"; fi

R="$D/report.html"
if ! "$WEFT" run "$D/m.onnx" --input "x=$D/x.npy" --iterations 2 $PLACE --profile "$D/p.json" --report "$R" \
    >"$D/out" 2>"$D/err" || ! grep -q "(report written to $R)" "$D/err" || grep -qE 'Sanitizer|runtime error' "$D/err"; then
    bad report_written "weft run --report failed or did not say so"; summary
fi
ok report_written

# --- (a) the DOM after the page's script ran -------------------------------------------------------
if timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --user-data-dir="$D/profile" \
    --dump-dom "file://$R" >"$D/dom.html" 2>"$D/chrome.err" && [ -s "$D/dom.html" ]; then
    if $PY - "$D/dom.html" "$D/p.json" "$HAVE_OCL" <<'EOF' 2>>"$D/err"; then ok report_dom_matches_trace
import json, sys
from html.parser import HTMLParser
dom, trace, have_ocl = open(sys.argv[1]).read(), json.load(open(sys.argv[2])), sys.argv[3] == "1"

class P(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.stack, self.rows, self.cls, self.text = set(), [], [], {}, {}
        self.cur_row, self.cur_cell, self.scripts, self.titles = None, None, 0, []
        self.in_title = False
        self.links = []
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a: self.ids.add(a["id"])
        c = a.get("class", "")
        self.cls[c] = self.cls.get(c, 0) + 1
        if tag == "script": self.scripts += 1
        if tag == "tr" and c in ("op-row", "link-row", "util-row"):
            self.cur_row = {"class": c, "attrs": a, "cells": []}
            self.rows.append(self.cur_row)
        if tag == "td" and self.cur_row is not None:
            self.cur_cell = []
        if tag == "title": self.in_title = True; self.titles.append("")
        if a.get("id") == "js-status": self.text["js-status"] = ""; self.stack.append("js-status")
    def handle_endtag(self, tag):
        if tag == "td" and self.cur_cell is not None:
            self.cur_row["cells"].append("".join(self.cur_cell).strip()); self.cur_cell = None
        if tag == "tr": self.cur_row = None
        if tag == "title": self.in_title = False
        if tag == "span" and self.stack: self.stack.pop()
    def handle_data(self, d):
        if self.cur_cell is not None: self.cur_cell.append(d)
        if self.in_title: self.titles[-1] += d
        if self.stack: self.text[self.stack[-1]] += d

p = P()
p.feed(dom)
for sec in ("utilisation", "timeline", "top-ops", "copies", "memory", "graph", "memory-peaks"):
    assert sec in p.ids, "no #%s in the DOM" % sec
ev = [e for e in trace["traceEvents"] if e["ph"] == "X"]
procs = {m["pid"]: m["args"]["name"] for m in trace["traceEvents"] if m["ph"] == "M" and m["name"] == "process_name"}
full_to_short = {}
for e in ev:
    if e["cat"] == "op": full_to_short[e["args"]["device"]] = procs[e["pid"]]
n_deps = sum(len(e["args"]["deps"]) for e in ev)
# the script ran: it says so and drew a box per event, a node per event, an edge per dependency
st = p.text.get("js-status", "")
assert st.startswith("drawn: %d events" % len(ev)), "js-status says %r, %d events in the trace" % (st, len(ev))
assert p.cls.get("ev", 0) == len(ev), "%d timeline boxes for %d events" % (p.cls.get("ev", 0), len(ev))
assert p.cls.get("node", 0) == len(ev), "%d graph nodes for %d events" % (p.cls.get("node", 0), len(ev))
assert p.cls.get("edge", 0) == n_deps, "%d graph edges for %d deps" % (p.cls.get("edge", 0), n_deps)
assert p.cls.get("mem-peak", 0) == len(trace["otherData"]["devices"]), "memory peaks"
# the hostile name is text in a tooltip, never an element: the page's two scripts only
assert p.scripts == 2, "%d script elements" % p.scripts
assert any(t.startswith("<script>alert(1)</script> (Relu") for t in p.titles), "the hostile node's tooltip"
assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom
# the devices
devs = [d["device"] for d in trace["otherData"]["devices"]]
util = [r["attrs"]["data-device"] for r in p.rows if r["class"] == "util-row"]
assert util == devs, "utilisation rows %s, trace devices %s" % (util, devs)
if have_ocl:
    assert "CPU:0" in devs and "OPENCL:0" in devs, devs
for d in trace["otherData"]["devices"]:
    row = [r for r in p.rows if r["class"] == "util-row" and r["attrs"]["data-device"] == d["device"]][0]
    assert abs(float(row["cells"][3].rstrip("%")) - 100 * d["utilisation"]) < 0.051, (row, d)
# the top ops: count, total, mean and share from the trace's events
agg = {}
for e in ev:
    if e["cat"] != "op": continue
    k = (procs[e["pid"]], e["args"]["op"])
    c, t = agg.get(k, (0, 0.0))
    agg[k] = (c + 1, t + e["dur"])
rows = {(r["attrs"]["data-device"], r["attrs"]["data-op"]): r["cells"] for r in p.rows if r["class"] == "op-row"}
assert set(rows) == set(agg), "op rows %s, trace ops %s" % (sorted(rows), sorted(agg))
dev_total = {}
for (d, _), (c, t) in agg.items(): dev_total[d] = dev_total.get(d, 0) + t
for k, (c, t) in agg.items():
    cells = rows[k]
    assert cells[0] == k[1] and int(cells[1]) == c, (k, cells, c)
    assert abs(float(cells[2]) - t) < 0.002, (k, cells, t)
    assert abs(float(cells[3]) - t / c) < 0.002, (k, cells, t / c)
    assert abs(float(cells[4].rstrip("%")) - 100 * t / dev_total[k[0]]) < 0.051, (k, cells)
if have_ocl:
    assert ("OPENCL:0", "MatMul") in agg and agg[("OPENCL:0", "MatMul")][0] == 3, agg
# copies per link: source = the device of the copy's producer
by_index = {e["args"]["event"]: e for e in ev}
links = {}
for e in ev:
    if e["cat"] != "copy": continue
    src = full_to_short.get(by_index[e["args"]["deps"][0]]["args"]["device"])
    dst = full_to_short.get(e["args"]["device"], e["args"]["device"])
    n, b = links.get((src, dst), (0, 0))
    links[(src, dst)] = (n + 1, b + e["args"]["bytes"])
got = {tuple(r["cells"][0].split(" \u2192 ")): (int(r["cells"][1]), int(r["cells"][2])) for r in p.rows if r["class"] == "link-row"}
assert got == links, "links %s, trace %s" % (got, links)
if have_ocl:
    assert ("CPU:0", "OPENCL:0") in links and ("OPENCL:0", "CPU:0") in links, links
    # x goes over once (64x256 f32) and the MatMuls' results come back
    assert links[("CPU:0", "OPENCL:0")][1] >= 64 * 256 * 4, links
EOF
    else bad report_dom_matches_trace "the rendered DOM does not match the trace"; fi
else
    cat "$D/chrome.err" >>"$D/err"; bad report_dom_matches_trace "chromium --dump-dom failed"
fi

# --- (b) the screenshot ----------------------------------------------------------------------------
rm -f "$D/shot.png"
if timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --user-data-dir="$D/profile" --hide-scrollbars \
    --screenshot="$D/shot.png" --window-size=1400,1800 "file://$R" >"$D/chrome.out" 2>"$D/chrome.err" &&
    [ -s "$D/shot.png" ]; then
    mkdir -p build && cp "$D/shot.png" build/report-screenshot.png 2>/dev/null
    if $PY - "$D/shot.png" "$R" <<'EOF' 2>>"$D/err"; then ok report_screenshot_shows_devices
import json, re, struct, sys, zlib
png = open(sys.argv[1], "rb").read()
assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, hdr = 8, b"", None
while pos < len(png):
    n, kind = struct.unpack(">I4s", png[pos:pos + 8])
    body = png[pos + 8:pos + 8 + n]
    if kind == b"IHDR": hdr = struct.unpack(">IIBBBBB", body)
    elif kind == b"IDAT": idat += body
    pos += 12 + n
w, h, depth, ctype, _, _, interlace = hdr
assert depth == 8 and ctype in (2, 6) and not interlace, "PNG kind %s" % (hdr,)
bpp = 3 if ctype == 2 else 4
raw, stride = zlib.decompress(idat), w * bpp
assert w >= 1000 and h >= 1000, (w, h)
prev, px, off = bytearray(stride), {}, 0
for y in range(h):
    f, line = raw[off], bytearray(raw[off + 1:off + 1 + stride]); off += 1 + stride
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + ((a + b) >> 1)) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    for i in range(0, stride, bpp):
        k = bytes(line[i:i + 3]); px[k] = px.get(k, 0) + 1
    prev = line
total = w * h
white = px.get(b"\xff\xff\xff", 0)
assert total - white > total // 50, "the page is nearly blank: %d of %d pixels not white" % (total - white, total)
assert len(px) > 20, "only %d colours" % len(px)
html = open(sys.argv[2]).read()
data = json.loads(re.search(r'<script type="application/json" id="weft-data">(.*?)</script>', html, re.S).group(1))
for d in data["devices"]:
    col = data["colors"][d["index"] % len(data["colors"])]
    rgb = bytes(int(col[i:i + 2], 16) for i in (1, 3, 5))
    n = px.get(rgb, 0)
    # the legend swatches alone are ~400 pixels; the timeline and graph boxes bring far more
    assert n > 600, "%d pixels of %s's colour %s" % (n, d["name"], col)
    print("%s %s: %d pixels" % (d["name"], col, n))
print("%dx%d, %d of %d pixels not white, %d colours" % (w, h, total - white, total, len(px)))
EOF
    else bad report_screenshot_shows_devices "the screenshot is blank or lacks the device colours"; fi
else
    cat "$D/chrome.err" >>"$D/err"; bad report_screenshot_shows_devices "chromium --screenshot failed"
fi
summary
