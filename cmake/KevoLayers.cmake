# KevoLayers.cmake — kevo's layers, checked every time CMake configures.
#
# Each top-level folder of host code is one library, and may use only the
# folders listed for it below. Two checks enforce that, before anything is
# compiled:
#   - includes: every #include "folder/..." in a folder's .c, .h and .cu files
#     must name the folder itself or one it may use;
#   - links: no target's link closure may reach a library its folder may not
#     use (the worker's in particular: it runs candidate code, and must never
#     be able to reach the archive, the search, the mutators, LMDB or libcurl).
# Each violation is reported (the file and the include, or the path of
# libraries, that broke the rule), and the configuration then fails.
#
# The declarations below are also the one source of the kevo libraries each
# target links: kevo_link_layers() links exactly the folders a folder may use,
# so CMakeLists.txt names only outside libraries (cJSON, LMDB, CUDA, ...).

# The folders each folder may use (itself included implicitly).
set(KEVO_LAYER_common    "")
set(KEVO_LAYER_problem   common)
set(KEVO_LAYER_protocol  common)
set(KEVO_LAYER_archive   common)
set(KEVO_LAYER_evaluator common problem protocol)
set(KEVO_LAYER_worker    common problem protocol)
set(KEVO_LAYER_mutate    common problem)
set(KEVO_LAYER_search    common problem archive evaluator mutate)
set(KEVO_LAYER_report    common problem archive search)
set(KEVO_LAYER_cli       common problem protocol archive evaluator mutate search report)
set(KEVO_LAYERS common problem protocol archive evaluator worker mutate search report cli)

# Outside libraries only some layers may link.
set(KEVO_EXTERNAL_kevo::lmdb archive)
set(KEVO_EXTERNAL_kevo::curl mutate)

# kevo_link_layers(target folder PUBLIC|PRIVATE): target links the library of
# every folder its folder may use (the worker and the cli are executables: no
# library of their own).
function(kevo_link_layers target folder scope)
  foreach(f IN LISTS KEVO_LAYER_${folder})
    target_link_libraries(${target} ${scope} kevo_${f})
  endforeach()
endfunction()

# The tree the include check reads (tests/layers points it at a made-up one).
if(NOT KEVO_LAYERS_ROOT)
  set(KEVO_LAYERS_ROOT ${PROJECT_SOURCE_DIR})
endif()

# kevo_check_includes(folder): every quoted include of the folder's files.
function(kevo_check_includes folder)
  set(allowed ${folder} ${KEVO_LAYER_${folder}} kevo) # kevo/: the candidate ABI
  file(GLOB_RECURSE files RELATIVE ${KEVO_LAYERS_ROOT}
       ${KEVO_LAYERS_ROOT}/${folder}/*.c ${KEVO_LAYERS_ROOT}/${folder}/*.h
       ${KEVO_LAYERS_ROOT}/${folder}/*.cu)
  foreach(f IN LISTS files)
    file(STRINGS ${KEVO_LAYERS_ROOT}/${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]+\"[^\"]+/")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+\"([^/\"]+)/.*" "\\1" used "${line}")
      if(NOT used IN_LIST allowed AND used IN_LIST KEVO_LAYERS)
        list(JOIN allowed " " may)
        message(SEND_ERROR "kevo layers: ${f} includes \"${used}/...\" (${line}); "
          "${folder}/ may use only: ${may} (cmake/KevoLayers.cmake)")
      endif()
    endforeach()
  endforeach()
endfunction()

# _kevo_link_closure(target path out): every library target's link closure
# reaches, each as "target > lib > lib ..." so a violation names its path.
function(_kevo_link_closure target path out)
  set(found "")
  get_target_property(type ${target} TYPE)
  set(props INTERFACE_LINK_LIBRARIES)
  if(NOT type STREQUAL "INTERFACE_LIBRARY")
    list(APPEND props LINK_LIBRARIES)
  endif()
  foreach(prop IN LISTS props)
    get_target_property(libs ${target} ${prop})
    if(NOT libs)
      continue()
    endif()
    foreach(lib IN LISTS libs)
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" lib "${lib}")
      if(lib MATCHES "^\\$<" OR "${path} > " MATCHES " > ${lib} > ")
        continue()
      endif()
      list(APPEND found "${path} > ${lib}")
      if(TARGET ${lib})
        _kevo_link_closure(${lib} "${path} > ${lib}" sub)
        list(APPEND found ${sub})
      endif()
    endforeach()
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

# _kevo_reach(folder out): the folders folder may use, directly or through
# the folders it uses (a library links what the libraries it uses link).
function(_kevo_reach folder out)
  set(reach ${folder})
  set(todo ${KEVO_LAYER_${folder}})
  while(todo)
    list(POP_FRONT todo f)
    if(NOT f IN_LIST reach)
      list(APPEND reach ${f})
      list(APPEND todo ${KEVO_LAYER_${f}})
    endif()
  endwhile()
  set(${out} ${reach} PARENT_SCOPE)
endfunction()

# kevo_check_links(target folder): target may reach kevo_<layer> only for the
# layers folder may use (directly or through them), and outside libraries
# only through a layer allowed to link them.
function(kevo_check_links target folder)
  _kevo_link_closure(${target} ${target} paths)
  list(REMOVE_DUPLICATES paths)
  _kevo_reach(${folder} allowed)
  foreach(p IN LISTS paths)
    string(REGEX REPLACE ".* > " "" lib "${p}")
    set(bad "")
    if(lib MATCHES "^kevo_(.*)$" AND CMAKE_MATCH_1 IN_LIST KEVO_LAYERS
       AND NOT CMAKE_MATCH_1 IN_LIST allowed)
      set(bad "kevo_${CMAKE_MATCH_1}")
    elseif(DEFINED KEVO_EXTERNAL_${lib})
      set(users ${KEVO_EXTERNAL_${lib}})
      set(ok 0)
      foreach(u IN LISTS users)
        if(u IN_LIST allowed)
          set(ok 1)
        endif()
      endforeach()
      if(NOT ok)
        set(bad ${lib})
      endif()
    endif()
    if(bad)
      list(JOIN allowed " " may)
      message(SEND_ERROR "kevo layers: ${target} (${folder}/) reaches ${bad}: ${p} "
        "(${folder}/ may use only: ${may}; cmake/KevoLayers.cmake)")
    endif()
  endforeach()
endfunction()
