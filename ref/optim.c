/* optim.c - float64 reference for the optimizer steps, with PyTorch's
 * single-tensor update rules (torch.optim.SGD and torch.optim.Adam /
 * AdamW, maximize = False, amsgrad = False).  State stays in double between
 * steps; the caller converts the float gradients the device sees. */
#include <math.h>

#include "ref.h"

void ref_sgd_step(double lr, double momentum, double dampening,
                  double weight_decay, int nesterov, long step, size_t n,
                  double *param, const double *grad, double *momentum_buf) {
  for (size_t i = 0; i < n; i++) {
    double d = grad[i];
    if (weight_decay != 0.0) d += weight_decay * param[i];
    if (momentum != 0.0) {
      double b = step <= 1 ? d
                           : momentum * momentum_buf[i] + (1.0 - dampening) * d;
      momentum_buf[i] = b;
      d = nesterov ? d + momentum * b : b;
    }
    param[i] -= lr * d;
  }
}

void ref_adam_step(double lr, double beta1, double beta2, double eps,
                   double weight_decay, int decoupled, long step, size_t n,
                   double *param, const double *grad, double *m, double *v) {
  const double bc1 = 1.0 - pow(beta1, (double)step);
  const double bc2 = 1.0 - pow(beta2, (double)step);
  const double step_size = lr / bc1, bc2_sqrt = sqrt(bc2);
  for (size_t i = 0; i < n; i++) {
    double g = grad[i];
    if (decoupled)
      param[i] *= 1.0 - lr * weight_decay;
    else if (weight_decay != 0.0)
      g += weight_decay * param[i];
    m[i] = beta1 * m[i] + (1.0 - beta1) * g;
    v[i] = beta2 * v[i] + (1.0 - beta2) * g * g;
    const double denom = sqrt(v[i]) / bc2_sqrt + eps;
    param[i] -= step_size * m[i] / denom;
  }
}
