/* gemm.c - rumus-info self-check of the gemm family (placeholder until the
 * family lands). */
#include "selfcheck.h"

void selfcheck_gemm(selfcheck *sc) { (void)sc; }
