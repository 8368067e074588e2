# NVML's header, nvml.h, from PyPI's nvidia-nvml-dev (scripts/setup installs
# it for the system Python, the way it takes cuda-bindings): the sim's NVML
# (tools/sim/nvml.c) and the shim's NVML hooks (src/interpose/nvml_*.c) are
# compiled against it. VS_NVML_INCLUDE_DIR names the folder, else the
# packages' own folders (nvidia/<cuXX>/include) under the Python's
# site-packages are searched.
set(VS_NVML_INCLUDE_DIR "" CACHE PATH "folder of nvml.h (default: PyPI's nvidia-nvml-dev for /usr/bin/python3)")
if(NOT VS_NVML_INCLUDE_DIR)
  execute_process(
    COMMAND /usr/bin/python3 -c "import nvidia; print(';'.join(nvidia.__path__))"
    OUTPUT_VARIABLE vs_nvidia_dirs OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  set(vs_nvml_hints "")
  foreach(d IN LISTS vs_nvidia_dirs)
    file(GLOB vs_found LIST_DIRECTORIES true "${d}/*/include")
    list(APPEND vs_nvml_hints ${vs_found})
  endforeach()
  find_path(VS_NVML_H_DIR nvml.h PATHS ${vs_nvml_hints} NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
  if(NOT VS_NVML_H_DIR)
    message(FATAL_ERROR "nvml.h not found: install PyPI's nvidia-nvml-dev "
      "(/usr/bin/python3 -m pip install --break-system-packages nvidia-nvml-dev, as scripts/setup does) "
      "or set VS_NVML_INCLUDE_DIR")
  endif()
  set(VS_NVML_INCLUDE_DIR ${VS_NVML_H_DIR})
endif()
add_library(nvml_headers INTERFACE)
target_include_directories(nvml_headers SYSTEM INTERFACE ${VS_NVML_INCLUDE_DIR})
