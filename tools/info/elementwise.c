/* elementwise.c - rumus-info self-check of the elementwise family (placeholder until the
 * family lands). */
#include "selfcheck.h"

void selfcheck_elementwise(selfcheck *sc) { (void)sc; }
