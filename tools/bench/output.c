/*
 * output.c - rumus-bench's writers: the aligned table on stdout, CSV and
 * JSON.  Times are in microseconds, rates in 1e9 bytes or flops per second.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static int measured(const bench_case *c) { return c->status == RUMUS_OK && c->ns > 0; }
/* "ok", "n/a" (the library lacks the op, or the shape does not fit it) or
 * "failed". */
static const char *status_text(const bench_case *c) {
  if (measured(c)) return "ok";
  if (c->status == RUMUS_EUNSUPPORTED || (c->status == RUMUS_ESHAPE && c->nt == 0)) return "n/a";
  return "failed";
}
static double gbs(const bench_case *c) { return c->bytes / c->ns; }
static double gflops(const bench_case *c) { return c->flops / c->ns; }
/* The copy bandwidths a case is compared with: the copies paired with its
 * runs when it has them (large cases on a CPU), else the run's. */
static double copy_ref(const bench_run *r, const bench_case *c) {
  return c->local_copy_gbs > 0 ? c->local_copy_gbs : r->copy_gbs;
}
static double stream_ref(const bench_run *r, const bench_case *c) {
  return c->local_stream_gbs > 0 ? c->local_stream_gbs : r->stream_gbs;
}
/* Percentages of the copies and the speed against the peer: medians of the
 * per-run ratios when the runs were paired, else ratios of the medians. */
static double pct_copy(const bench_run *r, const bench_case *c) {
  if (c->pct_copy_paired > 0) return c->pct_copy_paired;
  return copy_ref(r, c) > 0 ? 100.0 * gbs(c) / copy_ref(r, c) : 0;
}
static double pct_stream(const bench_run *r, const bench_case *c) {
  if (c->pct_stream_paired > 0) return c->pct_stream_paired;
  return stream_ref(r, c) > 0 ? 100.0 * gbs(c) / stream_ref(r, c) : 0;
}
static double vs_peer(const bench_case *c) {
  return c->speed_ratio > 0 ? c->speed_ratio : c->peer_ns / c->ns;
}

static const char *variant_text(const bench_run *r) {
  return r->gpu_variant ? "work-group variant" : "row variant";
}

void bench_print_table(const bench_run *r, FILE *f) {
  fprintf(f, "rumus-bench %s, %s\n", rumus_version_string(), r->date);
  fprintf(f, "device: %s (%s, %s)\n", r->device, r->is_gpu ? "GPU" : "CPU",
          variant_text(r));
  if (r->dtype != RUMUS_F32)
    fprintf(f, "storage: %s for the ops that take it (the others F32)\n",
            rumus_dtype_name(r->dtype));
  const char *wait = getenv("OMP_WAIT_POLICY");
  fprintf(f, "host:   %s, %d OpenMP threads (OMP_WAIT_POLICY %s); BLAS: %s\n",
          r->host_cpu, r->threads, wait ? wait : "unset",
          r->blas ? r->blas : "none");
  fprintf(f, "host load average (1, 5, 15 min): %s at the start, %s at the end\n",
          r->load_start, r->load_end);
  fprintf(f, "device copy kernel (float4, 2 x %.0f MiB): %.1f GB/s"
             " (one float4 per work-item %.1f, strided grid %.1f)\n",
          (double)r->copy_bytes / 1048576.0, r->copy_gbs, r->copy_forms[0],
          r->copy_forms[1]);
  fprintf(f, "host STREAM copy   (OpenMP, 2 x %.0f MiB): %.1f GB/s\n",
          (double)r->copy_bytes / 1048576.0, r->stream_gbs);
  fprintf(f, "empty kernel (one work-group): %.1f us of device time\n", r->empty_us);
  fprintf(f, "\n%-16s %-20s %9s %4s %11s %8s %8s %6s", "op", "shape", "MB",
          "reps", "rumus_us", "GB/s", "GFLOP/s", "%copy");
  if (!r->is_gpu) fprintf(f, " %7s %-8s %11s %7s", "%stream", "peer", "peer_us", "vs_peer");
  fprintf(f, " %8s\n", "check");
  for (size_t i = 0; i < r->ncases; i++) {
    const bench_case *c = &r->cases[i];
    fprintf(f, "%-16s %-20s %9.3f ", c->op->name, c->shape.text, c->bytes / 1e6);
    if (!measured(c)) {
      if (c->status == RUMUS_EUNSUPPORTED)
        fprintf(f, "   n/a  (not in the library yet)\n");
      else if (c->status == RUMUS_ESHAPE && c->nt == 0)
        fprintf(f, "   n/a  (%s)\n", c->note);
      else
        fprintf(f, "   FAILED  %s\n", c->note);
      continue;
    }
    fprintf(f, "%4d %11.1f %8.1f %8.1f ", c->reps, c->ns / 1e3, gbs(c), gflops(c));
    if (c->op->memory_bound && pct_copy(r, c) > 0)
      fprintf(f, "%5.0f%%", pct_copy(r, c));
    else
      fprintf(f, "%6s", "-");
    if (!r->is_gpu) {
      if (c->op->memory_bound && pct_stream(r, c) > 0)
        fprintf(f, " %6.0f%%", pct_stream(r, c));
      else
        fprintf(f, " %7s", "-");
      if (c->peer_ns > 0)
        fprintf(f, " %-8s %11.1f %6.2fx", c->peer_name, c->peer_ns / 1e3,
                vs_peer(c));
      else
        fprintf(f, " %-8s %11s %7s", "-", "-", "-");
    }
    if (c->check_err >= 0 || isnan(c->check_err))
      fprintf(f, " %8.1e%s\n", c->check_err,
              c->check_err > bench_check_limit(c->dtype) || isnan(c->check_err) ? " BAD" : "");
    else
      fprintf(f, " %8s\n", "-");
  }
  fprintf(f,
          "\nrumus_us: median device time (OpenCL profiling: first kernel start to"
          " last kernel end, the op's kernels queued before they run)"
          " after %d warm-up runs; MB, GB/s, GFLOP/s: the op's compulsory bytes"
          " and flops (rumus-bench --list);\n%%copy: GB/s against the device copy"
          " kernel",
          r->warmup);
  if (!r->is_gpu)
    fprintf(f, "; %%stream: against the host STREAM copy; peer_us: median wall"
               " time of the host peer (omp: OpenMP C loops, openblas: sgemm,"
               " im2col+sgemm: im2col / col2im and OpenBLAS sgemm per image"
               " and group);"
               "\nvs_peer: peer time / rumus time (above 1: rumus is faster); the op, the"
               " peer and (from 64 MiB) both copies alternate run by run, and %%copy,"
               " %%stream and vs_peer are medians of the per-run ratios");
  fprintf(f, "; check: normwise relative error against the peer (gemm: 4096"
             " sampled entries against float64).\n");
}

static void csv_num(FILE *f, int ok, double v) {
  if (ok) fprintf(f, ",%.6g", v);
  else fputs(",", f);
}

int bench_write_csv(const bench_run *r, const char *path) {
  FILE *f = fopen(path, "w");
  if (f == NULL) return -1;
  fprintf(f, "op,family,dtype,shape,bytes,flops,status,reps,rumus_us,rumus_min_us,"
             "rumus_wall_us,rumus_busy_us,gbs,gflops,pct_copy,pct_stream,peer,peer_reps,"
             "peer_us,peer_min_us,"
             "speed_vs_peer,check_err,copy_gbs,stream_gbs,device\n");
  for (size_t i = 0; i < r->ncases; i++) {
    const bench_case *c = &r->cases[i];
    int m = measured(c), p = m && c->peer_ns > 0;
    fprintf(f, "%s,%s,%s,%s,%.0f,%.0f,%s", c->op->name, c->op->family,
            rumus_dtype_name(c->dtype), c->shape.text, c->bytes, c->flops,
            status_text(c));
    if (m) fprintf(f, ",%d", c->reps);
    else fputs(",", f);
    csv_num(f, m, c->ns / 1e3);
    csv_num(f, m, c->min_ns / 1e3);
    csv_num(f, m, c->wall_ns / 1e3);
    csv_num(f, m, c->busy_ns / 1e3);
    csv_num(f, m, m ? gbs(c) : 0);
    csv_num(f, m, m ? gflops(c) : 0);
    csv_num(f, m && c->op->memory_bound && pct_copy(r, c) > 0, m ? pct_copy(r, c) : 0);
    csv_num(f, m && c->op->memory_bound && pct_stream(r, c) > 0, m ? pct_stream(r, c) : 0);
    fprintf(f, ",%s", p ? c->peer_name : "");
    if (p) fprintf(f, ",%d", c->peer_reps);
    else fputs(",", f);
    csv_num(f, p, c->peer_ns / 1e3);
    csv_num(f, p, c->peer_min_ns / 1e3);
    csv_num(f, p, p ? vs_peer(c) : 0);
    csv_num(f, m && c->check_err >= 0, c->check_err);
    fprintf(f, ",%.6g,%.6g,\"%s\"\n", copy_ref(r, c), stream_ref(r, c), r->device);
  }
  return fclose(f) == 0 ? 0 : -1;
}

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

static void json_num(FILE *f, const char *key, int ok, double v) {
  if (ok && isfinite(v)) fprintf(f, ", \"%s\": %.6g", key, v);
  else fprintf(f, ", \"%s\": null", key);
}

int bench_write_json(const bench_run *r, const char *path) {
  FILE *f = fopen(path, "w");
  if (f == NULL) return -1;
  fprintf(f, "{\n  \"tool\": \"rumus-bench\", \"version\": ");
  json_str(f, rumus_version_string());
  fprintf(f, ", \"date\": ");
  json_str(f, r->date);
  fprintf(f, ",\n  \"device\": ");
  json_str(f, r->device);
  fprintf(f, ", \"is_gpu\": %s, \"variant\": \"%s\",\n  \"host_cpu\": ",
          r->is_gpu ? "true" : "false", r->gpu_variant ? "gpu" : "cpu");
  json_str(f, r->host_cpu);
  fprintf(f, ", \"threads\": %d, \"load_start\": \"%s\", \"load_end\": \"%s\", \"blas\": ",
          r->threads, r->load_start, r->load_end);
  if (r->blas) json_str(f, r->blas);
  else fputs("null", f);
  fprintf(f, ",\n  \"copy_bytes\": %zu, \"copy_gbs\": %.6g, \"copy_forms_gbs\": [%.6g, %.6g], "
             "\"stream_gbs\": %.6g, \"empty_kernel_us\": %.6g, \"warmup\": %d,\n  \"results\": [",
          r->copy_bytes, r->copy_gbs, r->copy_forms[0], r->copy_forms[1], r->stream_gbs,
          r->empty_us, r->warmup);
  for (size_t i = 0; i < r->ncases; i++) {
    const bench_case *c = &r->cases[i];
    int m = measured(c), p = m && c->peer_ns > 0;
    fprintf(f, "%s\n    {\"op\": \"%s\", \"family\": \"%s\", \"dtype\": \"%s\", \"shape\": ",
            i ? "," : "", c->op->name, c->op->family, rumus_dtype_name(c->dtype));
    json_str(f, c->shape.text);
    fprintf(f, ", \"dims\": [");
    for (int d = 0; d < c->shape.ndim; d++)
      fprintf(f, "%s%zu", d ? ", " : "", c->shape.d[d]);
    fprintf(f, "], \"trans_a\": %d, \"trans_b\": %d, \"memory_bound\": %s",
            c->shape.ta, c->shape.tb, c->op->memory_bound ? "true" : "false");
    /* The CNN geometry the op used (its defaults filled in). */
    if (c->shape.geom)
      fprintf(f, ", \"geom\": {\"k\": %zu, \"s\": %zu, \"p\": %zu, \"g\": %zu, \"o\": %zu}",
              c->shape.k, c->shape.s, c->shape.p, c->shape.g, c->shape.o);
    fprintf(f, ", \"bytes\": %.0f, \"flops\": %.0f, \"status\": \"%s\"",
            c->bytes, c->flops, status_text(c));
    if (!m) {
      fprintf(f, ", \"note\": ");
      json_str(f, c->note);
    }
    fprintf(f, ", \"reps\": %d", m ? c->reps : 0);
    json_num(f, "rumus_us", m, c->ns / 1e3);
    json_num(f, "rumus_min_us", m, c->min_ns / 1e3);
    json_num(f, "rumus_wall_us", m, c->wall_ns / 1e3);
    json_num(f, "rumus_busy_us", m, c->busy_ns / 1e3);
    json_num(f, "gbs", m, m ? gbs(c) : 0);
    json_num(f, "gflops", m, m ? gflops(c) : 0);
    json_num(f, "pct_copy", m && c->op->memory_bound && pct_copy(r, c) > 0,
             m ? pct_copy(r, c) : 0);
    json_num(f, "pct_stream", m && c->op->memory_bound && pct_stream(r, c) > 0,
             m ? pct_stream(r, c) : 0);
    fprintf(f, ", \"paired\": %s", c->pct_copy_paired > 0 ? "true" : "false");
    json_num(f, "copy_local_gbs", c->local_copy_gbs > 0, c->local_copy_gbs);
    json_num(f, "stream_local_gbs", c->local_stream_gbs > 0, c->local_stream_gbs);
    fprintf(f, ", \"peer\": ");
    if (p) json_str(f, c->peer_name);
    else fputs("null", f);
    json_num(f, "peer_us", p, c->peer_ns / 1e3);
    json_num(f, "peer_min_us", p, c->peer_min_ns / 1e3);
    json_num(f, "speed_vs_peer", p, p ? vs_peer(c) : 0);
    json_num(f, "check_err", m && c->check_err >= 0, c->check_err);
    fputc('}', f);
  }
  fprintf(f, "\n  ]\n}\n");
  return fclose(f) == 0 ? 0 : -1;
}
