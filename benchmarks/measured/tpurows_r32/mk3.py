import sys
V = sys.argv[1]
M = {
# 2D chain: h = x @ w1 [32,256]; d = dot(w2 [256,128] contr 0, h contr 1) -> [128,32]
"c2d": """  x = f32[32,128] parameter(0)
  w1 = f32[128,256] parameter(1)
  w2 = f32[256,128] parameter(2)
  h = f32[32,256] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT d = f32[128,32] dot(w2, h), lhs_contracting_dims={0}, rhs_contracting_dims={1}
""",
# 2D chain, the dot result already on the lhs
"c2d_l": """  x = f32[32,128] parameter(0)
  w1 = f32[128,256] parameter(1)
  w2 = f32[256,128] parameter(2)
  h = f32[32,256] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT d = f32[32,128] dot(h, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
""",
# rhs is an elementwise of a parameter (exp)
"exp": """  x = f32[32,256] parameter(0)
  w2 = f32[256,128] parameter(1)
  h = f32[32,256] exponential(x)
  ROOT d = f32[128,32] dot(w2, h), lhs_contracting_dims={0}, rhs_contracting_dims={1}
""",
# rhs is a broadcast-free reduce result
"red": """  x = f32[32,256,4] parameter(0)
  w2 = f32[256,128] parameter(1)
  z = f32[] constant(0)
  h = f32[32,256] reduce(x, z), dimensions={2}, to_apply=add
  ROOT d = f32[128,32] dot(w2, h), lhs_contracting_dims={0}, rhs_contracting_dims={1}
""",
# both from dots
"both": """  x = f32[32,128] parameter(0)
  w1 = f32[128,256] parameter(1)
  a = f32[256,64] parameter(2)
  b = f32[64,128] parameter(3)
  h = f32[32,256] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  w2 = f32[256,128] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT d = f32[128,32] dot(w2, h), lhs_contracting_dims={0}, rhs_contracting_dims={1}
""",
# lhs from dot, rhs param
"lhsdot": """  a = f32[256,64] parameter(0)
  b = f32[64,128] parameter(1)
  h = f32[32,256] parameter(2)
  w2 = f32[256,128] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT d = f32[128,32] dot(w2, h), lhs_contracting_dims={0}, rhs_contracting_dims={1}
""",
}
add = "add {\n  p = f32[] parameter(0)\n  q = f32[] parameter(1)\n  ROOT s = f32[] add(p, q)\n}\n\n"
print("HloModule m\n\n" + add + "ENTRY e {\n" + M[V] + "}\n")
