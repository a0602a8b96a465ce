/* activation.c - placeholder until the family lands. */
#include "ref.h"
double ref_activation(int act, double param, double x) { (void)act; (void)param; return x; }
double ref_activation_grad(int act, double param, double x) { (void)act; (void)param; (void)x; return 1; }
