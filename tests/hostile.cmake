# SPDX-License-Identifier: Apache-2.0
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

# test_hostile_peer: rank 0 is a test-only speaker of the bootstrap protocol
# (hostile_peer.c, with the core's SHA-256 compiled in) that holds the job
# secret and, after the rendezvous, sends malformed frames; rank 1, a real
# rank, must drop it with an error naming the problem, never obey, never hang.
if(TARGET weft-plugin-ofi)
  weft_add_test(test_hostile_peer SOURCES test_hostile_peer.c hostile_peer.c ${PROJECT_SOURCE_DIR}/core/sha256.c
    LABELS mp TIMEOUT 300)
  add_dependencies(test_hostile_peer weft-plugin-ofi)
endif()
