/* Ops from the ONNX suite: recurrent, signal, detection. */
#include "graph/op.h"

const wf__op_def wf__ops_onnx2[] = {
    {0},
};
