/* optim.c - rumus-info self-check of the optim family (placeholder until the
 * family lands). */
#include "selfcheck.h"

void selfcheck_optim(selfcheck *sc) { (void)sc; }
