"""Training-step state for :func:`hloshard.jax.auto_shard`: which result leaves are the next value of an
argument leaf (by pytree path, an explicit ``state=`` mapping, or ``donate_argnums`` / ``donate_argnames``),
step 3 of :mod:`hloshard.jax.api`'s flow.
"""

from __future__ import annotations

import inspect

STATE_MODES = ("tie", "pay")


def donated_args(fn, nargs: int, donate_argnums, donate_argnames) -> tuple:
    """The donated positional argument numbers, as ``jax.jit`` reads ``donate_argnums`` /
    ``donate_argnames``; ValueError for a number or name that is not an argument."""
    nums = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums or ())
    names = (donate_argnames,) if isinstance(donate_argnames, str) else tuple(donate_argnames or ())
    out = set()
    for n in nums:
        if not -nargs <= int(n) < nargs:
            raise ValueError(f"donate_argnums {n}: the function is called with {nargs} positional arguments")
        out.add(int(n) % nargs)
    if names:
        try:
            params = [p.name for p in inspect.signature(fn).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            params = []
        for name in names:
            if name not in params[:nargs]:
                raise ValueError(f"donate_argnames {name!r}: not a positional argument of the function "
                                 f"({', '.join(params[:nargs]) or 'no signature'})")
            out.add(params.index(name))
    return tuple(sorted(out))


def find_ties(args, out, donated: tuple, state, state_mode: str) -> list:
    """``(output leaf, input leaf, mode, donated, source)`` for every result leaf that is the next value
    of an argument leaf (flat leaf indices of ``out`` and of the ``args`` tuple; ``args`` / ``out``:
    pytrees of ``ShapeDtypeStruct``).

    ``state`` None: by path -- the whole result, else each top-level element of it, is tied to the first
    positional argument (not yet tied) with the same pytree structure and leaf shapes and dtypes (the
    ``(loss, new_params)`` pattern; a single array only when exactly one argument matches it); a dict: exactly its pairs, ``{output path: input path}`` or
    ``{output path: (input path, mode)}`` with jax key paths (``jax.tree_util.keystr``: ``"[1]['w']"``
    of the result, ``"[0]['w']"`` of the argument tuple) or flat leaf numbers.  Then every leaf of a
    donated argument not yet tied is tied to the first untied result leaf of its shape and dtype (as
    ``jax.jit`` pairs donated buffers).  ValueError for a path that names no leaf or a pair whose shapes
    or dtypes differ."""
    import jax

    in_flat = jax.tree_util.tree_flatten_with_path(args)[0]
    out_flat = jax.tree_util.tree_flatten_with_path(out)[0]
    in_paths = [jax.tree_util.keystr(k) for k, _ in in_flat]
    out_paths = [jax.tree_util.keystr(k) for k, _ in out_flat]

    def aval(leaf):
        return tuple(leaf.shape), str(leaf.dtype)

    ties: dict = {}   # output leaf -> (input leaf, mode, source)
    if state is None:
        used: set = set()
        groups = [((), out)]
        if isinstance(out, (tuple, list)):
            groups += [((jax.tree_util.SequenceKey(j),), o) for j, o in enumerate(out)]
        elif isinstance(out, dict):
            groups += [((jax.tree_util.DictKey(k),), out[k]) for k in sorted(out)]
        for prefix, sub in groups:
            leaves = [j for j, (k, _) in enumerate(out_flat) if tuple(k[:len(prefix)]) == prefix]
            if not leaves or any(j in ties for j in leaves):
                continue
            matches = []
            for i, a in enumerate(args):
                if i in used or jax.tree_util.tree_structure(a) != jax.tree_util.tree_structure(sub):
                    continue
                ins = [q for q, (k, _) in enumerate(in_flat) if k[0] == jax.tree_util.SequenceKey(i)]
                if len(ins) == len(leaves) and all(aval(in_flat[q][1]) == aval(out_flat[j][1])
                                                   for q, j in zip(ins, leaves)):
                    matches.append((i, ins))
            # a bare array matching several arguments (f(w, x) -> x @ w, all square) names no state
            if matches and (len(leaves) > 1 or len(matches) == 1):
                i, ins = matches[0]
                used.add(i)
                for q, j in zip(ins, leaves):
                    ties[j] = (q, state_mode, "path")
    else:
        if not isinstance(state, dict):
            raise ValueError(f"state must be a dict {{output path: input path}} or None, got {type(state).__name__}")

        def index(key, paths, what):
            if isinstance(key, int) and 0 <= key < len(paths):
                return key
            if isinstance(key, str) and key in paths:
                return paths.index(key)
            names = ", ".join(repr(p) + (" (the whole " + what + ")" if p == "" else "") for p in paths)
            raise ValueError(f"state: {key!r} is not a {what} leaf (one of the paths {names}, "
                             f"or an index 0..{len(paths) - 1})" if paths else
                             f"state: {key!r} is not a {what} leaf (the {what} has no array leaf)")

        for o, v in state.items():
            src, mode = (v if isinstance(v, tuple) else (v, state_mode))
            if mode not in STATE_MODES:
                raise ValueError(f"state {o!r}: mode {mode!r} is not one of {', '.join(STATE_MODES)}")
            j, q = index(o, out_paths, "result"), index(src, in_paths, "argument")
            if aval(in_flat[q][1]) != aval(out_flat[j][1]):
                raise ValueError(f"state {out_paths[j]} -> {in_paths[q]}: shapes / dtypes differ "
                                 f"({aval(out_flat[j][1])} vs {aval(in_flat[q][1])})")
            ties[j] = (q, mode, "state")
    tied_in = {q for q, _, _ in ties.values()}
    don = set()
    for q, (k, leaf) in enumerate(in_flat):
        if k[0].idx not in donated:
            continue
        don.add(q)
        if q in tied_in:
            continue
        for j, (_, o) in enumerate(out_flat):
            if j not in ties and aval(o) == aval(leaf):
                ties[j] = (q, "tie", "donate")
                tied_in.add(q)
                break
    return [(j, q, mode, q in don, source) for j, (q, mode, source) in sorted(ties.items())]

