import json
c = []
for W in (16, 48, 72, 80, 112, 128):
    for rows in (24, 64): c.append(dict(root="fusion", W=W, rows=rows, dtype="float32"))
for rows in (160, 192, 256, 8): c.append(dict(root="fusion", W=64, rows=rows, dtype="float32"))
for W in (48, 80): c.append(dict(root="fusion", W=W, rows=32, dtype="bfloat16"))
c.append(dict(root="fusion", W=64, rows=32, dtype="float16"))
for W in (64, 96): c.append(dict(root="fusion", W=W, rows=32, dtype="int8"))
c.append(dict(root="fusion", W=64, rows=32, dtype="int32"))
c += [dict(root="fusion", W=64, rows=32, dtype="float32", k=8), dict(root="fusion", W=96, rows=32, dtype="float32", k=8),
      dict(root="fusion", W=32, rows=64, dtype="bfloat16", k=8), dict(root="fusion", W=64, rows=32, dtype="float32", k=2),
      dict(root="fusion", W=128, rows=32, dtype="float32", k=2),
      dict(root="fusion", W=64, rows=16, B=2, dtype="float32"), dict(root="fusion", W=64, rows=128, B=2, dtype="float32"),
      dict(root="param", W=64, rows=32, dtype="float32"), dict(root="param", W=96, rows=32, dtype="float32")]
print(json.dumps(c))
