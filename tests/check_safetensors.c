/*
 * check_safetensors.c - rumus-train's safetensors reader and writer: a file
 * written by the Python safetensors package (tests/data/fixture.safetensors,
 * made by tests/data/make_safetensors_fixture.py) read value by value, the
 * round trip of every dtype, and damaged files refused with TRAIN_EFORMAT
 * and a message naming what is wrong.  Host only: no OpenCL device.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tools/train/safetensors.h"

static char tmpdir[256];

static void tmp_setup(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/rumus-st-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void tmp_teardown(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
}

static const char *tmp_path(const char *name) {
  static char p[512];
  snprintf(p, sizeof p, "%s/%s", tmpdir, name);
  return p;
}

static const char *fixture(void) {
  static char p[1024];
  const char *src = getenv("srcdir");
  snprintf(p, sizeof p, "%s/tests/data/fixture.safetensors", src ? src : ".");
  return p;
}

static void assert_floats(const st_tensor *t, const float *want, size_t n) {
  ck_assert_uint_eq(st_numel(t), n);
  float got[16];
  st_to_f32(t, got);
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(got[i] == want[i], "%s[%zu] = %g, expected %g", t->name, i,
                  (double)got[i], (double)want[i]);
}

START_TEST(python_fixture) {
  st_file f;
  char err[512] = "";
  ck_assert_msg(st_load(fixture(), &f, err, sizeof err) == RUMUS_OK, "%s", err);
  ck_assert_uint_eq(f.n, 5);
  ck_assert_str_eq(st_meta(&f, "model"), "mlp");
  ck_assert_str_eq(st_meta(&f, "widths"), "784-256-10");
  ck_assert_ptr_null(st_meta(&f, "nothing"));
  const st_tensor *w = st_get(&f, "fc.weight");
  ck_assert_ptr_nonnull(w);
  ck_assert(w->dtype == RUMUS_F32 && w->ndim == 2 && w->shape[0] == 3 &&
            w->shape[1] == 4);
  float want[12];
  for (int i = 0; i < 12; i++) want[i] = (float)i * 0.5f - 1.0f;
  assert_floats(w, want, 12);
  const st_tensor *b = st_get(&f, "fc.bias");
  ck_assert(b && b->dtype == RUMUS_F16);
  assert_floats(b, (const float[]){1.5f, -2.25f, 65504.0f}, 3);
  const st_tensor *e = st_get(&f, "emb.weight");
  ck_assert(e && e->dtype == RUMUS_BF16 && e->ndim == 2);
  assert_floats(e, (const float[]){1.0f, 3.140625f, -0.0078125f, 256.0f}, 4);
  const st_tensor *ids = st_get(&f, "ids");
  ck_assert(ids && ids->dtype == RUMUS_I32);
  int32_t iv[4];
  memcpy(iv, ids->data, sizeof iv);
  ck_assert(iv[0] == 7 && iv[1] == -1 && iv[2] == 0 && iv[3] == 2147483647);
  const st_tensor *q = st_get(&f, "q");
  ck_assert(q && q->dtype == RUMUS_I8);
  assert_floats(q, (const float[]){-127.0f, 0.0f, 5.0f, 127.0f}, 4);
  ck_assert_ptr_null(st_get(&f, "missing"));
  st_free(&f);
}
END_TEST

START_TEST(round_trip) {
  const float w[6] = {1, -2, 3.5f, 0, -0.0f, 1e-30f};
  const uint16_t h[3] = {rumus_f32_to_f16(1.5f), rumus_f32_to_f16(-3.0f), 0x7C00};
  const uint16_t bf[2] = {rumus_f32_to_bf16(2.0f), rumus_f32_to_bf16(-0.5f)};
  const st_tensor t[4] = {
      {"layers.0.weight", RUMUS_F32, 2, {2, 3}, w, sizeof w},
      {"layers.0.bias", RUMUS_F16, 1, {3}, h, sizeof h},
      {"scalar", RUMUS_F32, 0, {0}, w, 4},
      {"b", RUMUS_BF16, 2, {1, 2}, bf, sizeof bf}};
  const char *meta[4] = {"kind", "mlp", "in_std", "0.3530"};
  char err[512] = "";
  char path[512];
  snprintf(path, sizeof path, "%s", tmp_path("m.safetensors"));
  ck_assert_msg(st_save(path, t, 4, meta, 2, err, sizeof err) == RUMUS_OK, "%s", err);
  ck_assert_int_ne(access(tmp_path("m.safetensors.tmp"), F_OK), 0);
  st_file f;
  ck_assert_msg(st_load(path, &f, err, sizeof err) == RUMUS_OK, "%s", err);
  ck_assert_uint_eq(f.n, 4);
  for (int i = 0; i < 4; i++) {
    const st_tensor *g = st_get(&f, t[i].name);
    ck_assert_ptr_nonnull(g);
    ck_assert(g->dtype == t[i].dtype && g->ndim == t[i].ndim && g->nbytes == t[i].nbytes);
    ck_assert(memcmp(g->data, t[i].data, t[i].nbytes) == 0);
  }
  ck_assert_str_eq(st_meta(&f, "in_std"), "0.3530");
  ck_assert_uint_eq(st_numel(st_get(&f, "scalar")), 1);
  st_free(&f);
  /* Bad arguments to the writer. */
  const st_tensor dup[2] = {t[0], t[0]};
  ck_assert_int_eq(st_save(path, dup, 2, NULL, 0, err, sizeof err), RUMUS_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "duplicate"));
  st_tensor wrong = t[0];
  wrong.nbytes = 20;
  ck_assert_int_eq(st_save(path, &wrong, 1, NULL, 0, err, sizeof err), RUMUS_EINVAL);
}
END_TEST

/* A file of the 8-byte length of json, json itself and data bytes. */
static const char *write_raw(const char *name, const char *json, size_t data,
                             long hlen_delta) {
  const char *path = tmp_path(name);
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  uint64_t n = strlen(json) + (uint64_t)hlen_delta;
  for (int i = 0; i < 8; i++) fputc((int)(n >> (8 * i)) & 0xFF, f);
  fputs(json, f);
  for (size_t i = 0; i < data; i++) fputc(0, f);
  fclose(f);
  return path;
}

static void assert_refused(const char *path, int status, const char *needle) {
  st_file f;
  char err[512] = "";
  ck_assert_int_eq(st_load(path, &f, err, sizeof err), status);
  ck_assert_msg(strstr(err, needle) != NULL, "message \"%s\" lacks \"%s\"", err, needle);
  ck_assert_ptr_null(f.buf);
}

#define ENTRY(name, dt, shape, a, b)                                          \
  "\"" name "\":{\"dtype\":\"" dt "\",\"shape\":" shape                       \
  ",\"data_offsets\":[" #a "," #b "]}"

START_TEST(damaged_files) {
  assert_refused(tmp_path("none"), TRAIN_EIO, "cannot open");
  FILE *f = fopen(tmp_path("short"), "wb");
  ck_assert_ptr_nonnull(f);
  fputs("abc", f);
  fclose(f);
  assert_refused(tmp_path("short"), TRAIN_EFORMAT, "too short");
  const char *ok = "{" ENTRY("a", "F32", "[2]", 0, 8) "}";
  assert_refused(write_raw("hlen", ok, 8, 100), TRAIN_EFORMAT, "header length");
  assert_refused(write_raw("trunc", ok, 7, 0), TRAIN_EFORMAT, "cover");
  assert_refused(write_raw("trail", ok, 9, 0), TRAIN_EFORMAT, "cover");
  assert_refused(write_raw("notjson", "{\"a\":", 0, 0), TRAIN_EFORMAT, "JSON");
  assert_refused(write_raw("array", "[1,2]", 0, 0), TRAIN_EFORMAT, "JSON");
  assert_refused(write_raw("dtype", "{" ENTRY("a", "F64", "[1]", 0, 8) "}", 8, 0),
                 TRAIN_EFORMAT, "unsupported dtype F64");
  assert_refused(write_raw("shape", "{" ENTRY("a", "F32", "[3]", 0, 8) "}", 8, 0),
                 TRAIN_EFORMAT, "8 bytes of data for a shape of 3");
  assert_refused(write_raw("neg", "{" ENTRY("a", "F32", "[-2]", 0, 8) "}", 8, 0),
                 TRAIN_EFORMAT, "bad extent");
  assert_refused(write_raw("offs", "{" ENTRY("a", "F32", "[2]", 8, 0) "}", 8, 0),
                 TRAIN_EFORMAT, "bad data_offsets");
  assert_refused(write_raw("overlap",
                           "{" ENTRY("a", "F32", "[2]", 0, 8) "," ENTRY(
                               "b", "F32", "[2]", 4, 12) "}",
                           12, 0),
                 TRAIN_EFORMAT, "overlaps");
  assert_refused(write_raw("gap",
                           "{" ENTRY("a", "F32", "[1]", 0, 4) "," ENTRY(
                               "b", "F32", "[1]", 8, 12) "}",
                           12, 0),
                 TRAIN_EFORMAT, "gap");
  assert_refused(write_raw("range", "{" ENTRY("a", "F32", "[4]", 0, 16) "}", 8, 0),
                 TRAIN_EFORMAT, "truncated");
  assert_refused(write_raw("meta", "{\"__metadata__\":{\"k\":1}}", 0, 0),
                 TRAIN_EFORMAT, "not a string");
  assert_refused(write_raw("entry", "{\"a\":{\"dtype\":\"F32\"}}", 0, 0),
                 TRAIN_EFORMAT, "expected an object");
  assert_refused(write_raw("dims", "{" ENTRY("a", "F32", "[1,1,1,1,1,1,1,1,1]", 0, 4) "}",
                           4, 0),
                 TRAIN_EFORMAT, "dimensions");
}
END_TEST

int main(void) {
  Suite *s = suite_create("safetensors");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
  tcase_add_test(tc, python_fixture);
  tcase_add_test(tc, round_trip);
  tcase_add_test(tc, damaged_files);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
