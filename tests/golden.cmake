# SPDX-License-Identifier: Apache-2.0
# weft-info's output for the tree's test configs (tests/golden/configs) against
# golden files (tests/golden/expected), after golden.sh normalizes what differs
# between machines. The files list every plugin of a full build, so the tests
# exist only where all of them are built (the main build of CI).
# Regenerate after an intended change: tests/golden/golden.sh <weft-info> <conf> <mode> --update
set(_golden_plugins algo-gpu algo-host algo-plan ib nvlink ofi shm ucx xgmi)
set(_golden_all TRUE)
foreach(p IN LISTS _golden_plugins)
  if(NOT TARGET weft-plugin-${p})
    set(_golden_all FALSE)
  endif()
endforeach()
if(_golden_all)
  set(_gdir ${CMAKE_CURRENT_SOURCE_DIR}/golden)
  file(GLOB _golden_files CONFIGURE_DEPENDS ${_gdir}/expected/*.txt)
  foreach(f IN LISTS _golden_files)
    get_filename_component(n ${f} NAME_WE)
    get_filename_component(m ${f} NAME)
    string(REGEX REPLACE "^[^.]+\\.([^.]+)\\.txt$" "\\1" m ${m})
    add_test(NAME golden_${n}_${m} COMMAND ${_gdir}/golden.sh $<TARGET_FILE:weft-info> ${n} ${m})
    # golden.sh clears the caller's WEFT_* variables and sets what it needs.
    set_tests_properties(golden_${n}_${m} PROPERTIES LABELS unit TIMEOUT 60)
  endforeach()
endif()
