/*
 * gpt_file.h - the GPT as a safetensors file, named as the state_dict of
 * nanoGPT's GPT (model.py, bias = True) would name it:
 *
 *   transformer.wte.weight [V, C], transformer.wpe.weight [T, C],
 *   transformer.h.<l>.ln_1.weight, .ln_1.bias, .attn.c_attn.weight [3C, C],
 *   .attn.c_attn.bias, .attn.c_proj.weight [C, C], .attn.c_proj.bias,
 *   .ln_2.weight, .ln_2.bias, .mlp.c_fc.weight [4C, C], .mlp.c_fc.bias,
 *   .mlp.c_proj.weight [C, 4C], .mlp.c_proj.bias, transformer.ln_f.weight,
 *   transformer.ln_f.bias, lm_head.weight [V, C]
 *
 * (a tied model writes lm_head.weight as a copy of wte, so that
 * load_state_dict takes the file; the reader takes a model as tied when
 * lm_head.weight is absent, equal to wte, or the metadata says so), F32,
 * with the metadata "format" = "pt", "rumus.model" = "gpt", nanoGPT's
 * GPTConfig fields n_layer, n_head, n_embd, block_size, vocab_size, bias,
 * dropout, "rumus.tied" and "rumus.vocab" (the vocabulary: token i is the
 * byte whose two hex digits are at 2i), and the caller's extra pairs (the
 * training's hyper-parameters).
 */
#ifndef RUMUS_TRAIN_GPT_FILE_H
#define RUMUS_TRAIN_GPT_FILE_H

#include "gpt.h"
#include "gpt_data.h"

/*! gpt_file_is_gpt() : whether path is a safetensors file with a
 *  transformer.wte.weight. */
int gpt_file_is_gpt(const char *path);

/*! gpt_ckpt_save() : p and its vocabulary v to path (PATH.tmp, then
 *  renamed), with nextra more (key, value) metadata pairs extra[2i],
 *  extra[2i+1] (at most 5).  @return RUMUS_OK, RUMUS_ENOMEM, TRAIN_EIO. */
int gpt_ckpt_save(const char *path, const gpt_params *p, const gpt_vocab *v,
                  const char *const *extra, size_t nextra, char *err, size_t errlen);

/*! gpt_ckpt_load() : the model (allocated into p) and vocabulary in path.
 *  @return RUMUS_OK, TRAIN_EIO, TRAIN_EFORMAT (with the tensor or key
 *  named), RUMUS_ENOMEM. */
int gpt_ckpt_load(const char *path, gpt_params *p, gpt_vocab *v, char *err,
                  size_t errlen);

#endif /* RUMUS_TRAIN_GPT_FILE_H */
