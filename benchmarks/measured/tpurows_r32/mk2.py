import sys
# mk2.py LHS RHS DNUMS OUT [neg]: both operands computed (negate of a parameter) unless neg=0
l, r, dn, o = sys.argv[1:5]; neg = len(sys.argv) < 6 or sys.argv[5] != "0"
s = f"HloModule m\n\nENTRY e {{\n  a = {l} parameter(0)\n  b = {r} parameter(1)\n"
if neg:
    s += f"  na = {l} negate(a)\n  nb = {r} negate(b)\n  ROOT d = {o} dot(na, nb), {dn}\n}}\n"
else:
    s += f"  ROOT d = {o} dot(a, b), {dn}\n}}\n"
print(s)
