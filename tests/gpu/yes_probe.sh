#!/bin/sh
# Stands in for cuda_probe in tests/gpu/bundle.sh: answers "usable GPU" so
# that the GPU check's every step runs (and its CUDA steps fail) without one.
# PENTAD_TEST_PROBE_SLEEP_S=N makes it take N seconds first, so that the
# test, not the machine's speed, decides when the check's budget is spent.
echo "yes_probe: answering as if a GPU were usable"
sleep "${PENTAD_TEST_PROBE_SLEEP_S:-0}"
exit 0
