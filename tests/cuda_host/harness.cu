// Host emulation of the CUDA RoPE kernel: the thread body of backends/cuda/rope.cuh, compiled for the
// CPU, run for every block and thread of the grid the launcher plans. Built by
// tests/test_cuda_host.py into a shared library and called through ctypes.
#include <cstddef>

#include "rope.cuh"

namespace {

// Every thread of the grid of rope_kernel (GATHER false) or rope_gather_kernel (true).
template <class T, bool INTERLEAVED, bool VECTOR, bool GATHER>
void run_grid(const RopeParams& p, long long grid, long long block) {
  for (long long b = 0; b < grid; ++b) {
    const int tensor = rope_tensor_of_block(p, b);
    const RopeTensor& t = p.t[tensor];
    for (long long thread = 0; thread < block; ++thread) {
      if (GATHER) {
        rope_gather_thread_of<T, INTERLEAVED, VECTOR>(p, t, tensor, b, thread, block);
      } else {
        rope_thread_of<T, INTERLEAVED, VECTOR>(p, t, b, thread, block);
      }
    }
  }
}

template <class T, bool GATHER>
void run_kernel(const RopeParams& p, int interleaved, int vector, long long grid, long long block) {
  if (interleaved) {
    if (vector) run_grid<T, true, true, GATHER>(p, grid, block);
    else run_grid<T, true, false, GATHER>(p, grid, block);
  } else {
    if (vector) run_grid<T, false, true, GATHER>(p, grid, block);
    else run_grid<T, false, false, GATHER>(p, grid, block);
  }
}

template <class T>
int run_element(const RopeParams& p, int gather, int interleaved, int vector, long long grid,
                long long block) {
  if (gather) run_kernel<T, true>(p, interleaved, vector, grid, block);
  else run_kernel<T, false>(p, interleaved, vector, grid, block);
  return 0;
}

}  // namespace

extern "C" {

// element: index into ("rope_f16", "rope_bf16", "float", "double"); gather: 1 runs the
// gather kernel's threads, 0 the strided-table kernel's.
int rope_host_launch(int gather, int element, int interleaved, int vector, const RopeParams* p,
                     long long grid, long long block) {
  switch (element) {
    case 0: return run_element<rope_f16>(*p, gather, interleaved, vector, grid, block);
    case 1: return run_element<rope_bf16>(*p, gather, interleaved, vector, grid, block);
    case 2: return run_element<float>(*p, gather, interleaved, vector, grid, block);
    case 3: return run_element<double>(*p, gather, interleaved, vector, grid, block);
    default: return -1;
  }
}

// Where thread (block, thread) of the grid works: writes tensor, chunk, head0, x_row, out_row,
// table_row into result[0..5]; returns 0 when the thread has nothing to do.
int rope_host_locate(const RopeParams* p, long long block, long long thread, long long block_dim,
                     long long* result) {
  const int tensor = rope_tensor_of_block(*p, block);
  const RopeTensor& t = p->t[tensor];
  RopeWork w;
  if (!rope_locate(*p, t, (block - t.first_block) * block_dim + thread, &w)) return 0;
  result[0] = tensor;
  result[1] = w.chunk;
  result[2] = w.head0;
  result[3] = w.x_row;
  result[4] = w.out_row;
  result[5] = w.table_row;
  return 1;
}

long long rope_host_params_size(void) { return static_cast<long long>(sizeof(RopeParams)); }

// Byte offsets of the fields, in the launcher's PARAM_FIELDS order.
#define ROPE_TENSOR_OFFSETS(I)                                                          \
  offsetof(RopeParams, t[I].x), offsetof(RopeParams, t[I].out),                        \
  offsetof(RopeParams, t[I].cos), offsetof(RopeParams, t[I].sin),                      \
  offsetof(RopeParams, t[I].n_items), offsetof(RopeParams, t[I].first_block),          \
  offsetof(RopeParams, t[I].heads), offsetof(RopeParams, t[I].heads_per_thread),       \
  offsetof(RopeParams, t[I].head_groups), offsetof(RopeParams, t[I].copy_chunks),      \
  offsetof(RopeParams, t[I].x_head_stride), offsetof(RopeParams, t[I].out_head_stride), \
  offsetof(RopeParams, t[I].x_feat_stride), offsetof(RopeParams, t[I].out_feat_stride), \
  offsetof(RopeParams, t[I].ndim),                                                     \
  offsetof(RopeParams, t[I].shape[0]), offsetof(RopeParams, t[I].shape[1]),            \
  offsetof(RopeParams, t[I].shape[2]), offsetof(RopeParams, t[I].shape[3]),            \
  offsetof(RopeParams, t[I].x_stride[0]), offsetof(RopeParams, t[I].x_stride[1]),      \
  offsetof(RopeParams, t[I].x_stride[2]), offsetof(RopeParams, t[I].x_stride[3]),      \
  offsetof(RopeParams, t[I].out_stride[0]), offsetof(RopeParams, t[I].out_stride[1]),  \
  offsetof(RopeParams, t[I].out_stride[2]), offsetof(RopeParams, t[I].out_stride[3]),  \
  offsetof(RopeParams, t[I].table_stride[0]), offsetof(RopeParams, t[I].table_stride[1]), \
  offsetof(RopeParams, t[I].table_stride[2]), offsetof(RopeParams, t[I].table_stride[3])

long long rope_host_offsets(long long* result, long long capacity) {
  const std::size_t offsets[] = {
      ROPE_TENSOR_OFFSETS(0),
      ROPE_TENSOR_OFFSETS(1),
      offsetof(RopeParams, n_tensors),
      offsetof(RopeParams, head_dim),
      offsetof(RopeParams, n_pairs),
      offsetof(RopeParams, rotary_start),
      offsetof(RopeParams, rot_chunks),
      offsetof(RopeParams, inverse),
      offsetof(RopeParams, positions[0]),
      offsetof(RopeParams, positions[1]),
      offsetof(RopeParams, position_type[0]),
      offsetof(RopeParams, position_type[1]),
      offsetof(RopeParams, position_offset),
      offsetof(RopeParams, capacity),
      offsetof(RopeParams, inv_freq),
      offsetof(RopeParams, factor),
  };
  const long long count = static_cast<long long>(sizeof(offsets) / sizeof(offsets[0]));
  for (long long i = 0; i < count && i < capacity; ++i) result[i] = static_cast<long long>(offsets[i]);
  return count;
}

// The element conversions, exposed for exhaustive tests against NumPy and ml_dtypes.
void rope_host_f16_to_float(const unsigned short* in, float* out, long long n) {
  for (long long i = 0; i < n; ++i) out[i] = rope_f16_to_float(in[i]);
}
void rope_host_f16_from_float(const float* in, unsigned short* out, long long n) {
  for (long long i = 0; i < n; ++i) out[i] = rope_f16_from_float(in[i]);
}
void rope_host_bf16_to_float(const unsigned short* in, float* out, long long n) {
  for (long long i = 0; i < n; ++i) out[i] = rope_bf16_to_float(in[i]);
}
void rope_host_bf16_from_float(const float* in, unsigned short* out, long long n) {
  for (long long i = 0; i < n; ++i) out[i] = rope_bf16_from_float(in[i]);
}

}  // extern "C"
