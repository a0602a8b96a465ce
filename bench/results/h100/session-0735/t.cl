#ifdef cl_nv_pragma_unroll
__kernel void nv_pragma_unroll_defined(global int *a) { a[0] = 1; }
#endif
#ifdef cl_nv_compiler_options
__kernel void nv_compiler_options_defined(global int *a) { a[0] = 1; }
#endif
__kernel void fence_asm(global int *a, volatile global int *f) {
  a[get_global_id(0)] = 1;
  __asm__ __volatile__("membar.gl;" ::: "memory");
  atomic_xchg(f, 1);
}
__kernel void fence_ocl(global int *a, volatile global int *f) {
  a[get_global_id(0)] = 2;
  mem_fence(CLK_GLOBAL_MEM_FENCE);
  atomic_xchg(f, 1);
}
__kernel void fence_write(global int *a, volatile global int *f) {
  a[get_global_id(0)] = 3;
  write_mem_fence(CLK_GLOBAL_MEM_FENCE);
  atomic_xchg(f, 1);
}
__kernel void fence_barrier(global int *a, volatile global int *f) {
  a[get_global_id(0)] = 4;
  barrier(CLK_GLOBAL_MEM_FENCE);
  atomic_xchg(f, 1);
}
