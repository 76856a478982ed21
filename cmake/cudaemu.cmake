# The CUDA plugin on the CPU (WEFT_CUDA_EMU=ON): the same sources as cmake/cuda.cmake builds with nvcc,
# compiled by the host compilers against tests/cudaemu's headers (the CUDA runtime, cuBLAS, half types,
# device-side built-ins) and linked with its runtime instead of libcudart and cuBLAS, into
# BUILD/cudaemu/libweft-cuda.so. No nvcc, no CUDA library. tests/cudaemu/README.md says what it checks.
option(WEFT_CUDA_EMU "build the CUDA plugin against the CPU emulator in tests/cudaemu (BUILD/cudaemu)" OFF)

if(WEFT_CUDA_EMU AND WEFT_SANITIZE)
  # the coroutines that run a block's threads switch stacks behind the sanitizers' backs
  message(STATUS "CUDA emulator: not built in sanitizer (${WEFT_SANITIZE}) builds")
elseif(WEFT_CUDA_EMU)
  enable_language(CXX)
  find_program(WEFT_EMU_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
  if(NOT WEFT_EMU_PYTHON)
    find_program(WEFT_EMU_PYTHON NAMES python3 REQUIRED)
  endif()
  set(emu_dir ${CMAKE_CURRENT_LIST_DIR}/../tests/cudaemu)
  set(cu_dir ${CMAKE_CURRENT_LIST_DIR}/../src/backends/cuda)
  set(gen_dir ${PROJECT_BINARY_DIR}/cudaemu/gen)
  file(MAKE_DIRECTORY ${gen_dir})
  file(GLOB emu_c_sources CONFIGURE_DEPENDS ${cu_dir}/*.c)
  file(GLOB emu_cu_sources CONFIGURE_DEPENDS ${cu_dir}/*.cu ${cu_dir}/*.cuh)
  file(GLOB emu_headers CONFIGURE_DEPENDS ${emu_dir}/include/*.h)
  # each .cu (and .cuh, for `extern __shared__`) rewritten into the build folder: launches become calls
  set(emu_gen_sources "")
  set(emu_gen_cc "")
  foreach(src IN LISTS emu_cu_sources)
    get_filename_component(name ${src} NAME)
    if(name MATCHES "\\.cu$")
      set(out ${gen_dir}/${name}.cc)
      list(APPEND emu_gen_cc ${out})
    else()
      set(out ${gen_dir}/${name})
    endif()
    add_custom_command(OUTPUT ${out}
      COMMAND ${WEFT_EMU_PYTHON} ${emu_dir}/rewrite_cu.py ${src} ${out}
      DEPENDS ${src} ${emu_dir}/rewrite_cu.py
      COMMENT "cudaemu: rewriting ${name}" VERBATIM)
    list(APPEND emu_gen_sources ${out})
  endforeach()
  # the emulator's NVRTC compiles run-time generated kernels with this build's C++ compiler against the
  # emulation headers of the source tree
  get_filename_component(emu_include_dir ${emu_dir}/include ABSOLUTE)
  set(emu_runtime_sources ${emu_dir}/cudaemu_runtime.cc ${emu_dir}/cudaemu_nvrtc.cc)
  set_source_files_properties(${emu_dir}/cudaemu_nvrtc.cc PROPERTIES COMPILE_DEFINITIONS
    "CUEMU_HOST_CXX=\"${CMAKE_CXX_COMPILER}\";CUEMU_INCLUDE_DIR=\"${emu_include_dir}\"")
  add_library(weft-cuda-emu SHARED ${emu_c_sources} ${emu_gen_sources} ${emu_runtime_sources})
  set_target_properties(weft-cuda-emu PROPERTIES
    OUTPUT_NAME weft-cuda
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/cudaemu
    C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
    CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON
    POSITION_INDEPENDENT_CODE ON)
  # The directory-wide options include C-only ones (-Werror=implicit-function-declaration, ...): keep
  # them for the C files; the device code gets -Wall, as nvcc's host pass does in cmake/cuda.cmake.
  get_target_property(emu_opts weft-cuda-emu COMPILE_OPTIONS)
  if(emu_opts)
    set(emu_c_opts "")
    foreach(o IN LISTS emu_opts)
      list(APPEND emu_c_opts "$<$<COMPILE_LANGUAGE:C>:${o}>")
    endforeach()
    set_target_properties(weft-cuda-emu PROPERTIES COMPILE_OPTIONS "${emu_c_opts}")
  endif()
  target_compile_options(weft-cuda-emu PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -fno-math-errno>)
  # device code sees the emulated built-ins without including anything (nvcc includes cuda_runtime.h)
  set_source_files_properties(${emu_gen_cc} PROPERTIES LANGUAGE CXX COMPILE_OPTIONS "-include;cuda_runtime.h"
                              OBJECT_DEPENDS "${emu_headers}")
  target_compile_definitions(weft-cuda-emu PRIVATE WEFT_CUDA_EMU=1)
  # the emulation headers first, so that they shadow any installed toolkit's; the rewritten .cuh next
  # to the rewritten .cu, the plain headers from the plugin's folder
  target_include_directories(weft-cuda-emu BEFORE PRIVATE ${emu_dir}/include)
  target_include_directories(weft-cuda-emu PRIVATE ${gen_dir} ${cu_dir} ${CMAKE_CURRENT_LIST_DIR}/../include
                                                   ${CMAKE_CURRENT_LIST_DIR}/../src)
  target_link_libraries(weft-cuda-emu PRIVATE Threads::Threads m ${CMAKE_DL_LIBS})
  # as the real plugin: only the host table, no libweft symbol
  target_link_options(weft-cuda-emu PRIVATE -Wl,--no-undefined)

  # the emulator's own test (barriers, warp collectives, half rounding, cuBLAS, error paths, NVRTC and
  # library loading), through the same rewrite
  add_custom_command(OUTPUT ${gen_dir}/selftest.cu.cc
    COMMAND ${WEFT_EMU_PYTHON} ${emu_dir}/rewrite_cu.py ${emu_dir}/selftest.cu ${gen_dir}/selftest.cu.cc
    DEPENDS ${emu_dir}/selftest.cu ${emu_dir}/rewrite_cu.py
    COMMENT "cudaemu: rewriting selftest.cu" VERBATIM)
  add_executable(cudaemu_selftest ${gen_dir}/selftest.cu.cc ${emu_runtime_sources})
  set_source_files_properties(${gen_dir}/selftest.cu.cc PROPERTIES LANGUAGE CXX
                              COMPILE_OPTIONS "-include;cuda_runtime.h" OBJECT_DEPENDS "${emu_headers}")
  set_target_properties(cudaemu_selftest PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/cudaemu
                        CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON COMPILE_OPTIONS "")
  target_compile_options(cudaemu_selftest PRIVATE -Wall)
  target_include_directories(cudaemu_selftest BEFORE PRIVATE ${emu_dir}/include)
  target_link_libraries(cudaemu_selftest PRIVATE Threads::Threads m ${CMAKE_DL_LIBS})
  message(STATUS "CUDA emulator: the CUDA plugin's sources on the CPU in ${PROJECT_BINARY_DIR}/cudaemu")
endif()
