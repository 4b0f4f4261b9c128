# SPDX-License-Identifier: Apache-2.0
# install_out_of_tree: what a vendor building out of tree finds after
# `cmake --install`: weft.pc's plugindir and abidir, weftConfig.cmake's
# weft_PLUGIN_DIR and weft_ABI_DIR (read by a consumer project through
# find_package), the frozen 0.2 and 0.0 headers, and the transport skeleton
# built against the installed headers with the frozen 0.2 one first, loading
# as 0.2 from the plugin folder. Included by tests/CMakeLists.txt (registering
# the test) and run by ctest in script mode (performing it).

if(NOT CMAKE_SCRIPT_MODE_FILE)
  if(TARGET weft-info)
    add_test(NAME install_out_of_tree
      COMMAND ${CMAKE_COMMAND}
        -DBUILD=${PROJECT_BINARY_DIR}
        -DSRC=${PROJECT_SOURCE_DIR}
        -DWORK=${CMAKE_CURRENT_BINARY_DIR}/install-out-of-tree
        -DCC=${CMAKE_C_COMPILER}
        -P ${CMAKE_CURRENT_LIST_FILE})
    set_tests_properties(install_out_of_tree PROPERTIES LABELS "unit;example" TIMEOUT 300
      ENVIRONMENT "WEFT_CONFIG=${CMAKE_CURRENT_BINARY_DIR}/empty.conf;WEFT_PLUGIN_PATH=")
  endif()
  return()
endif()

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK}/prefix)
file(REMOVE_RECURSE ${WORK})
run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD} --prefix ${prefix})

# pkg-config's variables, read from the file as pkg-config would expand them.
file(GLOB pc ${prefix}/lib*/pkgconfig/weft.pc ${prefix}/lib/*/pkgconfig/weft.pc)
if(NOT pc)
  message(FATAL_ERROR "no weft.pc under ${prefix}")
endif()
list(GET pc 0 pc)
file(READ ${pc} pctext)
foreach(v plugindir abidir)
  if(NOT pctext MATCHES "\n${v}=([^\n]+)")
    message(FATAL_ERROR "weft.pc has no ${v}:\n${pctext}")
  endif()
endforeach()

# A consumer project: find_package(weft) gives the target and both folders.
file(WRITE ${WORK}/consumer/CMakeLists.txt [=[
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(weft REQUIRED CONFIG)
message(STATUS "weft_PLUGIN_DIR=${weft_PLUGIN_DIR}")
message(STATUS "weft_ABI_DIR=${weft_ABI_DIR}")
if(NOT TARGET weft::weft)
  message(FATAL_ERROR "find_package(weft) gave no weft::weft target")
endif()
]=])
run("configuring a find_package(weft) consumer" ${CMAKE_COMMAND} -S ${WORK}/consumer -B ${WORK}/consumer/build
  -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_C_COMPILER=${CC})
if(NOT out MATCHES "weft_PLUGIN_DIR=([^\n]+)")
  message(FATAL_ERROR "weftConfig.cmake sets no weft_PLUGIN_DIR:\n${out}")
endif()
set(plugindir ${CMAKE_MATCH_1})
if(NOT out MATCHES "weft_ABI_DIR=([^\n]+)")
  message(FATAL_ERROR "weftConfig.cmake sets no weft_ABI_DIR:\n${out}")
endif()
set(abidir ${CMAKE_MATCH_1})
foreach(f 0.2/weft/plugin.h 0.0/weft/plugin.h)
  if(NOT EXISTS ${abidir}/${f})
    message(FATAL_ERROR "the frozen header ${abidir}/${f} is not installed")
  endif()
endforeach()
if(NOT EXISTS ${plugindir}/libweft-algo-host.so)
  message(FATAL_ERROR "weft_PLUGIN_DIR=${plugindir} holds no libweft-algo-host.so")
endif()

# The transport skeleton against the installed headers, frozen 0.2 first.
get_filename_component(incdir ${abidir}/../.. ABSOLUTE)
run("building the skeleton against the installed 0.2 header" ${CC} -shared -fPIC -fvisibility=hidden
  -Wno-missing-prototypes -I${abidir}/0.2 -I${incdir} -o ${WORK}/libweft-skeleton.so
  ${SRC}/examples/plugin-skeleton/skeleton.c)
file(GLOB info ${prefix}/bin/weft-info)
run("weft-info" ${CMAKE_COMMAND} -E env WEFT_PLUGIN_PATH=${WORK} ${info})
if(NOT out MATCHES "\n +skeleton +transport +ABI 0\\.2 ")
  message(FATAL_ERROR "the installed weft-info does not load the 0.2 skeleton:\n${out}")
endif()
message(STATUS "install: pkg-config and CMake name the plugin and ABI folders; a 0.2 plugin builds against them")
