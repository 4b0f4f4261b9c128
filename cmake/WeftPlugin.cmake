# SPDX-License-Identifier: Apache-2.0
# Helpers for plugins: build one as a MODULE, or skip it with a reason.
# A plugin named in WEFT_REQUIRE_PLUGINS (or every plugin, with 'all') that is
# skipped fails the configure instead.

string(REPLACE "," ";" WEFT_REQUIRE_PLUGINS_LIST "${WEFT_REQUIRE_PLUGINS}")
set_property(GLOBAL PROPERTY WEFT_BUILT_PLUGINS "")
set_property(GLOBAL PROPERTY WEFT_SKIPPED_PLUGINS "")

function(weft_plugin_required name out)
  if("all" IN_LIST WEFT_REQUIRE_PLUGINS_LIST OR "${name}" IN_LIST WEFT_REQUIRE_PLUGINS_LIST)
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()

# weft_skip_plugin(<name> <reason>)
function(weft_skip_plugin name reason)
  weft_plugin_required(${name} req)
  if(req)
    message(FATAL_ERROR "weft: plugin '${name}' is required (WEFT_REQUIRE_PLUGINS) but cannot be built: ${reason}")
  endif()
  message(STATUS "weft: skipping plugin '${name}': ${reason}")
  set_property(GLOBAL APPEND PROPERTY WEFT_SKIPPED_PLUGINS ${name})
endfunction()

# weft_add_plugin(<name> SOURCES ... [LIBS ...] [INCLUDES ...] [NO_INSTALL])
# Builds libweft-<name>.so into the build tree's plugin folder, hidden
# visibility, exporting only weft_plugin_init.
function(weft_add_plugin name)
  cmake_parse_arguments(P "NO_INSTALL" "" "SOURCES;LIBS;INCLUDES" ${ARGN})
  set(tgt weft-plugin-${name})
  add_library(${tgt} MODULE ${P_SOURCES})
  set_target_properties(${tgt} PROPERTIES
    OUTPUT_NAME weft-${name}
    PREFIX lib
    LIBRARY_OUTPUT_DIRECTORY ${WEFT_PLUGIN_BUILD_DIR}
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden)
  target_include_directories(${tgt} PRIVATE ${PROJECT_SOURCE_DIR}/include ${P_INCLUDES})
  target_link_libraries(${tgt} PRIVATE ${P_LIBS})
  # A plugin must not depend on core symbols: every core service comes through
  # struct weft_core_api. -z defs catches an accidental reference at link time.
  target_link_options(${tgt} PRIVATE -Wl,-z,defs)
  if(NOT P_NO_INSTALL)
    install(TARGETS ${tgt} LIBRARY DESTINATION ${WEFT_PLUGIN_INSTALL_DIR})
    set_property(GLOBAL APPEND PROPERTY WEFT_BUILT_PLUGINS ${name})
  endif()
endfunction()

# Called once at the end: a required plugin that no subdirectory built or
# skipped is a typo in WEFT_REQUIRE_PLUGINS, and that must not pass silently.
function(weft_check_required_plugins)
  get_property(built GLOBAL PROPERTY WEFT_BUILT_PLUGINS)
  get_property(skipped GLOBAL PROPERTY WEFT_SKIPPED_PLUGINS)
  foreach(p IN LISTS WEFT_REQUIRE_PLUGINS_LIST)
    if(NOT p STREQUAL "all" AND NOT p IN_LIST built AND NOT p IN_LIST skipped)
      message(FATAL_ERROR "weft: WEFT_REQUIRE_PLUGINS names '${p}', which is no plugin of this tree (built: ${built})")
    endif()
  endforeach()
  message(STATUS "weft: plugins built: ${built}")
  if(skipped)
    message(STATUS "weft: plugins skipped: ${skipped}")
  endif()
endfunction()
