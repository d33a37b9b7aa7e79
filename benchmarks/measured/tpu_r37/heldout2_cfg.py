import json
c = [dict(root="fusion", W=w, rows=r, dtype=d) for (w, r, d) in
     [(64, 136, "float32"), (32, 144, "float32"), (64, 320, "float32"), (32, 200, "float32"), (64, 160, "bfloat16"),
      (48, 130, "float32"), (64, 120, "float32"), (32, 112, "bfloat16"), (56, 40, "float32"), (64, 96, "bfloat16")]]
c += [dict(root="fusion", W=64, rows=16, B=200, dtype="float32"), dict(root="fusion", W=64, rows=16, B=100, dtype="float32")]
print(json.dumps(c))
