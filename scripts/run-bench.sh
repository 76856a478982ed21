#!/bin/sh
# Runs weft's benchmarks from BUILD (default build/). Numbers are printed, never asserted.
set -eu
cd "$(dirname "$0")/.."
B=${1:-build}
echo "== executor overhead"; "$B/bench/bench_exec"
echo; echo "== generated elementwise kernels: an 8-op chain on 16M f32, fused and unfused, against a STREAM-style copy"
"$B/bench/bench_jit"
echo; echo "== MatMul 1024^3 f32: weft vs oneDNN called directly"; "$B/bench/bench_matmul"
echo; echo "== demo model forward pass"; "$B/bench/bench_demo"
echo; echo "== Conv2D layers: weft vs oneDNN (plain NCHW and its chosen layout)"; "$B/bench/bench_conv"
echo; echo "== contention: default thread counts against --threads 1, idle and with one core busy"
/usr/bin/python3 bench/bench_contention.py "$B" --rounds 3
echo; echo "== ResNet-18 and MobileNetV2 on CPU:0 (and GPU:0 where there is one): before (a baseline revision, built once) and after"
/usr/bin/python3 bench/bench_before_after.py "$B" --rounds 3
echo; echo "== real models (ONNX from PyTorch): weft run vs PyTorch"; /usr/bin/python3 bench/bench_models.py "$B"
echo; echo "== every device against the CPU: GEMM and ResNet-18 through weft run --device"; /usr/bin/python3 bench/bench_devices.py "$B"
echo; echo "== placement: HEFT against other rules (estimates), placement speed, ResNet-18 placed vs single devices"
"$B/bench/bench_place" "$B/bench-devices/resnet18/model.onnx" input
echo; echo "== training the demo model (Fashion-MNIST MLP): ms per step at batch 32 and 256, then the full 5 epochs; weft vs TensorFlow/Keras and PyTorch"
# TensorFlow comes from PyPI into build/venv-bench (once, a few minutes); without it that column says why.
TFPY=$(sh scripts/venv-bench.sh) || TFPY=none
/usr/bin/python3 bench/bench_train.py "$B" --full --tf-python "$TFPY"
echo; echo "== training a small CNN (Conv32-pool-Conv64-pool-Dense128-Dense10, batch 64): weft vs TensorFlow/Keras and PyTorch, interleaved; losses against PyTorch's from the same weights"
/usr/bin/python3 bench/bench_train_cnn.py "$B" --tf-python "$TFPY"
echo; echo "== training ResNet-18 on 3x32x32 at batch 32 (BatchNorm in training mode, Adam): weft vs TensorFlow/Keras and PyTorch, interleaved"
/usr/bin/python3 bench/bench_train_cnn.py "$B" --model resnet18 --steps 20 --warmup 5 --tf-python "$TFPY"
echo; echo "== recurrent classifiers (2 layers, seq 32, batch 8, input 64, hidden 128): weft before/after and ONNX Runtime"
for cell in lstm gru rnn; do
    if [ "$TFPY" = none ]; then /usr/bin/python3 bench/bench_lstm.py "$B" --cell $cell --rounds 3
    else /usr/bin/python3 bench/bench_lstm.py "$B" --cell $cell --rounds 3 --ort-python "$TFPY"; fi
done
echo; echo "== pooling layers of those models alone: weft run vs ONNX Runtime, interleaved, same threads"
if [ "$TFPY" = none ]; then /usr/bin/python3 bench/bench_pool.py "$B"
else /usr/bin/python3 bench/bench_pool.py "$B" --ort-python "$TFPY"; fi
echo; echo "== single operators: one-node models, weft run vs ONNX Runtime, interleaved, same threads"
if [ "$TFPY" = none ]; then /usr/bin/python3 bench/bench_ops.py "$B"
else /usr/bin/python3 bench/bench_ops.py "$B" --ort-python "$TFPY"; fi
echo; echo "== mixed precision: f32 against bf16 (f16 on a GPU) for ResNet-50 inference and the CNN and MLP training steps, interleaved, with peak activation memory"
/usr/bin/python3 bench/bench_amp.py "$B" --rounds 3
echo; echo "== weft vs ONNX Runtime on real models (torchvision CNNs, a BERT-style encoder, the LSTM classifier), interleaved, same threads"
for lvl in 2 3; do
    echo "-- weft at --opt-level $lvl"
    if [ "$TFPY" = none ]; then /usr/bin/python3 bench/bench_ort.py "$B" --opt-level $lvl
    else /usr/bin/python3 bench/bench_ort.py "$B" --ort-python "$TFPY" --opt-level $lvl; fi
done
echo; echo "== input pipelines: the seeds' JPEG pipeline (read, decode, resize 224, brightness, /255, batch 32) in weft and tf.data at 1 and 2 threads, AUTOTUNE against fixed settings, bounded memory, batches against Pillow and TensorFlow"
/usr/bin/python3 bench/bench_input.py "$B" --tf-python "$TFPY"
echo; echo "== prefetch_to_device: the demo MLP for one epoch on OPENCL:0 with its batches prefetched into device memory and without, interleaved: the share of the step spent waiting for input, and copies overlapping steps"
/usr/bin/python3 bench/bench_prefetch.py "$B" --device OPENCL:0 --rounds 2
echo; echo "== Python API overheads (python/weft): eager scalar add, a one-op tf.function call, numpy round trip of 4 MiB; weft vs TensorFlow and PyTorch, interleaved"
/usr/bin/python3 bench/bench_python.py "$B" --tf-python "$TFPY"
echo; echo "== TensorFlow's beginner tutorial (examples/fashion_mnist.py) as is under weft and under TensorFlow, interleaved: wall, fit time, test accuracy"
/usr/bin/python3 bench/bench_tutorial.py "$B" --tf-python "$TFPY"
