inline void one_loss(volatile global float *lp, size_t G, int mean,
                     volatile global uint *cnt, global float *loss,
                     volatile global int *status, local float *la) {
  float a = 0.0f;
  for (size_t i = get_local_id(0); i < G; i += WG) a += lp[i];
  rumus_wg_sum(la, a);
  if (get_local_id(0) != 0) return;
  const float total = la[0];
  loss[0] = mean ? total / (float)*cnt : total;
  atomic_xchg(status + RUMUS_STATUS_SETS + 2, 0);
  if (mean) atomic_xchg(status + RUMUS_STATUS_SETS + 1, 0);
}
inline void one_rows(size_t j, size_t G, volatile global float *lp, volatile global uint *cp, size_t ncount, int mean,
  volatile global int *status, global float *loss, local float *lm, local float *ls, local int *last) {
  rumus_wg_sum(lm, 0.0f);
  if (get_local_id(0) == 0) lp[j] = lm[0];
  if (!rumus_last_group(status + RUMUS_STATUS_SETS + 2, G, last))
    return;
  one_loss(lp, G, mean, cp + ncount, loss, status, ls);
}
inline void one_count(volatile global uint *cp, size_t ncount, volatile global int *status, local float *la, local int *last) {
  rumus_wg_sum(la, 1.0f);
  if (get_local_id(0) == 0) cp[0] = (uint)la[0];
  if (!rumus_last_group(status + RUMUS_STATUS_SETS + 0, ncount, last)) return;
  rumus_wg_sum(la, 2.0f);
  if (get_local_id(0) != 0) return;
  cp[ncount] = 5; atomic_xchg(status + RUMUS_STATUS_SETS + 0, 0); atomic_xchg(status + RUMUS_STATUS_SETS + 1, 1);
}
__kernel RUMUS_WG_ATTR void t(volatile global int *status, global float *out, ulong ncount) {
    local float lm[WG], ls[WG], ld[WG];
    local uint lc[WG], q;
    local int last;
    const size_t groups = get_num_groups(0), G = groups - (size_t)ncount;
    const size_t p = bn_draw(status, groups, &q);
    volatile global float *lp = out + 16;
    volatile global uint *cp = (volatile global uint *)(lp + G);
#if IF_ELSE /* never finishes on PoCL 3.1 */
    if (p < (size_t)ncount)
      one_count(cp, (size_t)ncount, status, ld, &last);
    else
      one_rows(p - (size_t)ncount, G, lp, cp, (size_t)ncount, 1, status, out, lm, ls, &last);
#else /* finishes */
    const int is_count = p < (size_t)ncount;
    if (is_count) one_count(cp, (size_t)ncount, status, ld, &last);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!is_count)
      one_rows(p - (size_t)ncount, G, lp, cp, (size_t)ncount, 1, status, out, lm, ls, &last);
#endif
}
