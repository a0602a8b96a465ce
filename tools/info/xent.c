/* xent.c - rumus-info self-check of the xent family (placeholder until the
 * family lands). */
#include "selfcheck.h"

void selfcheck_xent(selfcheck *sc) { (void)sc; }
