"""keras-hub Falcon (falcon-rw style: ALiBi, separate q/k/v EinsumDense (hidden, heads, hd), GELU MLP), random
weights, causal-LM train step, hand-written Adam. Expert layout written the way keras-hub's Gemma get_layout_map
writes one (Falcon has no get_layout_map in keras-hub 0.32)."""
import os
os.environ.setdefault("KERAS_BACKEND", "jax")
import numpy as np
import jax, jax.numpy as jnp
import keras, keras_hub
from jax.sharding import PartitionSpec as P

VOCAB, B, S, H, L, NH, FF = 4096, 8, 128, 256, 2, 4, 1024
def build():
    keras.utils.set_random_seed(0)
    bb = keras_hub.models.FalconBackbone(vocabulary_size=VOCAB, num_layers=L, num_attention_heads=NH,
                                         hidden_dim=H, intermediate_dim=FF)
    tv = bb.trainable_variables; ntv = bb.non_trainable_variables
    names = [v.path for v in tv]
    params = [jnp.asarray(v.value) for v in tv]
    nt = [jnp.asarray(v.value) for v in ntv]
    emb_idx = names.index([n for n in names if "token_embedding" in n][0])
    def loss_fn(params, token_ids, targets):
        mask = jnp.ones_like(token_ids)
        h, _ = bb.stateless_call(params, nt, {"token_ids": token_ids, "padding_mask": mask}, training=False)
        logits = h @ params[emb_idx].T          # tied embedding, as FalconCausalLM does (ReversibleEmbedding)
        lp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(lp, targets[..., None], axis=-1))
    def step(params, m, v, count, token_ids, targets):
        loss, g = jax.value_and_grad(loss_fn)(params, token_ids, targets)
        count = count + 1
        b1, b2, lr, eps = 0.9, 0.999, 1e-3, 1e-8
        m = [b1 * a + (1 - b1) * b for a, b in zip(m, g)]
        v = [b2 * a + (1 - b2) * b * b for a, b in zip(v, g)]
        c = count.astype(jnp.float32)
        params = [p - lr * (mm / (1 - b1 ** c)) / (jnp.sqrt(vv / (1 - b2 ** c)) + eps) for p, mm, vv in zip(params, m, v)]
        return loss, params, m, v, count
    rng = np.random.default_rng(0)
    tok = jnp.asarray(rng.integers(0, VOCAB, (B, S)), jnp.int32)
    tgt = jnp.asarray(np.roll(np.asarray(tok), -1, axis=1), jnp.int32)
    m = [jnp.zeros_like(p) for p in params]; v = [jnp.zeros_like(p) for p in params]
    args = (params, m, v, jnp.zeros((), jnp.int32), tok, tgt)
    return step, args, names

def expert_specs(names, shapes):
    """Gemma-style: token embedding (model, data); q/k/v kernel (hidden, heads, hd) -> (data, model, None) (heads on
    model, as Gemma's (heads, hidden, hd) -> (model, data, None)); attention output Dense (hidden, hidden) ->
    (model, data); MLP in (data, model), MLP out (model, data); the rest replicated."""
    specs = []
    for n, s in zip(names, shapes):
        if "token_embedding" in n: sp = P("model", "data")
        elif any(k in n for k in ("query_dense", "key_dense", "value_dense")) and n.endswith("kernel"): sp = P("data", "model", None)
        elif "output_dense" in n and n.endswith("kernel"): sp = P("model", "data")
        elif "dense_h_to_4h" in n and n.endswith("kernel"): sp = P("data", "model")
        elif "dense_4h_to_h" in n and n.endswith("kernel"): sp = P("model", "data")
        else: sp = P()
        specs.append(sp)
    return specs

if __name__ == "__main__":
    step, args, names = build()
    for n, p, s in zip(names, args[0], expert_specs(names, [p.shape for p in args[0]])):
        print(n, p.shape, s)
    print(len(names), sum(p.size for p in args[0]))
    print(jax.jit(step)(*args)[0])
