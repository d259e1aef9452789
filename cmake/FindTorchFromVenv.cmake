# Locates LibTorch. Order: an explicit Torch_DIR / CMAKE_PREFIX_PATH, else the
# torch wheel in the project's .venv (or the python3 on PATH, as on the lent GPU
# machines). Sets XSAGPT_HAVE_CUDA when the LibTorch found was built with CUDA
# and a CUDA toolkit is available to compile against it.
if(NOT Torch_DIR)
  find_program(XSAGPT_PYTHON NAMES python3 python
               HINTS "${CMAKE_SOURCE_DIR}/.venv/bin" NO_DEFAULT_PATH)
  if(NOT XSAGPT_PYTHON)
    find_program(XSAGPT_PYTHON NAMES python3 python)
  endif()
  if(XSAGPT_PYTHON)
    execute_process(
      COMMAND "${XSAGPT_PYTHON}" -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
      OUTPUT_VARIABLE _torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE _torch_rc ERROR_QUIET)
    if(_torch_rc EQUAL 0 AND _torch_prefix)
      list(APPEND CMAKE_PREFIX_PATH "${_torch_prefix}")
      message(STATUS "xsagpt: LibTorch from ${XSAGPT_PYTHON} (${_torch_prefix})")
    endif()
  endif()
endif()

# Device code is compiled for TORCH_CUDA_ARCH_LIST (PyTorch's cmake turns it into
# -gencode flags and ignores CMAKE_CUDA_ARCHITECTURES). Unless it is set, that is the
# GPUs this machine has (nvidia-smi), so a GPU build compiles each kernel once;
# a machine without a GPU compiles for Hopper (sm_90, the H100/H200 the paper sizes
# target) so the kernels still build and link and nothing rots unseen. Set e.g.
# TORCH_CUDA_ARCH_LIST="8.0;9.0" to build on a login node for other GPUs.
if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST} AND NOT TORCH_CUDA_ARCH_LIST)
  set(TORCH_CUDA_ARCH_LIST "9.0")
  find_program(XSAGPT_NVIDIA_SMI nvidia-smi)
  if(XSAGPT_NVIDIA_SMI)
    execute_process(COMMAND "${XSAGPT_NVIDIA_SMI}" --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE _caps RESULT_VARIABLE _smi_rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(_smi_rc EQUAL 0 AND _caps MATCHES "^[0-9]")
      string(REPLACE "\n" ";" _caps "${_caps}")
      list(REMOVE_DUPLICATES _caps)
      set(TORCH_CUDA_ARCH_LIST "${_caps}")
    endif()
  endif()
endif()

find_package(Torch REQUIRED)
message(STATUS "xsagpt: Torch ${Torch_VERSION} libraries: ${TORCH_LIBRARIES}")

separate_arguments(XSAGPT_TORCH_CXX_FLAGS UNIX_COMMAND "${TORCH_CXX_FLAGS}")
set(XSAGPT_HAVE_CUDA OFF)
if(TARGET torch_cuda OR TORCH_CUDA_LIBRARIES)
  set(XSAGPT_HAVE_CUDA ON)
endif()
