/* faultcl.c - see faultcl.h. */
#include "faultcl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The wrappers the linker sends the library's calls to. */
#define FAULTCL_DECLARE(kind, ret, name, params, args) \
  ret CL_API_CALL __wrap_##name params;
FAULTCL_CALLS(FAULTCL_DECLARE)
#undef FAULTCL_DECLARE

/* ---- The driver ------------------------------------------------------- */

static faultcl_table real;
static pthread_once_t real_once = PTHREAD_ONCE_INIT;

static void *must_find(void *lib, const char *name) {
  void *f = dlsym(lib, name);
  if (f == NULL) {
    fprintf(stderr, "faultcl: the OpenCL loader has no %s\n", name);
    abort();
  }
  return f;
}

static void load_real(void) {
  void *lib = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) lib = dlopen("libOpenCL.so", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "faultcl: cannot load the OpenCL loader: %s\n", dlerror());
    abort();
  }
  /* POSIX's way to store dlsym's result in a function pointer. */
#define FAULTCL_LOAD(kind, ret, name, params, args) \
  *(void **)&real.name = must_find(lib, #name);
  FAULTCL_CALLS(FAULTCL_LOAD)
#undef FAULTCL_LOAD
  *(void **)&real.clRetainProgram = must_find(lib, "clRetainProgram");
  *(void **)&real.clGetContextInfo = must_find(lib, "clGetContextInfo");
}

const faultcl_table *faultcl_real(void) {
  pthread_once(&real_once, load_real);
  return &real;
}

/* ---- Calls and faults -------------------------------------------------- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long ncalls;
static const char **names;
static size_t names_cap;
static faultcl_fault faults[FAULTCL_MAX_FAULTS];
static int nfaults;
static const char *phase = "";

/* Counts a call; returns 1 with *err set when it is to fail. */
static int begin_call(const char *name, cl_int *err) {
  faultcl_real();
  pthread_mutex_lock(&lock);
  unsigned long n = ++ncalls;
  if (n > names_cap) {
    size_t cap = names_cap ? 2 * names_cap : 1024;
    const char **p = realloc(names, cap * sizeof *p);
    if (p == NULL) abort();
    names = p;
    names_cap = cap;
  }
  names[n - 1] = name;
  int fail = 0;
  for (int i = 0; i < nfaults; i++)
    if (faults[i].n == n) {
      faults[i].hit = 1;
      faults[i].name = name;
      faults[i].phase = phase;
      *err = faults[i].err;
      fail = 1;
    }
  pthread_mutex_unlock(&lock);
  return fail;
}

void faultcl_fail(unsigned long n, cl_int err) {
  pthread_mutex_lock(&lock);
  if (nfaults < FAULTCL_MAX_FAULTS)
    faults[nfaults++] = (faultcl_fault){n, err, 0, NULL, NULL};
  pthread_mutex_unlock(&lock);
}

void faultcl_phase(const char *p) {
  pthread_mutex_lock(&lock);
  phase = p;
  pthread_mutex_unlock(&lock);
}

unsigned long faultcl_calls(void) {
  pthread_mutex_lock(&lock);
  unsigned long n = ncalls;
  pthread_mutex_unlock(&lock);
  return n;
}

const char *faultcl_name(unsigned long n) {
  pthread_mutex_lock(&lock);
  const char *name = n >= 1 && n <= ncalls ? names[n - 1] : NULL;
  pthread_mutex_unlock(&lock);
  return name;
}

int faultcl_faults(faultcl_fault *out, int max) {
  pthread_mutex_lock(&lock);
  int n = nfaults < max ? nfaults : max;
  memcpy(out, faults, (size_t)n * sizeof *out);
  pthread_mutex_unlock(&lock);
  return n;
}

/* ---- The ledger -------------------------------------------------------- */

typedef enum {
  K_CONTEXT, K_QUEUE, K_DEVICE, K_MEM, K_PROGRAM, K_KERNEL, K_EVENT
} kind;
#define KIND_OF(obj)                                                        \
  _Generic((obj), cl_context: K_CONTEXT, cl_command_queue: K_QUEUE,         \
           cl_device_id: K_DEVICE, cl_mem: K_MEM, cl_program: K_PROGRAM,    \
           cl_kernel: K_KERNEL, cl_event: K_EVENT)
static const char *const kind_name[] = {"context", "queue",  "device", "buffer",
                                        "program", "kernel", "event"};

typedef struct {
  void *obj;
  kind k;
  long refs;    /* references the library holds */
  long refused; /* of which releases failed on purpose */
} entry;

static entry *ledger;
static size_t nledger, ledger_cap;
static char complaints[4096];
static size_t ncomplaints;

static void complain(const char *fmt, ...) {
  size_t used = strlen(complaints);
  va_list ap;
  va_start(ap, fmt);
  if (used + 1 < sizeof complaints)
    vsnprintf(complaints + used, sizeof complaints - used, fmt, ap);
  va_end(ap);
  ncomplaints++;
}

/* The entry of obj (created with 0 references when absent); lock held. */
static entry *find(void *obj, kind k) {
  for (size_t i = 0; i < nledger; i++)
    if (ledger[i].obj == obj) return &ledger[i];
  if (nledger == ledger_cap) {
    size_t cap = ledger_cap ? 2 * ledger_cap : 256;
    entry *p = realloc(ledger, cap * sizeof *p);
    if (p == NULL) abort();
    ledger = p;
    ledger_cap = cap;
  }
  ledger[nledger] = (entry){obj, k, 0, 0};
  return &ledger[nledger++];
}

static void forget(entry *e) { *e = ledger[--nledger]; }

static void take(void *obj, kind k) {
  pthread_mutex_lock(&lock);
  find(obj, k)->refs++;
  pthread_mutex_unlock(&lock);
}

static cl_int release_real(void *obj, kind k) {
  switch (k) {
    case K_CONTEXT: return real.clReleaseContext(obj);
    case K_QUEUE: return real.clReleaseCommandQueue(obj);
    case K_DEVICE: return real.clReleaseDevice(obj);
    case K_MEM: return real.clReleaseMemObject(obj);
    case K_PROGRAM: return real.clReleaseProgram(obj);
    case K_KERNEL: return real.clReleaseKernel(obj);
    case K_EVENT: return real.clReleaseEvent(obj);
  }
  return CL_INVALID_VALUE;
}

/* Books a release by the library; returns 0 (and complains) for an object
 * it holds no reference to, which is then not released.  *gone is set when
 * the library's last reference went. */
static int drop(const char *name, void *obj, kind k, int refused, int *gone) {
  pthread_mutex_lock(&lock);
  entry *e = find(obj, k);
  int ok = e->refs - e->refused > 0;
  if (!ok)
    complain("%s of a %s (%p) the library holds no reference to; ", name,
             kind_name[k], obj);
  else if (refused)
    e->refused++;
  else
    e->refs--;
  *gone = ok && e->refs == 0;
  if (e->refs == 0) forget(e);
  pthread_mutex_unlock(&lock);
  return ok;
}

static void program_gone(cl_program p);

static cl_int release(const char *name, void *obj, kind k) {
  cl_int err;
  int gone;
  if (begin_call(name, &err)) {
    drop(name, obj, k, 1, &gone);
    return err;
  }
  if (!drop(name, obj, k, 0, &gone)) return CL_INVALID_VALUE;
  err = release_real(obj, k);
  if (gone && k == K_PROGRAM) {
    pthread_mutex_lock(&lock);
    program_gone(obj);
    pthread_mutex_unlock(&lock);
  }
  return err;
}

size_t faultcl_unbalanced(char *buf, size_t len) {
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < nledger;) {
    entry *e = &ledger[i];
    for (; e->refused > 0; e->refused--, e->refs--) release_real(e->obj, e->k);
    if (e->refs == 0) {
      if (e->k == K_PROGRAM) program_gone(e->obj);
      forget(e);
    } else {
      i++;
    }
  }
  size_t bad = ncomplaints + nledger;
  size_t used = (size_t)snprintf(buf, len, "%s", complaints);
  for (size_t i = 0; i < nledger && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used,
                             "%ld reference(s) to a %s (%p) kept; ",
                             ledger[i].refs, kind_name[ledger[i].k],
                             ledger[i].obj);
  pthread_mutex_unlock(&lock);
  return bad;
}

void faultcl_reset(void) {
  pthread_mutex_lock(&lock);
  ncalls = 0;
  nfaults = 0;
  phase = "";
  nledger = 0;
  complaints[0] = '\0';
  ncomplaints = 0;
  pthread_mutex_unlock(&lock);
}

/* ---- Memoisation ------------------------------------------------------- */

typedef struct {
  cl_device_id device;
  cl_context_properties platform;
  cl_context context;
} memo_context;

typedef struct {
  cl_context context;
  cl_device_id device;
  char *source, *options;
  cl_program program; /* built, held by the memo */
} memo_program;

/* A program the library created: its context and source, and the program
 * its kernels come from once built. */
typedef struct {
  cl_program program;
  cl_context context;
  char *source;
  cl_program built;
} program_info;

static int memo_on;
static memo_context memo_ctx[8];
static int nmemo_ctx;
static memo_program *memo_prog;
static size_t nmemo_prog, memo_prog_cap;
static program_info *infos;
static size_t ninfos, infos_cap;

void faultcl_memo(int on) {
  pthread_mutex_lock(&lock);
  memo_on = on;
  pthread_mutex_unlock(&lock);
}

void faultcl_memo_clear(void) {
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < nmemo_prog; i++) {
    real.clReleaseProgram(memo_prog[i].program);
    free(memo_prog[i].source);
    free(memo_prog[i].options);
  }
  nmemo_prog = 0;
  for (int i = 0; i < nmemo_ctx; i++)
    real.clReleaseContext(memo_ctx[i].context);
  nmemo_ctx = 0;
  pthread_mutex_unlock(&lock);
}

static cl_context_properties platform_of(const cl_context_properties *p) {
  for (; p != NULL && p[0] != 0; p += 2)
    if (p[0] == CL_CONTEXT_PLATFORM) return p[1];
  return 0;
}

/* A memoised context for one device and platform, retained; or NULL. */
static cl_context memo_context_get(const cl_context_properties *props,
                                   cl_uint n, const cl_device_id *devices) {
  cl_context c = NULL;
  pthread_mutex_lock(&lock);
  for (int i = 0; memo_on && n == 1 && i < nmemo_ctx && c == NULL; i++)
    if (memo_ctx[i].device == devices[0] &&
        memo_ctx[i].platform == platform_of(props))
      c = memo_ctx[i].context;
  pthread_mutex_unlock(&lock);
  if (c != NULL && real.clRetainContext(c) != CL_SUCCESS) c = NULL;
  return c;
}

static void memo_context_put(cl_context c, const cl_context_properties *props,
                             cl_uint n, const cl_device_id *devices) {
  pthread_mutex_lock(&lock);
  if (memo_on && n == 1 && nmemo_ctx < 8 &&
      real.clRetainContext(c) == CL_SUCCESS)
    memo_ctx[nmemo_ctx++] =
        (memo_context){devices[0], platform_of(props), c};
  pthread_mutex_unlock(&lock);
}

cl_context CL_API_CALL __wrap_clCreateContext(
    const cl_context_properties *properties, cl_uint num_devices,
    const cl_device_id *devices, faultcl_ctx_notify notify, void *user_data,
    cl_int *errcode_ret) {
  cl_int err;
  if (begin_call("clCreateContext", &err)) {
    if (errcode_ret != NULL) *errcode_ret = err;
    return NULL;
  }
  cl_context c = memo_context_get(properties, num_devices, devices);
  if (c != NULL) {
    if (errcode_ret != NULL) *errcode_ret = CL_SUCCESS;
  } else {
    c = real.clCreateContext(properties, num_devices, devices, notify,
                             user_data, errcode_ret);
    if (c != NULL) memo_context_put(c, properties, num_devices, devices);
  }
  if (c != NULL) take(c, K_CONTEXT);
  return c;
}

static char *join(cl_uint count, const char **strings, const size_t *lengths) {
  size_t total = 1;
  for (cl_uint i = 0; i < count; i++)
    total += lengths && lengths[i] ? lengths[i] : strlen(strings[i]);
  char *s = malloc(total), *p = s;
  if (s == NULL) abort();
  for (cl_uint i = 0; i < count; i++) {
    size_t n = lengths && lengths[i] ? lengths[i] : strlen(strings[i]);
    memcpy(p, strings[i], n);
    p += n;
  }
  *p = '\0';
  return s;
}

static char *dup(const char *s) {
  char *d = strdup(s ? s : "");
  if (d == NULL) abort();
  return d;
}

/* The record of a program the library created; lock held. */
static program_info *info_of(cl_program p) {
  for (size_t i = 0; i < ninfos; i++)
    if (infos[i].program == p) return &infos[i];
  return NULL;
}

/* Forgets a program the library no longer holds; lock held. */
static void program_gone(cl_program p) {
  program_info *i = info_of(p);
  if (i == NULL) return;
  free(i->source);
  *i = infos[--ninfos];
}

cl_program CL_API_CALL __wrap_clCreateProgramWithSource(
    cl_context context, cl_uint count, const char **strings,
    const size_t *lengths, cl_int *errcode_ret) {
  cl_int err;
  if (begin_call("clCreateProgramWithSource", &err)) {
    if (errcode_ret != NULL) *errcode_ret = err;
    return NULL;
  }
  cl_program p = real.clCreateProgramWithSource(context, count, strings,
                                                lengths, errcode_ret);
  if (p == NULL) return NULL;
  take(p, K_PROGRAM);
  pthread_mutex_lock(&lock);
  if (ninfos == infos_cap) {
    size_t cap = infos_cap ? 2 * infos_cap : 64;
    program_info *q = realloc(infos, cap * sizeof *q);
    if (q == NULL) abort();
    infos = q;
    infos_cap = cap;
  }
  infos[ninfos++] =
      (program_info){p, context, join(count, strings, lengths), NULL};
  pthread_mutex_unlock(&lock);
  return p;
}

/* The memoised build of the library's program p for devices[0] and
 * options, or NULL; lock held. */
static cl_program memo_program_find(const program_info *i, cl_device_id d,
                                    const char *options) {
  for (size_t k = 0; k < nmemo_prog; k++) {
    const memo_program *m = &memo_prog[k];
    if (m->context == i->context && m->device == d &&
        strcmp(m->options, options ? options : "") == 0 &&
        strcmp(m->source, i->source) == 0)
      return m->program;
  }
  return NULL;
}

/* Keeps the freshly built program p; lock held. */
static void memo_program_put(program_info *i, cl_device_id d,
                             const char *options) {
  if (real.clRetainProgram(i->program) != CL_SUCCESS) return;
  if (nmemo_prog == memo_prog_cap) {
    size_t cap = memo_prog_cap ? 2 * memo_prog_cap : 64;
    memo_program *q = realloc(memo_prog, cap * sizeof *q);
    if (q == NULL) abort();
    memo_prog = q;
    memo_prog_cap = cap;
  }
  memo_prog[nmemo_prog++] = (memo_program){i->context, d, dup(i->source),
                                           dup(options), i->program};
}

cl_int CL_API_CALL __wrap_clBuildProgram(cl_program program,
                                         cl_uint num_devices,
                                         const cl_device_id *devices,
                                         const char *options,
                                         faultcl_build_notify notify,
                                         void *user_data) {
  cl_int err;
  if (begin_call("clBuildProgram", &err)) return err;
  pthread_mutex_lock(&lock);
  program_info *i = memo_on && num_devices == 1 ? info_of(program) : NULL;
  cl_program done = i ? memo_program_find(i, devices[0], options) : NULL;
  if (done != NULL) i->built = done;
  pthread_mutex_unlock(&lock);
  if (done != NULL) return CL_SUCCESS;
  err = real.clBuildProgram(program, num_devices, devices, options, notify,
                            user_data);
  pthread_mutex_lock(&lock);
  i = memo_on && num_devices == 1 ? info_of(program) : NULL;
  if (err == CL_SUCCESS && i != NULL) {
    memo_program_put(i, devices[0], options);
    i->built = program;
  }
  pthread_mutex_unlock(&lock);
  return err;
}

cl_kernel CL_API_CALL __wrap_clCreateKernel(cl_program program,
                                            const char *kernel_name,
                                            cl_int *errcode_ret) {
  cl_int err;
  if (begin_call("clCreateKernel", &err)) {
    if (errcode_ret != NULL) *errcode_ret = err;
    return NULL;
  }
  pthread_mutex_lock(&lock);
  program_info *i = info_of(program);
  cl_program from = i && i->built ? i->built : program;
  pthread_mutex_unlock(&lock);
  cl_kernel k = real.clCreateKernel(from, kernel_name, errcode_ret);
  if (k != NULL) take(k, K_KERNEL);
  return k;
}

cl_int CL_API_CALL __wrap_clReleaseProgram(cl_program obj) {
  return release("clReleaseProgram", obj, K_PROGRAM);
}

/* ---- The other wrappers ------------------------------------------------ */

#define WRAP_PLAIN(ret, name, params, args) \
  ret CL_API_CALL __wrap_##name params {    \
    cl_int err;                             \
    if (begin_call(#name, &err)) return err; \
    return real.name args;                  \
  }
#define WRAP_ENQ(ret, name, params, args)                               \
  ret CL_API_CALL __wrap_##name params {                                \
    cl_int err;                                                         \
    if (begin_call(#name, &err)) return err;                            \
    err = real.name args;                                               \
    if (err == CL_SUCCESS && event != NULL) take(*event, K_EVENT);      \
    return err;                                                         \
  }
#define WRAP_CREATE(ret, name, params, args)           \
  ret CL_API_CALL __wrap_##name params {               \
    cl_int err;                                        \
    if (begin_call(#name, &err)) {                     \
      if (errcode_ret != NULL) *errcode_ret = err;     \
      return NULL;                                     \
    }                                                  \
    ret obj = real.name args;                          \
    if (obj != NULL) take(obj, KIND_OF(obj));          \
    return obj;                                        \
  }
#define WRAP_RETAIN(ret, name, params, args)                   \
  ret CL_API_CALL __wrap_##name params {                       \
    cl_int err;                                                \
    if (begin_call(#name, &err)) return err;                   \
    err = real.name args;                                      \
    if (err == CL_SUCCESS) take(obj, KIND_OF(obj));            \
    return err;                                                \
  }
#define WRAP_RELEASE(ret, name, params, args) \
  ret CL_API_CALL __wrap_##name params {      \
    return release(#name, obj, KIND_OF(obj)); \
  }
#define WRAP_MEMO(ret, name, params, args) /* written above */
#define FAULTCL_WRAP(kind, ret, name, params, args) \
  WRAP_##kind(ret, name, params, args)
FAULTCL_CALLS(FAULTCL_WRAP)
