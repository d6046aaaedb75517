"""The CUDA kernel (``rope.cu``, ``rope.cuh``) and the parts that plan, table and launch it."""
