/* The weft command-line tool: version, devices, run, inspect, demo, help. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/weft.h"
#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: weft COMMAND [OPTIONS]\n"
            "\n"
            "commands:\n"
            "  version              print the library version\n"
            "  devices [--json] [--match SPEC] [--verbose] [--calibrate]\n"
            "                       list the devices weft can use (--verbose: each device's performance\n"
            "                       figures, each backend plugin's path, status and reason; --calibrate:\n"
            "                       measure the figures first and save them for later runs)\n"
            "  run MODEL.onnx [--input NAME=FILE.npy|.pb]... [--random-inputs] [--output-dir DIR]\n"
            "                 [--iterations N] [--threads N] [--device SPEC] [--strict-placement]\n"
            "                 [--memory-limit SPEC=SIZE]... [--log-device-placement] [--place PATTERN=SPEC]...\n"
            "                 [--explain] [--calibrate] [--profile FILE.json] [--report FILE.html]\n"
            "                       import an ONNX model, run it, print and save its outputs, time it\n"
            "  inspect MODEL.onnx   IR and opset versions, inputs, outputs, op histogram, parameters,\n"
            "                       unsupported ops\n"
            "  inspect FILE.npy|FILE.safetensors\n"
            "                       check a tensor file whole and list its tensors\n"
            "  demo [--device SPEC] [--epochs N] [--batch N] [--threads N] [--data DIR] ...\n"
            "                       train the TensorFlow tutorial model (Flatten 784 -> Dense 128 relu ->\n"
            "                       Dense 10 softmax) on Fashion-MNIST and report test accuracy and speed\n"
            "                       (weft demo --help lists every option)\n"
            "\n"
            "weft COMMAND --help (or weft help COMMAND) prints that command's options.\n"
            "Exit status: 0 done; 1 a file, the model, a device or the run failed (the message names it);\n"
            "2 a usage error (an unknown option, a missing or malformed value, a value out of range).\n");
}

static void devices_usage(FILE *f)
{
    fprintf(f, "usage: weft devices [--json] [--match SPEC] [--verbose] [--calibrate]\n"
               "Lists the devices weft can use: full name, type, backend, hardware, memory, compute units.\n"
               "  --json        the same as one JSON object, with the backend plugins\n"
               "  --match SPEC  only the devices SPEC matches (CPU:0, /device:OPENCL:*, or a bare type: gpu);\n"
               "                none matching is exit status 1\n"
               "  --verbose     each device's performance figures and each plugin's path, status and reason\n"
               "  --calibrate   measure the figures first and save them for later runs\n"
               "Exit status: 0 done, 1 no device matches or calibration failed, 2 a usage error.\n");
}

int cli_fail(wf_status *s)
{
    fprintf(stderr, "weft: error: %s\n", wf_status_message(s));
    wf_status_free(s);
    return 1;
}

static void json_str(const char *s)
{
    putchar('"');
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20) printf("\\u%04x", *s);
        else putchar(*s);
    }
    putchar('"');
}

/* The placer's figures of device i, on the line under the device (text) or as a "perf" member (JSON). */
static void print_perf(wf_context *ctx, int i, const wf_device_info *d, int json)
{
    wf_device_perf p;
    wf_status *s = wf_context_device_perf(ctx, i, &p);
    if (s) {
        wf_status_free(s);
        return;
    }
    int link = strcmp(d->backend, "builtin") != 0; /* the CPU has no link to itself */
    if (json) {
        printf(", \"perf\": {\"dense_gflops\": %.4g, \"vector_gflops\": %.4g, \"mem_gbps\": %.4g, "
               "\"launch_us\": %.4g, \"link_gbps\": %.4g, \"link_latency_us\": %.4g, \"measured\": %s}",
               p.dense_gflops, p.vector_gflops, p.mem_gbps, p.launch_us, p.link_gbps, p.link_latency_us,
               p.measured ? "true" : "false");
        printf(", \"fast_16bit\": [%s%s%s], \"precision\": ", d->fast_dtypes >> WF_F16 & 1 ? "\"f16\"" : "",
               (d->fast_dtypes >> WF_F16 & 1) && (d->fast_dtypes >> WF_BF16 & 1) ? ", " : "",
               d->fast_dtypes >> WF_BF16 & 1 ? "\"bf16\"" : "");
        json_str(d->precision ? d->precision : "");
        return;
    }
    printf("    %-9s dense %.4g GFLOP/s  vector %.4g GFLOP/s  memory %.4g GB/s  launch %.3g us",
           p.measured ? "measured:" : "default:", p.dense_gflops, p.vector_gflops, p.mem_gbps, p.launch_us);
    if (link) printf("  link %.4g GB/s, %.3g us latency", p.link_gbps, p.link_latency_us);
    printf("\n");
    /* what --precision and the mixed policies can use here (passes/amp.c converts only to these) */
    printf("    precision: %s\n", d->precision && *d->precision ? d->precision : "no 16-bit float dtype is native");
}

static int cmd_devices(int argc, char **argv)
{
    int json = 0, verbose = 0, calibrate = 0;
    const char *match = NULL;
    if (cli_wants_help(argc, argv)) {
        devices_usage(stdout);
        return 0;
    }
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--verbose") || !strcmp(argv[i], "-v")) verbose = 1;
        else if (!strcmp(argv[i], "--calibrate")) calibrate = 1;
        else if (!strcmp(argv[i], "--match")) {
            if (!(match = cli_value("devices", argc, argv, &i, "SPEC"))) return CLI_USAGE;
        } else if (argv[i][0] == '-')
            return cli_usage_error("devices", "unknown option '%s' (see 'weft devices --help')", argv[i]);
        else return cli_usage_error("devices", "unexpected argument '%s' (see 'weft devices --help')", argv[i]);
    }
    wf_device_spec spec;
    wf_status *s = wf_device_spec_parse(match ? match : "", &spec);
    if (s && match && !strchr(match, '/') && !strchr(match, ':')) {
        /* a bare type ("cpu", "OPENCL") means every device of that type */
        char buf[128];
        snprintf(buf, sizeof buf, "/device:%s", match);
        wf_status_free(s);
        s = wf_device_spec_parse(buf, &spec);
    }
    if (s) return cli_fail(s);
    wf_context *ctx;
    if ((s = wf_context_new(NULL, &ctx))) return cli_fail(s);
    int failed = 0;
    if (calibrate) {
        char canon[WF_DEVICE_SPEC_MAX];
        wf_device_spec_format(&spec, canon, sizeof canon);
        fprintf(stderr, "weft devices: calibrating %s (a few seconds per device)...\n", match ? canon : "every device");
        if ((s = wf_context_calibrate(ctx, match ? canon : NULL, NULL))) {
            fprintf(stderr, "weft: error: %s\n", wf_status_message(s));
            wf_status_free(s);
            failed = 1;
        }
    }
    int shown = 0;
    if (json) printf("{\"devices\": [");
    for (int i = 0; i < wf_context_num_devices(ctx); i++) {
        wf_device_info d;
        wf_device_spec ds;
        if ((s = wf_context_device(ctx, i, &d)) || (s = wf_device_spec_parse(d.name, &ds))) {
            wf_context_free(ctx);
            return cli_fail(s);
        }
        if (!wf_device_spec_matches(&spec, &ds)) continue;
        if (json) {
            printf("%s\n  {\"name\": ", shown ? "," : "");
            json_str(d.name);
            printf(", \"type\": ");
            json_str(d.type);
            printf(", \"backend\": ");
            json_str(d.backend);
            printf(", \"hardware\": ");
            json_str(d.description);
            printf(", \"memory_bytes\": %llu, \"compute_units\": %d, \"threads\": %d",
                   (unsigned long long)d.memory_bytes, d.compute_units, d.threads);
            if (verbose || calibrate) print_perf(ctx, i, &d, 1);
            printf("}");
        } else {
            printf("%s  type=%s  backend=%s  hardware=\"%s\"  memory=%.1f GiB  compute_units=%d  threads=%d\n", d.name,
                   d.type, d.backend, d.description, (double)d.memory_bytes / (1024.0 * 1024 * 1024), d.compute_units,
                   d.threads);
            if (verbose || calibrate) print_perf(ctx, i, &d, 0);
        }
        shown++;
    }
    if (json) printf("%s]", shown ? "\n" : "");
    if (verbose || json) {
        if (json) printf(", \"plugins\": [");
        else printf("\nplugins:\n");
        for (int i = 0; i < wf_context_num_plugins(ctx); i++) {
            wf_plugin_info p;
            if (wf_context_plugin(ctx, i, &p)) continue;
            if (json) {
                printf("%s\n  {\"name\": ", i ? "," : "");
                json_str(p.name);
                printf(", \"path\": ");
                json_str(p.path);
                printf(", \"status\": ");
                json_str(p.status);
                printf(", \"reason\": ");
                json_str(p.reason);
                printf(", \"devices\": %d}", p.n_devices);
            } else {
                printf("  %-8s %-11s %d device%s  %s%s%s\n", p.name, p.status, p.n_devices, p.n_devices == 1 ? " " : "s",
                       p.path, *p.reason ? "\n           reason: " : "", p.reason);
            }
        }
        if (json) printf("%s]", wf_context_num_plugins(ctx) ? "\n" : "");
    }
    if (json) printf("}\n");
    wf_context_free(ctx);
    if (match && !shown && !json) {
        fprintf(stderr, "weft devices: no device matches '%s'\n", match);
        return 1;
    }
    return failed;
}

typedef int (*cmd_fn)(int argc, char **argv);

static cmd_fn find_cmd(const char *name)
{
    if (!strcmp(name, "devices")) return cmd_devices;
    if (!strcmp(name, "demo")) return cmd_demo;
    if (!strcmp(name, "run")) return cmd_run;
    if (!strcmp(name, "inspect")) return cmd_inspect;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("weft %s\n", wf_version());
        return 0;
    }
    cmd_fn fn = find_cmd(cmd);
    if (fn) return fn(argc - 2, argv + 2);
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        if (argc > 2 && !strcmp(argv[2], "version")) {
            printf("usage: weft version\nPrints the library version.\n");
            return 0;
        }
        if (argc > 2 && (fn = find_cmd(argv[2]))) {
            char help[] = "--help";
            char *args[] = {help, NULL};
            return fn(1, args);
        }
        if (argc > 2) {
            fprintf(stderr, "weft help: unknown command '%s' (see 'weft help')\n", argv[2]);
            return CLI_USAGE;
        }
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "weft: unknown command '%s' (see 'weft help')\n", cmd);
    return CLI_USAGE;
}
