/* softmax.c - rumus-info self-check of the softmax family. */
#include <stdlib.h>

#include "selfcheck.h"

void selfcheck_softmax(selfcheck *sc) {
  enum { R = 33, C = 1000 };
  float *x = malloc(R * C * sizeof *x), *y = malloc(R * C * sizeof *y),
        *dy = malloc(R * C * sizeof *dy), *dx = malloc(R * C * sizeof *dx);
  double *want = malloc(R * C * sizeof *want);
  if (!x || !y || !dy || !dx || !want) {
    selfcheck_report(sc, "softmax", RUMUS_ENOMEM, 0, 0);
    goto out;
  }
  for (size_t i = 0; i < R * C; i++)
    x[i] = selfcheck_rand(-6, 6), dy[i] = selfcheck_rand(-1, 1);
  rumus_tensor *tx = selfcheck_tensor(sc, R, C, x), *ty = selfcheck_tensor(sc, R, C, NULL),
               *tdy = selfcheck_tensor(sc, R, C, dy), *tdx = selfcheck_tensor(sc, R, C, NULL);
  for (int log_mode = 0; log_mode < 2 && tx && ty && tdy && tdx; log_mode++) {
    int st = (log_mode ? rumus_log_softmax_fwd : rumus_softmax_fwd)(sc->ctx, tx, ty);
    if (st == RUMUS_OK) st = rumus_tensor_download(ty, y, R * C * sizeof *y);
    ref_softmax_fwd(x, R, C, log_mode, want);
    selfcheck_report(sc, log_mode ? "log_softmax_fwd" : "softmax_fwd", st,
                     selfcheck_max_err(y, want, R * C), log_mode ? 2e-5 : 1e-6);
    st = (log_mode ? rumus_log_softmax_bwd : rumus_softmax_bwd)(sc->ctx, ty, tdy, tdx);
    if (st == RUMUS_OK) st = rumus_tensor_download(tdx, dx, R * C * sizeof *dx);
    ref_softmax_bwd(y, dy, R, C, log_mode, want);
    selfcheck_report(sc, log_mode ? "log_softmax_bwd" : "softmax_bwd", st,
                     selfcheck_max_err(dx, want, R * C), 2e-6);
  }
  rumus_tensor_free(tx);
  rumus_tensor_free(ty);
  rumus_tensor_free(tdy);
  rumus_tensor_free(tdx);
out:
  free(x);
  free(y);
  free(dy);
  free(dx);
  free(want);
}
