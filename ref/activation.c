/*
 * activation.c - float64 reference activations and their derivatives
 * (act: rumus_activation values; param: the leaky ReLU slope).
 *
 * The GELUs use their sigmoid / erfc forms (x s(2u), 0.5 x erfc(-x/sqrt2)),
 * which are exact in double even where 1 + tanh / 1 + erf would cancel for
 * negative x.  Edges follow PyTorch: relu'(0) = 0, leaky'(0) = slope; at
 * +-inf the limits (GELU(-inf) = 0, act'(+-inf) = 0 or 1); NaN gives NaN.
 */
#include <math.h>

#include "ref.h"

static const double GELU_K = 0.79788456080286535588; /* sqrt(2 / pi) */
static const double GELU_C = 0.044715;

static double sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }
/* sigmoid'(z) in a form without inf * 0. */
static double dsigmoid(double z) {
  double e = exp(-fabs(z));
  return e / ((1.0 + e) * (1.0 + e));
}

double ref_activation(int act, double p, double x) {
  if (isnan(x)) return x;
  switch (act) {
  case 0: return x > 0 ? x : 0.0;
  case 1: return x > 0 ? x : p * x;
  case 2: return sigmoid(x);
  case 3: return tanh(x);
  case 4: {
    if (isinf(x)) return x > 0 ? x : 0.0;
    double s = sigmoid(2.0 * GELU_K * (x + GELU_C * x * x * x));
    return x * s;
  }
  case 5:
    if (isinf(x)) return x > 0 ? x : 0.0;
    return 0.5 * x * erfc(-x / sqrt(2.0));
  }
  return NAN;
}

double ref_activation_grad(int act, double p, double x) {
  if (isnan(x)) return x;
  switch (act) {
  case 0: return x > 0 ? 1.0 : 0.0;
  case 1: return x > 0 ? 1.0 : p;
  case 2: return dsigmoid(x);
  case 3: return 4.0 * dsigmoid(2.0 * x);
  case 4: {
    if (isinf(x)) return x > 0 ? 1.0 : 0.0;
    double z = 2.0 * GELU_K * (x + GELU_C * x * x * x);
    double dz = 2.0 * GELU_K * (1.0 + 3.0 * GELU_C * x * x);
    double t = dsigmoid(z);
    /* x t dz, with t == 0 first: t underflows long before x dz overflows */
    return sigmoid(z) + (t == 0.0 ? 0.0 : x * t * dz);
  }
  case 5: {
    if (isinf(x)) return x > 0 ? 1.0 : 0.0;
    double phi = exp(-0.5 * x * x) * 0.39894228040143267794; /* 1/sqrt(2 pi) */
    return 0.5 * erfc(-x / sqrt(2.0)) + (phi == 0.0 ? 0.0 : x * phi);
  }
  }
  return NAN;
}
