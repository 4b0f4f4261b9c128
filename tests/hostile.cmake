# Hostile input beyond tests/hardening.cmake (see docs/reliability.md).
# test_hostile_wire: the GPU transports' peer-input checks (nvlink_wire.c,
# xgmi_wire.h: pure C, no device, no CUDA or HIP needed), with the inputs
# the fuzzers and review found kept in fuzz/corpus/nvlink/regress-*.
weft_add_test(test_hostile_wire SOURCES test_hostile_wire.c
  ${PROJECT_SOURCE_DIR}/plugins/nvlink/nvlink_wire.c
  LABELS unit TIMEOUT 60)
target_include_directories(test_hostile_wire PRIVATE ${PROJECT_SOURCE_DIR}/plugins/nvlink
  ${PROJECT_SOURCE_DIR}/plugins/xgmi)
target_compile_definitions(test_hostile_wire PRIVATE WEFT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
