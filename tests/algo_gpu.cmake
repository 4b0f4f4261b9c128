# SPDX-License-Identifier: Apache-2.0
# algo-gpu: the chunk schedules are plain C and tested on every machine
# (label unit); the GPU tests and benchmark need the plugin built (CUDA
# compiler present) and run only where a GPU is (label gpu, skip 77 otherwise).
weft_add_test(test_algo_gpu_sched
  SOURCES test_algo_gpu_sched.c ${PROJECT_SOURCE_DIR}/plugins/algo-gpu/schedule.c
    ${PROJECT_SOURCE_DIR}/plugins/algo-gpu/hier.c
  LABELS unit TIMEOUT 300) # its every-size sweeps take minutes under ASan on 2 busy cores
# Where the pack is built (CI builds it: nvcc is there), the same test also
# checks its parameters and the algorithm choice they give.
if(TARGET weft-plugin-algo-gpu)
  target_compile_definitions(test_algo_gpu_sched PRIVATE WAG_HAVE_PACK=1)
  add_dependencies(test_algo_gpu_sched weft-plugin-algo-gpu)
endif()

# GPU tests through the public API (label gpu) and the benchmark, where the
# pack is built. test_algo_gpu_rings turns both one-shot paths and the LL path
# off, so every size, odd tails included, goes through the pipelined rings.
if(TARGET weft-plugin-algo-gpu AND TARGET weft-plugin-nvlink)
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES ${WEFT_CUDA_ARCH})
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  get_directory_property(_wag_topts COMPILE_OPTIONS)
  set(_wag_tcuda "")
  foreach(o IN LISTS _wag_topts)
    list(APPEND _wag_tcuda "-Xcompiler=${o}")
  endforeach()
  # The copy-engine algorithms start at 256 MiB by default; the tests' buffers
  # are smaller, so the plain entries lower that to 16 MiB to reach them.
  set(_wag_ce16 WEFT_ALGO_GPU_CE_ALLREDUCE_MIN=16M WEFT_ALGO_GPU_CE_REDUCE_SCATTER_MIN=16M
    WEFT_ALGO_GPU_CE_ALLGATHER_MIN=16M WEFT_ALGO_GPU_CE_BROADCAST_MIN=16M WEFT_ALGO_GPU_CE_ALLTOALL_MIN=16M)
  weft_add_test(test_algo_gpu SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test_algo_gpu.cu LABELS gpu TIMEOUT 900
    LIBS CUDA::cudart_static ${CMAKE_DL_LIBS} rt
    ENV WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1 NCCL_NVLS_ENABLE=0 CK_RUN_CASE=two ${_wag_ce16})
  add_dependencies(test_algo_gpu weft-plugin-algo-gpu weft-plugin-nvlink)
  set_property(TARGET test_algo_gpu PROPERTY COMPILE_OPTIONS
    "$<$<COMPILE_LANGUAGE:C>:${_wag_topts}>" "$<$<COMPILE_LANGUAGE:CUDA>:${_wag_tcuda}>")
  # The same binary, one Check case per entry; the _rings entries turn the LL,
  # one-shot and copy-engine paths off, so every size, odd tails included,
  # goes through the pipelined rings (small tiles: many pipeline steps); send/recv
  # entries go without LL packets, those of 16K x the channel's blocks and more in
  # 16K slots (the large-entry tiles).
  set(_wag_rings WEFT_ALGO_GPU_P2P_LL_MAX=0 WEFT_ALGO_GPU_P2P_TILE=16K
    WEFT_ALGO_GPU_LL_MAX=0 WEFT_ALGO_GPU_LL_EXCHANGE_MAX=0 WEFT_ALGO_GPU_ONESHOT_MAX=0
    WEFT_ALGO_GPU_ALLGATHER_ONESHOT_MAX=0 WEFT_ALGO_GPU_TILE=4K WEFT_ALGO_GPU_CE_ALLREDUCE_MIN=0
    WEFT_ALGO_GPU_CE_REDUCE_SCATTER_MIN=0 WEFT_ALGO_GPU_CE_ALLGATHER_MIN=0 WEFT_ALGO_GPU_CE_BROADCAST_MIN=0
    WEFT_ALGO_GPU_CE_ALLTOALL_MIN=0 WEFT_ALGO_GPU_DIRECT_ALLREDUCE_MIN=0 WEFT_ALGO_GPU_DIRECT_REDUCE_SCATTER_MIN=0
    WEFT_ALGO_GPU_DIRECT_ALLGATHER_MIN=0 WEFT_ALGO_GPU_DIRECT_BROADCAST_MIN=0 WEFT_ALGO_GPU_DIRECT_ALLTOALL_MIN=0)
  # The _direct entries give every size, from one element up, to the direct
  # kernels (copy engines off): odd sizes, graphs and 3-4 ranks reach them.
  set(_wag_direct WEFT_ALGO_GPU_DIRECT_ALLREDUCE_MIN=1 WEFT_ALGO_GPU_DIRECT_REDUCE_SCATTER_MIN=1
    WEFT_ALGO_GPU_DIRECT_ALLGATHER_MIN=1 WEFT_ALGO_GPU_DIRECT_BROADCAST_MIN=1 WEFT_ALGO_GPU_DIRECT_ALLTOALL_MIN=1
    WEFT_ALGO_GPU_CE_ALLREDUCE_MIN=0 WEFT_ALGO_GPU_CE_REDUCE_SCATTER_MIN=0 WEFT_ALGO_GPU_CE_ALLGATHER_MIN=0
    WEFT_ALGO_GPU_CE_BROADCAST_MIN=0 WEFT_ALGO_GPU_CE_ALLTOALL_MIN=0)
  # The _cepush entries: the copy-engine paths as in the plain ones, with
  # allreduce-ce on two ranks by pushes only (ce_allreduce_push).
  # The _mismatch entries: a call the last rank makes with another datatype
  # (or, in send/recv, one element more) on a stream fails the comm's next
  # call with -WEFT_ERR_MISMATCH on both ranks; LL kernels, and rings.
  foreach(v graph:graph: multi:multi: rings_two:two:rings rings_graph:graph:rings direct_two:two:direct
      direct_graph:graph:direct direct_multi:multi:direct cepush_two:two:cepush cepush_graph:graph:cepush
      premul:premul: premul_direct:premul:direct mismatch:mismatch: mismatch_rings:mismatch:rings)
    string(REPLACE ":" ";" _v "${v}")
    list(GET _v 0 _name)
    list(GET _v 1 _case)
    list(LENGTH _v _len)
    set(_env "WEFT_CONFIG=${CMAKE_CURRENT_BINARY_DIR}/empty.conf" "WEFT_PLUGIN_PATH=" "CK_DEFAULT_TIMEOUT=900"
      WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1 NCCL_NVLS_ENABLE=0 CK_RUN_CASE=${_case})
    if(v MATCHES ":rings$")
      list(APPEND _env ${_wag_rings})
    elseif(v MATCHES ":direct$")
      list(APPEND _env ${_wag_direct})
    elseif(v MATCHES ":cepush$")
      list(APPEND _env ${_wag_ce16} WEFT_ALGO_GPU_CE_ALLREDUCE_PUSH=1)
    else()
      list(APPEND _env ${_wag_ce16})
    endif()
    add_test(NAME test_algo_gpu_${_name} COMMAND test_algo_gpu)
    set_tests_properties(test_algo_gpu_${_name} PROPERTIES LABELS gpu TIMEOUT 900 SKIP_RETURN_CODE 77
      ENVIRONMENT "${_env}")
  endforeach()

  # The cross-host algorithms (*-hier), their names checked on every
  # allreduce and alltoall: 2 test hosts of one rank over ofi tcp and over ucx
  # tcp; 3 and 4 ranks on 2 hosts (nvlink inside a host, ofi between); and 2
  # ranks of one host with nvlink forbidden (host rings over shm); then 2 and
  # 4 ranks with the test hosts in network namespaces joined by veth (root,
  # `ip netns`), the traffic between them on the veth addresses.
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/hier_ofi.conf "[transport]\nrequire ofi when peer=other-host\n")
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/hier_ucx.conf "[transport]\nrequire ucx when peer=other-host\n")
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/hier_shm.conf "[transport]\nforbid nvlink\n")
  foreach(v ofi:hier:ab ucx:hier:ab ofi:multi:aabb shm:hier: ofi:hier:ab:netns ucx:hier:ab:netns
      ofi:multi:aabb:netns)
    string(REPLACE ":" ";" _v "${v}")
    list(GET _v 0 _tp)
    list(GET _v 1 _case)
    if(NOT TARGET weft-plugin-${_tp})
      continue()
    endif()
    list(LENGTH _v _len)
    set(_hosts "")
    set(_ns "")
    if(_len GREATER 2)
      list(GET _v 2 _hosts)
    endif()
    if(_len GREATER 3)
      set(_ns _netns)
    endif()
    set(_n test_algo_gpu_hier${_ns}_${_tp})
    if(NOT _case STREQUAL "hier")
      set(_n test_algo_gpu_hier${_ns}_${_case}_${_tp})
    endif()
    add_test(NAME ${_n} COMMAND test_algo_gpu)
    set_tests_properties(${_n} PROPERTIES LABELS gpu TIMEOUT 900 SKIP_RETURN_CODE 77
      ENVIRONMENT "WEFT_CONFIG=${CMAKE_CURRENT_BINARY_DIR}/hier_${_tp}.conf;WEFT_PLUGIN_PATH=;CK_DEFAULT_TIMEOUT=900;WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1;WEFT_OFI_ADDR=127.0.0.1;NCCL_NVLS_ENABLE=0;CK_RUN_CASE=${_case};WAG_TEST_HOSTS=${_hosts};WAG_TEST_EXPECT=-hier;WAG_TEST_NETNS=$<BOOL:${_ns}>;WEFT_REQUIRE_NETNS=1")
  endforeach()

  add_executable(weft-algo-gpu-bench ${CMAKE_CURRENT_SOURCE_DIR}/gpu/algo_gpu_bench.cu)
  target_include_directories(weft-algo-gpu-bench PRIVATE ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(weft-algo-gpu-bench PRIVATE weft CUDA::cudart_static ${CMAKE_DL_LIBS} rt Threads::Threads)
  add_dependencies(weft-algo-gpu-bench weft-plugin-algo-gpu weft-plugin-nvlink)
  set_property(TARGET weft-algo-gpu-bench PROPERTY COMPILE_OPTIONS
    "$<$<COMPILE_LANGUAGE:CUDA>:${_wag_tcuda}>")
endif()
