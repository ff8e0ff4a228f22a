# KevoDeps.cmake — finds kevo's system dependencies and says exactly what is
# missing. Headers and libraries are found with find_path/find_library, so a
# private prefix (CMAKE_PREFIX_PATH) works as well as the system one.

set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)

# kv_require_lib(<target> <header> <library> <debian package> <what>)
function(kv_require_lib target header library package what)
  string(MAKE_C_IDENTIFIER "${target}" id)
  find_path(${id}_INCLUDE_DIR ${header})
  find_library(${id}_LIBRARY ${library})
  if(NOT ${id}_INCLUDE_DIR OR NOT ${id}_LIBRARY)
    set(missing "")
    if(NOT ${id}_INCLUDE_DIR)
      list(APPEND missing "header ${header}")
    endif()
    if(NOT ${id}_LIBRARY)
      list(APPEND missing "library lib${library}")
    endif()
    message(FATAL_ERROR
      "kevo needs ${what}: ${missing} not found. "
      "Install the Debian/Ubuntu package ${package} (scripts/setup.sh does), "
      "or point CMAKE_PREFIX_PATH at a prefix that has it.")
  endif()
  add_library(${target} UNKNOWN IMPORTED GLOBAL)
  set_target_properties(${target} PROPERTIES
    IMPORTED_LOCATION "${${id}_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${${id}_INCLUDE_DIR}")
  message(STATUS "kevo: ${what}: ${${id}_LIBRARY}")
endfunction()

kv_require_lib(kevo::lmdb lmdb.h lmdb liblmdb-dev "LMDB")
kv_require_lib(kevo::cjson cjson/cJSON.h cjson libcjson-dev "cJSON")
kv_require_lib(kevo::curl curl/curl.h curl libcurl4-openssl-dev "libcurl")
kv_require_lib(kevo::zstd zstd.h zstd libzstd-dev "zstd (libzstd)")
kv_require_lib(kevo::crypto openssl/evp.h crypto libssl-dev "OpenSSL's libcrypto")
# Debian and Ubuntu put OpenSSL's generated headers (openssl/configuration.h)
# in the multiarch folder, which the compiler searches under /usr only: name
# it, for a libssl-dev unpacked into a private prefix (scripts/gpu-deps.sh).
find_path(kevo_crypto_conf_INCLUDE_DIR openssl/configuration.h
  PATH_SUFFIXES include/${CMAKE_LIBRARY_ARCHITECTURE})
if(NOT kevo_crypto_conf_INCLUDE_DIR)
  message(FATAL_ERROR
    "kevo needs OpenSSL >= 3's headers: openssl/configuration.h not found. "
    "Install the Debian/Ubuntu package libssl-dev (scripts/setup.sh does), "
    "or point CMAKE_PREFIX_PATH at a prefix that has it.")
endif()
set_property(TARGET kevo::crypto APPEND PROPERTY
  INTERFACE_INCLUDE_DIRECTORIES "${kevo_crypto_conf_INCLUDE_DIR}")

# CUDA toolkit and NCCL: the evaluator, references and patterns need them.
find_package(CUDAToolkit)
if(NOT CUDAToolkit_FOUND)
  message(FATAL_ERROR
    "kevo needs the CUDA toolkit (nvcc, cudart, cuBLAS): not found. Install CUDA 12.8 or newer "
    "and put its bin/ on PATH (or set CUDAToolkit_ROOT).")
endif()
if(NOT CUDAToolkit_NVCC_EXECUTABLE)
  find_program(CUDAToolkit_NVCC_EXECUTABLE nvcc HINTS ${CUDAToolkit_BIN_DIR})
endif()
if(NOT CUDAToolkit_NVCC_EXECUTABLE)
  message(FATAL_ERROR "kevo needs nvcc, the CUDA compiler: not found in ${CUDAToolkit_BIN_DIR} or on PATH.")
endif()
message(STATUS "kevo: CUDA ${CUDAToolkit_VERSION}, nvcc ${CUDAToolkit_NVCC_EXECUTABLE}")

find_path(NCCL_INCLUDE_DIR nccl.h HINTS $ENV{NCCL_HOME}/include ${CUDAToolkit_INCLUDE_DIRS})
find_path(NCCL_DEVICE_INCLUDE_DIR nccl_device.h HINTS $ENV{NCCL_HOME}/include ${CUDAToolkit_INCLUDE_DIRS})
find_library(NCCL_LIBRARY nccl HINTS $ENV{NCCL_HOME}/lib ${CUDAToolkit_LIBRARY_DIR})
if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY OR NOT NCCL_DEVICE_INCLUDE_DIR)
  set(missing "")
  if(NOT NCCL_INCLUDE_DIR)
    list(APPEND missing "header nccl.h")
  endif()
  if(NOT NCCL_DEVICE_INCLUDE_DIR)
    list(APPEND missing "header nccl_device.h (the device API of NCCL >= 2.28)")
  endif()
  if(NOT NCCL_LIBRARY)
    list(APPEND missing "library libnccl")
  endif()
  message(FATAL_ERROR
    "kevo needs NCCL >= 2.28 with its device API: ${missing} not found. "
    "Install libnccl2 and libnccl-dev from NVIDIA's repository, or set NCCL_HOME.")
endif()
add_library(kevo::nccl UNKNOWN IMPORTED GLOBAL)
set_target_properties(kevo::nccl PROPERTIES
  IMPORTED_LOCATION "${NCCL_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
message(STATUS "kevo: NCCL ${NCCL_LIBRARY}")
