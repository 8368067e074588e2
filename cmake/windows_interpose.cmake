# The Windows shim (vramshim.dll) and the launcher behind `vramshim.exe run`
# (issue 12, the interposer part). Included by cmake/windows.cmake after the
# concerns (src/platform, common, arena, tenant, explain, tools/vramshim);
# the Linux build never reads it.
#
# vramshim.dll = src/interpose (the same sources as libvramshim.so) over the
# platform layer; the shim's own primitives (vramshim_platform_shim:
# windows/interpose.c with DllMain, the import-table patcher, the loader and
# CreateProcess hooks; windows/inject.c; docs/windows.md) linked whole.
add_subdirectory(src/interpose)

# Exports: what cmake/libvramshim.map lets out on Linux (every hooked cu*
# entry point, the public vramshim_* API), as a .def file written from the
# hook list and include/vramshim.h. dlsym has no Windows counterpart to
# export (GetProcAddress is hooked by import-table patching), and the
# injector needs nothing of the DLL but its DllMain.
set(VS_IP ${PROJECT_SOURCE_DIR}/src/interpose)
file(READ ${VS_IP}/driver/hook_list.h vs_hook_list)
string(FIND "${vs_hook_list}" "#define VS_DRIVER_EXTRAS" vs_extras_at)
string(SUBSTRING "${vs_hook_list}" 0 ${vs_extras_at} vs_hooks_only)
string(REGEX MATCHALL "X\\((cu[A-Za-z0-9_]+)," vs_rows "${vs_hooks_only}")
set(vs_def "LIBRARY vramshim.dll\nEXPORTS\n")
foreach(row ${vs_rows})
  string(REGEX REPLACE "X\\((cu[A-Za-z0-9_]+)," "\\1" name "${row}")
  string(APPEND vs_def "  ${name}\n")
endforeach()
# NVML's hooks (src/interpose/nvml_api.h, VS_NVML_HOOKS): nvmlDeviceGetMemoryInfo*
file(READ ${VS_IP}/driver/nvml_api.h vs_nvml_list)
string(FIND "${vs_nvml_list}" "#define VS_NVML_EXTRAS" vs_nvml_extras_at)
string(SUBSTRING "${vs_nvml_list}" 0 ${vs_nvml_extras_at} vs_nvml_hooks_only)
string(REGEX MATCHALL "X\\(nvmlReturn_t, (nvml[A-Za-z0-9_]+)," vs_nvml_rows "${vs_nvml_hooks_only}")
foreach(row ${vs_nvml_rows})
  string(REGEX REPLACE "X\\(nvmlReturn_t, (nvml[A-Za-z0-9_]+)," "\\1" name "${row}")
  string(APPEND vs_def "  ${name}\n")
endforeach()
file(READ ${PROJECT_SOURCE_DIR}/include/vramshim.h vs_api_h)
string(REGEX MATCHALL "[ *](vramshim_[a-z_]+)\\(" vs_api "${vs_api_h}")
foreach(f ${vs_api})
  string(REGEX REPLACE "[ *](vramshim_[a-z_]+)\\(" "\\1" name "${f}")
  string(APPEND vs_def "  ${name}\n")
endforeach()
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/vramshim.def CONTENT "${vs_def}")

add_library(vramshim SHARED ${PROJECT_BINARY_DIR}/vramshim.def)
set_source_files_properties(${PROJECT_BINARY_DIR}/vramshim.def PROPERTIES GENERATED ON)
target_link_libraries(vramshim PRIVATE
  -Wl,--whole-archive ${VS_INTERPOSE_LIBS} vramshim_platform_shim -Wl,--no-whole-archive
  vramshim_explain vramshim_tenant vramshim_arena vramshim_common vramshim_platform cuda_headers Threads::Threads)
set_target_properties(vramshim PROPERTIES LINKER_LANGUAGE C PREFIX "" OUTPUT_NAME vramshim
  RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR} ARCHIVE_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib)

# vramshim.exe (tools/vramshim): `run` finds the DLL beside it.
target_compile_definitions(vramshim_tool PRIVATE VS_RUN_BIN_TO_SHIM="vramshim.dll")
