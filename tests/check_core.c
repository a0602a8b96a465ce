/*
 * check_core.c - the runtime: status codes, device selection, contexts
 * (created and adopted), options, tensors (create, wrap, transfers, fill,
 * copy, reshape), the program cache, kernel sources and profiling.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <math.h>

#include "testutil.h"

START_TEST(status_codes) {
  ck_assert_str_eq(rumus_err_name(RUMUS_OK), "RUMUS_OK");
  ck_assert_str_eq(rumus_err_name(RUMUS_ESHAPE), "RUMUS_ESHAPE");
  ck_assert_int_eq(RUMUS_ESHAPE, -21);
  ck_assert_str_eq(rumus_strerror(RUMUS_EINDEX), "index out of range (detected on the device)");
  ck_assert_str_eq(rumus_strerror(12345), "unknown status");
  ck_assert_str_eq(rumus_err_name(-9999), "RUMUS_UNKNOWN");
  ck_assert_uint_eq(rumus_version_number(), RUMUS_VERSION_NUMBER);
  /* One version, configure.ac's, in every form. */
  char v[32];
  snprintf(v, sizeof v, "%d.%d.%d", RUMUS_VERSION_MAJOR, RUMUS_VERSION_MINOR,
           RUMUS_VERSION_PATCH);
  ck_assert_str_eq(rumus_version_string(), v);
  ck_assert_str_eq(RUMUS_VERSION_STRING, v);
  ck_assert_str_eq(rumus_ctx_errmsg(NULL), "NULL context");
  ck_assert_int_eq(rumus_ctx_errcode(NULL), RUMUS_ENULL);
  ck_assert_int_eq(rumus_ctx_last_cl_error(NULL), CL_SUCCESS);
  /* -70 and -71 are retired, not statuses. */
  ck_assert_str_eq(rumus_err_name(-70), "RUMUS_UNKNOWN");
  ck_assert_str_eq(rumus_err_name(-71), "RUMUS_UNKNOWN");
}
END_TEST

START_TEST(device_selection) {
  int n = 0;
  TU_STATUS(RUMUS_OK, rumus_device_count(&n));
  ck_assert_int_ge(n, 1);
  char desc[512];
  TU_STATUS(RUMUS_OK, rumus_device_describe(0, desc, sizeof desc));
  ck_assert_msg(strstr(desc, "OpenCL C") != NULL, "%s", desc);
  TU_STATUS(RUMUS_ENODEVICE, rumus_device_describe(n, desc, sizeof desc));
  TU_STATUS(RUMUS_ENULL, rumus_device_count(NULL));

  rumus_ctx *ctx = NULL;
  TU_STATUS(RUMUS_OK, rumus_ctx_create(&ctx, "0", 0));
  ck_assert_ptr_nonnull(ctx);
  /* Select the same device again by a substring of its name, any case. */
  char sub[8] = {0};
  const char *name = rumus_ctx_device_name(ctx);
  const char *slash = strstr(name, " / ");
  ck_assert_ptr_nonnull(slash);
  strncpy(sub, slash + 3, 5);
  for (char *p = sub; *p; p++) *p = (char)((*p >= 'a' && *p <= 'z') ? *p - 32 : *p);
  rumus_ctx *ctx2 = NULL;
  TU_STATUS(RUMUS_OK, rumus_ctx_create(&ctx2, sub, 0));
  ck_assert_ptr_eq(rumus_ctx_cl_device(ctx2), rumus_ctx_cl_device(ctx));
  TU_OK(ctx2, rumus_ctx_free(ctx2));
  TU_OK(ctx, rumus_ctx_free(ctx));

  TU_STATUS(RUMUS_ENODEVICE, rumus_ctx_create(&ctx, "no-such-device-xyz", 0));
  ck_assert_ptr_null(ctx);
  ck_assert_msg(strstr(rumus_last_create_error(), "no-such-device-xyz") != NULL, "%s",
                rumus_last_create_error());
  TU_STATUS(RUMUS_ENODEVICE, rumus_ctx_create(&ctx, "999", 0));
  TU_STATUS(RUMUS_EINVAL, rumus_ctx_create(&ctx, NULL, 0x80));
  TU_STATUS(RUMUS_ENULL, rumus_ctx_create(NULL, NULL, 0));
  /* RUMUS_DEVICE is read when no selector is given. */
  setenv("RUMUS_DEVICE", "no-such-device-xyz", 1);
  TU_STATUS(RUMUS_ENODEVICE, rumus_ctx_create(&ctx, NULL, 0));
  unsetenv("RUMUS_DEVICE");
}
END_TEST

static cl_uint refcount_ctx(cl_context c) {
  cl_uint n = 0;
  clGetContextInfo(c, CL_CONTEXT_REFERENCE_COUNT, sizeof n, &n, NULL);
  return n;
}
static cl_uint refcount_queue(cl_command_queue q) {
  cl_uint n = 0;
  clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof n, &n, NULL);
  return n;
}

START_TEST(adopt_application_objects) {
  /* The application's own objects, as a legacy code would have them. */
  rumus_ctx *probe = tu_ctx();
  cl_device_id dev = rumus_ctx_cl_device(probe);
  cl_int e;
  cl_context app_ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
  ck_assert_int_eq(e, CL_SUCCESS);
  cl_command_queue app_q = clCreateCommandQueue(app_ctx, dev, 0, &e);
  ck_assert_int_eq(e, CL_SUCCESS);
  cl_uint rc0 = refcount_ctx(app_ctx), rq0 = refcount_queue(app_q);

  rumus_ctx *ctx = NULL;
  TU_STATUS(RUMUS_OK, rumus_ctx_adopt(&ctx, app_ctx, dev, app_q));
  ck_assert_ptr_eq(rumus_ctx_cl_context(ctx), app_ctx);
  ck_assert_ptr_eq(rumus_ctx_cl_queue(ctx), app_q);

  /* Work on an application buffer through a borrowed tensor. */
  float x[2 * 3] = {1, 2, 3, 0, 0, 0}, y[6];
  cl_mem buf = clCreateBuffer(app_ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof x, x, &e);
  ck_assert_int_eq(e, CL_SUCCESS);
  size_t shape[2] = {2, 3};
  rumus_tensor *t = NULL;
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 2, shape, buf, 0, &t));
  TU_OK(ctx, rumus_softmax_fwd(ctx, t, t));
  TU_OK(ctx, rumus_ctx_sync(ctx));
  TU_OK(ctx, rumus_tensor_download(t, y, sizeof y));
  ck_assert_float_eq_tol(y[2], 0.66524096f, 1e-6f);
  ck_assert_float_eq_tol(y[4], 1.0f / 3.0f, 1e-6f);
  rumus_tensor_free(t);
  TU_OK(ctx, rumus_ctx_free(ctx));
  /* The application's objects still work after rumus let go of them... */
  e = clEnqueueReadBuffer(app_q, buf, CL_TRUE, 0, sizeof y, y, 0, NULL, NULL);
  ck_assert_int_eq(e, CL_SUCCESS);
  ck_assert_float_eq_tol(y[0], 0.09003057f, 1e-6f);
  clFinish(app_q);
  clReleaseMemObject(buf); /* it holds a reference to app_ctx too */
  buf = NULL;
  /* ...and rumus released exactly what it retained.  Drivers drop their own
   * references of finished commands asynchronously (PoCL under ASan was
   * seen holding the queue for a moment after clFinish), so wait up to 5 s
   * for the counts to settle: a leaked retain never does. */
  for (int i = 0; i < 500 && (refcount_ctx(app_ctx) != rc0 || refcount_queue(app_q) != rq0); i++)
    nanosleep(&(struct timespec){0, 10000000}, NULL);
  ck_assert_uint_eq(refcount_ctx(app_ctx), rc0);
  ck_assert_uint_eq(refcount_queue(app_q), rq0);

  /* A queue of another context is refused. */
  cl_command_queue other_q = rumus_ctx_cl_queue(probe);
  TU_STATUS(RUMUS_EINVAL, rumus_ctx_adopt(&ctx, app_ctx, dev, other_q));
  ck_assert_ptr_null(ctx);
  TU_STATUS(RUMUS_ENULL, rumus_ctx_adopt(&ctx, NULL, dev, app_q));
  /* An out-of-order queue is refused. */
  cl_command_queue ooo = clCreateCommandQueue(app_ctx, dev, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &e);
  if (e == CL_SUCCESS) {
    TU_STATUS(RUMUS_EINVAL, rumus_ctx_adopt(&ctx, app_ctx, dev, ooo));
    clReleaseCommandQueue(ooo);
  }
  clReleaseCommandQueue(app_q);
  clReleaseContext(app_ctx);
  TU_OK(probe, rumus_ctx_free(probe));
}
END_TEST

/* Failures are recorded per thread: a thread reads its own last failure,
 * on the context it happened on; other contexts and other threads'
 * failures read as none, and successful calls leave it alone. */
typedef struct {
  rumus_ctx *ctx;
  rumus_tensor *t;
  char before[256], after[256];
  int code;
} other_thread;

static void *fail_elsewhere(void *arg) {
  other_thread *o = arg;
  float host[4] = {0};
  snprintf(o->before, sizeof o->before, "%s", rumus_ctx_errmsg(o->ctx));
  o->code = rumus_tensor_upload(o->t, host, 12);
  snprintf(o->after, sizeof o->after, "%s", rumus_ctx_errmsg(o->ctx));
  return NULL;
}

START_TEST(errors_per_thread) {
  rumus_ctx *a = tu_ctx(), *b = tu_ctx();
  ck_assert_str_eq(rumus_ctx_errmsg(a), "");
  ck_assert_int_eq(rumus_ctx_errcode(a), RUMUS_OK);
  size_t s[1] = {4};
  rumus_tensor *t = tu_tensor(a, RUMUS_F32, 1, s, NULL);
  float host[4] = {0};
  TU_STATUS(RUMUS_ESIZE, rumus_tensor_upload(t, host, 8));
  ck_assert_msg(strstr(rumus_ctx_errmsg(a), "8 bytes given"), "%s",
                rumus_ctx_errmsg(a));
  ck_assert_int_eq(rumus_ctx_errcode(a), RUMUS_ESIZE);
  ck_assert_str_eq(rumus_ctx_errmsg(b), "");
  ck_assert_int_eq(rumus_ctx_errcode(b), RUMUS_OK);
  TU_OK(a, rumus_tensor_upload(t, host, sizeof host));
  ck_assert_int_eq(rumus_ctx_errcode(a), RUMUS_ESIZE);

  other_thread o = {.ctx = a, .t = t};
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, fail_elsewhere, &o), 0);
  pthread_join(th, NULL);
  ck_assert_str_eq(o.before, "");
  ck_assert_int_eq(o.code, RUMUS_ESIZE);
  ck_assert_msg(strstr(o.after, "12 bytes given"), "%s", o.after);
  ck_assert_msg(strstr(rumus_ctx_errmsg(a), "8 bytes given"), "%s",
                rumus_ctx_errmsg(a));

  /* A failure on b is now this thread's last: a reads as clean. */
  rumus_tensor *bad = NULL;
  TU_STATUS(RUMUS_EINVAL, rumus_tensor_create(b, RUMUS_F32, 9, s, &bad));
  ck_assert_str_eq(rumus_ctx_errmsg(a), "");
  ck_assert_msg(strstr(rumus_ctx_errmsg(b), "ndim 9"), "%s",
                rumus_ctx_errmsg(b));
  /* A new context, perhaps at b's address, has no failure. */
  TU_OK(b, rumus_ctx_free(b));
  rumus_ctx *c = tu_ctx();
  ck_assert_str_eq(rumus_ctx_errmsg(c), "");
  ck_assert_int_eq(rumus_ctx_last_cl_error(c), CL_SUCCESS);
  TU_OK(c, rumus_ctx_free(c));
  tu_free_all(a, t, NULL);
}
END_TEST

START_TEST(free_with_live_tensors) {
  rumus_ctx *ctx = tu_ctx();
  size_t s[1] = {10};
  rumus_tensor *t = tu_tensor(ctx, RUMUS_F32, 1, s, NULL);
  TU_STATUS(RUMUS_EBUSY, rumus_ctx_free(ctx));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "1 tensors") != NULL, "%s", rumus_ctx_errmsg(ctx));
  rumus_tensor_free(t);
  rumus_tensor_free(NULL);
  TU_OK(ctx, rumus_ctx_free(ctx));
  TU_STATUS(RUMUS_OK, rumus_ctx_free(NULL));
}
END_TEST

START_TEST(options) {
  rumus_ctx *ctx = tu_ctx();
  int v = -1;
  TU_OK(ctx, rumus_ctx_get_option(ctx, RUMUS_OPT_VARIANT, &v));
  ck_assert_int_eq(v, RUMUS_VARIANT_AUTO);
  ck_assert_int_eq(rumus_ctx_uses_gpu_variant(ctx), rumus_ctx_is_gpu(ctx));
  TU_OK(ctx, rumus_ctx_set_option(ctx, RUMUS_OPT_VARIANT, RUMUS_VARIANT_GPU));
  ck_assert_int_eq(rumus_ctx_uses_gpu_variant(ctx), 1);
  TU_OK(ctx, rumus_ctx_set_option(ctx, RUMUS_OPT_VARIANT, RUMUS_VARIANT_CPU));
  ck_assert_int_eq(rumus_ctx_uses_gpu_variant(ctx), 0);
  TU_STATUS(RUMUS_EOPTION, rumus_ctx_set_option(ctx, RUMUS_OPT_VARIANT, 7));
  TU_STATUS(RUMUS_EOPTION, rumus_ctx_set_option(ctx, RUMUS_OPT_WORKGROUP_SIZE, 48));
  TU_STATUS(RUMUS_EOPTION, rumus_ctx_set_option(ctx, RUMUS_OPT_WORKGROUP_SIZE, 8));
  TU_STATUS(RUMUS_EOPTION, rumus_ctx_set_option(ctx, (rumus_option)99, 0));
  TU_STATUS(RUMUS_EOPTION, rumus_ctx_get_option(ctx, (rumus_option)99, &v));
  TU_OK(ctx, rumus_ctx_set_option(ctx, RUMUS_OPT_WORKGROUP_SIZE, 64));
  TU_OK(ctx, rumus_ctx_get_option(ctx, RUMUS_OPT_WORKGROUP_SIZE, &v));
  ck_assert_int_eq(v, 64);
  /* A softmax with work-groups of 64 still gives the right answer. */
  TU_OK(ctx, rumus_ctx_set_option(ctx, RUMUS_OPT_VARIANT, RUMUS_VARIANT_GPU));
  float x[300], want_f[300];
  double want[300];
  for (int i = 0; i < 300; i++) x[i] = (float)((i * 37) % 101) / 10.0f;
  ref_softmax_fwd(x, 1, 300, 0, want);
  rumus_tensor *t = tu_tensor_2d(ctx, 1, 300, x);
  TU_OK(ctx, rumus_softmax_fwd(ctx, t, t));
  TU_OK(ctx, rumus_tensor_download(t, want_f, sizeof want_f));
  tu_check_close("softmax_wg64", want_f, want, 300, 1e-7, 2e-5);
  /* RUMUS_VARIANT in the environment sets the initial value. */
  setenv("RUMUS_VARIANT", "cpu", 1);
  rumus_ctx *c2 = tu_ctx();
  TU_OK(c2, rumus_ctx_get_option(c2, RUMUS_OPT_VARIANT, &v));
  ck_assert_int_eq(v, RUMUS_VARIANT_CPU);
  unsetenv("RUMUS_VARIANT");
  TU_OK(c2, rumus_ctx_free(c2));
  /* So does RUMUS_WORKGROUP_SIZE, when it holds a valid size. */
  static const struct {
    const char *env;
    int want;
  } WG_ENV[] = {{"32", 32}, {"48", 0}, {"8", 0}, {"32x", 0}, {"", 0},
                {"99999999999999999999", 0}};
  for (size_t i = 0; i < sizeof WG_ENV / sizeof WG_ENV[0]; i++) {
    setenv("RUMUS_WORKGROUP_SIZE", WG_ENV[i].env, 1);
    rumus_ctx *c3 = tu_ctx();
    TU_OK(c3, rumus_ctx_get_option(c3, RUMUS_OPT_WORKGROUP_SIZE, &v));
    ck_assert_msg(v == WG_ENV[i].want, "RUMUS_WORKGROUP_SIZE=\"%s\" gave %d",
                  WG_ENV[i].env, v);
    TU_OK(c3, rumus_ctx_free(c3));
  }
  unsetenv("RUMUS_WORKGROUP_SIZE");
  tu_free_all(ctx, t, NULL);
}
END_TEST

START_TEST(tensor_lifecycle) {
  rumus_ctx *ctx = tu_ctx();
  size_t s[3] = {2, 3, 4};
  rumus_tensor *t = NULL;
  TU_OK(ctx, rumus_tensor_create(ctx, RUMUS_F32, 3, s, &t));
  ck_assert_int_eq(rumus_tensor_ndim(t), 3);
  ck_assert_uint_eq(rumus_tensor_numel(t), 24);
  ck_assert_uint_eq(rumus_tensor_nbytes(t), 96);
  ck_assert_uint_eq(rumus_tensor_dim(t, -1), 4);
  ck_assert_uint_eq(rumus_tensor_dim(t, 1), 3);
  ck_assert_uint_eq(rumus_tensor_dim(t, 3), 0);
  ck_assert_int_eq(rumus_tensor_dtype(t), RUMUS_F32);
  float in[24], out[24];
  for (int i = 0; i < 24; i++) in[i] = (float)i * 0.5f;
  TU_OK(ctx, rumus_tensor_upload(t, in, sizeof in));
  TU_OK(ctx, rumus_tensor_download(t, out, sizeof out));
  ck_assert_mem_eq(in, out, sizeof in);
  TU_STATUS(RUMUS_ESIZE, rumus_tensor_upload(t, in, sizeof in - 4));
  TU_STATUS(RUMUS_ESIZE, rumus_tensor_download(t, out, sizeof out + 4));
  TU_STATUS(RUMUS_ENULL, rumus_tensor_upload(t, NULL, sizeof in));
  TU_STATUS(RUMUS_ENULL, rumus_tensor_upload(NULL, in, sizeof in));

  /* Fill, copy, reshape. */
  rumus_tensor *u = tu_tensor(ctx, RUMUS_F32, 3, s, NULL);
  TU_OK(ctx, rumus_tensor_fill(u, 2.5f));
  TU_OK(ctx, rumus_tensor_download(u, out, sizeof out));
  for (int i = 0; i < 24; i++) ck_assert_float_eq(out[i], 2.5f);
  TU_OK(ctx, rumus_tensor_copy(u, t));
  TU_OK(ctx, rumus_tensor_download(u, out, sizeof out));
  ck_assert_mem_eq(in, out, sizeof in);
  size_t s2[2] = {6, 4}, s3[2] = {5, 5};
  TU_OK(ctx, rumus_tensor_reshape(u, 2, s2));
  ck_assert_uint_eq(rumus_tensor_dim(u, 0), 6);
  TU_STATUS(RUMUS_ESHAPE, rumus_tensor_reshape(u, 2, s3));
  TU_OK(ctx, rumus_tensor_copy(u, t)); /* same count, other shape: fine */
  rumus_tensor *ints = tu_tensor(ctx, RUMUS_I32, 2, s2, NULL);
  TU_STATUS(RUMUS_EDTYPE, rumus_tensor_copy(ints, t));
  TU_OK(ctx, rumus_tensor_fill(ints, 7.0f));
  int32_t iv[24];
  TU_OK(ctx, rumus_tensor_download(ints, iv, sizeof iv));
  ck_assert_int_eq(iv[23], 7);
  /* I32 fills truncate toward zero and saturate; NaN has no int32. */
  static const struct {
    float value;
    int32_t want;
  } FILLS[] = {{-7.9f, -7},           {2147483520.0f, 2147483520},
               {3e9f, INT32_MAX},     {INFINITY, INT32_MAX},
               {-3e9f, INT32_MIN},    {-INFINITY, INT32_MIN},
               {-2147483648.0f, INT32_MIN}};
  for (size_t i = 0; i < sizeof FILLS / sizeof FILLS[0]; i++) {
    TU_OK(ctx, rumus_tensor_fill(ints, FILLS[i].value));
    TU_OK(ctx, rumus_tensor_download(ints, iv, sizeof iv));
    ck_assert_msg(iv[0] == FILLS[i].want && iv[23] == FILLS[i].want,
                  "fill %g gave %d", FILLS[i].value, iv[0]);
  }
  TU_STATUS(RUMUS_EINVAL, rumus_tensor_fill(ints, NAN));
  TU_OK(ctx, rumus_tensor_download(ints, iv, sizeof iv));
  ck_assert_int_eq(iv[5], INT32_MIN); /* untouched by the refused fill */

  /* Scalars and empty tensors. */
  rumus_tensor *sc = tu_tensor(ctx, RUMUS_F32, 0, NULL, NULL);
  ck_assert_uint_eq(rumus_tensor_numel(sc), 1);
  size_t se[2] = {0, 7};
  rumus_tensor *em = tu_tensor(ctx, RUMUS_F32, 2, se, NULL);
  ck_assert_uint_eq(rumus_tensor_nbytes(em), 0);
  TU_OK(ctx, rumus_tensor_upload(em, in, 0));
  TU_OK(ctx, rumus_tensor_fill(em, 1.0f));

  /* Bad creations. */
  rumus_tensor *bad = (rumus_tensor *)1;
  size_t big[2] = {SIZE_MAX / 2, 4};
  TU_STATUS(RUMUS_ESIZE, rumus_tensor_create(ctx, RUMUS_F32, 2, big, &bad));
  ck_assert_ptr_null(bad);
  size_t huge[1] = {(size_t)1 << 60};
  TU_STATUS(RUMUS_ESIZE, rumus_tensor_create(ctx, RUMUS_F32, 1, huge, &bad));
  size_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  TU_STATUS(RUMUS_EINVAL, rumus_tensor_create(ctx, RUMUS_F32, 9, nine, &bad));
  TU_STATUS(RUMUS_EINVAL, rumus_tensor_create(ctx, RUMUS_F32, -1, nine, &bad));
  TU_STATUS(RUMUS_EDTYPE, rumus_tensor_create(ctx, (rumus_dtype)42, 1, s, &bad));
  TU_STATUS(RUMUS_ENULL, rumus_tensor_create(ctx, RUMUS_F32, 2, NULL, &bad));
  TU_STATUS(RUMUS_ENULL, rumus_tensor_create(ctx, RUMUS_F32, 1, s, NULL));
  TU_STATUS(RUMUS_ENULL, rumus_tensor_create(NULL, RUMUS_F32, 1, s, &bad));
  tu_free_all(ctx, t, u, ints, sc, em, NULL);
}
END_TEST

START_TEST(tensor_wrap_checks) {
  rumus_ctx *ctx = tu_ctx();
  cl_int e;
  cl_mem buf = clCreateBuffer(rumus_ctx_cl_context(ctx), CL_MEM_READ_WRITE, 400, NULL, &e);
  ck_assert_int_eq(e, CL_SUCCESS);
  size_t s[2] = {10, 10}, s9[2] = {9, 10};
  rumus_tensor *t = NULL;
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 2, s, buf, 0, &t));
  size_t off = 1;
  ck_assert_ptr_eq(rumus_tensor_cl_mem(t, &off), buf);
  ck_assert_uint_eq(off, 0);
  rumus_tensor_free(t);
  TU_STATUS(RUMUS_ESIZE, rumus_tensor_wrap(ctx, RUMUS_F32, 2, s, buf, 4, &t));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "400") != NULL, "%s", rumus_ctx_errmsg(ctx));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 2, s9, buf, 40, &t));
  rumus_tensor_free(t);
  TU_STATUS(RUMUS_EINVAL, rumus_tensor_wrap(ctx, RUMUS_F32, 2, s9, buf, 2, &t));
  TU_STATUS(RUMUS_ESIZE, rumus_tensor_wrap(ctx, RUMUS_F32, 2, s9, buf, SIZE_MAX - 3, &t));
  TU_STATUS(RUMUS_ENULL, rumus_tensor_wrap(ctx, RUMUS_F32, 2, s, NULL, 0, &t));
  /* A buffer of another context. */
  rumus_ctx *other = tu_ctx();
  TU_STATUS(RUMUS_EINVAL, rumus_tensor_wrap(other, RUMUS_F32, 2, s, buf, 0, &t));
  TU_OK(other, rumus_ctx_free(other));
  clReleaseMemObject(buf);
  tu_free_all(ctx, NULL);
}
END_TEST

/* rumus_ctx_kernel_profile() on a profiling context: two softmax launches
 * and one add, counted by (op, kernel), the most time first. */
static void profile_by_kernel(rumus_ctx *ctx, rumus_tensor *t) {
  rumus_kernel_stat st[4];
  size_t n = 99;
  TU_OK(ctx, rumus_softmax_fwd(ctx, t, t));
  TU_OK(ctx, rumus_add(ctx, t, t, t));
  TU_OK(ctx, rumus_softmax_fwd(ctx, t, t));
  TU_OK(ctx, rumus_ctx_kernel_profile(ctx, st, 4, &n));
  ck_assert_uint_eq(n, 2);
  ck_assert_uint_ge(st[0].ns, st[1].ns);
  const int soft = strcmp(st[0].op, "rumus_softmax_fwd") == 0 ? 0 : 1;
  ck_assert_str_eq(st[soft].op, "rumus_softmax_fwd");
  ck_assert_uint_eq(st[soft].launches, 2);
  ck_assert_str_eq(st[1 - soft].op, "rumus_add");
  ck_assert_str_eq(st[1 - soft].kernel, "ew_add");
  ck_assert_uint_eq(st[1 - soft].launches, 1);
  ck_assert_uint_gt(st[1 - soft].ns, 0);
  /* Counted and forgotten: nothing since; cap 0 only counts. */
  TU_OK(ctx, rumus_ctx_kernel_profile(ctx, st, 4, &n));
  ck_assert_uint_eq(n, 0);
  TU_OK(ctx, rumus_softmax_fwd(ctx, t, t));
  TU_OK(ctx, rumus_ctx_kernel_profile(ctx, NULL, 0, &n));
  ck_assert_uint_eq(n, 1);
  uint64_t ns = 1;
  TU_OK(ctx, rumus_ctx_kernel_time(ctx, &ns));
  ck_assert_uint_eq(ns, 0);
  TU_STATUS(RUMUS_ENULL, rumus_ctx_kernel_profile(ctx, NULL, 1, &n));
  TU_STATUS(RUMUS_ENULL, rumus_ctx_kernel_profile(ctx, st, 4, NULL));
  TU_STATUS(RUMUS_ENULL, rumus_ctx_kernel_profile(NULL, st, 4, &n));
}

START_TEST(program_cache_and_profiling) {
  rumus_ctx *ctx = NULL;
  TU_STATUS(RUMUS_OK, rumus_ctx_create(&ctx, NULL, RUMUS_CTX_PROFILING));
  TU_OK(ctx, rumus_cache_fill(ctx));
  rumus_tensor *t = tu_tensor_2d(ctx, 64, 64, NULL);
  TU_OK(ctx, rumus_tensor_fill(t, 1.0f));
  uint64_t ns = 0;
  TU_OK(ctx, rumus_ctx_kernel_time(ctx, &ns)); /* fill is not a kernel */
  TU_OK(ctx, rumus_softmax_fwd(ctx, t, t));
  TU_OK(ctx, rumus_softmax_fwd(ctx, t, t));
  TU_OK(ctx, rumus_ctx_kernel_time(ctx, &ns));
  ck_assert_uint_gt(ns, 0);
  TU_OK(ctx, rumus_ctx_kernel_time(ctx, &ns));
  ck_assert_uint_eq(ns, 0);
  /* Two launches queued back to back: the span covers both kernels and the
   * gap between them, so it is at least their summed time. */
  uint64_t busy = 0, span = 0;
  TU_OK(ctx, rumus_softmax_fwd(ctx, t, t));
  TU_OK(ctx, rumus_softmax_fwd(ctx, t, t));
  TU_OK(ctx, rumus_ctx_kernel_span(ctx, &busy, &span));
  ck_assert_uint_gt(busy, 0);
  ck_assert_uint_ge(span, busy);
  TU_OK(ctx, rumus_softmax_fwd(ctx, t, t));
  TU_OK(ctx, rumus_ctx_kernel_span(ctx, NULL, &span)); /* one kernel */
  ck_assert_uint_gt(span, 0);
  TU_OK(ctx, rumus_ctx_kernel_span(ctx, &busy, &span)); /* none since */
  ck_assert_uint_eq(busy, 0);
  ck_assert_uint_eq(span, 0);
  TU_STATUS(RUMUS_ENULL, rumus_ctx_kernel_span(ctx, NULL, NULL));
  TU_STATUS(RUMUS_ENULL, rumus_ctx_kernel_span(NULL, &busy, &span));
  profile_by_kernel(ctx, t);
  TU_OK(ctx, rumus_cache_clear(ctx));
  TU_OK(ctx, rumus_softmax_fwd(ctx, t, t)); /* rebuilt on demand */
  TU_OK(ctx, rumus_ctx_sync(ctx));
  rumus_tensor_free(t);
  TU_OK(ctx, rumus_ctx_free(ctx));
  ctx = tu_ctx();
  TU_STATUS(RUMUS_EUNSUPPORTED, rumus_ctx_kernel_time(ctx, &ns));
  TU_STATUS(RUMUS_EUNSUPPORTED, rumus_ctx_kernel_span(ctx, &ns, NULL));
  size_t n = 0;
  TU_STATUS(RUMUS_EUNSUPPORTED, rumus_ctx_kernel_profile(ctx, NULL, 0, &n));
  tu_free_all(ctx, NULL);
}
END_TEST

/* RUMUS_KERNEL_DIR: a missing folder, then a kernel that does not compile;
 * the message carries the build log. */
START_TEST(kernel_dir_and_build_errors) {
  char dir[] = "/tmp/rumus-kdir-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  rumus_ctx *ctx = tu_ctx();
  rumus_tensor *t = tu_tensor_2d(ctx, 2, 2, NULL);
  setenv("RUMUS_KERNEL_DIR", "/nonexistent-rumus-dir", 1);
  TU_STATUS(RUMUS_ENOSOURCE, rumus_softmax_fwd(ctx, t, t));
  char path[256];
  snprintf(path, sizeof path, "%s/common.cl", dir);
  FILE *f = fopen(path, "w");
  fputs("/* empty */\n", f);
  fclose(f);
  snprintf(path, sizeof path, "%s/softmax.cl", dir);
  f = fopen(path, "w");
  fputs("__kernel void softmax_fwd_row(global float *x) { this is not C; }\n", f);
  fclose(f);
  setenv("RUMUS_KERNEL_DIR", dir, 1);
  TU_OK(ctx, rumus_ctx_set_option(ctx, RUMUS_OPT_VARIANT, RUMUS_VARIANT_CPU));
  TU_STATUS(RUMUS_EBUILD, rumus_softmax_fwd(ctx, t, t));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "build log") != NULL &&
                strstr(rumus_ctx_errmsg(ctx), "softmax.cl") != NULL,
                "%s", rumus_ctx_errmsg(ctx));
  ck_assert_int_eq(rumus_ctx_errcode(ctx), RUMUS_EBUILD);
  ck_assert_int_ne(rumus_ctx_last_cl_error(ctx), CL_SUCCESS);
  unsetenv("RUMUS_KERNEL_DIR");
  TU_OK(ctx, rumus_softmax_fwd(ctx, t, t)); /* the embedded source again */
  remove(path);
  snprintf(path, sizeof path, "%s/common.cl", dir);
  remove(path);
  rmdir(dir);
  tu_free_all(ctx, t, NULL);
}
END_TEST

/* Several threads share one context: each builds (the first to come
 * compiles, the others wait on the cache) and launches softmax on its own
 * tensors many times; every result must match the reference. */
enum { THREADS = 4, ROUNDS = 25, TROWS = 9, TCOLS = 130 };
typedef struct {
  rumus_ctx *ctx;
  int id, status;
  double worst;
} thread_job;

static void *thread_main(void *arg) {
  thread_job *job = arg;
  float x[TROWS * TCOLS], y[TROWS * TCOLS];
  double want[TROWS * TCOLS];
  tu_rng r;
  tu_rng_seed(&r, 1000 + (uint64_t)job->id);
  tu_fill_uniform(&r, x, TROWS * TCOLS, -5, 5);
  ref_softmax_fwd(x, TROWS, TCOLS, job->id % 2, want);
  size_t shape[2] = {TROWS, TCOLS};
  rumus_tensor *tx = NULL, *ty = NULL;
  job->status = rumus_tensor_create(job->ctx, RUMUS_F32, 2, shape, &tx);
  if (job->status == RUMUS_OK)
    job->status = rumus_tensor_create(job->ctx, RUMUS_F32, 2, shape, &ty);
  if (job->status == RUMUS_OK) job->status = rumus_tensor_upload(tx, x, sizeof x);
  for (int k = 0; k < ROUNDS && job->status == RUMUS_OK; k++) {
    job->status = (job->id % 2 ? rumus_log_softmax_fwd : rumus_softmax_fwd)(job->ctx, tx, ty);
    if (job->status == RUMUS_OK) job->status = rumus_tensor_download(ty, y, sizeof y);
    for (size_t i = 0; job->status == RUMUS_OK && i < TROWS * TCOLS; i++) {
      double e = fabs(y[i] - want[i]);
      if (!(e <= 2e-5)) job->worst = e > job->worst || isnan(e) ? e : job->worst;
    }
  }
  rumus_tensor_free(tx);
  rumus_tensor_free(ty);
  return NULL;
}

START_TEST(threads_share_a_context) {
  rumus_ctx *ctx = tu_ctx();
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    TU_OK(ctx, rumus_cache_clear(ctx));
    pthread_t th[THREADS];
    thread_job jobs[THREADS];
    for (int i = 0; i < THREADS; i++) {
      jobs[i] = (thread_job){ctx, i, RUMUS_OK, 0.0};
      ck_assert_int_eq(pthread_create(&th[i], NULL, thread_main, &jobs[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < THREADS; i++) {
      ck_assert_msg(jobs[i].status == RUMUS_OK, "thread %d: %s", i, rumus_err_name(jobs[i].status));
      ck_assert_msg(jobs[i].worst == 0.0, "thread %d (%s): error %g", i,
                    tu_variant_name(tu_variants[v]), jobs[i].worst);
    }
  }
  tu_free_all(ctx, NULL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("core");
  TCase *core = tu_tcase("core");
  tcase_add_test(core, status_codes);
  tcase_add_test(core, device_selection);
  tcase_add_test(core, adopt_application_objects);
  tcase_add_test(core, options);
  tcase_add_test(core, tensor_lifecycle);
  tcase_add_test(core, program_cache_and_profiling);
  tcase_add_test(core, threads_share_a_context);
  suite_add_tcase(s, core);
  TCase *errors = tu_tcase("errors");
  tcase_add_test(errors, free_with_live_tensors);
  tcase_add_test(errors, errors_per_thread);
  tcase_add_test(errors, tensor_wrap_checks);
  tcase_add_test(errors, kernel_dir_and_build_errors);
  suite_add_tcase(s, errors);
  return tu_run(s);
}
