"""More sample models for ``scripts/make_samples.py``: the structures ``benchmarks/xla_truth.py`` needs.

They live in their own file so that the committed samples of ``make_samples.py`` keep their bytes
(their stack-frame tables record line numbers of ``make_samples.py``). Same conventions: jax 0.10.2, 8
fake CPU devices, a 2x4 mesh ('data', 'model'), f32, batch on 'data', Megatron-style weights.

* ``attention_6heads``: self-attention forward with 6 heads of 64 (d = 384) on ``model`` = 4: the head
  count does not divide the mesh axis, so Q/K/V split over 'model' (96 columns per device) cut heads.
* ``moe_layer``: 8 experts on 'model' (expert parallel), top-2 routing with ``jax.lax.top_k`` and softmax
  gates; every expert runs on every token, weighted by a one-hot combine tensor (zero outside the top 2).
* ``embedding_lookup``: ``jnp.take`` (a gather) from a vocabulary-parallel table (rows on 'model'),
  ids batch-split on 'data', then a column-parallel projection.
* ``scan_mlp_train_step``: 4 residual MLP blocks run by ``jax.lax.scan`` over stacked weights (a while
  loop forward and one backward), MSE loss, value_and_grad + SGD.
* ``fused_qkv_train_step``: 2 pre-LN transformer layers with a fused QKV matmul split by ``jnp.split``,
  MSE loss, value_and_grad + SGD.

:func:`models` takes the ``make_samples`` module (its ``_jax``, ``_mesh``, ``_spec``, ``_layer_norm``,
``_attention`` helpers) and returns ``{name: builder}``; a builder returns ``(fn, args)``.
"""

from __future__ import annotations

import functools


def attention_6heads(ms):
    jax, jnp = ms._jax()
    mesh = ms._mesh()
    d, heads = 384, 6

    def attention_6heads(p, x):
        a = ms._attention(jax, jnp, x @ p["wq"], x @ p["wk"], x @ p["wv"], heads)
        return x + a @ p["wo"]

    p = {"wq": ms._spec(mesh, (d, d), None, "model"), "wk": ms._spec(mesh, (d, d), None, "model"),
         "wv": ms._spec(mesh, (d, d), None, "model"), "wo": ms._spec(mesh, (d, d), "model", None)}
    return attention_6heads, (p, ms._spec(mesh, (8, 64, d), "data", None, None))


def moe_layer(ms):
    jax, jnp = ms._jax()
    mesh = ms._mesh()
    d, f, experts, k = 128, 256, 8, 2

    def moe_layer(p, x):
        logits = x @ p["router"]                                      # [b, s, E]
        top_vals, top_idx = jax.lax.top_k(logits, k)                  # [b, s, k]
        gates = jax.nn.softmax(top_vals, axis=-1)
        combine = jnp.sum(jax.nn.one_hot(top_idx, experts, dtype=x.dtype) * gates[..., None], axis=-2)
        h = jax.nn.relu(jnp.einsum("bsd,edf->bsef", x, p["w1"]))
        y = jnp.einsum("bsef,efd->bsed", h, p["w2"])
        return x + jnp.einsum("bsed,bse->bsd", y, combine)

    p = {"router": ms._spec(mesh, (d, experts)), "w1": ms._spec(mesh, (experts, d, f), "model", None, None),
         "w2": ms._spec(mesh, (experts, f, d), "model", None, None)}
    return moe_layer, (p, ms._spec(mesh, (8, 32, d), "data", None, None))


def embedding_lookup(ms):
    jax, jnp = ms._jax()
    mesh = ms._mesh()
    from jax.sharding import NamedSharding, PartitionSpec as P

    vocab, d = 4096, 256

    def embedding_lookup(table, w, ids):
        return jnp.tanh(jnp.take(table, ids, axis=0) @ w)

    ids = jax.ShapeDtypeStruct((8, 128), jnp.int32, sharding=NamedSharding(mesh, P("data", None)))
    return embedding_lookup, (ms._spec(mesh, (vocab, d), "model", None), ms._spec(mesh, (d, d), None, "model"), ids)


def scan_mlp_train_step(ms, layers: int = 4):
    jax, jnp = ms._jax()
    mesh = ms._mesh()
    d, f = 256, 512

    def block(h, w):
        w1, w2 = w
        return h + jax.nn.relu(h @ w1) @ w2, None

    def loss_fn(params, x, y):
        h, _ = jax.lax.scan(block, x, params)
        return jnp.mean(jnp.square(h - y))

    params = (ms._spec(mesh, (layers, d, f), None, None, "model"), ms._spec(mesh, (layers, f, d), None, "model", None))
    return _sgd_step(jax, loss_fn, 0.01, "scan_mlp_train_step"), (params, ms._spec(mesh, (64, d), "data", None), ms._spec(mesh, (64, d), "data", None))


def fused_qkv_train_step(ms, layers: int = 2):
    jax, jnp = ms._jax()
    mesh = ms._mesh()
    d, f, heads, batch, seq = 256, 512, 8, 8, 64

    def forward(params, x):
        for p in params:
            h = ms._layer_norm(jnp, x, p["ln1_g"], p["ln1_b"])
            q, k, v = jnp.split(h @ p["wqkv"], 3, axis=-1)
            x = x + ms._attention(jax, jnp, q, k, v, heads) @ p["wo"]
            h = ms._layer_norm(jnp, x, p["ln2_g"], p["ln2_b"])
            x = x + jax.nn.gelu(h @ p["w1"]) @ p["w2"]
        return x

    def loss_fn(params, x, y):
        return jnp.mean(jnp.square(forward(params, x) - y))

    shapes = {"ln1_g": ((d,),), "ln1_b": ((d,),), "wqkv": ((d, 3 * d), None, "model"),
              "wo": ((d, d), "model", None), "ln2_g": ((d,),), "ln2_b": ((d,),),
              "w1": ((d, f), None, "model"), "w2": ((f, d), "model", None)}
    params = [{k: ms._spec(mesh, *v) for k, v in shapes.items()} for _ in range(layers)]
    act = ms._spec(mesh, (batch, seq, d), "data", None, None)
    return _sgd_step(jax, loss_fn, 1e-3, "fused_qkv_train_step"), (params, act, act)


def _sgd_step(jax, loss_fn, lr: float, name: str):
    """``name(params, x, y) -> (loss, params - lr * grad)`` (value_and_grad + SGD); the name is the
    jitted module's name (``jit_<name>``)."""

    def step(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return loss, jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)

    step.__name__ = step.__qualname__ = name
    return step


BUILDERS = (attention_6heads, moe_layer, embedding_lookup, scan_mlp_train_step, fused_qkv_train_step)


def models(make_samples_module) -> dict:
    """``{name: builder()}`` for :data:`BUILDERS`, bound to the ``make_samples`` helpers."""
    return {b.__name__: functools.partial(b, make_samples_module) for b in BUILDERS}
