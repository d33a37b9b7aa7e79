"""Held-out train steps for the update-layout rule (round 35): attention train steps of benchmarks/attention_heads.py's
form at shapes no earlier round compiled; NAME.pre.hlo / NAME.propagated.hlo (GSPMD's plan) / NAME.mesh in OUT, then
each GSPMD plan copied into OUT/tpu-v5e/ho35/NAME.GSPMD.hlo and OUT/tpu-v6e/ho35/ for tpu.py.
python gen_ho.py OUT [ho35|ho35b]"""
import sys, pathlib, os, shutil
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
WT = os.environ.get("WT", "/work/wt/tpurows")
sys.path[:0] = [WT + "/benchmarks", WT + "/scripts", WT + "/src", WT]
import attention_heads as a
#: (name, heads, model axis, head dim, batch, seq, train); set 1 (written first), set 2 (written after the rule's
#: tie case was read off set 1: held out for the refined rule)
SETS = {"ho35": [
    ("ho_h4m4_d48_s64_train", 4, 4, 48, 8, 64, True),      # d 192
    ("ho_h8m4_d40_s64_train", 8, 4, 40, 8, 64, True),      # d 320
    ("ho_h16m8_d24_s64_train", 16, 8, 24, 8, 64, True),    # d 384, mesh 8
    ("ho_h6m2_d80_s64_train", 6, 2, 80, 8, 64, True),      # d 480, mesh 4x2
    ("ho_h4m4_d128_s32_train", 4, 4, 128, 8, 32, True),    # d 512
], "ho35b": [
    ("hb_h4m2_d64_s64_train", 4, 2, 64, 8, 64, True),      # d 256 over 2: local [256,128], ties
    ("hb_h12m4_d32_s64_train", 12, 4, 32, 8, 64, True),    # d 384 over 4: [384,96]
    ("hb_h10m2_d32_s64_train", 10, 2, 32, 8, 64, True),    # d 320 over 2: [320,160]
    ("hb_h8m8_d80_s32_train", 8, 8, 80, 8, 32, True),      # d 640 over 8: [640,80]
    ("hb_h6m4_d96_s32_train", 6, 4, 96, 8, 32, True),      # d 576 over 4: [576,144]
]}
SET = sys.argv[2] if len(sys.argv) > 2 else "ho35"
a.CASES = SETS[SET]
out = pathlib.Path(sys.argv[1])
names = [c[0] for c in a.CASES]
a._child(out, names)   # in this process: the child of write_cases would read the module's own CASES
for dev in ("tpu-v5e", "tpu-v6e"):
    d = out / dev / SET; d.mkdir(parents=True, exist_ok=True)
    for n in names:
        shutil.copy(out / f"{n}.propagated.hlo", d / f"{n}.GSPMD.hlo")
        shutil.copy(out / f"{n}.mesh", d / f"{n}.mesh")
print(names)
