# GPU tests (label gpu; CUDA builds only). Each first asks cuda_probe for a
# usable GPU and is reported as Skipped, with the reason, where there is none.
add_executable(cuda_probe ${CMAKE_CURRENT_LIST_DIR}/cuda_probe.cpp)
target_link_libraries(cuda_probe PRIVATE pentad_lib pentad_runtime)

# The op test over every backend built (tests/backend_ops), with the CUDA
# backend: every CUDA op against the CPU op, plus the CPU's reference checks.
add_executable(test_cuda_ops ${PROJECT_SOURCE_DIR}/tests/backend_ops/test_backend_ops.cpp)
target_compile_definitions(test_cuda_ops PRIVATE PENTAD_TEST_CUDA=1)
target_compile_options(test_cuda_ops PRIVATE ${PENTAD_WARNINGS})
target_link_libraries(test_cuda_ops PRIVATE pentad_lib pentad_runtime GTest::gtest GTest::gtest_main)

set(gpu_run bash ${CMAKE_CURRENT_LIST_DIR}/with_gpu.sh $<TARGET_FILE:cuda_probe>)
set(gpu_parity ${PROJECT_SOURCE_DIR}/tests/parity)

# Every CUDA op against the CPU op (forward and backward).
add_test(NAME gpu_ops COMMAND ${gpu_run} $<TARGET_FILE:test_cuda_ops> --gtest_filter=*OpsVsCpu*)

# Training parity, CUDA against CPU on the tiny parity decks (10 steps).
# fp32: the layout harness and its tolerances (per-step loss 1e-5 relative,
# final parameters 1e-5 abs + 1e-4 rel): only the summation order differs.
foreach(model gpt2 llama)
  add_test(NAME gpu_parity_fp32_${model}
           COMMAND ${gpu_run} bash ${gpu_parity}/run_layout.sh ${gpu_parity}/${model}.toml 1 ""
                   "--set backend=cuda")
  # bf16 on the GPU follows the CPU's fp32 loss curve within the bound of the
  # CPU bf16 test (tests/precision), 20 steps of the tiny deck.
  add_test(NAME gpu_bf16_follows_fp32_${model}
           COMMAND ${gpu_run} bash ${PROJECT_SOURCE_DIR}/tests/precision/loss_curves.sh
                   ${gpu_parity}/${model}.toml 20 1e-2 "" "--set backend=cuda --set train.dtype=bf16")
endforeach()
# The same with 2 heads of 16 (the tiny decks' 8 is not one the fused bf16
# attention kernels are built for): the model's attention through
# cuda/attention_flash.cu, both directions, the summary counting them.
add_test(NAME gpu_bf16_follows_fp32_gpt2_fused_attention
         COMMAND ${gpu_run} bash ${PROJECT_SOURCE_DIR}/tests/precision/fused_attention_training.sh
                 ${gpu_parity}/gpt2.toml)

# Four ranks sharing one GPU (host-staged MPI collectives), dp 2 x tp 2,
# against the 1-rank CUDA run of the same global batch.
add_test(NAME gpu_one_device_dp2_tp2_comm_mpi
         COMMAND ${gpu_run} bash ${gpu_parity}/run_layout.sh ${gpu_parity}/gpt2.toml 4
                 "--set backend=cuda --set train.grad_accum=2"
                 "--set backend=cuda --set parallel.comm=mpi --set parallel.dp=2 --set parallel.tp=2")
# Two pipeline stages on one GPU (staged point-to-point), 1f1b with the tied
# embedding summed over the stages.
add_test(NAME gpu_one_device_pp2_comm_mpi
         COMMAND ${gpu_run} bash ${gpu_parity}/run_layout.sh ${gpu_parity}/gpt2.toml 2
                 "--set backend=cuda --set train.grad_accum=2"
                 "--set backend=cuda --set parallel.comm=mpi --set parallel.pp=2 --set train.grad_accum=2")

set_tests_properties(gpu_ops gpu_parity_fp32_gpt2 gpu_parity_fp32_llama gpu_bf16_follows_fp32_gpt2
                     gpu_bf16_follows_fp32_llama gpu_bf16_follows_fp32_gpt2_fused_attention gpu_one_device_dp2_tp2_comm_mpi gpu_one_device_pp2_comm_mpi
                     PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 600)

# The GPU bundle (scripts/gpu_bundle.sh) is self-contained: packed from this
# build, at most 60 MiB, ldd resolving inside it, and training on 2 ranks with
# the system's MPICH, HDF5, OpenBLAS and toml++ hidden (a mount namespace;
# needs root, else skipped with the reason).
add_test(NAME gpu_bundle
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/bundle.sh ${PROJECT_BINARY_DIR})
set_tests_properties(gpu_bundle PROPERTIES LABELS "cuda;mpi" SKIP_RETURN_CODE 77 TIMEOUT 300)

# The other side: the CUDA binary where no GPU is usable must stop with one
# clear message (label cuda; skipped where a GPU is present).
add_test(NAME cuda_backend_without_gpu_message
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/no_gpu.sh $<TARGET_FILE:cuda_probe>)
set_tests_properties(cuda_backend_without_gpu_message PROPERTIES LABELS "cuda;mpi" SKIP_RETURN_CODE 77
                     ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)

# Registers and spills of the hot kernels from nvcc -Xptxas -v for sm_90 (no
# GPU needed; label cuda): fails when any kernel spills. The nvcc of the build
# (cuda/CMakeLists.txt picks it the same way; its choice is not seen here).
if(CMAKE_CUDA_COMPILER)
  set(PENTAD_NVCC ${CMAKE_CUDA_COMPILER})
else()
  find_program(PENTAD_NVCC nvcc HINTS /usr/local/cuda/bin REQUIRED)
endif()
add_test(NAME cuda_ptxas_no_spills
         COMMAND ${CMAKE_COMMAND} -DNVCC=${PENTAD_NVCC} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                 -DOUT_DIR=${CMAKE_CURRENT_BINARY_DIR}/ptxas_spills -DARCH=90
                 "-DINCLUDES=$<JOIN:$<TARGET_PROPERTY:MPI::MPI_CXX,INTERFACE_INCLUDE_DIRECTORIES>,|>"
                 -P ${CMAKE_CURRENT_LIST_DIR}/ptxas_spills.cmake)
set_tests_properties(cuda_ptxas_no_spills PROPERTIES LABELS cuda TIMEOUT 600)
