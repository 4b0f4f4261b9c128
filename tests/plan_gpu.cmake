# SPDX-License-Identifier: Apache-2.0
# algo-plan's device interpreter. What it shares with the CPU interpreter
# (geom.h's offsets, enc.c's encoding of a plan for the kernel) is checked on
# every machine (label unit). The GPU test (label gpu) runs where the pack is
# built with CUDA and the nvlink plugin too: one ctest entry per Check case
# (CK_RUN_CASE), each skipping (77) without a GPU unless WEFT_REQUIRE_GPU=1.
set(_wpg_dir ${PROJECT_SOURCE_DIR}/plugins/algo-plan)
weft_add_test(test_plan_gpu_geom
  SOURCES test_plan_gpu_geom.c ${_wpg_dir}/enc.c ${_wpg_dir}/json.c ${_wpg_dir}/plan.c ${_wpg_dir}/wp_sha256.c
    ${PROJECT_SOURCE_DIR}/core/sha256.c
  LABELS unit TIMEOUT 120)
target_include_directories(test_plan_gpu_geom PRIVATE ${_wpg_dir})
target_compile_definitions(test_plan_gpu_geom PRIVATE
  PLAN_DATA_DIR="${CMAKE_CURRENT_SOURCE_DIR}/data/mscclpp-0.9-plans"
  PLAN_OWN_DIR="${_wpg_dir}/plans")

set(_wpg_srcs "")
if(TARGET weft-plugin-algo-plan)
  get_target_property(_wpg_srcs weft-plugin-algo-plan SOURCES)
endif()
if(TARGET weft-plugin-nvlink AND _wpg_srcs MATCHES "dev\\.cu")
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  weft_add_test(test_plan_gpu SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_plan_gpu.cu LABELS gpu TIMEOUT 900
    LIBS CUDA::cudart_static ${CMAKE_DL_LIBS} rt ENV CK_RUN_CASE=mscclpp)
  target_compile_definitions(test_plan_gpu PRIVATE
    PLAN_DATA_DIR="${CMAKE_CURRENT_SOURCE_DIR}/data/mscclpp-0.9-plans"
    PLAN_OWN_DIR="${_wpg_dir}/plans")
  add_dependencies(test_plan_gpu weft-plugin-algo-plan weft-plugin-nvlink weft-plugin-shm)
  get_directory_property(_wpg_opts COMPILE_OPTIONS)
  set(_wpg_cuda "")
  foreach(o IN LISTS _wpg_opts)
    list(APPEND _wpg_cuda "-Xcompiler=${o}")
  endforeach()
  set_property(TARGET test_plan_gpu PROPERTY COMPILE_OPTIONS
    "$<$<COMPILE_LANGUAGE:C>:${_wpg_opts}>" "$<$<COMPILE_LANGUAGE:CUDA>:${_wpg_cuda}>")
  # weft-plan-gpu-bench: the interpreter against a native kernel doing the
  # same work on one GPU (tools/gpu-check.sh plan runs it).
  add_executable(weft-plan-gpu-bench ${CMAKE_CURRENT_SOURCE_DIR}/test_plan_gpu_bench.cu)
  target_include_directories(weft-plan-gpu-bench PRIVATE ${PROJECT_SOURCE_DIR}/include ${_wpg_dir})
  target_link_libraries(weft-plan-gpu-bench PRIVATE weft CUDA::cudart_static ${CMAKE_DL_LIBS} rt Threads::Threads)
  add_dependencies(weft-plan-gpu-bench weft-plugin-algo-plan weft-plugin-nvlink)
  set_property(TARGET weft-plan-gpu-bench PROPERTY COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:CUDA>:${_wpg_cuda}>")
  foreach(c own port graph)
    add_test(NAME test_plan_gpu_${c} COMMAND test_plan_gpu)
    set_tests_properties(test_plan_gpu_${c} PROPERTIES LABELS gpu TIMEOUT 900 SKIP_RETURN_CODE 77
      ENVIRONMENT "WEFT_CONFIG=${CMAKE_CURRENT_BINARY_DIR}/empty.conf;WEFT_PLUGIN_PATH=;CK_DEFAULT_TIMEOUT=900;WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1;CK_RUN_CASE=${c}")
  endforeach()
endif()
