#!/usr/bin/env bash
# First pass over the shapes: can ncu read counters here (the d = 768 and 1024³ winners), the existing matmul space sampled at
# 2048³/4096³/1000³, layer norm at M = 16384 over seven widths, and the same-bytes copy at 4096 × 768.
set -uo pipefail
OUT=${OUT:-runs}; mkdir -p "$OUT"
mt() { python -m mage_tune "$@"; }
LN="--set threads=64 --set rows=2 --set vec=8 --set passes=regs --set reduce=shfl --set rsqrt=approx --set hint=cs --set persist=0"
MM="--set bm=64 --set bn=64 --set bk=32 --set tm=8 --set tn=4 --set stages=3 --set a_vec=8 --set b_vec=16 --set a_trans=0 --set pad=4 --set smem_vec=1"
mt counters layernorm --m 4096 --d 768 $LN --baseline 'triton[num_warps=4]' --baseline copy[copy_two_per_thread] --out "$OUT/counters_ln_4096x768.json" > "$OUT/counters.txt" 2>&1
mt counters matmul --m 2048 --n 2048 --k 2048 $MM --baseline 'torch.matmul (cuBLAS FP32)' --out "$OUT/counters_mm_2048.json" >> "$OUT/counters.txt" 2>&1
mt bench matmul --m 2048 --n 2048 --k 2048 --all --sample 60 --rounds 5 --out "$OUT/mm_2048_sample.json" > "$OUT/mm_2048.txt" 2>&1
SW="--set threads=64,128,256 --set rows=1,2 --set vec=8,16 --set passes=regs --set reduce=shfl --set rsqrt=approx --set hint=cs --set persist=0"
mt bench layernorm --m 4096 --d 768 $SW --rounds 5 --out "$OUT/ln_m4096_d768.json" > "$OUT/ln_m4096_d768.txt" 2>&1
for d in 768 1024 2048 4096 8192 700 1000; do
  mt bench layernorm --m 16384 --d $d $SW --rounds 5 --out "$OUT/ln_m16384_d$d.json" > "$OUT/ln_m16384_d$d.txt" 2>&1
done
mt bench matmul --m 4096 --n 4096 --k 4096 --all --sample 24 --rounds 3 --out "$OUT/mm_4096_sample.json" > "$OUT/mm_4096.txt" 2>&1
mt bench matmul --m 1000 --n 1000 --k 1000 --all --sample 40 --rounds 5 --out "$OUT/mm_1000_sample.json" > "$OUT/mm_1000.txt" 2>&1
