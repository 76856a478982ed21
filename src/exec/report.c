/*
 * The HTML report of a traced run: one self-contained file (inline CSS, JS and SVG, nothing fetched)
 * for people. The tables (utilisation, top ops, copies per link) are written here, so they read
 * without JS; the trace itself goes into the page as JSON, from which the page's script draws the
 * timeline (a row per device stream), the live memory per device and the placed graph. Every string
 * from the graph is escaped: HTML entities in the tables, \u003c and friends inside the JSON (which
 * the script only ever puts into the page as text nodes). Works through the public trace accessors.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/core.h"

/* The device colours, by device index (also in the page's legend; tests/cli/test_report.sh looks
 * for the first two in its screenshot). */
static const char *const k_colors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                       "#b07aa1", "#76b7b2", "#edc948", "#9c755f"};
#define N_COLORS ((int)(sizeof k_colors / sizeof k_colors[0]))

static void html_str(FILE *f, const char *s)
{
    for (const char *p = s ? s : ""; *p; p++) {
        switch (*p) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*p, f);
        }
    }
}

/* A JSON string safe inside <script>: no '<', '>' or '&' survive, so nothing can close the element. */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&') fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static int64_t end_of(const wf_trace_event *e) { return e->end_ns < e->start_ns ? e->start_ns : e->end_ns; }

typedef struct iv {
    int64_t a, b;
} iv;

static int cmp_iv(const void *x, const void *y)
{
    const iv *p = x, *q = y;
    return p->a != q->a ? (p->a < q->a ? -1 : 1) : (p->b > q->b) - (p->b < q->b);
}

/* Union length of the copy-stream events on device d. */
static int64_t copy_stream_busy(const wf_trace *t, int d, iv *buf)
{
    int k = 0;
    for (int i = 0; i < wf_trace_num_events(t); i++) {
        wf_trace_event e = wf_trace_event_at(t, i);
        if (e.stream == WF_STREAM_COPY && e.stream_device == d) buf[k++] = (iv){e.start_ns, end_of(&e)};
    }
    qsort(buf, (size_t)k, sizeof *buf, cmp_iv);
    int64_t total = 0, a = 0, b = -1;
    for (int i = 0; i < k; i++) {
        if (b >= 0 && buf[i].a <= b) {
            if (buf[i].b > b) b = buf[i].b;
            continue;
        }
        if (b >= 0) total += b - a;
        a = buf[i].a;
        b = buf[i].b;
    }
    return b >= 0 ? total + b - a : total;
}

/* One row of the top-ops table or of the links table. */
typedef struct agg {
    int dev, src;      /* ops: dev; links: src -> dev */
    const char *op;    /* ops only */
    int count;
    int64_t total_ns, bytes;
} agg;

static int cmp_op(const void *x, const void *y)
{
    const agg *p = x, *q = y;
    if (p->dev != q->dev) return p->dev < q->dev ? -1 : 1;
    if (p->total_ns != q->total_ns) return p->total_ns > q->total_ns ? -1 : 1;
    return strcmp(p->op, q->op);
}

static int cmp_link(const void *x, const void *y)
{
    const agg *p = x, *q = y;
    if (p->src != q->src) return p->src < q->src ? -1 : 1;
    return (p->dev > q->dev) - (p->dev < q->dev);
}

static void human_bytes(FILE *f, double b)
{
    if (b >= 1024.0 * 1024 * 1024) fprintf(f, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024) fprintf(f, "%.2f MiB", b / (1024.0 * 1024));
    else if (b >= 1024.0) fprintf(f, "%.2f KiB", b / 1024.0);
    else fprintf(f, "%.0f B", b);
}

/* How many top ops each device's table shows. */
#define TOP_OPS 15

static const char k_css[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:16px 24px;color:#222;background:#fff}\n"
    "h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:22px 0 6px;border-bottom:1px solid #ddd}\n"
    "table{border-collapse:collapse;margin:4px 0 10px}td,th{padding:2px 10px;border-bottom:1px solid #eee;"
    "text-align:right}th{background:#f4f4f4}td.l,th.l{text-align:left}\n"
    ".sw{display:inline-block;width:12px;height:12px;margin-right:5px;vertical-align:-1px;border-radius:2px}\n"
    ".note{color:#666;font-size:12px;max-width:1100px}.scroll{overflow:auto;max-width:100%;border:1px solid #eee}\n"
    "svg text{font:11px system-ui,sans-serif}\n";

/* The page's script: reads the JSON, draws the three SVGs with DOM calls (text goes in as text
 * nodes, never as markup) and says in #js-status that it ran. */
static const char k_js[] =
    "(function(){\n"
    "var D=JSON.parse(document.getElementById('weft-data').textContent);\n"
    "var NS='http://www.w3.org/2000/svg',E=D.events,W=D.wall_ns||1;\n"
    "function el(n,a,p){var e=document.createElementNS(NS,n);for(var k in a)e.setAttribute(k,a[k]);"
    "if(p)p.appendChild(e);return e}\n"
    "function txt(p,x,y,s,a){var t=el('text',Object.assign({x:x,y:y},a||{}),p);t.textContent=s;return t}\n"
    "function tip(p,s){el('title',{},p).textContent=s}\n"
    "function col(d){return D.colors[d%D.colors.length]}\n"
    "function dname(d){for(var i=0;i<D.devices.length;i++)if(D.devices[i].index==d)return D.devices[i].name;"
    "return 'device '+d}\n"
    "function ms(ns){return (ns/1e6).toFixed(3)+' ms'}\n"
    "function legend(id){var g=document.getElementById(id);D.devices.forEach(function(d){"
    "var s=document.createElement('span');s.className='sw';s.style.background=col(d.index);g.appendChild(s);"
    "g.appendChild(document.createTextNode(d.name+'   '))})}\n"
    "legend('legend-timeline');legend('legend-graph');legend('legend-memory');\n"
    /* timeline: rows per (stream device, stream), lanes where events overlap */
    "var rows={},keys=[];E.forEach(function(e,i){var k=e.sd*2+e.s;if(!rows[k]){rows[k]=[];keys.push(k)}"
    "rows[k].push(i)});keys.sort(function(a,b){return a-b});\n"
    "var LW=170,TW=1100,LH=18,y=20,svg=el('svg',{width:LW+TW+20},null),lanes={};\n"
    "for(var t=0;t<=4;t++){var x=LW+TW*t/4;el('line',{x1:x,y1:12,x2:x,y2:10000,stroke:'#eee'},svg);"
    "txt(svg,x,10,ms(W*t/4),{'text-anchor':t?'end':'start',fill:'#888'})}\n"
    "keys.forEach(function(k){var ix=rows[k].slice().sort(function(a,b){return E[a].t0-E[b].t0}),ends=[];"
    "ix.forEach(function(i){var l=0;while(l<ends.length&&ends[l]>E[i].t0)l++;ends[l]=Math.max(E[i].t1,E[i].t0);"
    "lanes[i]=l});var n=Math.max(ends.length,1),g=el('g',{'class':'track'},svg);"
    "txt(g,4,y+13,dname(k>>1)+(k&1?' copy':' compute'));"
    "el('rect',{x:LW,y:y,width:TW,height:n*LH,fill:'#fafafa'},g);"
    "ix.forEach(function(i){var e=E[i],x=LW+TW*e.t0/W,w=Math.max(TW*(e.t1-e.t0)/W,1);"
    "var r=el('rect',{x:x,y:y+lanes[i]*LH+1,width:w,height:LH-2,fill:col(e.d),"
    "stroke:e.c?'#222':'none','stroke-width':e.c?1:0,'class':'ev'},g);"
    "tip(r,e.n+' ('+e.op+') on '+dname(e.d)+': '+ms(e.t1-e.t0))});y+=n*LH+6});\n"
    "svg.setAttribute('height',y+4);document.getElementById('timeline').appendChild(svg);\n"
    /* memory: bytes of live values per device, a step line */
    "var MH=200,ms2=el('svg',{width:LW+TW+20,height:MH+40},null),peaks=[],top=1,series=[];\n"
    "D.devices.forEach(function(d){var p=[];E.forEach(function(e){if(e.d!=d.index||!e.ob)return;"
    "p.push([e.t0,e.ob]);p.push([e.r<0?W:Math.max(e.r,e.t0),-e.ob])});"
    "p.sort(function(a,b){return a[0]-b[0]||a[1]-b[1]});var cur=0,pk=0,pts=[[0,0]];"
    "p.forEach(function(q){pts.push([q[0],cur]);cur+=q[1];pts.push([q[0],cur]);if(cur>pk)pk=cur});"
    "pts.push([W,cur]);series.push([d,pts]);peaks.push([d,pk]);if(pk>top)top=pk});\n"
    "series.forEach(function(s){var dd='';s[1].forEach(function(q,j){dd+=(j?'L':'M')+(LW+TW*q[0]/W).toFixed(1)+"
    "','+(10+MH-MH*q[1]/top).toFixed(1)});var pa=el('path',{d:dd,fill:'none',stroke:col(s[0].index),"
    "'stroke-width':2,'class':'mem'},ms2);tip(pa,s[0].name)});\n"
    "el('line',{x1:LW,y1:10+MH,x2:LW+TW,y2:10+MH,stroke:'#888'},ms2);"
    "txt(ms2,LW-4,14,(top/1048576).toFixed(2)+' MiB',{'text-anchor':'end'});txt(ms2,LW-4,10+MH,'0',{'text-anchor':'end'});"
    "txt(ms2,LW+TW,MH+26,ms(W),{'text-anchor':'end'});\n"
    "document.getElementById('memory').appendChild(ms2);\n"
    "var mp=document.getElementById('memory-peaks');peaks.forEach(function(q){var li=document.createElement('li');"
    "li.className='mem-peak';li.textContent=q[0].name+': peak of live values '+(q[1]/1048576).toFixed(3)+' MiB';"
    "mp.appendChild(li)});\n"
    /* graph: layers by longest path from the roots, nodes coloured by device */
    "var L=E.map(function(){return 0}),ch=true,it=0;while(ch&&it++<E.length+1){ch=false;"
    "E.forEach(function(e,i){e.deps.forEach(function(p){if(L[p]+1>L[i]){L[i]=L[p]+1;ch=true}})})}\n"
    "var by=[],pos=[],NW=130,NH=24,GX=20,GY=46;E.forEach(function(e,i){(by[L[i]]=by[L[i]]||[]).push(i)});\n"
    "var wmax=0;by.forEach(function(v,l){(v||[]).forEach(function(i,j){pos[i]=[10+j*(NW+GX),10+l*GY]});"
    "wmax=Math.max(wmax,(v||[]).length)});\n"
    "var gs=el('svg',{width:20+wmax*(NW+GX),height:20+by.length*GY},null);\n"
    "el('marker',{id:'arr',viewBox:'0 0 10 10',refX:10,refY:5,markerWidth:6,markerHeight:6,orient:'auto'},"
    "el('defs',{},gs)).appendChild(el('path',{d:'M0,0L10,5L0,10z',fill:'#999'}));\n"
    "E.forEach(function(e,i){e.deps.forEach(function(p){var a=pos[p],b=pos[i];el('path',{d:'M'+(a[0]+NW/2)+','"
    "+(a[1]+NH)+'C'+(a[0]+NW/2)+','+(a[1]+NH+16)+' '+(b[0]+NW/2)+','+(b[1]-16)+' '+(b[0]+NW/2)+','+b[1],"
    "fill:'none',stroke:'#999','marker-end':'url(#arr)','class':'edge'},gs)})});\n"
    "E.forEach(function(e,i){var g=el('g',{'class':'node'},gs),p=pos[i];"
    "el('rect',{x:p[0],y:p[1],width:NW,height:NH,rx:4,fill:col(e.d),stroke:e.c?'#222':'none',"
    "'stroke-dasharray':e.c?'3,2':''},g);var s=e.n.length>20?e.n.slice(0,19)+'\\u2026':e.n;"
    "txt(g,p[0]+5,p[1]+16,s,{fill:'#fff'});tip(g,e.n+' ('+e.op+') on '+dname(e.d))});\n"
    "document.getElementById('graph').appendChild(gs);\n"
    "var st=document.getElementById('js-status');st.textContent='drawn: '+E.length+' events on '+"
    "keys.length+' streams, '+D.devices.length+' devices';st.setAttribute('data-events',E.length);\n"
    "})();\n";

wf_status *wf_trace_write_report(const wf_trace *t, const wf_context *ctx, const char *path)
{
    if (!t || !path) return wf__status(WF_INVALID_ARGUMENT, "wf_trace_write_report: NULL trace or path");
    int n = wf_trace_num_events(t);
    int nd = wf_trace_summary(t, ctx, NULL, 0);
    wf_trace_device_summary *sums = wf__calloc((size_t)nd + 1, sizeof *sums);
    agg *ops = wf__calloc((size_t)n + 1, sizeof *ops), *links = wf__calloc((size_t)n + 1, sizeof *links);
    iv *buf = wf__calloc((size_t)n + 1, sizeof *buf);
    FILE *f = NULL;
    wf_status *st = NULL;
    if (!sums || !ops || !links || !buf) {
        st = wf__oom("the HTML report", sizeof(agg) * (size_t)n * 2);
        goto cleanup;
    }
    nd = wf_trace_summary(t, ctx, sums, nd);
    /* top ops per device (copies are in the links table) and copies per link */
    int n_ops = 0, n_links = 0;
    for (int i = 0; i < n; i++) {
        wf_trace_event e = wf_trace_event_at(t, i);
        int64_t dur = end_of(&e) - e.start_ns;
        if (e.is_copy) {
            int src = e.n_deps ? wf_trace_event_at(t, e.deps[0]).device_index : e.device_index;
            int k = 0;
            while (k < n_links && !(links[k].src == src && links[k].dev == e.device_index)) k++;
            if (k == n_links) links[n_links++] = (agg){.dev = e.device_index, .src = src};
            links[k].count++;
            links[k].total_ns += dur;
            links[k].bytes += e.bytes;
            continue;
        }
        int k = 0;
        while (k < n_ops && !(ops[k].dev == e.device_index && !strcmp(ops[k].op, e.op))) k++;
        if (k == n_ops) ops[n_ops++] = (agg){.dev = e.device_index, .op = e.op};
        ops[k].count++;
        ops[k].total_ns += dur;
    }
    qsort(ops, (size_t)n_ops, sizeof *ops, cmp_op);
    qsort(links, (size_t)n_links, sizeof *links, cmp_link);

    if (!(f = fopen(path, "w"))) {
        st = wf__status(WF_IO_ERROR, "%s: cannot write the HTML report: %s", path, strerror(errno));
        goto cleanup;
    }
    int64_t wall = wf_trace_wall_ns(t);
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
               "<title>weft run report</title>\n<style>\n%s</style></head>\n<body>\n", k_css);
    fprintf(f, "<h1>weft run report</h1>\n<p>One traced run: %d events on %d devices, wall %.3f ms "
               "(weft %s). <span id=\"js-status\">the page's script has not run</span></p>\n",
            n, nd, (double)wall / 1e6, wf_version());

    /* utilisation */
    fprintf(f, "<section id=\"utilisation\"><h2>Utilisation per device</h2>\n<table><tr><th class=\"l\">device"
               "</th><th>nodes</th><th>compute busy (ms)</th><th>utilisation</th><th>copies to it</th>"
               "<th>copy stream busy (ms)</th><th>allocator peak</th></tr>\n");
    for (int k = 0; k < nd; k++) {
        const wf_trace_device_summary *sm = &sums[k];
        fprintf(f, "<tr class=\"util-row\" data-device=\"");
        html_str(f, sm->device);
        fprintf(f, "\"><td class=\"l\"><span class=\"sw\" style=\"background:%s\"></span>",
                k_colors[sm->device_index % N_COLORS]);
        html_str(f, sm->device);
        fprintf(f, "</td><td>%d</td><td>%.3f</td><td class=\"util\">%.1f%%</td><td>%d</td><td>%.3f</td><td>",
                sm->n_nodes, (double)sm->busy_ns / 1e6, sm->utilisation * 100, sm->n_copies,
                (double)copy_stream_busy(t, sm->device_index, buf) / 1e6);
        if (ctx) human_bytes(f, (double)sm->peak_memory);
        else fputs("-", f);
        fprintf(f, "</td></tr>\n");
    }
    fprintf(f, "</table>\n<p class=\"note\">Compute busy: the union of the device's compute events over the "
               "run's wall time (nodes running at once on several threads count once). Copy stream busy: the "
               "union of the copies on the device's copy stream (a copy to the host is on its source device's "
               "stream). Allocator peak: the device allocator's peak since the context was created.</p>"
               "</section>\n");

    /* timeline */
    fprintf(f, "<section id=\"timeline-section\"><h2>Device timeline</h2>\n<div id=\"legend-timeline\"></div>\n"
               "<div class=\"scroll\" id=\"timeline\"></div>\n<p class=\"note\">One row per device stream "
               "(compute, copy), extra lanes where events of a stream overlap. Boxes are coloured by the device "
               "that holds their result; copies are outlined. Hover for names and times.</p></section>\n");

    /* top ops */
    fprintf(f, "<section id=\"top-ops\"><h2>Top ops by time per device</h2>\n");
    for (int k = 0; k < nd; k++) {
        int d = sums[k].device_index;
        int64_t dev_total = 0;
        for (int j = 0; j < n_ops; j++)
            if (ops[j].dev == d) dev_total += ops[j].total_ns;
        fprintf(f, "<h3><span class=\"sw\" style=\"background:%s\"></span>", k_colors[d % N_COLORS]);
        html_str(f, sums[k].device);
        fprintf(f, "</h3>\n<table class=\"ops\"><tr><th class=\"l\">op</th><th>count</th><th>total (&micro;s)</th>"
                   "<th>mean (&micro;s)</th><th>share</th></tr>\n");
        int shown = 0;
        for (int j = 0; j < n_ops; j++) {
            if (ops[j].dev != d || shown == TOP_OPS) continue;
            shown++;
            fprintf(f, "<tr class=\"op-row\" data-device=\"");
            html_str(f, sums[k].device);
            fprintf(f, "\" data-op=\"");
            html_str(f, ops[j].op);
            fprintf(f, "\"><td class=\"l\">");
            html_str(f, ops[j].op);
            fprintf(f, "</td><td class=\"count\">%d</td><td class=\"total\">%.3f</td><td class=\"mean\">%.3f</td>"
                       "<td class=\"share\">%.1f%%</td></tr>\n",
                    ops[j].count, (double)ops[j].total_ns / 1e3, (double)ops[j].total_ns / 1e3 / ops[j].count,
                    dev_total > 0 ? 100.0 * (double)ops[j].total_ns / (double)dev_total : 0.0);
        }
        if (!shown) fprintf(f, "<tr><td class=\"l\" colspan=\"5\">no ops (copies only)</td></tr>\n");
        fprintf(f, "</table>\n");
    }
    fprintf(f, "<p class=\"note\">Total: the sum of the op's event durations on the device; share: of the sum "
               "over all its ops (so shares add up to 100%% even where nodes ran at once). Fused nodes are "
               "listed under their fused name (MatMul+BiasAdd). At most %d ops per device.</p></section>\n",
            TOP_OPS);

    /* copies per link */
    fprintf(f, "<section id=\"copies\"><h2>Copies per link</h2>\n");
    if (!n_links) {
        fprintf(f, "<p>No copies: the whole run stayed on one device.</p>\n");
    } else {
        fprintf(f, "<table><tr><th class=\"l\">link</th><th>copies</th><th>bytes</th><th>volume</th>"
                   "<th>time (&micro;s)</th><th>rate</th></tr>\n");
        for (int j = 0; j < n_links; j++) {
            const char *src = NULL, *dst = NULL;
            for (int i = 0; i < n && (!src || !dst); i++) {
                wf_trace_event e = wf_trace_event_at(t, i);
                if (e.device_index == links[j].src) src = e.device_short;
                if (e.device_index == links[j].dev) dst = e.device_short;
            }
            fprintf(f, "<tr class=\"link-row\"><td class=\"l\">");
            html_str(f, src);
            fputs(" &rarr; ", f);
            html_str(f, dst);
            fprintf(f, "</td><td>%d</td><td class=\"bytes\">%lld</td><td>", links[j].count, (long long)links[j].bytes);
            human_bytes(f, (double)links[j].bytes);
            fprintf(f, "</td><td>%.3f</td><td>", (double)links[j].total_ns / 1e3);
            if (links[j].total_ns > 0) fprintf(f, "%.3f GB/s", (double)links[j].bytes / (double)links[j].total_ns);
            else fputs("-", f);
            fprintf(f, "</td></tr>\n");
        }
        fprintf(f, "</table>\n");
    }
    fprintf(f, "<p class=\"note\">Time: the sum of the copies' durations on the link.</p></section>\n");

    /* memory */
    fprintf(f, "<section id=\"memory-section\"><h2>Memory in use over time per device</h2>\n"
               "<div id=\"legend-memory\"></div>\n<div class=\"scroll\" id=\"memory\"></div>\n"
               "<ul id=\"memory-peaks\"></ul>\n<p class=\"note\">What this measures: the bytes of the values the "
               "run's nodes produced on each device, each live from its producer's start to the end of its last "
               "reader (where the executor releases it); fetched outputs, feeds and constants count to the end "
               "of the run. It is not the allocator's figure: a kernel that writes in place into its input is "
               "counted twice, and weights held by the session before the run are left out unless a node "
               "of this run produced them. The allocator's peak is in the utilisation table.</p></section>\n");

    /* graph */
    fprintf(f, "<section id=\"graph-section\"><h2>The placed graph</h2>\n<div id=\"legend-graph\"></div>\n"
               "<div class=\"scroll\" id=\"graph\"></div>\n<p class=\"note\">Every node of the plan (copies "
               "dashed), layered by its longest path from the inputs, coloured by its device; arrows are "
               "the dependencies of the trace.</p></section>\n");

    /* the data, then the script */
    fprintf(f, "<script type=\"application/json\" id=\"weft-data\">{\"wall_ns\":%lld,\"colors\":[", (long long)wall);
    for (int c = 0; c < N_COLORS; c++) fprintf(f, "%s\"%s\"", c ? "," : "", k_colors[c]);
    fprintf(f, "],\"devices\":[");
    for (int k = 0; k < nd; k++) {
        fprintf(f, "%s{\"index\":%d,\"name\":", k ? "," : "", sums[k].device_index);
        json_str(f, sums[k].device);
        fprintf(f, "}");
    }
    fprintf(f, "],\n\"events\":[");
    for (int i = 0; i < n; i++) {
        wf_trace_event e = wf_trace_event_at(t, i);
        fprintf(f, "%s{\"n\":", i ? ",\n" : "\n");
        json_str(f, e.node);
        fprintf(f, ",\"op\":");
        json_str(f, e.op);
        fprintf(f, ",\"d\":%d,\"sd\":%d,\"s\":%d,\"c\":%d,\"t0\":%lld,\"t1\":%lld,\"ob\":%lld,\"r\":%lld,\"deps\":[",
                e.device_index, e.stream_device, e.stream, e.is_copy, (long long)e.start_ns,
                (long long)end_of(&e), (long long)e.out_bytes, (long long)e.release_ns);
        for (int k = 0; k < e.n_deps; k++) fprintf(f, "%s%d", k ? "," : "", e.deps[k]);
        fprintf(f, "]}");
    }
    fprintf(f, "]}</script>\n<script>\n%s</script>\n</body></html>\n", k_js);

    bool werr = ferror(f) != 0;
    int saved = errno;
    if (fclose(f) != 0 && !werr) {
        werr = true;
        saved = errno;
    }
    f = NULL;
    if (werr) st = wf__status(WF_IO_ERROR, "%s: writing the HTML report failed: %s", path, strerror(saved));
cleanup:
    wf__free(sums);
    wf__free(ops);
    wf__free(links);
    wf__free(buf);
    return st;
}
