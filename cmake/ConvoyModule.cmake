# One static library per source folder, each able to include only its own headers and those of
# the modules it declares, so that a wrong #include fails to compile instead of growing a cycle.
#
# Headers are included from the repository root ("engine/core/tensor.h"), but the repository root
# is on no target's include path. Each module gets an include root of its own in the build tree,
#   <build>/include/<name>/<dir>  ->  <source>/<dir>   (a symbolic link to the folder)
# and passes it on to its dependents like any PUBLIC include directory. "engine/train/trainer.h"
# therefore resolves only in targets that link convoy_train, directly or through a PUBLIC edge.

# convoy_include_root(<target> <scope> <name> <dir>): gives <target> the include root <name>
# in which "<dir>/..." names the source folder <dir>.
function(convoy_include_root target scope name dir)
  set(root "${PROJECT_BINARY_DIR}/include/${name}")
  set(link "${root}/${dir}")
  get_filename_component(parent "${link}" DIRECTORY)
  file(MAKE_DIRECTORY "${parent}")
  # Replaced on every configure, so that a moved source tree or a changed DIR takes effect.
  file(REMOVE "${link}")
  file(CREATE_LINK "${PROJECT_SOURCE_DIR}/${dir}" "${link}" SYMBOLIC)
  target_include_directories(${target} ${scope} "$<BUILD_INTERFACE:${root}>")
endfunction()

# Flags of every Convoy target: the project's warnings, and a switch over an enum that misses a
# value is an error (an op or dtype added to an enum must be handled everywhere it is switched on).
function(convoy_target_flags target)
  target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -Werror=switch>
      $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Werror=switch --expt-relaxed-constexpr -lineinfo>)
endfunction()

# convoy_link(<target> <PUBLIC|PRIVATE|INTERFACE> <module>...): links Convoy modules by name.
# Modules declared WHOLE_ARCHIVE are linked whole wherever they are used: CMake refuses a link
# line on which one library appears both with and without the feature, so every edge must say it.
function(convoy_link target scope)
  get_property(whole GLOBAL PROPERTY CONVOY_WHOLE_ARCHIVE_MODULES)
  set(libs)
  foreach(module IN LISTS ARGN)
    if(NOT TARGET convoy_${module})
      message(FATAL_ERROR "convoy_link(${target}): no module '${module}' (declare it first)")
    endif()
    if(module IN_LIST whole)
      list(APPEND libs "$<LINK_LIBRARY:WHOLE_ARCHIVE,convoy_${module}>")
    else()
      list(APPEND libs convoy_${module})
    endif()
  endforeach()
  target_link_libraries(${target} ${scope} ${libs})
endfunction()

# convoy_module(<name> DIR <folder>
#               [DEPS <module>...]          modules whose headers this module's headers include
#               [PRIVATE_DEPS <module>...]  modules only this module's sources include
#               [LIBS <target_link_libraries arguments>...]   third-party libraries
#               [EXCLUDE <regex>...]        sources to leave out, matched against paths
#                                           relative to <folder> ("cuda/x.cpp")
#               [WHOLE_ARCHIVE])            every object is kept, referenced or not
# makes the static library convoy_<name> from <folder>'s *.cpp (and *.cu with CUDA), recursively.
function(convoy_module name)
  cmake_parse_arguments(PARSE_ARGV 1 M "WHOLE_ARCHIVE" "DIR" "DEPS;PRIVATE_DEPS;LIBS;EXCLUDE")
  if(NOT M_DIR OR M_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "convoy_module(${name}): DIR is required; unknown: ${M_UNPARSED_ARGUMENTS}")
  endif()
  set(patterns *.cpp)
  if(CONVOY_HAVE_CUDA)
    list(APPEND patterns *.cu)
  endif()
  list(TRANSFORM patterns PREPEND "${PROJECT_SOURCE_DIR}/${M_DIR}/")
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS RELATIVE "${PROJECT_SOURCE_DIR}/${M_DIR}" ${patterns})
  foreach(regex IN LISTS M_EXCLUDE)
    list(FILTER sources EXCLUDE REGEX "${regex}")
  endforeach()
  if(NOT sources)
    message(FATAL_ERROR "convoy_module(${name}): no sources in ${M_DIR}")
  endif()
  list(TRANSFORM sources PREPEND "${PROJECT_SOURCE_DIR}/${M_DIR}/")

  add_library(convoy_${name} STATIC ${sources})
  convoy_include_root(convoy_${name} PUBLIC ${name} ${M_DIR})
  convoy_target_flags(convoy_${name})
  if(M_DEPS)
    convoy_link(convoy_${name} PUBLIC ${M_DEPS})
  endif()
  if(M_PRIVATE_DEPS)
    convoy_link(convoy_${name} PRIVATE ${M_PRIVATE_DEPS})
  endif()
  if(M_LIBS)
    target_link_libraries(convoy_${name} ${M_LIBS})
  endif()
  if(M_WHOLE_ARCHIVE)
    set_property(GLOBAL APPEND PROPERTY CONVOY_WHOLE_ARCHIVE_MODULES ${name})
  endif()
endfunction()

# convoy_layering_test(<module> ALLOWS <header> FORBIDS <header>...): tests that compile just one
# #include with <module>'s include path, as its sources are compiled: the allowed header (one of
# a dependency) must compile, and each forbidden one must not be found. They guard the mechanism
# above: a repository root on some include path would let every wrong include through again.
function(convoy_layering_test module)
  cmake_parse_arguments(PARSE_ARGV 1 T "" "ALLOWS" "FORBIDS")
  set(includes "$<TARGET_PROPERTY:convoy_${module},INCLUDE_DIRECTORIES>")
  # -include: the header as the first line of an empty file; it is looked up in the working
  # directory first, so the tests run in the build tree, where no engine/ folder is.
  set(compile ${CMAKE_CXX_COMPILER} -std=c++20 -fsyntax-only "-I$<JOIN:${includes},$<SEMICOLON>-I>" -x c++)
  add_test(NAME layering.${module}.allows COMMAND ${compile} -include ${T_ALLOWS} /dev/null
           WORKING_DIRECTORY ${PROJECT_BINARY_DIR} COMMAND_EXPAND_LISTS)
  set_tests_properties(layering.${module}.allows PROPERTIES LABELS layering)
  set(suffix "")
  set(n 1)
  foreach(header IN LISTS T_FORBIDS)
    set(name layering.${module}.forbids${suffix})
    add_test(NAME ${name} COMMAND ${compile} -include ${header} /dev/null
             WORKING_DIRECTORY ${PROJECT_BINARY_DIR} COMMAND_EXPAND_LISTS)
    string(REPLACE "." "\\." forbidden "${header}")
    # GCC: "fatal error: a/b.h: No such file or directory"; Clang: "'a/b.h' file not found".
    set_tests_properties(${name} PROPERTIES
        PASS_REGULAR_EXPRESSION "${forbidden}(: No such file|' file not found)" LABELS layering)
    math(EXPR n "${n} + 1")
    set(suffix ".${n}")
  endforeach()
endfunction()
