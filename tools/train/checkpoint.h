/*
 * checkpoint.h - rumus-train's models as safetensors files (safetensors.h),
 * named as the PyTorch state_dict of the same model would name them:
 *
 *   MLP  nn.Sequential(nn.Linear(784, h1), nn.ReLU(), ..., nn.Linear(hk, 10)):
 *        "0.weight" [h1, 784], "0.bias" [h1], "2.weight", "2.bias", ...
 *        (linear layer l is module 2 l)
 *   CNN  a module with conv1, bn1, conv2, bn2, fc1, fc2 (docs/TRAINING.md):
 *        "conv1.weight" [32, 1, 3, 3], "conv1.bias", "bn1.weight",
 *        "bn1.bias", "bn1.running_mean", "bn1.running_var", ...,
 *        "fc2.bias" (num_batches_tracked is not written; PyTorch's
 *        BatchNorm fills it in when a state_dict lacks it)
 *
 * with the metadata "format" = "pt", "rumus.model" = "mlp" or "cnn",
 * "rumus.widths" (the shape, as rumus-train prints it), "rumus.in_mean" and
 * "rumus.in_std" (the input transform).  The writer stores F32 (the master
 * weights); the reader takes F32, F16 or BF16 tensors, derives the model's
 * widths from the tensors' shapes (so a file written from PyTorch loads
 * without rumus's metadata: its inputs are then pixel / 255), and refuses
 * a missing, misshapen, non-finite or unexpected tensor, naming it.
 */
#ifndef RUMUS_TRAIN_CHECKPOINT_H
#define RUMUS_TRAIN_CHECKPOINT_H

#include "cnn.h"
#include "mlp.h"
#include "options.h"

/*! ckpt_is_safetensors() : whether the file at path starts as a
 *  safetensors file does (a plausible length, then '{'). */
int ckpt_is_safetensors(const char *path);

/*! ckpt_save() : the model of kind (mp or cp) to path.
 *  @return RUMUS_OK, RUMUS_ENOMEM, TRAIN_EIO, with the message in err. */
int ckpt_save(const char *path, train_model_kind kind, const mlp_params *mp,
              const cnn_params *cp, char *err, size_t errlen);

/*! ckpt_load() : the model in the file into a new allocation of mp or cp
 *  (the other left zeroed), its kind into *kind.
 *  @return RUMUS_OK, TRAIN_EIO, TRAIN_EFORMAT, RUMUS_ENOMEM. */
int ckpt_load(const char *path, train_model_kind *kind, mlp_params *mp,
              cnn_params *cp, char *err, size_t errlen);

#endif /* RUMUS_TRAIN_CHECKPOINT_H */
