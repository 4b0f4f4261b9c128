# SPDX-License-Identifier: Apache-2.0
# Communicator layer (core/comm.c, mem.c, conn.c, sem.c, port.c) beyond the
# transport conformance suite (conformance.cmake): several comms and several
# ranks per process, launcher environments, transport choice. Uses ofi as the
# transport that any build with libfabric has.
if(TARGET weft-plugin-ofi)
  weft_add_test(test_comm SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_comm.c LABELS mp TIMEOUT 120)
endif()
