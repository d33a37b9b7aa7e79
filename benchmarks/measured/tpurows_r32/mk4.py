import sys
V = sys.argv[1]
M = {
"ds": """  w = f32[256,128] parameter(0)
  s = f32[4,32,256] parameter(1)
  i = s32[] parameter(2)
  z = s32[] constant(0)
  h3 = f32[1,32,256] dynamic-slice(s, i, z, z), dynamic_slice_sizes={1,32,256}
  h = f32[32,256] reshape(h3)
  ROOT d = f32[128,32] dot(w, h), lhs_contracting_dims={0}, rhs_contracting_dims={1}
""",
"explhs": """  x = f32[32,128] parameter(0)
  w1 = f32[128,256] parameter(1)
  w0 = f32[256,128] parameter(2)
  w2 = f32[256,128] exponential(w0)
  h = f32[32,256] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT d = f32[128,32] dot(w2, h), lhs_contracting_dims={0}, rhs_contracting_dims={1}
""",
"tfold_pc": """  x = f32[32,128] parameter(0)
  w1 = f32[128,256] parameter(1)
  w2 = f32[256,128] parameter(2)
  h = f32[32,256] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  d = f32[128,32] dot(w2, h), lhs_contracting_dims={0}, rhs_contracting_dims={1}
  ROOT t = f32[32,128] transpose(d), dimensions={1,0}
""",
"tfold_cp": """  x = f32[32,128] parameter(0)
  w1 = f32[128,256] parameter(1)
  w2 = f32[256,128] parameter(2)
  h = f32[32,256] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  d = f32[32,128] dot(h, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = f32[128,32] transpose(d), dimensions={1,0}
""",
"gte": """  p = (f32[256,128], f32[32,256]) parameter(0)
  w = f32[256,128] get-tuple-element(p), index=0
  x = f32[32,256] get-tuple-element(p), index=1
  h = f32[32,256] exponential(x)
  ROOT d = f32[128,32] dot(w, h), lhs_contracting_dims={0}, rhs_contracting_dims={1}
""",
"bf": """  x = bf16[32,128] parameter(0)
  w1 = bf16[128,256] parameter(1)
  w2 = bf16[256,128] parameter(2)
  h = bf16[32,256] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT d = bf16[128,32] dot(w2, h), lhs_contracting_dims={0}, rhs_contracting_dims={1}
""",
}
print("HloModule m\n\nENTRY e {\n" + M[V] + "}\n")
