/*
 * trainstate.h: a model's training state as checkpoint tensors, and back.
 *
 * The state is every parameter tensor ("param/wte", ...) and AdamW's two moments
 * ("adam_m/wte", "adam_v/wte", ...), each a global tensor of the model's shape.
 * The scalar state (update count, cursor, clocks, ...) travels in the manifest;
 * see runstate.h.
 */
#ifndef LMT_TRAINSTATE_H
#define LMT_TRAINSTATE_H

#include "ckpt/ckpt.h"
#include "core/error.h"
#include "model/model.h"

/* The model's shape as the checkpoint's state.model records it; the message
 * names the manifest when a field is missing or the shape does not hold together. */
int lmt_trainstate_model(const struct lmt_ckpt *c, struct lmt_gpt_config *cfg, struct lmt_err *err);
/* Does the checkpoint's tensor table hold exactly the training state of the model
 * its state.model describes: param/, adam_m/ and adam_v/ of every model tensor,
 * each with the model's shape, and nothing else? The one definition of "this is
 * train's state", shared by ckpt-inspect --verify and resume. */
int lmt_trainstate_check(const struct lmt_ckpt *c, struct lmt_err *err);

/* The tensors to save, as host memory: copies in *host in the canonical order,
 * gathered from the device's layer-major layout (caller frees *host and *t). */
int lmt_trainstate_tensors(struct lmt_gpt *g, struct lmt_ckpt_tensor **t, int *n, float **host,
			  struct lmt_err *err);
/* Load parameters and moments from c into g (which has its optimizer allocated);
 * every tensor must be present with the model's shape, or the message names it. */
int lmt_trainstate_restore(struct lmt_gpt *g, const struct lmt_ckpt *c, struct lmt_err *err);
/* Load the parameters ("param/NAME") only, for evaluation: no optimizer needed, the
 * moments are not read. The same checks as lmt_trainstate_restore, each chunk's
 * CRC-32C included. */
int lmt_trainstate_load_params(struct lmt_gpt *g, const struct lmt_ckpt *c, struct lmt_err *err);

#endif
