/* The weft command-line tool: version, devices, demo. */
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
            "  devices              list the devices weft can use\n"
            "  run MODEL.onnx [--input NAME=FILE.npy|.pb]... [--random-inputs] [--output-dir DIR]\n"
            "                 [--iterations N] [--threads N]\n"
            "                       import an ONNX model, run it, print and save its outputs, time it\n"
            "  inspect MODEL.onnx   IR and opset versions, inputs, outputs, op histogram, parameters,\n"
            "                       unsupported ops\n"
            "  demo [--batch N] [--iterations N] [--threads N]\n"
            "                       build the TensorFlow tutorial model (Flatten 784 -> Dense 128 relu ->\n"
            "                       Dense 10 softmax, random weights) and time its forward pass\n");
}

int cli_fail(wf_status *s)
{
    fprintf(stderr, "weft: error: %s\n", wf_status_message(s));
    wf_status_free(s);
    return 1;
}

static int cmd_devices(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    wf_context *ctx;
    wf_status *s = wf_context_new(NULL, &ctx);
    if (s) return cli_fail(s);
    for (int i = 0; i < wf_context_num_devices(ctx); i++) {
        wf_device_info d;
        if ((s = wf_context_device(ctx, i, &d))) {
            wf_context_free(ctx);
            return cli_fail(s);
        }
        printf("%s  type=%s  cores=%d  threads=%d  memory=%.1f GiB  (%s)\n", d.name, d.type, d.compute_units,
               d.threads, (double)d.memory_bytes / (1024.0 * 1024 * 1024), d.description);
    }
    wf_context_free(ctx);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("weft %s\n", wf_version());
        return 0;
    }
    if (!strcmp(cmd, "devices")) return cmd_devices(argc - 2, argv + 2);
    if (!strcmp(cmd, "demo")) return cmd_demo(argc - 2, argv + 2);
    if (!strcmp(cmd, "run")) return cmd_run(argc - 2, argv + 2);
    if (!strcmp(cmd, "inspect")) return cmd_inspect(argc - 2, argv + 2);
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "weft: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
