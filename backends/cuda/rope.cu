// Rotary position embedding, CUDA kernel. The thread body lives in rope.cuh (shared with the
// host emulation); this file only maps CUDA's block/thread indices onto it.
//
// Loaded by rope_ref.backends.cuda.cupy_kernel with cupy.RawModule (NVRTC), which replaces the
// include line below by the text of rope.cuh. One launch of either kernel rotates one tensor
// or both q and k:
// blocks [0, t[1].first_block) belong to t[0], the rest to t[1]. Each branch below passes a
// statically indexed tensor, so every field is read straight from the kernel parameters.
#include "rope.cuh"

template <class T, bool INTERLEAVED, bool VECTOR>
__global__ void __launch_bounds__(ROPE_BLOCK, ROPE_MIN_BLOCKS) rope_kernel(const RopeParams p) {
  const long long block = blockIdx.x;
  if (rope_tensor_of_block(p, block) == 0) {
    rope_thread_of<T, INTERLEAVED, VECTOR>(p, p.t[0], block, threadIdx.x, blockDim.x);
  } else {
    rope_thread_of<T, INTERLEAVED, VECTOR>(p, p.t[1], block, threadIdx.x, blockDim.x);
  }
}

template <class T, bool INTERLEAVED, bool VECTOR>
__global__ void __launch_bounds__(ROPE_BLOCK, ROPE_MIN_BLOCKS)
    rope_gather_kernel(const RopeParams p) {
  const long long block = blockIdx.x;
  if (rope_tensor_of_block(p, block) == 0) {
    rope_gather_thread_of<T, INTERLEAVED, VECTOR>(p, p.t[0], 0, block, threadIdx.x, blockDim.x);
  } else {
    rope_gather_thread_of<T, INTERLEAVED, VECTOR>(p, p.t[1], 1, block, threadIdx.x, blockDim.x);
  }
}

// NVRTC instantiates only the name expressions the launcher asks for (one module for each
// kernel, compiled on first use); `nvcc -DROPE_INSTANTIATE_ALL -c rope.cu` compiles and checks
// every variant: rope_kernel<T, interleaved, vector> and rope_gather_kernel<...>.
#ifdef ROPE_INSTANTIATE_ALL
#define ROPE_INSTANTIATE(KERNEL, T)                                       \
  template __global__ void KERNEL<T, false, false>(const RopeParams);    \
  template __global__ void KERNEL<T, false, true>(const RopeParams);     \
  template __global__ void KERNEL<T, true, false>(const RopeParams);     \
  template __global__ void KERNEL<T, true, true>(const RopeParams);

ROPE_INSTANTIATE(rope_kernel, rope_f16)
ROPE_INSTANTIATE(rope_kernel, rope_bf16)
ROPE_INSTANTIATE(rope_kernel, float)
ROPE_INSTANTIATE(rope_kernel, double)
ROPE_INSTANTIATE(rope_gather_kernel, rope_f16)
ROPE_INSTANTIATE(rope_gather_kernel, rope_bf16)
ROPE_INSTANTIATE(rope_gather_kernel, float)
ROPE_INSTANTIATE(rope_gather_kernel, double)
#endif
