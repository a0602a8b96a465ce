/*
 * faultcl.h - fault injection for check_faults: every OpenCL call of the
 * library goes through a wrapper that counts it, fails it on request and
 * keeps a ledger of the references the library takes and gives back.
 *
 * check_faults links a second build of the library's objects with
 * -Wl,--wrap=clX for every function below (FAULTCL_WRAP in Makefile.am),
 * so the library's calls to clX reach __wrap_clX here, and it does not link
 * the OpenCL loader: the wrappers reach the real functions through
 * faultcl_real, loaded with dlopen.  A library call to an OpenCL function
 * that is not wrapped is therefore an undefined reference at link time.
 * The test program itself calls OpenCL only through faultcl_real.
 *
 * Calls are numbered from 1 since the last faultcl_reset().  A planned
 * fault makes call n return its error without calling the driver (a
 * creation returns NULL and sets *errcode_ret).  The ledger counts, per
 * object, the references the library took (a creation, a retain, an event
 * from an enqueue) minus those it released; a release of an object it
 * holds no reference to is counted as an over-release and not passed on.
 * A release failed on purpose does not release (the object stays in the
 * ledger as refused; faultcl_unbalanced() gives those back).
 *
 * Memoisation (faultcl_memo), for speed only: clCreateContext on a device
 * it saw before returns the same context again (retained), and
 * clBuildProgram of a (context, source, options) built before does not
 * build again: the library's program stays unbuilt and its kernels are
 * created from the first build's program.  The library sees the same calls
 * and real objects either way; what is skipped is PoCL's 30-50 ms per
 * program, paid hundreds of times otherwise.
 */
#ifndef RUMUS_FAULTCL_H
#define RUMUS_FAULTCL_H

#include <stddef.h>

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

typedef void(CL_CALLBACK *faultcl_ctx_notify)(const char *, const void *,
                                              size_t, void *);
typedef void(CL_CALLBACK *faultcl_build_notify)(cl_program, void *);

/* Every OpenCL function the library calls: X(kind, return type, name,
 * parameters, arguments).  Kinds: PLAIN (returns a cl_int), ENQ (an
 * enqueue: its event, when asked for, is a reference taken), CREATE
 * (returns an object and sets *errcode_ret), RETAIN, RELEASE, and MEMO
 * (written by hand for memoisation).  A new function goes here and in
 * FAULTCL_WRAP of Makefile.am. */
#define FAULTCL_CALLS(X)                                                      \
  X(MEMO, cl_int, clBuildProgram,                                             \
    (cl_program program, cl_uint num_devices, const cl_device_id *devices,    \
     const char *options, faultcl_build_notify notify, void *user_data),      \
    (program, num_devices, devices, options, notify, user_data))              \
  X(CREATE, cl_mem, clCreateBuffer,                                           \
    (cl_context context, cl_mem_flags flags, size_t size, void *host_ptr,     \
     cl_int *errcode_ret),                                                    \
    (context, flags, size, host_ptr, errcode_ret))                            \
  X(CREATE, cl_command_queue, clCreateCommandQueue,                           \
    (cl_context context, cl_device_id device,                                 \
     cl_command_queue_properties properties, cl_int *errcode_ret),            \
    (context, device, properties, errcode_ret))                               \
  X(MEMO, cl_context, clCreateContext,                                        \
    (const cl_context_properties *properties, cl_uint num_devices,            \
     const cl_device_id *devices, faultcl_ctx_notify notify,                  \
     void *user_data, cl_int *errcode_ret),                                   \
    (properties, num_devices, devices, notify, user_data, errcode_ret))       \
  X(MEMO, cl_kernel, clCreateKernel,                                          \
    (cl_program program, const char *kernel_name, cl_int *errcode_ret),       \
    (program, kernel_name, errcode_ret))                                      \
  X(MEMO, cl_program, clCreateProgramWithSource,                              \
    (cl_context context, cl_uint count, const char **strings,                 \
     const size_t *lengths, cl_int *errcode_ret),                             \
    (context, count, strings, lengths, errcode_ret))                          \
  X(ENQ, cl_int, clEnqueueCopyBuffer,                                         \
    (cl_command_queue queue, cl_mem src, cl_mem dst, size_t src_offset,       \
     size_t dst_offset, size_t size, cl_uint num_events,                      \
     const cl_event *wait_list, cl_event *event),                             \
    (queue, src, dst, src_offset, dst_offset, size, num_events, wait_list,    \
     event))                                                                  \
  X(ENQ, cl_int, clEnqueueFillBuffer,                                         \
    (cl_command_queue queue, cl_mem buffer, const void *pattern,              \
     size_t pattern_size, size_t offset, size_t size, cl_uint num_events,     \
     const cl_event *wait_list, cl_event *event),                             \
    (queue, buffer, pattern, pattern_size, offset, size, num_events,          \
     wait_list, event))                                                       \
  X(ENQ, cl_int, clEnqueueNDRangeKernel,                                      \
    (cl_command_queue queue, cl_kernel kernel, cl_uint dims,                  \
     const size_t *offset, const size_t *global, const size_t *local,         \
     cl_uint num_events, const cl_event *wait_list, cl_event *event),         \
    (queue, kernel, dims, offset, global, local, num_events, wait_list,       \
     event))                                                                  \
  X(ENQ, cl_int, clEnqueueReadBuffer,                                         \
    (cl_command_queue queue, cl_mem buffer, cl_bool blocking, size_t offset,  \
     size_t size, void *ptr, cl_uint num_events, const cl_event *wait_list,   \
     cl_event *event),                                                        \
    (queue, buffer, blocking, offset, size, ptr, num_events, wait_list,       \
     event))                                                                  \
  X(ENQ, cl_int, clEnqueueWriteBuffer,                                        \
    (cl_command_queue queue, cl_mem buffer, cl_bool blocking, size_t offset,  \
     size_t size, const void *ptr, cl_uint num_events,                        \
     const cl_event *wait_list, cl_event *event),                             \
    (queue, buffer, blocking, offset, size, ptr, num_events, wait_list,       \
     event))                                                                  \
  X(PLAIN, cl_int, clFinish, (cl_command_queue queue), (queue))               \
  X(PLAIN, cl_int, clGetCommandQueueInfo,                                     \
    (cl_command_queue queue, cl_command_queue_info param, size_t size,        \
     void *value, size_t *size_ret),                                          \
    (queue, param, size, value, size_ret))                                    \
  X(PLAIN, cl_int, clGetDeviceIDs,                                            \
    (cl_platform_id platform, cl_device_type type, cl_uint num_entries,       \
     cl_device_id *devices, cl_uint *num_devices),                            \
    (platform, type, num_entries, devices, num_devices))                      \
  X(PLAIN, cl_int, clGetDeviceInfo,                                           \
    (cl_device_id device, cl_device_info param, size_t size, void *value,     \
     size_t *size_ret),                                                       \
    (device, param, size, value, size_ret))                                   \
  X(PLAIN, cl_int, clGetEventProfilingInfo,                                   \
    (cl_event event, cl_profiling_info param, size_t size, void *value,       \
     size_t *size_ret),                                                       \
    (event, param, size, value, size_ret))                                    \
  X(PLAIN, cl_int, clGetKernelWorkGroupInfo,                                  \
    (cl_kernel kernel, cl_device_id device, cl_kernel_work_group_info param,  \
     size_t size, void *value, size_t *size_ret),                             \
    (kernel, device, param, size, value, size_ret))                           \
  X(PLAIN, cl_int, clGetMemObjectInfo,                                        \
    (cl_mem mem, cl_mem_info param, size_t size, void *value,                 \
     size_t *size_ret),                                                       \
    (mem, param, size, value, size_ret))                                      \
  X(PLAIN, cl_int, clGetPlatformIDs,                                          \
    (cl_uint num_entries, cl_platform_id *platforms, cl_uint *num_platforms), \
    (num_entries, platforms, num_platforms))                                  \
  X(PLAIN, cl_int, clGetPlatformInfo,                                         \
    (cl_platform_id platform, cl_platform_info param, size_t size,            \
     void *value, size_t *size_ret),                                          \
    (platform, param, size, value, size_ret))                                 \
  X(PLAIN, cl_int, clGetProgramBuildInfo,                                     \
    (cl_program program, cl_device_id device, cl_program_build_info param,    \
     size_t size, void *value, size_t *size_ret),                             \
    (program, device, param, size, value, size_ret))                          \
  X(RELEASE, cl_int, clReleaseCommandQueue, (cl_command_queue obj), (obj))    \
  X(RELEASE, cl_int, clReleaseContext, (cl_context obj), (obj))               \
  X(RELEASE, cl_int, clReleaseDevice, (cl_device_id obj), (obj))              \
  X(RELEASE, cl_int, clReleaseEvent, (cl_event obj), (obj))                   \
  X(RELEASE, cl_int, clReleaseKernel, (cl_kernel obj), (obj))                 \
  X(RELEASE, cl_int, clReleaseMemObject, (cl_mem obj), (obj))                 \
  X(MEMO, cl_int, clReleaseProgram, (cl_program obj), (obj))                  \
  X(RETAIN, cl_int, clRetainCommandQueue, (cl_command_queue obj), (obj))      \
  X(RETAIN, cl_int, clRetainContext, (cl_context obj), (obj))                 \
  X(RETAIN, cl_int, clRetainDevice, (cl_device_id obj), (obj))                \
  X(RETAIN, cl_int, clRetainMemObject, (cl_mem obj), (obj))                   \
  X(PLAIN, cl_int, clSetKernelArg,                                            \
    (cl_kernel kernel, cl_uint index, size_t size, const void *value),        \
    (kernel, index, size, value))

/* The driver's functions, for the wrappers and for the test's own calls
 * (which must not be counted). */
typedef struct {
#define FAULTCL_PTR(kind, ret, name, params, args) \
  ret(CL_API_CALL *name) params;
  FAULTCL_CALLS(FAULTCL_PTR)
#undef FAULTCL_PTR
  /* Used by the test only. */
  cl_int(CL_API_CALL *clRetainProgram)(cl_program);
  cl_int(CL_API_CALL *clGetContextInfo)(cl_context, cl_context_info, size_t,
                                        void *, size_t *);
} faultcl_table;

/* Loads the driver's functions on first use (aborts if it cannot). */
const faultcl_table *faultcl_real(void);

/* Forgets the call count, the call names, the planned faults, the ledger
 * and its complaints; memoised objects stay. */
void faultcl_reset(void);
/* Plans call n (from 1) to fail with err; up to FAULTCL_MAX_FAULTS. */
#define FAULTCL_MAX_FAULTS 4
void faultcl_fail(unsigned long n, cl_int err);
/* Names what the test is doing, for the record of each fault. */
void faultcl_phase(const char *phase);

/* Calls so far, and the name of call n (NULL past the count). */
unsigned long faultcl_calls(void);
const char *faultcl_name(unsigned long n);

/* A planned fault and what became of it. */
typedef struct {
  unsigned long n;
  cl_int err;
  int hit;           /* call n happened (and failed) */
  const char *name;  /* the function of call n */
  const char *phase; /* the test's phase then */
} faultcl_fault;
/* The planned faults in the order planned; returns their number. */
int faultcl_faults(faultcl_fault *out, int max);

/* Releases the objects whose release was failed on purpose, then
 * describes into buf every object the library still holds a reference to
 * and every over-release; returns their number (0: balanced). */
size_t faultcl_unbalanced(char *buf, size_t len);

/* Turns memoisation on or off; _clear releases what it kept. */
void faultcl_memo(int on);
void faultcl_memo_clear(void);

#endif /* RUMUS_FAULTCL_H */
