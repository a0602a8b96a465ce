/* optim.c - placeholder until the family lands. */
#include "ref.h"
