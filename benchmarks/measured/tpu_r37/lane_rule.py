"""The lane rule (round 37, fixed 22:37 UTC before the held-out set ran): libtpu 0.0.42.1's layout assignment of a
resharding all-to-all.  chunk = the per-device operand's dims with the split dim divided by k (the non-exchanged
dims, in order, minor last).  The all-to-all exchanges a lane-flat buffer -- a data-moving reshape to
[k, s, N/(k s)] T(s,128) before it (s = 4 / element bytes sublanes), and for element types under 4 bytes a reshape
back after it -- iff (a) no chunk dim is a multiple of 128 and (b) the chunk's minor dim is <= 64.  Else no
flattening: the producer writes an exchanged-dim-major layout (a 128-multiple dim made minor if there is one)."""
def chunk_dims(in_shape, split_dim, k):
    return [(d // k if i == split_dim else d) for i, d in enumerate(in_shape)]
def flattens(chunk):
    chunk = [d for d in chunk]
    return not any(d % 128 == 0 for d in chunk if d > 1) and chunk[-1] <= 64
def post_reshape(elem_bytes):
    return elem_bytes < 4

# refinement read off held-out set 1's two misses (W 64, rows 160 / 192: not flattened; the 160-row dim made minor
# by a copy), 22:38 UTC: (a') no chunk dim of 128 or more.
def flattens_r2(chunk):
    return not any(d >= 128 for d in chunk) and chunk[-1] <= 64

# refinement r3 read off held-out set 2 (22:41 UTC): libtpu picks the chunk dim with the best lane utilisation
# u(d) = d / (128 ceil(d / 128)) as the buffer's minor dim; it flattens iff even the best is half a lane tile or
# less: max u <= 0.5.
def lane_use(d):
    return d / (128 * -(-d // 128))
def flattens_r3(chunk):
    return max(lane_use(d) for d in chunk) <= 0.5
