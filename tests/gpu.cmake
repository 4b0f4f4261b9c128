# SPDX-License-Identifier: Apache-2.0
# Device-channel API checks that need no GPU (label unit): every host.
weft_add_test(test_devchan_nodev SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test_devchan_nodev.c LABELS unit
  TIMEOUT 60)

# GPU tests (label gpu) and the weft-gpu-bench benchmark: only where the nvlink
# plugin is built, which means a CUDA compiler was found. Without a GPU the
# tests skip (exit 77); with WEFT_REQUIRE_GPU=1 they fail instead.
get_property(_weft_have_cuda GLOBAL PROPERTY WEFT_HAVE_CUDA)
if(_weft_have_cuda AND TARGET weft-plugin-nvlink)
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES ${WEFT_CUDA_ARCH})
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  set(_gpurt ${PROJECT_SOURCE_DIR}/plugins/gpurt/gpurt.c ${PROJECT_SOURCE_DIR}/plugins/gpurt/gpurt_cuda.c)
  set(_gpudir ${CMAKE_CURRENT_SOURCE_DIR}/gpu)
  # The project's warning flags are gcc's: nvcc gets them through -Xcompiler.
  get_directory_property(_opts COMPILE_OPTIONS)
  set(_cuda_opts "")
  foreach(o IN LISTS _opts)
    list(APPEND _cuda_opts "-Xcompiler=${o}")
  endforeach()
  function(weft_gpu_flags tgt)
    set_property(TARGET ${tgt} PROPERTY COMPILE_OPTIONS
      "$<$<COMPILE_LANGUAGE:C>:${_opts}>" "$<$<COMPILE_LANGUAGE:CUDA>:${_cuda_opts}>")
  endfunction()

  weft_add_test(test_nvlink_gpu SOURCES ${_gpudir}/test_nvlink_gpu.cu ${_gpurt} LABELS gpu TIMEOUT 900
    LIBS CUDA::cudart_static ${CMAKE_DL_LIBS} rt)
  target_compile_definitions(test_nvlink_gpu PRIVATE WEFT_NVLINK_PLUGIN="$<TARGET_FILE:weft-plugin-nvlink>")
  add_dependencies(test_nvlink_gpu weft-plugin-nvlink)
  weft_gpu_flags(test_nvlink_gpu)

  # The same paths through the public API: libweft loads the nvlink plugin from
  # the build tree (memory channels, port channels with host and device
  # producers, abort flags).
  weft_add_test(test_devchan_gpu SOURCES ${_gpudir}/test_devchan_gpu.cu LABELS gpu TIMEOUT 900
    LIBS CUDA::cudart_static ${CMAKE_DL_LIBS} rt)
  add_dependencies(test_devchan_gpu weft-plugin-nvlink)
  weft_gpu_flags(test_devchan_gpu)

  # The ib plugin's dma-buf export on cudaMalloc memory (C, no kernels): its
  # source is compiled in, so neither rdma-core nor an RDMA device is needed.
  weft_add_test(test_ib_dmabuf_gpu SOURCES ${_gpudir}/test_ib_dmabuf_gpu.c
    ${PROJECT_SOURCE_DIR}/plugins/ib/ib_dmabuf.c LABELS gpu TIMEOUT 300
    LIBS CUDA::cudart_static ${CMAKE_DL_LIBS} rt)

  # libweft_nccl on device buffers: ncclMemAlloc (VMM), allreduce in windows,
  # ranks that disagree on a window's offset. The CUDA runtime is linked as a
  # shared library: libweft_nccl finds it in the process (dlsym), as in an
  # application. allreduce-direct from 1 MiB: the path windows serve.
  if(TARGET weft_nccl AND TARGET weft-plugin-algo-gpu)
    weft_add_test(test_nccl_win_gpu SOURCES ${_gpudir}/test_nccl_win_gpu.c LABELS gpu TIMEOUT 300
      LIBS weft_nccl CUDA::cudart ${CMAKE_DL_LIBS}
      ENV WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1 NCCL_NVLS_ENABLE=0 WEFT_ALGO_GPU_DIRECT_ALLREDUCE_MIN=1M)
    target_include_directories(test_nccl_win_gpu PRIVATE ${PROJECT_SOURCE_DIR}/nccl/include)
    add_dependencies(test_nccl_win_gpu weft-plugin-algo-gpu weft-plugin-nvlink weft-plugin-shm)
  endif()

  add_executable(weft-gpu-bench ${_gpudir}/gpu_bench.cu ${_gpurt})
  target_include_directories(weft-gpu-bench PRIVATE ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(weft-gpu-bench PRIVATE CUDA::cudart_static ${CMAKE_DL_LIBS} rt Threads::Threads)
  target_compile_definitions(weft-gpu-bench PRIVATE WEFT_NVLINK_PLUGIN="$<TARGET_FILE:weft-plugin-nvlink>")
  add_dependencies(weft-gpu-bench weft-plugin-nvlink)
  weft_gpu_flags(weft-gpu-bench)
endif()
