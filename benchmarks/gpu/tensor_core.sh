#!/usr/bin/env bash
# The 3xTF32 tensor-core matmul family (matmul-3xtf32) beside cuBLAS FP32 at the shapes where the SIMT family misses
# its target: its default config crossed with block tile, warp tile and accumulation chain (chain=0, 1, 2: the error
# against the float64 reference is in each record), and with split_k where 128×128 tiles make under two waves on
# 132 SMs (2; and 4 under one wave); one `mage-tune bench --configs` run per shape, cuBLAS FP32 (TF32 off) and
# Triton's IEEE matmul timed beside them.
# Then cuBLAS itself with TF32 on (one pass: 10-bit significands, not FP32's accuracy), for context only, at the
# same shapes (cublas_tf32.json).
# Records: OUT/tensor_core/matmul-3xtf32-SHAPE.{configs.json,json,txt,log}, cublas_tf32.json; OUT/tensor_core.tgz.
#
# usage: OUT=/tmp/w bash benchmarks/gpu/tensor_core.sh [SHAPE ...]
set -u
out=${OUT:-runs}/tensor_core
mkdir -p "$out"
start=$SECONDS
source benchmarks/gpu/crossed_bench.sh

shapes=${*:-m=1024,n=4096,k=1024 m=4096,n=1024,k=2048 m=8192,n=1024,k=1024 m=1024,n=1024,k=8192 \
  m=2048,n=2048,k=6144 m=5120,n=5120,k=5120 m=1536,n=1536,k=1536}
for shape in $shapes; do
  tag=matmul-3xtf32-${shape//[=,]/}
  echo '[{}]' > "$out/$tag.bases.json"
  split=$(python -c "import sys; s = dict(p.split('=') for p in sys.argv[1].split(',')); \
tiles = -(-int(s['m']) // 128) * -(-int(s['n']) // 128); \
print('1,2,4' if tiles < 132 else '1,2' if tiles < 264 else '1')" "$shape")
  bench_crossed matmul-3xtf32 "$shape" "$out/$tag.bases.json" --set bm=128,256 --set bn=128,256 \
    --set wm=32,64 --set wn=32,64 --set chain=0,1,2 --set "split_k=$split"
done

python - "$out/cublas_tf32.json" $shapes <<'PY'
import json, sys
import torch
out, shapes = sys.argv[1], sys.argv[2:]
rows = []
for text in shapes:
    s = {k: int(v) for k, v in (p.split("=") for p in text.split(","))}
    a = torch.rand(s["m"], s["k"], device="cuda") * 2 - 1
    b = torch.rand(s["k"], s["n"], device="cuda") * 2 - 1
    row = {"shape": s}
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        for _ in range(10):
            torch.matmul(a, b)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(20):
            start.record(); torch.matmul(a, b); end.record(); end.synchronize()
            times.append(start.elapsed_time(end) * 1e3)
        row["tf32_us" if tf32 else "fp32_us"] = sorted(times)[len(times) // 2]
    rows.append(row)
    print(row)
json.dump({"note": "torch.matmul, CUDA events, median of 20 warm launches, inputs resident (a hot regime)",
           "torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "rows": rows}, open(out, "w"), indent=1)
PY
tar czf "$out.tgz" -C "$out" .
echo "done after $(( SECONDS - start )) s"
