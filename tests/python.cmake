# SPDX-License-Identifier: Apache-2.0
# python_numpy: the Python package (python/) as a user installs it, in a venv
# of Debian's python3, tested by forked ranks over shm and ofi's tcp against
# numpy (python/tests/venv-test.sh says how). It skips (77) only where venv or
# numpy is missing; tools/deps.sh installs both.
# A sanitized libweft.so cannot be loaded into an uninstrumented python3 (the
# sanitizer runtime must come first in the process), so sanitized builds leave
# the test out.
if(TARGET weft-plugin-shm AND TARGET weft-plugin-algo-host AND NOT WEFT_SANITIZE)
  if(EXISTS /usr/bin/python3)
    set(_weft_py /usr/bin/python3) # Debian's, whose site-packages hold python3-numpy
  else()
    find_program(_weft_py python3)
  endif()
  set(WEFT_TEST_PYTHON "${_weft_py}" CACHE FILEPATH "python3 whose venv runs the Python package's test")
  add_test(NAME python_numpy
    COMMAND bash ${PROJECT_SOURCE_DIR}/python/tests/venv-test.sh ${WEFT_TEST_PYTHON}
      ${CMAKE_CURRENT_BINARY_DIR}/python $<TARGET_FILE:weft>)
  # weft_add_test's environment, less WEFT_UCX_NET_DEVICES: the ranks keep
  # ucx out (WEFT_CORE_PLUGINS), so it would be warned about as unknown.
  set_tests_properties(python_numpy PROPERTIES LABELS "mp;python" TIMEOUT 240 SKIP_RETURN_CODE 77
    ENVIRONMENT "WEFT_CONFIG=${CMAKE_CURRENT_BINARY_DIR}/empty.conf;WEFT_PLUGIN_PATH=;WEFT_CORE_BOOTSTRAP_ADDR=127.0.0.1")
endif()
