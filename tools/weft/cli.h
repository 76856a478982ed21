/* Commands of the weft tool, one file each. */
#ifndef WEFT_CLI_H
#define WEFT_CLI_H

#include "weft/weft.h"

int cli_fail(wf_status *s); /* prints and frees s; returns the exit code 1 */
int cmd_demo(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_inspect(int argc, char **argv);

#endif
