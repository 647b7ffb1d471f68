# Finds what the engine links against. CPU: OpenBLAS (GEMM), zlib (gzip IDX), threads,
# nlohmann-json (every JSON the engine reads or writes, in io/).
# CUDA (optional, ENGINE_CUDA=AUTO|ON|OFF): CUDAToolkit, cuBLAS, cuDNN and NCCL.
# MPI (optional, ENGINE_MPI=AUTO|ON|OFF): Open MPI's C library (Debian: libopenmpi-dev), for
# ranks that meet through mpirun and the --backend mpi collectives.
find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_path(CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas REQUIRED)
include_directories(SYSTEM ${CBLAS_INCLUDE_DIR})

set(ENGINE_HAS_CUDA OFF)
if(NOT ENGINE_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # sm_80 and sm_90 machine code, plus PTX for newer GPUs.
      set(CMAKE_CUDA_ARCHITECTURES 80-real 90)
    endif()
    # One CUDA runtime per process: the shared libcudart that cuBLAS, cuDNN and NCCL use too
    # (CMake's default, cudart_static, would put a second copy beside CUDA::cudart).
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    enable_language(CUDA)
    find_package(CUDAToolkit)
    find_library(CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
    if(CUDAToolkit_FOUND AND CUDNN_LIBRARY AND NCCL_LIBRARY)
      set(ENGINE_HAS_CUDA ON)
    endif()
  endif()
  if(ENGINE_CUDA STREQUAL "ON" AND NOT ENGINE_HAS_CUDA)
    message(FATAL_ERROR "ENGINE_CUDA=ON but CUDAToolkit, cuDNN or NCCL was not found")
  endif()
endif()
message(STATUS "engine: CUDA backend ${ENGINE_HAS_CUDA}")

if(ENGINE_HAS_CUDA)
  # CMake 3.25 knows nvcc's dialect flags only up to C++17; nvcc 12+ takes -std=c++20.
  if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  add_compile_definitions(ENGINE_WITH_CUDA=1)
  # Warnings as errors in device code.
  set(CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS} -Werror all-warnings -Xcompiler=-Wall")
  set(ENGINE_CUDA_LIBRARIES CUDA::cudart CUDA::cublas CUDA::cublasLt ${CUDNN_LIBRARY} ${NCCL_LIBRARY})
endif()

set(ENGINE_HAS_MPI OFF)
if(NOT ENGINE_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS C)
  if(MPI_C_FOUND)
    set(ENGINE_HAS_MPI ON)
    # comm/backends/mpi/ and comm/rendezvous/mpi_meet.cpp compile their MPI code; the rest of the engine asks comm/backends/mpi/mpi_world.h.
    add_compile_definitions(ENGINE_WITH_MPI=1)
  endif()
  if(ENGINE_MPI STREQUAL "ON" AND NOT ENGINE_HAS_MPI)
    message(FATAL_ERROR "ENGINE_MPI=ON but no MPI C library was found "
                        "(Debian: apt-get install libopenmpi-dev openmpi-bin)")
  endif()
endif()
message(STATUS "engine: MPI ${ENGINE_HAS_MPI}")
