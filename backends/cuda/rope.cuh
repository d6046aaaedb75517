// Rotary position embedding: the per-thread body of the CUDA kernel, shared by the device
// kernel (rope.cu) and by a host build that runs every block and thread of the same grid on
// the CPU (the host emulation used by the tests).
//
// Nothing here includes a header, so the file compiles unchanged with NVRTC, nvcc (device and
// host passes) and a plain C++ compiler (where ROPE_HD is just inline).
//
// Work decomposition (planned in Python by rope_ref.backends.cuda.cupy_kernel, see RopeTensor):
//   x has leading axes L and a feature axis of length head_dim. One leading axis, the "head
//   axis", is one along which the cos/sin tables do not change (stride 0): the tables are read
//   once per (token, frequency) and reused for heads_per_thread heads by one thread, and for
//   the other head groups of the same token by neighbouring threads (L1 hits). The remaining
//   leading axes ("rows", at most ROPE_MAX_DIMS after merging) are walked with explicit strides.
//   A work item is (row, head group, chunk); a chunk is ROPE_PAIRS(T) pairs, which is one
//   16-byte vector of x per pair member, or a slice of the pass-through features to copy.
//   Item index = (row * head_groups + head_group) * chunks + chunk: consecutive threads touch
//   consecutive 16-byte vectors of one row. Every index and offset is a 64-bit integer.
//
// Two kernels share this body. rope_kernel reads tables laid out like x's rows (strided,
// broadcast with stride 0). rope_gather_kernel reads each row's position and takes that
// position's row of a cache of tables; a position that is not an integer inside the cache
// gets its cos and sin computed in float64 from inv_freq (as the host builds the cache),
// rounded once to the compute type. Nothing is read outside the cache.
#ifndef ROPE_REF_ROPE_CUH
#define ROPE_REF_ROPE_CUH

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define ROPE_HD __host__ __device__ __forceinline__
#else
#define ROPE_HD inline
#endif

#ifdef __CUDA_ARCH__
#define ROPE_UNROLL _Pragma("unroll")
#else
#define ROPE_UNROLL
#endif

#define ROPE_MAX_DIMS 4
#define ROPE_MAX_HEADS_PER_THREAD 4
#define ROPE_BLOCK 256       // threads per block, at most
#define ROPE_MIN_BLOCKS 3    // resident blocks per SM the register budget must allow

// ---- Launch description (every field 8 bytes: the Python side packs int64 values) --------

struct RopeTensor {
  const void* x;                 // data of x (element type T)
  void* out;                     // data of out (may equal x: in-place)
  const void* cos;               // cos table (float, or double for double x)
  const void* sin;               // sin table, same strides as cos
  long long n_items;             // rows * head_groups * (rot_chunks + copy_chunks)
  long long first_block;         // first blockIdx.x of this tensor in the grid
  long long heads;               // extent of the head axis (1 when there is none)
  long long heads_per_thread;    // 1 .. ROPE_MAX_HEADS_PER_THREAD
  long long head_groups;         // ceil(heads / heads_per_thread)
  long long copy_chunks;         // chunks of pass-through features per row (0 when in-place)
  long long x_head_stride;       // strides in elements
  long long out_head_stride;
  long long x_feat_stride;       // stride of the feature axis (1 on the vector path)
  long long out_feat_stride;
  long long ndim;                // row axes in use, 0 .. ROPE_MAX_DIMS
  long long shape[ROPE_MAX_DIMS];         // row axes, innermost first
  long long x_stride[ROPE_MAX_DIMS];
  long long out_stride[ROPE_MAX_DIMS];
  long long table_stride[ROPE_MAX_DIMS];  // elements of the cos and sin tables
};

struct RopeParams {
  RopeTensor t[2];               // queries and keys (t[1] unused when n_tensors == 1)
  long long n_tensors;
  long long head_dim;            // features per row
  long long n_pairs;             // pairs rotated per row
  long long rotary_start;        // first rotated feature
  long long rot_chunks;          // ceil(n_pairs / ROPE_PAIRS(T))
  long long inverse;             // bits: ROPE_INVERSE (sin negated), ROPE_CROSSED
  // Read by the gather kernel only. There, t[i].cos and t[i].sin are a cache of table rows
  // (row r: the tables of integer position r, n_pairs values each), and t[i].table_stride
  // indexes positions[i], the position of every row of x.
  const void* positions[2];      // positions of t[0] and t[1]
  long long position_type[2];    // ROPE_POSITION_INT32 .. ROPE_POSITION_FLOAT64
  long long position_offset;     // an integer added to every position
  long long capacity;            // rows in the cache: integer positions 0 .. capacity - 1
  const double* inv_freq;        // n_pairs inverse frequencies (float64), for the others
  double factor;                 // attention factor, multiplied into computed cos and sin
};

// Bits of RopeParams::inverse. ROPE_CROSSED: pairs read in the variant's layout are written
// in the other one (interleaved pairs to half order, or back); scalar variant only.
#define ROPE_INVERSE 1
#define ROPE_CROSSED 2

#define ROPE_POSITION_INT32 0
#define ROPE_POSITION_INT64 1
#define ROPE_POSITION_FLOAT32 2
#define ROPE_POSITION_FLOAT64 3

// Where one work item lives: filled by rope_locate, used by the kernel and by the tests.
struct RopeWork {
  long long chunk;       // 0 .. rot_chunks + copy_chunks - 1
  long long head0;       // first head of this thread's group
  long long x_row;       // element offset of (row, head0, feature 0) in x
  long long out_row;     // same in out
  long long table_row;   // element offset of (row, pair 0) in the tables
};

// ---- Element types ------------------------------------------------------------------------

struct rope_f16 { unsigned short bits; };   // IEEE binary16, raw bits
struct rope_bf16 { unsigned short bits; };  // bfloat16, raw bits

struct alignas(16) rope_vec { unsigned int w[4]; };  // one 16-byte vector

// 16-byte load and store, each a single vector instruction on the device.
ROPE_HD rope_vec rope_load16(const void* p) {
  rope_vec v;
#ifdef __CUDA_ARCH__
  const uint4 u = *static_cast<const uint4*>(p);
  v.w[0] = u.x;
  v.w[1] = u.y;
  v.w[2] = u.z;
  v.w[3] = u.w;
#else
  v = *static_cast<const rope_vec*>(p);
#endif
  return v;
}

ROPE_HD void rope_store16(void* p, const rope_vec& v) {
#ifdef __CUDA_ARCH__
  // A uint4 store of values computed lane by lane gets scalarised by the optimiser; PTX does not.
  asm volatile("st.v4.b32 [%0], {%1, %2, %3, %4};"
               :
               : "l"(p), "r"(v.w[0]), "r"(v.w[1]), "r"(v.w[2]), "r"(v.w[3])
               : "memory");
#else
  *static_cast<rope_vec*>(p) = v;
#endif
}

ROPE_HD float rope_float_from_bits(unsigned int u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  union { unsigned int u; float f; } c;
  c.u = u;
  return c.f;
#endif
}

ROPE_HD unsigned int rope_bits_from_float(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  union { float f; unsigned int u; } c;
  c.f = f;
  return c.u;
#endif
}

ROPE_HD double rope_double_from_words(unsigned int lo, unsigned int hi) {
#ifdef __CUDA_ARCH__
  return __hiloint2double(static_cast<int>(hi), static_cast<int>(lo));
#else
  union { unsigned long long u; double d; } c;
  c.u = (static_cast<unsigned long long>(hi) << 32) | lo;
  return c.d;
#endif
}

ROPE_HD void rope_words_from_double(double d, unsigned int* lo, unsigned int* hi) {
#ifdef __CUDA_ARCH__
  *lo = static_cast<unsigned int>(__double2loint(d));
  *hi = static_cast<unsigned int>(__double2hiint(d));
#else
  union { double d; unsigned long long u; } c;
  c.d = d;
  *lo = static_cast<unsigned int>(c.u);
  *hi = static_cast<unsigned int>(c.u >> 32);
#endif
}

// a * b rounded once: never fused into a neighbouring add (the host build does not fuse).
ROPE_HD double rope_mul(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

ROPE_HD double rope_sin(double a) {
#ifdef __CUDA_ARCH__
  return sin(a);
#else
  return __builtin_sin(a);
#endif
}

ROPE_HD double rope_cos(double a) {
#ifdef __CUDA_ARCH__
  return cos(a);
#else
  return __builtin_cos(a);
#endif
}

// binary16 -> float32, exact.
ROPE_HD float rope_f16_to_float(unsigned short h) {
#ifdef __CUDA_ARCH__
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#else
  const unsigned int sign = static_cast<unsigned int>(h & 0x8000u) << 16;
  const unsigned int exponent = (h >> 10) & 0x1Fu;
  unsigned int mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) return rope_float_from_bits(sign | 0x7F800000u | (mantissa << 13));
  if (exponent != 0) return rope_float_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return rope_float_from_bits(sign);
  unsigned int e = 113;  // subnormal: normalise mantissa * 2^-24
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return rope_float_from_bits(sign | (e << 23) | ((mantissa & 0x3FFu) << 13));
#endif
}

// float32 -> binary16, round to nearest even (the PTX cvt.rn on the device).
ROPE_HD unsigned short rope_f16_from_float(float f) {
#ifdef __CUDA_ARCH__
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  const unsigned int u = rope_bits_from_float(f);
  const unsigned int sign = (u >> 16) & 0x8000u;
  const unsigned int a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<unsigned short>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  if (a >= 0x477FF000u) return static_cast<unsigned short>(sign | 0x7C00u);  // >= 65520: inf
  if (a <= 0x33000000u) return static_cast<unsigned short>(sign);            // <= 2^-25: 0
  unsigned int r;
  unsigned int rem;
  unsigned int half;
  if (a < 0x38800000u) {  // subnormal result: round (1.m * 2^(e-127)) / 2^-24
    const unsigned int shift = 126u - (a >> 23);
    const unsigned int m = (a & 0x7FFFFFu) | 0x800000u;
    r = m >> shift;
    rem = m & ((1u << shift) - 1u);
    half = 1u << (shift - 1u);
  } else {
    r = (a - 0x38000000u) >> 13;
    rem = a & 0x1FFFu;
    half = 0x1000u;
  }
  if (rem > half || (rem == half && (r & 1u))) ++r;
  return static_cast<unsigned short>(sign | r);
#endif
}

ROPE_HD float rope_bf16_to_float(unsigned short h) {
  return rope_float_from_bits(static_cast<unsigned int>(h) << 16);
}

// float32 -> bfloat16, round to nearest even; NaN stays a (quiet) NaN.
ROPE_HD unsigned short rope_bf16_from_float(float f) {
  unsigned int u = rope_bits_from_float(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<unsigned short>((u >> 16) | 0x40u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<unsigned short>(u >> 16);
}

ROPE_HD float rope_fma(float a, float b, float c) {
#ifdef __CUDA_ARCH__
  return fmaf(a, b, c);
#else
  return __builtin_fmaf(a, b, c);
#endif
}

ROPE_HD double rope_fma(double a, double b, double c) {
#ifdef __CUDA_ARCH__
  return fma(a, b, c);
#else
  return __builtin_fma(a, b, c);
#endif
}

// Per-type conversions and the packing of ROPE_PAIRS(T) elements into one 16-byte vector.
template <class T> struct rope_traits;

template <> struct rope_traits<rope_f16> {
  typedef float compute;
  static const int per_vec = 8;
  ROPE_HD static float load(rope_f16 v) { return rope_f16_to_float(v.bits); }
  ROPE_HD static rope_f16 store(float f) { rope_f16 v; v.bits = rope_f16_from_float(f); return v; }
  ROPE_HD static float unpack(const rope_vec& v, int i) {
    return rope_f16_to_float(static_cast<unsigned short>(v.w[i / 2] >> (16 * (i % 2))));
  }
  ROPE_HD static void pack(rope_vec& v, int i, float f) {
    const unsigned int bits = rope_f16_from_float(f);
    v.w[i / 2] = (i % 2) ? ((v.w[i / 2] & 0xFFFFu) | (bits << 16)) : bits;
  }
};

template <> struct rope_traits<rope_bf16> {
  typedef float compute;
  static const int per_vec = 8;
  ROPE_HD static float load(rope_bf16 v) { return rope_bf16_to_float(v.bits); }
  ROPE_HD static rope_bf16 store(float f) { rope_bf16 v; v.bits = rope_bf16_from_float(f); return v; }
  ROPE_HD static float unpack(const rope_vec& v, int i) {
    return rope_bf16_to_float(static_cast<unsigned short>(v.w[i / 2] >> (16 * (i % 2))));
  }
  ROPE_HD static void pack(rope_vec& v, int i, float f) {
    const unsigned int bits = rope_bf16_from_float(f);
    v.w[i / 2] = (i % 2) ? ((v.w[i / 2] & 0xFFFFu) | (bits << 16)) : bits;
  }
};

template <> struct rope_traits<float> {
  typedef float compute;
  static const int per_vec = 4;
  ROPE_HD static float load(float v) { return v; }
  ROPE_HD static float store(float f) { return f; }
  ROPE_HD static float unpack(const rope_vec& v, int i) { return rope_float_from_bits(v.w[i]); }
  ROPE_HD static void pack(rope_vec& v, int i, float f) { v.w[i] = rope_bits_from_float(f); }
};

template <> struct rope_traits<double> {
  typedef double compute;
  static const int per_vec = 2;
  ROPE_HD static double load(double v) { return v; }
  ROPE_HD static double store(double f) { return f; }
  ROPE_HD static double unpack(const rope_vec& v, int i) {
    return rope_double_from_words(v.w[2 * i], v.w[2 * i + 1]);
  }
  ROPE_HD static void pack(rope_vec& v, int i, double f) {
    rope_words_from_double(f, &v.w[2 * i], &v.w[2 * i + 1]);
  }
};

#define ROPE_PAIRS(T) (rope_traits<T>::per_vec)

// ---- Index arithmetic ----------------------------------------------------------------------

// q = a / b, r = a % b for 0 <= a, 0 < b; 32-bit division when both fit (the common case).
ROPE_HD void rope_divmod(long long a, long long b, long long* q, long long* r) {
  if (((a | b) >> 32) == 0) {
    const unsigned int ua = static_cast<unsigned int>(a);
    const unsigned int ub = static_cast<unsigned int>(b);
    *q = static_cast<long long>(ua / ub);
    *r = static_cast<long long>(ua % ub);
  } else {
    *q = a / b;
    *r = a % b;
  }
}

// Tensor handled by block `block` of the grid (q's blocks come first, then k's).
ROPE_HD int rope_tensor_of_block(const RopeParams& p, long long block) {
  return (p.n_tensors > 1 && block >= p.t[1].first_block) ? 1 : 0;
}

// Locate work item `item` of tensor t; false when the thread has no work (grid tail).
ROPE_HD bool rope_locate(const RopeParams& p, const RopeTensor& t, long long item, RopeWork* w) {
  if (item < 0 || item >= t.n_items) return false;
  long long rest;
  long long group;
  long long row;
  rope_divmod(item, p.rot_chunks + t.copy_chunks, &rest, &w->chunk);
  rope_divmod(rest, t.head_groups, &row, &group);
  w->head0 = group * t.heads_per_thread;
  long long x_off = w->head0 * t.x_head_stride;
  long long out_off = w->head0 * t.out_head_stride;
  long long table_off = 0;
ROPE_UNROLL
  for (int d = 0; d < ROPE_MAX_DIMS; ++d) {
    if (d < t.ndim) {
      long long index;
      rope_divmod(row, t.shape[d], &row, &index);
      x_off += index * t.x_stride[d];
      out_off += index * t.out_stride[d];
      table_off += index * t.table_stride[d];
    }
  }
  w->x_row = x_off;
  w->out_row = out_off;
  w->table_row = table_off;
  return true;
}

ROPE_HD bool rope_head_active(const RopeTensor& t, const RopeWork& w, int k) {
  return k < t.heads_per_thread && w.head0 + k < t.heads;
}

// ---- Thread bodies -------------------------------------------------------------------------

// Copy pass-through features [0, rotary_start) and [rotary_start + 2 n, head_dim) unchanged.
template <class T>
ROPE_HD void rope_copy_chunk(const RopeParams& p, const RopeTensor& t, const RopeWork& w) {
  const long long width = 2 * ROPE_PAIRS(T);
  const long long n_copy = p.head_dim - 2 * p.n_pairs;
  const long long first = (w.chunk - p.rot_chunks) * width;
  const T* x = static_cast<const T*>(t.x);
  T* out = static_cast<T*>(t.out);
  for (int k = 0; k < ROPE_MAX_HEADS_PER_THREAD; ++k) {
    if (!rope_head_active(t, w, k)) continue;
    for (long long e = first; e < first + width && e < n_copy; ++e) {
      const long long f = e < p.rotary_start ? e : e + 2 * p.n_pairs;
      out[w.out_row + k * t.out_head_stride + f * t.out_feat_stride] =
          x[w.x_row + k * t.x_head_stride + f * t.x_feat_stride];
    }
  }
}

// Rotate one chunk of 16-byte vectors by the given cos/sin of its P pairs (not yet negated
// for inverse): the planner guarantees alignment and n_pairs % P == 0.
template <class T, bool INTERLEAVED>
ROPE_HD void rope_rotate_vector_by(const RopeParams& p, const RopeTensor& t, const RopeWork& w,
                                   typename rope_traits<T>::compute* c,
                                   typename rope_traits<T>::compute* s) {
  typedef rope_traits<T> tr;
  typedef typename tr::compute C;
  const int P = ROPE_PAIRS(T);
  const long long j0 = w.chunk * P;
  if (p.inverse & ROPE_INVERSE) {
ROPE_UNROLL
    for (int i = 0; i < P; ++i) s[i] = -s[i];
  }
  // Feature offsets of the two vectors: (a block, b block) or two halves of 2P features.
  const long long first = INTERLEAVED ? p.rotary_start + 2 * j0 : p.rotary_start + j0;
  const long long second = INTERLEAVED ? first + P : first + p.n_pairs;
  const T* x = static_cast<const T*>(t.x);
  T* out = static_cast<T*>(t.out);
  // All loads of the group first (2 * heads_per_thread vectors in flight), then math, stores.
  rope_vec lo[ROPE_MAX_HEADS_PER_THREAD] = {};
  rope_vec hi[ROPE_MAX_HEADS_PER_THREAD] = {};
ROPE_UNROLL
  for (int k = 0; k < ROPE_MAX_HEADS_PER_THREAD; ++k) {
    if (rope_head_active(t, w, k)) {
      const T* row = x + w.x_row + k * t.x_head_stride;
      lo[k] = rope_load16(row + first);
      hi[k] = rope_load16(row + second);
    }
  }
ROPE_UNROLL
  for (int k = 0; k < ROPE_MAX_HEADS_PER_THREAD; ++k) {
    if (!rope_head_active(t, w, k)) continue;
    rope_vec lo_out = {};
    rope_vec hi_out = {};
ROPE_UNROLL
    for (int i = 0; i < P; ++i) {
      // Element m of the 2P loaded features: m < P in lo, else in hi.
      const int ma = INTERLEAVED ? 2 * i : i;
      const int mb = INTERLEAVED ? 2 * i + 1 : i + P;
      const C a = ma < P ? tr::unpack(lo[k], ma) : tr::unpack(hi[k], ma - P);
      const C b = mb < P ? tr::unpack(lo[k], mb) : tr::unpack(hi[k], mb - P);
      const C ra = rope_fma(a, c[i], -(b * s[i]));
      const C rb = rope_fma(b, c[i], a * s[i]);
      if (ma < P) tr::pack(lo_out, ma, ra); else tr::pack(hi_out, ma - P, ra);
      if (mb < P) tr::pack(lo_out, mb, rb); else tr::pack(hi_out, mb - P, rb);
    }
    T* row = out + w.out_row + k * t.out_head_stride;
    rope_store16(row + first, lo_out);
    rope_store16(row + second, hi_out);
  }
}

// Rotary chunk, 16-byte vectors, tables read at w.table_row: once, for every head of the group.
template <class T, bool INTERLEAVED>
ROPE_HD void rope_rotate_vector(const RopeParams& p, const RopeTensor& t, const RopeWork& w) {
  typedef typename rope_traits<T>::compute C;
  const int P = ROPE_PAIRS(T);
  const int TABLE_VECS = (P * static_cast<int>(sizeof(C))) / 16;
  const long long j0 = w.chunk * P;
  C c[P];
  C s[P];
  const C* cos_row = static_cast<const C*>(t.cos) + w.table_row + j0;
  const C* sin_row = static_cast<const C*>(t.sin) + w.table_row + j0;
  const int per_table_vec = P / TABLE_VECS;
ROPE_UNROLL
  for (int v = 0; v < TABLE_VECS; ++v) {
    const rope_vec cv = rope_load16(cos_row + v * per_table_vec);
    const rope_vec sv = rope_load16(sin_row + v * per_table_vec);
ROPE_UNROLL
    for (int i = 0; i < per_table_vec; ++i) {
      c[v * per_table_vec + i] = rope_traits<C>::unpack(cv, i);
      s[v * per_table_vec + i] = rope_traits<C>::unpack(sv, i);
    }
  }
  rope_rotate_vector_by<T, INTERLEAVED>(p, t, w, c, s);
}

// Rotate pair j of every head of the group by c, s (not yet negated for inverse), one
// element at a time: any alignment, feature stride or n_pairs.
template <class T, bool INTERLEAVED>
ROPE_HD void rope_rotate_pair(const RopeParams& p, const RopeTensor& t, const RopeWork& w,
                              long long j, typename rope_traits<T>::compute c,
                              typename rope_traits<T>::compute s) {
  typedef rope_traits<T> tr;
  typedef typename tr::compute C;
  if (p.inverse & ROPE_INVERSE) s = -s;
  const T* x = static_cast<const T*>(t.x);
  T* out = static_cast<T*>(t.out);
  const long long fa = p.rotary_start + (INTERLEAVED ? 2 * j : j);
  const long long fb = p.rotary_start + (INTERLEAVED ? 2 * j + 1 : j + p.n_pairs);
  // ROPE_CROSSED: the pair is written in the other layout (never in place: the planner
  // gives such a launch a separate output).
  const bool crossed = (p.inverse & ROPE_CROSSED) != 0;
  const long long ga = crossed ? p.rotary_start + (INTERLEAVED ? j : 2 * j) : fa;
  const long long gb = crossed ? p.rotary_start + (INTERLEAVED ? j + p.n_pairs : 2 * j + 1) : fb;
  for (int k = 0; k < ROPE_MAX_HEADS_PER_THREAD; ++k) {
    if (!rope_head_active(t, w, k)) continue;
    const long long xr = w.x_row + k * t.x_head_stride;
    const long long orow = w.out_row + k * t.out_head_stride;
    const C a = tr::load(x[xr + fa * t.x_feat_stride]);
    const C b = tr::load(x[xr + fb * t.x_feat_stride]);
    out[orow + ga * t.out_feat_stride] = tr::store(rope_fma(a, c, -(b * s)));
    out[orow + gb * t.out_feat_stride] = tr::store(rope_fma(b, c, a * s));
  }
}

// Rotary chunk, one element at a time, tables read at w.table_row.
template <class T, bool INTERLEAVED>
ROPE_HD void rope_rotate_scalar(const RopeParams& p, const RopeTensor& t, const RopeWork& w) {
  typedef typename rope_traits<T>::compute C;
  const int P = ROPE_PAIRS(T);
  const C* cos_t = static_cast<const C*>(t.cos);
  const C* sin_t = static_cast<const C*>(t.sin);
  for (int i = 0; i < P; ++i) {
    const long long j = w.chunk * P + i;
    if (j >= p.n_pairs) break;
    rope_rotate_pair<T, INTERLEAVED>(p, t, w, j, cos_t[w.table_row + j], sin_t[w.table_row + j]);
  }
}

// The whole body of one thread: block/thread indices are explicit so the host can run it.
template <class T, bool INTERLEAVED, bool VECTOR>
ROPE_HD void rope_thread_of(const RopeParams& p, const RopeTensor& t, long long block,
                            long long thread, long long block_dim) {
  RopeWork w;
  if (!rope_locate(p, t, (block - t.first_block) * block_dim + thread, &w)) return;
  if (w.chunk >= p.rot_chunks) {
    rope_copy_chunk<T>(p, t, w);
  } else if (VECTOR) {
    rope_rotate_vector<T, INTERLEAVED>(p, t, w);
  } else {
    rope_rotate_scalar<T, INTERLEAVED>(p, t, w);
  }
}

// ---- Gather kernel: tables from a cache by position -----------------------------------------

// Where a row's tables come from: row `row` of the cache, or (row < 0) computed at `value`.
struct RopePosition {
  long long row;
  double value;
};

// The position at element `offset` of positions[tensor], plus position_offset. Integer
// positions add in 64-bit integers (wrapping, never undefined), floating ones in float64.
ROPE_HD RopePosition rope_position(const RopeParams& p, int tensor, long long offset) {
  const void* base = p.positions[tensor];
  const long long type = p.position_type[tensor];
  RopePosition at;
  at.row = -1;
  if (type == ROPE_POSITION_INT32 || type == ROPE_POSITION_INT64) {
    const long long read = type == ROPE_POSITION_INT32
                               ? static_cast<long long>(static_cast<const int*>(base)[offset])
                               : static_cast<const long long*>(base)[offset];
    const long long v = static_cast<long long>(static_cast<unsigned long long>(read) +
                                               static_cast<unsigned long long>(p.position_offset));
    at.value = static_cast<double>(v);
    if (v >= 0 && v < p.capacity) at.row = v;
  } else {
    const double read = type == ROPE_POSITION_FLOAT32
                            ? static_cast<double>(static_cast<const float*>(base)[offset])
                            : static_cast<const double*>(base)[offset];
    const double v = read + static_cast<double>(p.position_offset);
    at.value = v;
    // NaN fails the first test; v < capacity <= 2^62 makes the conversion defined.
    if (v >= 0.0 && v < static_cast<double>(p.capacity) &&
        static_cast<double>(static_cast<long long>(v)) == v) {
      at.row = static_cast<long long>(v);
    }
  }
  return at;
}

// cos and sin of pair j at `position`, as the host builds a table row: the float64 angle
// position * inv_freq[j], float64 cos and sin times the attention factor, one rounding to C.
template <class C>
ROPE_HD void rope_computed_table(const RopeParams& p, double position, long long j, C* c, C* s) {
  const double angle = rope_mul(position, p.inv_freq[j]);
  *c = static_cast<C>(rope_mul(rope_cos(angle), p.factor));
  *s = static_cast<C>(rope_mul(rope_sin(angle), p.factor));
}

template <class T, bool INTERLEAVED>
ROPE_HD void rope_rotate_vector_computed(const RopeParams& p, const RopeTensor& t,
                                         const RopeWork& w, double position) {
  typedef typename rope_traits<T>::compute C;
  const int P = ROPE_PAIRS(T);
  C c[P];
  C s[P];
ROPE_UNROLL
  for (int i = 0; i < P; ++i) rope_computed_table(p, position, w.chunk * P + i, &c[i], &s[i]);
  rope_rotate_vector_by<T, INTERLEAVED>(p, t, w, c, s);
}

template <class T, bool INTERLEAVED>
ROPE_HD void rope_rotate_scalar_computed(const RopeParams& p, const RopeTensor& t,
                                         const RopeWork& w, double position) {
  typedef typename rope_traits<T>::compute C;
  const int P = ROPE_PAIRS(T);
  for (int i = 0; i < P; ++i) {
    const long long j = w.chunk * P + i;
    if (j >= p.n_pairs) break;
    C c;
    C s;
    rope_computed_table(p, position, j, &c, &s);
    rope_rotate_pair<T, INTERLEAVED>(p, t, w, j, c, s);
  }
}

// The whole body of one thread of the gather kernel; `tensor` is 0 or 1 (t is p.t[tensor]).
template <class T, bool INTERLEAVED, bool VECTOR>
ROPE_HD void rope_gather_thread_of(const RopeParams& p, const RopeTensor& t, int tensor,
                                   long long block, long long thread, long long block_dim) {
  RopeWork w;
  if (!rope_locate(p, t, (block - t.first_block) * block_dim + thread, &w)) return;
  if (w.chunk >= p.rot_chunks) {
    rope_copy_chunk<T>(p, t, w);
    return;
  }
  const RopePosition at = rope_position(p, tensor, w.table_row);
  if (at.row >= 0) {
    w.table_row = at.row * p.n_pairs;
    if (VECTOR) {
      rope_rotate_vector<T, INTERLEAVED>(p, t, w);
    } else {
      rope_rotate_scalar<T, INTERLEAVED>(p, t, w);
    }
  } else if (VECTOR) {
    rope_rotate_vector_computed<T, INTERLEAVED>(p, t, w, at.value);
  } else {
    rope_rotate_scalar_computed<T, INTERLEAVED>(p, t, w, at.value);
  }
}

#endif  // ROPE_REF_ROPE_CUH
