#!/bin/sh
# Stands in for cuda_probe in tests/gpu/bundle.sh: answers "usable GPU" so
# that the GPU check's every step runs (and its CUDA steps fail) without one.
echo "yes_probe: answering as if a GPU were usable"
exit 0
