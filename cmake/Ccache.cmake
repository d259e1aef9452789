# Compiles through ccache when it is installed (scripts/setup.sh installs it), so a
# second clone, a worktree or CI on the same machine reuses the objects already
# built instead of spending half an hour of 2 cores on LibTorch's headers again.
# Paths are hashed relative to the source tree (base_dir) and the precompiled
# header is accepted by ccache (pch_defines, time_macros), which is what lets two
# checkouts in different folders share hits. XSAGPT_CCACHE=OFF turns it off.
option(XSAGPT_CCACHE "compile through ccache when it is found" ON)
if(XSAGPT_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(XSAGPT_CCACHE_PROGRAM ccache)
  if(XSAGPT_CCACHE_PROGRAM)
    set(_launcher "${CMAKE_COMMAND}" -E env
        "CCACHE_BASEDIR=${CMAKE_SOURCE_DIR}" CCACHE_NOHASHDIR=1
        "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
        "${XSAGPT_CCACHE_PROGRAM}")
    set(CMAKE_CXX_COMPILER_LAUNCHER ${_launcher})
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${_launcher})
    message(STATUS "xsagpt: compiling through ccache (${XSAGPT_CCACHE_PROGRAM}); -DXSAGPT_CCACHE=OFF to stop")
  else()
    message(STATUS "xsagpt: ccache not found; every build compiles from scratch")
  endif()
endif()
