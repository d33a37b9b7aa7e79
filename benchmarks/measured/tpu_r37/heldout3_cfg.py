import json
c = [dict(root="fusion", W=w, rows=r, dtype=d) for (w, r, d) in
     [(64, 72, "float32"), (64, 60, "float32"), (40, 66, "float32"), (63, 63, "float32"), (64, 80, "bfloat16"),
      (200, 16, "float32"), (192, 8, "float32"), (130, 8, "float32"), (129, 64, "float32"), (136, 16, "float32"),
      (260, 8, "float32"), (257, 64, "float32"), (60, 60, "bfloat16"), (48, 80, "int8")]]
c += [dict(root="fusion", W=64, rows=16, B=3, dtype="float32"), dict(root="fusion", W=32, rows=8, B=72, dtype="float32"),
      dict(root="fusion", W=48, rows=80, dtype="float32", k=8), dict(root="fusion", W=40, rows=40, dtype="float32", k=2)]
print(json.dumps(c))
