# The CUDA backend plugin: libweft-cuda.so beside the weft binary, built whenever nvcc exists (on PATH,
# in CUDACXX, CUDA_PATH or /usr/local/cuda), so that the plugin compiles in CI without a GPU. It links
# the CUDA runtime statically (it loads the driver itself, so the plugin loads without one and says so)
# and does not link cuBLAS at all: src/backends/cuda/cuda_blas.c dlopens it once a device is found, so
# that a machine without a GPU does not pay for loading it. Included from the top CMakeLists.txt;
# WEFT_CUDA=OFF skips it.
option(WEFT_CUDA "build the CUDA backend plugin when nvcc is found" ON)
set(WEFT_CUDA_ARCHITECTURES "75;90" CACHE STRING
    "CUDA architectures: sm_75 (nvcc 13's oldest and default, whose PTX also JIT-compiles on newer GPUs) and sm_90 (H100/H200)")

# Sanitizer builds skip it: the device code and the static runtime are not instrumented, and the
# release build already compiles and loads it.
if(WEFT_CUDA AND WEFT_SANITIZE)
  message(STATUS "CUDA backend: not built in sanitizer (${WEFT_SANITIZE}) builds")
  set(WEFT_CUDA OFF)
endif()

if(WEFT_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(WEFT_NVCC nvcc HINTS ENV CUDA_PATH ENV CUDA_HOME PATH_SUFFIXES bin
                 PATHS /usr/local/cuda/bin /usr/local/cuda)
    if(WEFT_NVCC)
      set(ENV{CUDACXX} ${WEFT_NVCC})
    endif()
  endif()
  # check_language compiles a test project first, so an nvcc that cannot work with this host compiler
  # leaves the plugin out instead of failing the whole configure
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES ${WEFT_CUDA_ARCHITECTURES})
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit)
  endif()
endif()

if(WEFT_CUDA AND CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND AND TARGET CUDA::cublas AND TARGET CUDA::cudart_static)
  file(GLOB WEFT_CUDA_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/../src/backends/cuda/*.c
                                                ${CMAKE_CURRENT_LIST_DIR}/../src/backends/cuda/*.cu)
  add_library(weft-cuda SHARED ${WEFT_CUDA_SOURCES})
  set_target_properties(weft-cuda PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}
    C_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden
    CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
    CUDA_RUNTIME_LIBRARY Static
    POSITION_INDEPENDENT_CODE ON
    # the RUNPATH that cuda_blas.c's dlopen of cuBLAS searches (and cuDNN's, when it is in the toolkit):
    # found where the toolkit is, also when that folder is not in the loader's path
    BUILD_WITH_INSTALL_RPATH ON INSTALL_RPATH "${CUDAToolkit_LIBRARY_DIR}")
  # The project's directory-wide options (-Wall ..., -fsanitize=...) are gcc flags that nvcc rejects:
  # keep them for the C files only.
  get_target_property(weft_cuda_opts weft-cuda COMPILE_OPTIONS)
  if(weft_cuda_opts)
    set(weft_cuda_c_opts "")
    foreach(o IN LISTS weft_cuda_opts)
      list(APPEND weft_cuda_c_opts "$<$<COMPILE_LANGUAGE:C>:${o}>")
    endforeach()
    set_target_properties(weft-cuda PROPERTIES COMPILE_OPTIONS "${weft_cuda_c_opts}")
  endif()
  # --threads: nvcc compiles the architectures in parallel
  target_compile_options(weft-cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall --threads=0>)
  target_include_directories(weft-cuda PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../include ${CMAKE_CURRENT_LIST_DIR}/../src
                                               ${CUDAToolkit_INCLUDE_DIRS})
  # libcudart_static.a needs dl, rt and pthread; the target brings them
  # cuBLAS only for its headers (the toolkit's include folder, above): it is loaded at run time
  target_link_libraries(weft-cuda PRIVATE CUDA::cudart_static Threads::Threads m ${CMAKE_DL_LIBS})
  # a plugin may use only the host table: an undefined libweft symbol fails the link, not the dlopen;
  # the static runtime's symbols stay private to the plugin
  target_link_options(weft-cuda PRIVATE -Wl,--exclude-libs,ALL)
  target_link_options(weft-cuda PRIVATE -Wl,--no-undefined)
  install(TARGETS weft-cuda LIBRARY DESTINATION ${WEFT_PLUGIN_DESTINATION})
  message(STATUS "CUDA backend: nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}")
elseif(WEFT_CUDA)
  message(STATUS "nvcc or the CUDA toolkit (cudart_static, cuBLAS) not found: the CUDA backend is not built")
endif()
