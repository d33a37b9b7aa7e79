#!/usr/bin/env python3
"""Dump a keras-hub Whisper train step (random weights, float32) as HLO text, for ``hloshard solve`` (round 30,
helper wall: the module of benchmarks/wall_clock.py's Whisper rows).

2 layers, hidden 384, 8 heads, MLP 1536, vocabulary 4096, 80 mels x 800 frames (max encoder length 800), decoder 64
tokens, batch 8; loss: the decoder's output against the token embedding (tied logits), mean next-token cross-entropy;
SGD at 1e-2.  Traced from shapes (no weights materialised by jax), on 8 fake CPU devices.

Usage: ``KERAS_BACKEND=jax python benchmarks/dump_whisper.py OUT.hlo``
"""

import os
import sys


def main(out: str) -> None:
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
    os.environ["KERAS_BACKEND"] = "jax"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import ortools.sat.python.cp_model  # noqa: F401  - before tensorflow (google/or-tools#3230)

    import jax
    import jax.numpy as jnp
    import keras
    import keras_hub

    keras.utils.set_random_seed(0)
    vocab, hidden = 4096, 384
    bb = keras_hub.models.WhisperBackbone(vocabulary_size=vocab, num_layers=2, num_heads=8, hidden_dim=hidden,
                                          intermediate_dim=1536, num_mels=80, max_encoder_sequence_length=800,
                                          max_decoder_sequence_length=64, dtype="float32")
    paths = [v.path for v in bb.trainable_variables]
    non_trainable = [v.value for v in bb.non_trainable_variables]
    params = {v.path: jax.ShapeDtypeStruct(v.shape, "float32") for v in bb.trainable_variables}
    emb = next(p for p in paths if tuple(params[p].shape) == (vocab, hidden))

    def loss_fn(p, batch):
        out, _ = bb.stateless_call([p[k] for k in paths], non_trainable,
                                   {"encoder_features": batch["feat"], "decoder_token_ids": batch["tok"],
                                    "decoder_padding_mask": batch["mask"]}, training=True)
        logp = jax.nn.log_softmax(out["decoder_sequence_output"] @ p[emb].T, -1)
        nll = -jnp.take_along_axis(logp, batch["lab"][..., None], -1)[..., 0]
        return jnp.mean(nll)

    def step(p, batch):
        loss, g = jax.value_and_grad(loss_fn)(p, batch)
        return loss, jax.tree_util.tree_map(lambda a, b: a - 1e-2 * b, p, g)

    b = 8
    batch = {"feat": jax.ShapeDtypeStruct((b, 800, 80), "float32"), "tok": jax.ShapeDtypeStruct((b, 64), "int32"),
             "mask": jax.ShapeDtypeStruct((b, 64), "int32"), "lab": jax.ShapeDtypeStruct((b, 64), "int32")}
    text = jax.jit(step).lower(params, batch).as_text(dialect="hlo")
    with open(out, "w") as fh:
        fh.write(text)
    print(f"{out}: {text.count(chr(10))} lines, {len(paths)} parameters")


if __name__ == "__main__":
    main(sys.argv[1])
