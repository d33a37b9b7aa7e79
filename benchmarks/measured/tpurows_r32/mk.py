import sys
V = sys.argv[1]
hdr = "HloModule m\n\nENTRY e {\n"
if V in ("A", "B", "C", "D"):
    s = """  x = f32[8,32,128]{2,1,0} parameter(0)
  w1 = f32[8,128,256]{2,1,0} parameter(1)
  w2 = f32[8,256,128]{2,1,0} parameter(2)
  h = f32[8,32,8,256]{3,2,1,0} dot(x, w1), lhs_contracting_dims={2}, rhs_contracting_dims={1}
  z = f32[] constant(0)
  zb = f32[8,32,8,256]{3,2,1,0} broadcast(z), dimensions={}
  m = f32[8,32,8,256]{3,2,1,0} maximum(h, zb)
"""
    if V == "C":
        s = s.replace("  m = f32[8,32,8,256]{3,2,1,0} maximum(h, zb)\n", "  m = f32[8,32,8,256]{3,2,1,0} parameter(3)\n")
    s += "  d = f32[8,128,8,32]{3,2,1,0} dot(w2, m), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={2}, rhs_contracting_dims={3}\n"
    if V == "B":
        s += "  ROOT n = f32[8,128,8,32]{3,2,1,0} negate(d)\n"
    elif V == "D":
        s += "  t = f32[8,32,8,128]{3,2,1,0} transpose(d), dimensions={2,3,0,1}\n  ROOT n = f32[8,32,8,128]{3,2,1,0} negate(t)\n"
    else:
        s += "  t = f32[8,32,8,128]{1,0,3,2} transpose(d), dimensions={2,3,0,1}\n  ROOT n = f32[8,32,8,128]{3,2,1,0} negate(t)\n"
print(hdr + s + "}\n")
