"""BF16 matmul C = A·B on Hopper's own machinery (sm_90a only): tensor copies (TMA) into a ring of shared-memory
stages guarded by mbarriers, a producer warpgroup and one or two consumer warpgroups (warp specialization with
`setmaxnreg`), `wgmma.mma_async` m64nNk16 with FP32 accumulation, and an epilogue from registers to global memory,
either directly or through shared memory and tensor stores (the knob `epilogue`).

The problem. A (M×K) and B (K×N) are row-major BF16 (make_inputs gives float32 arrays the harness rounds to bf16,
device_dtype); C (M×N, row-major) is BF16 (`FAMILY`, "matmul-bf16") or FP32 (`FP32_OUT`, "matmul-bf16-f32out"): the
output dtype is the problem's, not a knob, because the harness allocates the output by the family's device_dtype.
`F16` ("matmul-f16") is the same kernels on FP16 inputs and output: wgmma's .f16 type (whose products are exact in
FP32 as bf16's are), FLOAT16 tensor maps (6 in cuda.h), cvt.rn.f16x2.f32, cuBLAS and both Triton kernels in FP16;
with the same tiles at the same speed it takes matmul-bf16's tuning data at run time where it has none. The
reference is float64 from the inputs as the device holds them. Baselines: torch.matmul in BF16 (cuBLAS; for the FP32
output torch.mm with out_dtype=float32), the Triton tutorial matmul (mage_tune.triton_kernels.matmul_kernel, JIT
launched with the bf16 tensors at the tutorial's own fp16 configs) and Triton's persistent TMA matmul
(matmul_tma_persistent_kernel: min(SMs, tiles) programs walking the tiles, loads and stores through host-side tensor
descriptors, at MATMUL_TMA_CONFIGS), all of kind "triton", so "vs triton" is the best of both.

Operand layouts, as the kernel's shared memory holds them. A stays K-major (each row's K values contiguous: wgmma's
default for A). B is K×N row-major, so N-major: wgmma reads it with imm-trans-b = 1, which BF16 (and F16) support
(transposes exist for those types only, PTX ISA "wgmma.mma_async": imm-trans-a/b "valid only with .f16/.bf16").
Both are copied with the 128-byte swizzle; BK = 64 bf16 = one 128-byte swizzle row.

The kernel (kernels/templates/matmul_bf16.cu.j2; its header comment has the barrier protocol and layouts):
  warpgroup 0    setmaxnreg.dec to 40; one thread issues per k-tile one copy of A (box 64 × BM) and ceil(BN/64)
                 copies of B (boxes 64 × 64, a last one whole where BN is not a multiple of 64), after waiting for the
                 stage's `empty` barrier and arming its `full` barrier with the bytes to come
                 (mbarrier.arrive.expect_tx)
  warpgroups 1.. setmaxnreg.inc to 232 (two consumers), 240 (one) or 152 (three: 192-row tiles split by rows, 96
                 accumulators at most; one or two: 192, 128 with stream-K); wait on `full`, then 4 k16 steps ×
                 M_SUB wgmma per k-tile, one commit group per k-tile, wait_group 1, and release the previous k-tile's
                 stage (one arrival per warp on `empty`); at a tile's end wait_group 0 and store (see "the epilogues")
  schedule       cooperative: the consumers split each tile (its rows, BM / consumers each, or with split=columns its
                 columns); pingpong: each consumer
                 takes whole tiles, the block's alternately, skipping the other's k-tiles in the ring, and their main
                 loops take turns through two more mbarriers (wait on its own before a tile, arrive on the other's
                 once its wgmma completed): one consumer's epilogue runs under the other's wgmma, as CUTLASS's
                 ping-pong kernel schedules them. The turns also keep the shared ring safe: a consumer waits on a
                 stage only once every earlier k-tile was waited on, so no barrier is ever two phases behind. With
                 multicast both blocks of a pair walk the same tiles in the same turns, so a stage is released by
                 the same consumer of each block (4 warps × 2 blocks)
  split          rows (cooperative): consumer c takes rows c·bm/2 .. of the tile by all bn columns (m64n{bn}); columns
                 (cuBLAS's coopB): every row by columns c·bn/2 .. (bm/64 wgmma m64n{bn/2} per k16 step), wgmma's B
                 operand read from that column (transposed: A's rows from row c·bn/2, whole 8-row swizzle atoms;
                 untransposed: B's box c·bn/128, so bn/2 must be whole boxes), C's part stored at that offset; with
                 bm=192 two consumers hold 192 × 192 (144 accumulators a thread)
  stagger        L > 0 (cooperative, persistent, no stream-K): consumer 1 starts its first tile once consumer 0 has
                 issued L k-tiles of it (named barrier CONSUMERS + 2, 256 threads: consumer 0's arrive, consumer 1's
                 wait, once a block), and both then walk the same tiles L k-tiles apart, so that each one's epilogue
                 runs under the other's wgmma instead of both writing C while the tensor cores wait; the ring's
                 releases wait for the trailing consumer, so the leader reads L stages less far ahead
                 (stagger <= stages - 2). Correct on the GPU; no faster at the shapes measured, where the gap to
                 cuBLAS is in the main loop, not between tiles (records/h200-2026-12-05-k-sweep.tar.xz)
  walk           blocks take tiles blockIdx.x, + gridDim.x, ... in grouped order (raster); persistent=1 launches
                 one block per work item (a tile, or with multicast a cluster's pair or quad of tiles) up to the
                 blocks resident at once (a block per SM; in clusters those the GPCs hold: cluster), persistent=0 one
                 per work item (the kernel is the same; only the grid differs)
  stream_k       1 (persistent, cooperative): the grid is every SM a cluster can use (or one block per k-tile where
                 there are fewer).
                 The walkers are the blocks, or with multicast the clusters (a pair's or a quad's blocks walk the same
                 work items, each its own tile of them). The items of the full waves go whole as above, and the
                 k-tiles of the items left over are numbered item by item and dealt out evenly, walker b taking
                 [T·b/G, T·(b+1)/G) of the T. A walker walks its share's segments (one per item it touches) from the
                 last to the first: only the last can stop short of its item's end, so a block has at most one
                 partial sum to give, and gives it first (its workspace slot of bm × bn floats, then its flag up by
                 st.release.gpu). The segment holding an item's last k-tile finishes it: for each lower walker
                 holding an earlier part, nearest first and skipping empty shares, one thread spins on the flag of
                 that walker's block of its own rank (ld.acquire.gpu), the consumers meet at a named barrier, add its
                 slot, meet again, and the flag is lowered for the next launch; then the tile is stored. Waits point
                 only to lower walkers, which give before they wait, and every block of a grid of at most one per SM
                 (clusters fitted to those the device holds at once) is resident: every wait ends. The sums are added
                 in a fixed order: launches are bit-identical. With clusters the wave is the resident clusters' (the
                 tile-count quantization a 2 × 2 group of tiles makes worst). The launcher allocates the workspace
                 (a slot and a zeroed flag per block) once, on torch's device
  cluster        2: blocks launch in pairs (__cluster_dims__); 4 (with multicast): in 2 × 2 groups of tiles. A
                 persistent grid of clusters is planned on the blocks the arch's part holds at once in them (an H100
                 SXM: 132 in pairs, 120 in 2 × 2 clusters; Arch.resident_blocks) and fitted at launch to what the
                 device's driver answers (cuOccupancyMaxActiveClusters), one block per SM at most: a cluster's blocks
                 share a GPC, and where its SM count is not a multiple of the cluster size some SMs stay out
  multicast      1 (with cluster=2; pairing=above, transposed=0: the others are below): a pair takes tiles one
                 above the other (tile rows 2p and 2p+1 of one column), so the same k-tiles of B; block r copies B's
                 boxes j with j % 2 == r into both blocks' shared memory (cp.async.bulk.tensor ...
                 .multicast::cluster, ctaMask 0b11), each block's `full` barrier counting all of B's bytes and its
                 own A's; a stage is free once the consumer warps of both blocks have released it (remote arrivals
                 through mapa: 4 warps × 2 blocks per consumer warpgroup); the lower block of an odd last pair
                 copies no A and stores nothing but keeps the protocol; cluster barriers after the barriers'
                 initialization and before either block exits
  pairing        beside (a multicast pair): the pair takes tiles side by side (tile columns 2q and 2q+1 of one row),
                 so the same k-tiles of A: block r copies the half r of A's rows (bm / 2: A's map has boxes of that
                 height) into both and its own B; the right block of an odd last pair copies its half of A for its
                 partner and stores nothing
  transposed     1: the kernel computes tiles of Cᵀ = Bᵀ·Aᵀ (cuBLAS's NNT kernels' orientation). Its tile rows (bm,
                 wgmma's M) run along C's N and its columns (bn, wgmma's N) along C's M, so the 16-granular side fits
                 a ragged M. wgmma's A operand is B's k-tile from bm / 64 boxes of 64 of B's columns, N-major
                 (imm-trans-a = 1; LBO 8192, SBO 1024, k16 steps of 2048 bytes, as B's descriptor above), its B
                 operand A's k-tile, bn rows K-major (imm-trans-b = 0; A's descriptor above), A's map boxed bn rows
                 deep, so bn needs no whole 64-column boxes. The accumulators hold Dᵀ: kernel row r, column c is
                 C[c][r]. The TMA epilogue writes C's 64 × 64 chunks by stmatrix .trans (each 8 × 8 matrix stored
                 transposed: lane 8i + r addresses chunk row 8(jj + i/2) + r, 16-byte unit (2w + i % 2) ^ r) and
                 stores them through C's map at (kernel row, kernel column); C's rows past the last whole chunk
                 and the direct epilogue store element by element (2 or 4 bytes, guarded by C's M and N). stmatrix
                 moves 2-byte elements, so an FP32 C takes epilogue=direct. Pairs one above the other share A's
                 rows (halves of bn / 2), pairs side by side B's boxes (j % 2 == r), the quad both; stream-K and
                 ping-pong are unchanged (they see only the accumulators)
  multicast      1 with cluster=4: the four blocks take a 2 × 2 group of tiles (rank r: tile row 2p + r % 2, column
  (the quad)     2q + r / 2); the two blocks of a tile row each copy half of A's k-tile (bm / 2 rows: A's map has
                 boxes of that height) into both, those of a tile column half of B's boxes into both, so each block
                 issues half of what its tile loads. A block's stage is written by itself and its two peers, but
                 each consumer warp releases it in all four blocks (4 warps × 4 blocks per consumer warpgroup): a
                 block whose tile lies past M and N receives nothing, and released only by its peers its consumers
                 could run a lap ahead of the diagonal block's and free a stage it still reads. A block whose tile
                 lies past M or N still copies its halves for its peers.
                 For shapes whose rows of A or B start off 128-byte lines (K or N not a multiple of 64), where the
                 copies' L2 traffic, not the tensor cores, bounds a pair

Facts the kernel relies on, and where they come from (PTX ISA 8.x/9.x sections as mirrored at ptx.poole.ai, CUTLASS
at github.com/NVIDIA/cutlass include/cute and include/cutlass/pipeline, cuda.h's driver API as cuda-bindings 13
documents it):
  - wgmma smem descriptor (PTX "Matrix Descriptor Format"; cute/arch/mma_sm90_desc.hpp GmmaDescriptor): start
    address >> 4 in bits 0-13, leading-dimension byte offset >> 4 in 16-29, stride-dimension byte offset >> 4 in
    32-45, base offset in 49-51, layout in 62-63 with 1 = 128-byte swizzle (2 = 64B, 3 = 32B, 0 = none).
  - K-major, 128B swizzle (cute/atom/mma_traits_sm90_gmma.hpp make_gmma_desc<K>: ((8,n),2):((8,SBO),1) in 16-byte
    units): 8 rows of 128 bytes per atom, atoms SBO apart (1024 here), LBO unused ("assumed 1"). Stepping K within
    the 128-byte row adds 32 bytes per k16 to the start address (the swizzle is a function of the address bits, so
    tile bases must be 1024-aligned and the base offset stays 0).
  - MN-major, 128B swizzle (make_gmma_desc<MN>: ((8,n),(8,k)):((1,LBO),(8,SBO)) in 16-byte units; PTX tcgen05
    "Leading dimension stride", same definition: "stride from the first (swizzle-byte-size/16) rows to the next"):
    64 N-contiguous bf16 per 128-byte row, 64-column blocks LBO apart (8192 here: one 64×64 box), 8-row groups of
    K SBO apart (1024).
  - Accumulator fragment of m64nNk16 f32 (cute CLayout_64xN: thread (4,8,4):(128,1,16), value (2,2,N/8):(64,8,512)
    in a column-major 64×N tile): value i of lane l in warp w is row 16w + l/4 + 8·((i/2)%2), column 8·(i/4) +
    2·(l%4) + i%2.
  - wgmma.fence before the first wgmma and after ordinary accesses of the accumulators; chained wgmma on the same
    accumulators of one shape need no fence between them (PTX "wgmma.fence"); wait_group N waits until at most N
    committed groups are pending (PTX "wgmma.wait_group").
  - mbarrier phases (PTX "mbarrier"): try_wait.parity P succeeds once the phase of parity P has completed, so a
    fresh barrier (phase 0 under way) reports parity 1 complete: the producer starts on parity 1 (CUTLASS
    make_producer_start_state: "Producer starts with an opposite phase as the buffers are initially empty"). A
    phase completes when its pending arrivals reach 0 and its transaction count is 0. try_wait has acquire and
    arrive release semantics at CTA scope by default.
  - Consumer release: CUTLASS arrives on the empty barrier once per consumer thread (cluster of 1) or once per
    warpgroup per destination block (clusters) after warpgroup_wait; here once per warp after that warp's
    wait_group, which covers every warp's share of the wgmma (4 arrivals per consumer warpgroup).
  - Tensor copy: out-of-bounds elements of a box are filled with zeros (oobFill NONE) and the whole box counts
    toward complete_tx (CUTLASS arms its pipelines with constant TmaTransactionBytes at ragged edges too). Boxes of B
    that start at or past N are skipped and not counted, so no copy is entirely out of bounds.
  - cuTensorMapEncodeTiled: global address 16-byte aligned; global strides (the row pitch, K·2 and N·2 bytes) a
    multiple of 16 and < 2^40, hence K and N multiples of 8; box sizes <= 256; with SWIZZLE_128B the box's inner
    extent <= 128 bytes (64 bf16); the map itself 64-byte aligned. Enum values (cuda.h): BFLOAT16 = 9,
    INTERLEAVE_NONE = 0, SWIZZLE_128B = 3, L2_PROMOTION_L2_256B = 3, FLOAT_OOB_FILL_NONE = 0.
  - setmaxnreg (PTX "setmaxnreg"; HOPPER.md): counts 24..256 in steps of 8; it takes effect only with a register
    cap at entry (__launch_bounds__(threads, 1)), each role one branch of an if/else. The pool is what the block
    was launched with, and an .inc the pool cannot cover waits forever. ptxas 13 launches such a kernel with the
    consumers' count capped by the launch bounds (read off the compiles, held by the tests): 168 at 384 threads,
    where 40·128 + 232·256 = 64512 = 168·384 exactly, and 240 at 256 threads (40·128 + 240·128 <= 240·256).
  - A kernel with __cluster_dims__ launches through cuLaunchKernel with a grid divisible by the cluster; on a 1-D
    grid %clusterid.x is blockIdx.x / 2 and %cluster_ctarank blockIdx.x % 2 (read from the special registers).
  - Multicast (PTX "cp.async.bulk.tensor"): the data lands at the same CTA-relative offset as the destination in
    each CTA of ctaMask, and the complete_tx signal goes to the mbarrier at the same offset in each. mapa maps a
    shared::cta address to the same offset in another CTA of the cluster; CUTLASS's ClusterBarrier::arrive(cta_id)
    arrives there with mbarrier.arrive.shared::cluster at default semantics (release, CTA scope: no MEMBAR.GPU in
    SASS, where .release.cluster puts one before every arrival), as here: the consumers' reads were wgmma's, done
    at their wait_group, and the peer's next write is a tensor copy, so no generic-proxy data needs a wider release.
  - barrier.cluster.arrive.release / wait.acquire, by every thread (.aligned), orders the barriers' initialization
    (fence.mbarrier_init.release.cluster) before any peer's use, and keeps a block resident until its peer is done.
  - cvt.rn.bf16x2.f32 d, a, b puts a's conversion in the upper half of d (PTX "cvt"): the higher column goes first.
  - Triton's tl.dot ignores input_precision for inputs other than fp32, so the tutorial kernel's "ieee" leaves its
    bf16 products on the tensor cores (it compiles to wgmma m64n256k16 bf16 offline).

The epilogues (knob `epilogue`):
  direct         each thread stores its accumulator pairs to C: a bf16x2 (4 bytes) or float2 per row and 8-column
                 group, 16 contiguous bytes per row from 4 lanes, guarded by row < M and col < N
  tma            each consumer warpgroup writes its part of C in chunks of 64 rows × 128 bytes (64 bf16 or 32 FP32
                 columns, 8 KB) into one of its staging chunks in shared memory (after the stages, 1024-aligned),
                 128-byte swizzled (16-byte unit u of row r at u ^ (r % 8), conflict-free for the accumulator
                 fragment): bf16 by stmatrix.sync.aligned.m8n8.x4 (an 8 × 8 block of the accumulator fragment is
                 stmatrix's fragment: four blocks, rows +0/+8 of two column groups, per instruction), FP32 by
                 st.shared.v2.f32; every thread then runs fence.proxy.async.shared::cta, the warpgroup meets at named
                 barrier 1 + consumer (bar.sync, 128 threads), and its first thread issues the chunk's tensor store
                 (cp.async.bulk.tensor.2d.global.shared::cta.bulk_group through C's map, SWIZZLE_128B, box 64 rows ×
                 128 bytes) and commits it. Before that barrier the same thread waits cp.async.bulk.wait_group.read 0,
                 so the store of the previous chunk has read the other staging chunk, which the next chunk overwrites:
                 one store is in flight while the next chunk is written (staging=4: four chunks in turn, the wait
                 cp.async.bulk.wait_group.read 2, for the store three chunks back, so up to three are in flight). The
                 tensor store clips rows and columns outside C (no per-element guards); chunks that start outside C
                 are skipped by the whole warpgroup.
                 Where the consumer's width (bn, or bn / 2 with split=columns) is not a multiple of a chunk's (64 BF16
                 or 32 FP32 columns), the columns past its last whole chunk are stored from registers as the direct
                 epilogue does, guarded by row < M and col < N (a width under one chunk takes epilogue=direct).
                 Before exiting, the issuing thread waits cp.async.bulk.wait_group 0. Costs 2 × 8 KB (staging=2) of
                 shared memory per consumer warpgroup, refused where the stages leave no room. With staging=1 a consumer
                 warpgroup has one chunk: the issuing thread waits for the previous store's read and the warpgroup
                 meets before the chunk is written, then meets again before the store (two barriers per chunk, no
                 store under the next chunk's writes), for 8 KB per consumer warpgroup

The launch. A tensor map is a 128-byte, 64-byte-aligned kernel parameter (`const __grid_constant__`), which the
harness's cupy launch (pointers and scalars) cannot pass, so this family launches its own variants (`launcher` for
kind "variant"): the driver's cuTensorMapEncodeTiled (through ctypes on libcuda, into buffers this module aligns;
cuda-bindings' own CUtensorMap object lies in Python memory, 32 mod 64 where this was written) for each buffer set,
then cuLaunchKernel on torch's current stream (a CUDA graph captures it like any launch), with the dynamic shared
memory limit raised by cuFuncSetAttribute. Encoding needs the driver, so it happens on the GPU side only. With
epilogue=tma the kernel takes C's map too (M rows × N columns of C's dtype, FLOAT32 = 7 for the FP32 output, box one
staging chunk), third, before C's pointer: seven parameters instead of six.

What only the hardware can confirm (the descriptors, the swizzle agreement of the operands and of the epilogue's
staging chunks with C's map, the barrier protocols of both schedules, with and without multicast, the fragment
layout, the ctypes launch, and that wgmma reads the first BN % 64 columns of B's last 128-byte-swizzled N-major box
where BN is not a multiple of 64: no source we cite says so, and CUTLASS's layouts use such atoms only whole) is
checked by tests/kernels/test_gpu_matmul_bf16.py: every knob value at ragged shapes against a float64 reference,
repeats and graph replays bit-identical (passed on an H200). The CPU checks what it can:
every config compiles for sm_90a with HGMMA, UTMALDG (and UTMASTG for epilogue=tma), the mbarrier operations and
USETMAXREG in its SASS and no spills (tests/kernels/test_matmul_bf16_family.py).

Measured on an H200 (records/h200-2026-12-03-pingpong.tar.xz): the ping-pong schedule is correct but no faster than
the cooperative one here (193.6 µs at 4096³ with 128 × 128 tiles against cooperative 128 × 256's 178.3): a
consumer's whole tile must fit its registers, which leaves it the smaller tiles. Stream-K (stream_k=1) is for the
shapes whose last wave is part-full (8192 × 8192 × 2048 at 128 × 256: 2048 tiles are 15.5 waves of 132): its walk is
checked on the CPU (tests/kernels/test_matmul_bf16_stream_k.py: the kernel's own walk compiled for the host, over
grids with empty shares, fewer tiles than blocks and one k-tile), its exchange on the GPU (test_gpu_matmul_bf16.py:
test_stream_k_shares_the_last_wave, the repeat and cover tests; passed on an H200). Correct, but not the best config
at the shapes measured (records/h200-2026-12-03-stream-k.tar.xz): at 4224 × 2304 × 4096 it takes 128 × 256 from
130.0 to 109.0 µs where 128 × 192 without it runs 102.5; at 8192 × 8192 × 2048 it gains nothing. The 2 × 2 quad
(cluster=4) is what a ragged N needs (rows of B off 128-byte lines make a block's copies request-bound; sharing A
along the tile row and B along the column halves each block's copies): 3000 × 5000 × 3000 at 1.026 × cuBLAS BF16
against the pair's 1.12 × (records/h200-2026-12-03-quad.tar.xz). Its GPU tests
(test_quads_share_a_along_rows_and_b_along_columns_at_ragged_edges, the cover and repeat tests) passed on an H200.
Any K and N run: where one is not a multiple of 8 (a tensor map's row pitch is a multiple of 16 bytes), the launcher
runs the variant on zero-padded copies (PaddedLauncher: A where K is off the pitch, B and C where N is), made by a
row-pitch copy kernel (pitch_copy.py), and the copies are part of what is timed. At 2900 × 4700 × 3100 a 128 × 256
quad runs 188.00 µs against cuBLAS BF16's 466.18, which falls off the pitch too: 133.15 at 2900 × 4704 × 3104, so
the copies take about 55 µs (torch's strided copies took 90; records/h200-2026-12-04-ragged). Tiles of 160 and 224
columns fit a ragged N better (B's last box copied whole, wgmma reading part of it; C's columns past the last whole
store chunk stored from registers): at the unseen 5000 × 2600 × 4000 a search found the 224-column quad, 0.994 ×
cuBLAS BF16 (a search there without them ended at 1.052 ×), and at 2900 × 4704 × 3104 a 224-column pair runs
1.077 × (1.097 ×); 192-row tiles over three consumer warpgroups were correct but slower at every ragged shape tried
there (K of 2200-3100), and were taken out (same records), then brought back for long K (below). Widths of any
multiple of 8 (the last box read in part from 8 to 56 columns) and stream-K walked by clusters (a pair or quad
shares the last wave's k-tiles as one walker) are correct on the GPU
(records/h200-2026-12-04-wave-fill), but odd multiples of 8 ran 2-4 % slower per tile than the next multiple of 16
(the knob keeps multiples of 16), and neither beat the 224-column pair at 2900 × 4704 × 3104: a 216-column pair,
whose 264 pairs of tiles fill four waves of 66 clusters exactly, ran 122.62 µs against the 224-column pair's 119.55
(cuBLAS 109.97), and stream-K took that pair from 120.83 to 127.60; the search there, with both, ended at the
224-column pair, 1.080 × cuBLAS. cuBLAS's kernel there is NNT, 128 × 208: it computes C's transpose, so its 8-granular
side lies along M (2900 = 14 × 208 - 12), and by that count its per-SM rate is within 1 % of ours. The transposed
kernel (transposed=1) is that orientation (records/h200-2026-12-04-transposed.tar.xz): correct at its first GPU run,
its 128 × 208 tile ran 113.35 µs there against cuBLAS's 111.99 with no cluster, and a search from the shipped data
found it: 1.015 × cuBLAS in the bench, 0.997-1.006 × outside the harness. Pairs side by side (pairing=beside) are
correct and won at no shape benched.
matmul-f16's GPU tests passed there too, and its search at 3000 × 4096 × 3584, started from matmul-bf16's shipped
trials, ended at 1.002 × cuBLAS FP16.
At a long K the tile count decides (records/h100-2026-12-05-three-consumers.tar.xz, on an H100): at 4500 × 3000 × 8800
the 128 × 256 tiles make 3.27 waves, and stream-K, which shares the last wave's k-tiles, left the best of them (a pair)
at 1.06 × cuBLAS BF16, where with whole waves (4224 × 3072 × 8800, 3 × 132 tiles) a single 128 × 256 block matched
cuBLAS cycle for cycle under sustained load. Nsight Compute put the loss in stream-K itself: the tensor pipe busy 92 %
of the active cycles against 96 % without it and cuBLAS's 96 %, and 31 MB more DRAM traffic (the shares of the last
wave read their k-ranges out of step, so the L2 serves them less). cuBLAS runs 192 × 192 tiles there, 2.91 waves; with
three consumer warpgroups of one m64n192 each (the column split's m64n96 steps keep its tensor pipe 81 % busy) a
192 × 192 pair (four stages, one staging chunk) runs 1.019-1.022 × cuBLAS BF16, and 0.34 × at 3000 × 4500 × 8800, where
cuBLAS's heuristics pick a slow kernel.
"""

from __future__ import annotations

import ctypes
import dataclasses
import math
from typing import ClassVar

import numpy as np

from mage_tune import gpu
from mage_tune.arch import Arch, get_arch
from mage_tune.cuda_driver import Driver, LaunchConfig
from mage_tune.errors import ConfigError
from mage_tune.kernels import pitch_copy
from mage_tune.kernels.base import (
    SCALAR_TYPES,
    Baseline,
    Config,
    CudaFamily,
    Knob,
    Launch,
    Scalar,
    Shape,
    Variant,
    shape_words,
    tile_extents,
)
from mage_tune.kernels.matmul import triton_matmul_kernels
from mage_tune.ptx_parts import entry_params
from mage_tune.triton_ref import compile_jit

BF16 = 2  # bytes, as of FP16: the kernels' sizes hold for either input type
BK = 64  # k-tile depth: one 128-byte swizzle row of bf16
PITCH = 8  # bf16 per 16 bytes: a tensor map's rows must start a multiple of 16 bytes apart
SWIZZLE_ATOM = 1024  # bytes: 8 rows of 128; tile bases are aligned to it
SWIZZLE_ROW = 128  # bytes: one row of the 128-byte swizzle, the widest a swizzled box's inner extent may be
CHUNK_ROWS = 64  # rows of one staging chunk of C (epilogue=tma): one m64 wgmma tile
CHUNK_BYTES = CHUNK_ROWS * SWIZZLE_ROW  # 8 KB: 64 bf16 or 32 FP32 columns
STAGING_CHUNKS = 2  # per consumer warpgroup by default: one written while the other's tensor store reads it
BARRIER_BYTES = 8
WARPGROUP = 128
TARGET = "sm_90a"  # wgmma and setmaxnreg exist on this arch-specific target only


def wgmma_refusal(arch: Arch) -> list[str]:
    """Every config's problem on an arch other than TARGET (the refusal of the families built on wgmma)."""
    if arch.name == TARGET:
        return []
    return [
        f"wgmma and setmaxnreg run on sm_90a only (Hopper's arch-specific target); {arch.name} cannot build or run "
        "this kernel"
    ]


# FP32 accumulators per consumer thread, split by rows: ptxas 13 fits up to 192 (a 256 × 192 tile over two consumers,
# a 128 × 192 ping-pong or one-consumer tile) in 232 or 240 registers with no spill, every epilogue, cluster and the
# transposed kernel alike. Tiles over 128 accumulators fill a wave with fewer, larger tiles: 128 tiles of 256 × 160
# cover 2048 × 2560, as cuBLAS's 320 × 128 does there.
MAX_ACCUMULATORS = 192
# Stream-K's fix-up (a workspace walk beside the accumulators) spilled 8-36 bytes at 160 accumulators: it keeps 128.
STREAM_K_ACCUMULATORS = 128
WAVE_SEEDS = 2  # large tiles a search measures early for their wave fill (MatmulBF16.shape_seeds)
WAVE_SEED_ACCUMULATORS = 128  # a tile counts as large from this many accumulators a consumer thread (128 × 256)
# With split=columns, 144: a 192 × 192 tile's (three m64n96 wgmma per consumer), which ptxas 13 fits in 232 registers
# with no spill (as it does the other column splits of 132-144); over that, not compiled, so the space leaves it out.
COLUMNS_ACCUMULATORS = 144
# Three consumer warpgroups (a 192-row tile split by rows, one m64 each) get 152 registers each (128 × (40 + 3 × 152)
# <= 512 threads × 128, what the block launches with): room for 96 accumulators, a 192 × 192 tile's
THREE_CONSUMER_REGISTERS = 152
THREE_CONSUMER_ACCUMULATORS = 96
PRODUCER_REGISTERS = 40
REGISTER_FILE = 65536  # 32-bit registers per SM (and per block)
MAX_REGISTERS = 255  # per thread, ptxas's limit
FP32_UNIT = 2.0**-24
# Relative drift per product of one tensor-core accumulation chain: twice the 2^-27 measured for TF32 mma.sync on the
# H200 (matmul_3xtf32.CHAIN_DRIFT), as a margin until wgmma's own is measured.
CHAIN_DRIFT = 2.0**-26

# cuda.h enum values for cuTensorMapEncodeTiled and cuFuncSetAttribute (the tests check them against cuda-bindings).
TENSOR_MAP_BFLOAT16 = 9
TENSOR_MAP_FLOAT32 = 7
TENSOR_MAP_FLOAT16 = 6
TENSOR_MAP_INTERLEAVE_NONE = 0
TENSOR_MAP_SWIZZLE_128B = 3
TENSOR_MAP_L2_PROMOTION_256B = 3
TENSOR_MAP_OOB_FILL_NONE = 0
FUNC_MAX_DYNAMIC_SHARED = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
DEVICE_MULTIPROCESSOR_COUNT = 16  # CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGN = 64


@dataclasses.dataclass(frozen=True)
class InputType:
    """A 2-byte input type the kernels take: wgmma and cvt spell it `ptx`, Triton `triton`, the tables `label`."""

    family: str  # the family's name (with outputs of this type)
    ptx: str
    triton: str
    label: str
    unit: float  # unit roundoff: one rounding of an output of this type
    reduction_switch: str  # torch.backends.cuda.matmul's switch for reduced-precision split-K sums


INPUT_TYPES = {
    "bfloat16": InputType("matmul-bf16", "bf16", "bf16", "BF16", 2.0**-8, "allow_bf16_reduced_precision_reduction"),
    "float16": InputType("matmul-f16", "f16", "fp16", "FP16", 2.0**-11, "allow_fp16_reduced_precision_reduction"),
}

TMA_KERNEL = "persistent-tma"  # a Triton baseline's config key "kernel": triton_kernels.matmul_tma_persistent_kernel
TMA_BARRIER_BYTES = 1024  # room for the mbarriers Triton puts beside the persistent TMA matmul's buffers (24 B seen)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class MatmulBF16(CudaFamily):
    template = "matmul_bf16.cu.j2"
    kernel_name = "matmul_bf16"
    arch_features = "a"  # an sm_90 device runs it as sm_90a ("auto" arch, run-time choices)
    param_names = ("A", "B", "C")  # A and B reach the kernel as their tensor maps; C is the output
    input_dims: ClassVar[dict[str, tuple[str, ...]]] = {"A": ("m", "k"), "B": ("k", "n")}
    scalar_params = (Scalar("M", "int"), Scalar("N", "int"), Scalar("K", "int"))
    dims = ("m", "n", "k")
    default_dims: ClassVar[dict[str, int]] = {"m": 4096, "n": 4096, "k": 4096}
    dim_help: ClassVar[dict[str, str]] = {"m": "rows of A and C", "n": "columns of B and C", "k": "the inner size"}
    baselines = ("triton", "torch")
    # Defaults first: a 128×256 tile over two consumer warpgroups (128 accumulators each), four stages (192 KB) and
    # the TMA-store epilogue's staging (32 KB), persistent, grouped by 8 tile rows. The rest ascend (bm's 192, which
    # only split=columns takes, last).
    knobs = (
        Knob(
            "bm",
            (128, 64, 256, 192),
            "block tile rows: 64-row wgmma tiles, shared among the consumer warpgroups (192: three, with "
            "split=columns)",
        ),
        Knob(
            "bn",
            (256, *range(64, 256, 16)),
            "block tile columns: the N of each wgmma (with split=columns, twice it), any multiple of 16 from 64 to 256 "
            "(B copied in 64-column boxes, "
            "the last one whole where bn is not a multiple of 64), so that a tile count can fill whole waves of SMs "
            "and fit a ragged N (wgmma takes multiples of 8, but on an H200 one wave of 128 × bn tiles ran 2-4 % "
            "slower at 200, 216, 232 and 248 than at the next multiple of 16)",
        ),
        Knob("bk", (BK,), "k-tile depth: 64 bf16, one 128-byte swizzled row (the only depth of this layout)"),
        Knob("stages", (4, 2, 3, 5, 6), "shared-memory stages in the ring: tensor copies in flight ahead of wgmma"),
        Knob(
            "consumers",
            (2, 1, 3),
            "consumer warpgroups (block = 128 × (1 + consumers) threads; three, each 64 rows of a 192-row tile, hold "
            "152 registers each, so at most 96 accumulators: 192 × 192)",
        ),
        Knob(
            "cluster",
            (1, 2, 4),
            "blocks per cluster (__cluster_dims__), launched together on one GPC: 2 in pairs, 4 as a 2 × 2 group of "
            "tiles (with multicast)",
        ),
        Knob(
            "multicast",
            (0, 1),
            "1 (TMA multicast): with cluster=2 the pair shares one operand's k-tiles, each block copying half of "
            "them into both (which one: pairing); with cluster=4 the blocks of a tile row share the row operand and "
            "those of a tile column the column operand, so each block loads half of its tile's data",
        ),
        Knob(
            "raster",
            (8, 0, 4, 16),
            "tile rows per rasterization group (0: row-major tile order): blocks resident together share tiles in L2",
            free=True,
        ),
        Knob(
            "persistent",
            (1, 0),
            "1: a block per SM (in clusters, per SM the GPCs hold them on), at most one per tile, walks the tiles; "
            "0: one block per tile",
        ),
        Knob(
            "epilogue",
            ("tma", "direct"),
            "how C is written: tma, through swizzled 8 KB shared-memory chunks (two per consumer warpgroup, or one: "
            "staging) that tensor stores copy out (the default: 176.8 µs at 4096³ on an H200 against direct's "
            "191-194, and every search's best since); direct, from registers to global memory",
        ),
        Knob(
            "staging",
            (2, 1, 4),
            "epilogue=tma's staging chunks per consumer warpgroup: 2, one written while the other's tensor store "
            "reads it; 1, each store read out before the next chunk is written, 8 KB per consumer left for the "
            "stages (a fifth stage of 128 × 192 tiles with two consumers); 4, one written while up to three stores "
            "read the others (a 64 × 256 part of C whole: the wait before a chunk's barrier is for a store issued "
            "three chunks earlier), 16 KB more per consumer, at the cost of a stage",
        ),
        Knob(
            "schedule",
            ("cooperative", "pingpong"),
            "cooperative: the consumer warpgroups split each tile (its rows, or its columns: split); pingpong: each "
            "takes whole tiles in turn "
            "(the block's tiles alternate between them), their main loops one after the other, so that one's "
            "epilogue runs under the other's wgmma; needs two consumers (pays on a persistent grid)",
        ),
        Knob(
            "split",
            ("rows", "columns"),
            "how cooperative consumers share a tile: rows, bm / consumers rows each by all bn columns (wgmma "
            "m64n{bn}); columns, every row by bn / 2 columns each (bm / 64 wgmma m64n{bn/2} per k16 step, as "
            "cuBLAS's coopB kernels), which lets two consumers hold a 192-row tile; needs two cooperative "
            "consumers, and without transposed=1 a bn / 2 of whole 64-column boxes (128 or 256)",
        ),
        Knob(
            "stream_k",
            (0, 1),
            "1: the tiles of the last, partial wave are split along K, their k-tiles dealt out evenly to every block "
            "(with multicast, every cluster) of a grid of one block per SM, the partial sums added through a "
            "workspace in global memory (stream-K); needs persistent=1 and the cooperative schedule",
        ),
        Knob(
            "transposed",
            (0, 1),
            "1: the kernel computes tiles of Cᵀ = Bᵀ·Aᵀ (as cuBLAS's NNT kernels do): the tile's bm rows (wgmma's "
            "64-granular side) run along C's N and its bn columns (16-granular) along C's M, so a ragged M is what "
            "bn fits; wgmma reads B's k-tile N-major as its A operand and A's K-major as its B, and C is stored "
            "through stmatrix .trans or element by element (epilogue=tma needs a 2-byte C)",
        ),
        Knob(
            "pairing",
            ("above", "beside"),
            "how a multicast pair (cluster=2, multicast=1) lies: above, its tiles one above the other, sharing the "
            "k-tiles of the tile column's operand (B's, or A's with transposed=1); beside, side by side, sharing the "
            "tile row's (A's, or B's with transposed=1): which one a shape's tile counts fill whole waves with",
        ),
        Knob(
            "stagger",
            (0, 1, 2, 3),
            "k-tiles by which the second of two cooperative consumers starts its first tile after the first: 0, "
            "together (both write C between tiles while the tensor cores wait); more, each one's epilogue under the "
            "other's wgmma, the ring that many stages shorter for the leader; needs a persistent grid without "
            "stream-K, and stages - 2 or fewer",
        ),
    )

    def __init__(self, out_dtype: str = "bfloat16", in_dtype: str = "bfloat16"):
        if in_dtype not in INPUT_TYPES:
            raise ConfigError(f"matmul-bf16: input dtype {in_dtype!r} is not {' or '.join(INPUT_TYPES)}")
        if out_dtype not in (in_dtype, "float32"):
            raise ConfigError(f"matmul-bf16: output dtype {out_dtype!r} is not {in_dtype} or float32")
        self.in_dtype, self.out_dtype = in_dtype, out_dtype
        self.name = INPUT_TYPES[in_dtype].family + ("-f32out" if out_dtype == "float32" else "")

    @property
    def fp32_out(self) -> bool:
        """C holds the FP32 sums; otherwise one rounding of them to the input type."""
        return self.out_dtype == "float32"

    @property
    def out_bytes(self) -> int:
        return 4 if self.fp32_out else BF16

    @property
    def in_type(self) -> InputType:
        return INPUT_TYPES[self.in_dtype]

    # --- the space ---------------------------------------------------------------------------------------------
    @staticmethod
    def threads(config: Config) -> int:
        return WARPGROUP * (1 + config["consumers"])

    @staticmethod
    def tile_sharers(config: Config) -> int:
        """Consumer warpgroups that split one tile's rows: all of them (cooperative), or one (pingpong, or
        split=columns, where each takes every row)."""
        if config.get("schedule") == "pingpong" or config.get("split") == "columns":
            return 1
        return config["consumers"]

    @staticmethod
    def wgmma_n(config: Config) -> int:
        """The N of each wgmma: the consumer's columns of the tile (bn, or bn / consumers with split=columns)."""
        return config["bn"] // config["consumers"] if config.get("split") == "columns" else config["bn"]

    @staticmethod
    def m_sub(config: Config) -> int:
        """m64 wgmma tiles each consumer warpgroup issues per k16 step."""
        return config["bm"] // (64 * MatmulBF16.tile_sharers(config))

    @staticmethod
    def max_accumulators(config: Config) -> int:
        """The most FP32 accumulators per consumer thread the space admits (see MAX_ACCUMULATORS and the limits
        after it)."""
        if config.get("split") == "columns":
            return COLUMNS_ACCUMULATORS
        if config["consumers"] == 3:
            return THREE_CONSUMER_ACCUMULATORS
        return STREAM_K_ACCUMULATORS if config.get("stream_k") else MAX_ACCUMULATORS

    def accumulators(self, config: Config) -> int:
        """FP32 accumulators per consumer thread: M_SUB tiles of 64 × wgmma_n over 128 threads."""
        return self.m_sub(config) * self.wgmma_n(config) // 2

    @staticmethod
    def stage_columns(config: Config) -> int:
        """wgmma's B operand's rows of 64 k in a stage: B's columns, bn rounded up to whole 64-column boxes (a last
        box is copied whole), or with transposed=1 A's bn rows (whole 128-byte rows: no rounding)."""
        return config["bn"] if config.get("transposed") else _cdiv(config["bn"], 64) * 64

    @staticmethod
    def staging_bytes(config: Config) -> int:
        """The TMA-store epilogue's shared memory: `staging` 8 KB chunks of C per consumer warpgroup (none for
        direct)."""
        chunks = config.get("staging", STAGING_CHUNKS)
        return config["consumers"] * chunks * CHUNK_BYTES if config["epilogue"] == "tma" else 0

    @staticmethod
    def shared_bytes(config: Config) -> int:
        """Dynamic shared memory: the stages of wgmma's operands (bm × 64 and 64 × stage_columns), their two
        mbarriers each, the epilogue's staging chunks, 1024 bytes to align the first stage, and with pingpong the two
        mbarriers by which the consumers' main loops take turns."""
        stage = (config["bm"] + MatmulBF16.stage_columns(config)) * BK * BF16
        staging = MatmulBF16.staging_bytes(config)
        turns = 2 * BARRIER_BYTES if config.get("schedule") == "pingpong" else 0
        return SWIZZLE_ATOM + config["stages"] * (stage + 2 * BARRIER_BYTES) + staging + turns

    def bulk_bytes_in_flight(self, config: Config) -> int:
        """Every stage of wgmma's operands filling: the producer's tensor copies of A's and B's boxes."""
        return config["stages"] * (config["bm"] + MatmulBF16.stage_columns(config)) * BK * BF16

    @staticmethod
    def consumer_registers(config: Config) -> int:
        """What setmaxnreg.inc asks for each consumer thread: the block's share once the producer gave up its own."""
        return {1: 240, 2: 232, 3: THREE_CONSUMER_REGISTERS}[config["consumers"]]

    @staticmethod
    def launch_registers(config: Config) -> int:
        """Registers per thread at launch, as ptxas 13 sets them for a kernel with setmaxnreg (read off the
        compiles; the tests hold it): the consumers' count, capped by __launch_bounds__(threads, 1) at 65536 / threads
        rounded down to 8 (a warp's registers come in 256s) and at 255: 168 for 384 threads, 240 for 256, 128 for
        512."""
        cap = min(MAX_REGISTERS, REGISTER_FILE // MatmulBF16.threads(config) // 8 * 8)
        return min(cap, MatmulBF16.consumer_registers(config))

    @staticmethod
    def tiles(config: Config, shape: Shape) -> int:
        rows, cols = tile_extents(config, shape)
        return _cdiv(rows, config["bm"]) * _cdiv(cols, config["bn"])

    def shape_seeds(self, shape: Shape, arch: Arch) -> list[tuple[str, Config]]:
        """The WAVE_SEEDS large tiles (two consumers, 128 accumulators a thread or more: 128 × 256 and 256 × 128 to
        256 × 192) that keep the most of one block a SM busy over their waves at this shape: their tiles over the
        slots of whole waves, times C's share of the tiles' area. At 2048 × 2560 that is 128 tiles of 256 × 160 in
        one wave, where 128 × 256 makes 160 (two waves, the second a fifth full), and cuBLAS picks such a tile there
        (320 × 128); the tuning data, measured before tiles over 128 accumulators existed, holds none of them."""
        slots = arch.resident_blocks(1)
        scored = []
        for bm in (128, 256):
            for bn in self.knob("bn").domain:
                config = self.with_defaults({"bm": bm, "bn": bn, "cluster": 1, "multicast": 0})
                if not WAVE_SEED_ACCUMULATORS <= self.accumulators(config) <= self.max_accumulators(config):
                    continue
                tiles = self.tiles(config, shape)
                waves = _cdiv(tiles, slots)
                # the busy share is M·N / (waves · slots · bm · bn): the least waves · bm · bn (an integer, so ties
                # are exact), then the larger tile, then the fewer rows
                scored.append((waves * bm * bn, -bm * bn, bm, bn, tiles, waves, config))
        seeds = []
        for _, _, bm, bn, tiles, waves, base in sorted(scored, key=lambda row: row[:4]):
            # the tile, its orientation and its cluster kept: the count in the pick's words stays true
            config = self.nearest_valid(base, shape, arch, keep=("bm", "bn", "transposed", "cluster", "multicast"))
            if config is not None:
                wave_words = "one wave" if waves == 1 else f"{waves} waves"
                seeds.append((f"wave fill {bm}x{bn}: {tiles} tiles in {wave_words} of {slots}", config))
            if len(seeds) == WAVE_SEEDS:
                break
        return seeds

    @staticmethod
    def beside(config: Config) -> bool:
        """A multicast pair whose tiles lie side by side (pairing=beside)."""
        return config["cluster"] == 2 and bool(config["multicast"]) and config.get("pairing") == "beside"

    @staticmethod
    def cluster_blocks(config: Config, shape: Shape) -> int:
        """With multicast, the blocks of the clusters that walk the tiles: one per pair of tile rows (the lower tile
        of an odd last pair idles) or, side by side, of tile columns, or per 2 × 2 group of tiles (its tiles past the
        edges idle), times the cluster."""
        extent_rows, extent_cols = tile_extents(config, shape)
        quad, beside = config["cluster"] == 4, MatmulBF16.beside(config)
        rows = _cdiv(extent_rows, (1 if beside else 2) * config["bm"])
        cols = _cdiv(extent_cols, (2 if quad or beside else 1) * config["bn"])
        return rows * cols * config["cluster"]

    def work_units(self, config: Config, shape: Shape) -> tuple[int, str]:
        """What the blocks share out, for explain's tail and the time model's waves: tiles, or with stream_k=1 their
        k-tiles (the last wave's are dealt out one by one, so only a k-tile's worth of the wave idles). A multicast
        cluster walks its pair or 2 × 2 group of tiles together, so its tiles past the edges (the idle one of an
        odd last pair, a quad's past the edge) hold a block each all the same: counted as the clusters' block slots."""
        if config["multicast"]:
            tiles, where = self.cluster_blocks(config, shape), f" in clusters of {config['cluster']}"
        else:
            tiles, where = self.tiles(config, shape), ""
        if config.get("stream_k"):
            return tiles * _cdiv(shape["k"], BK), f"k-tiles{where} (stream-K)"
        return tiles, f"tiles{where}"

    def refusal(self, shape: Shape, arch: Arch) -> list[str]:
        return wgmma_refusal(arch)

    def violations(self, config: Config, shape: Shape, arch: Arch) -> list[str]:
        c, out = config, self.refusal(shape, arch)
        sharers = self.tile_sharers(c)
        if c["bm"] % (64 * sharers):
            out.append(
                f"bm={c['bm']} does not split into 64-row wgmma tiles over {sharers} consumer warpgroups "
                f"(a multiple of {64 * sharers})"
            )
        elif self.accumulators(c) > self.max_accumulators(c):
            stream_k_limit = c.get("stream_k") and self.max_accumulators(c) == STREAM_K_ACCUMULATORS
            split = "(bm / consumers / 64)" if sharers > 1 else "(bm / 64, every row of the tile per consumer)"
            width = "bn / consumers / 2" if c.get("split") == "columns" else "bn / 2"
            out.append(
                f"each consumer thread would hold {self.accumulators(c)} FP32 accumulators ({split} "
                f"× {width}), over the {self.max_accumulators(c)} that fit its {self.consumer_registers(c)} registers"
                + (" beside stream-K's fix-up" if stream_k_limit else "")
            )
        if c.get("split") == "columns":
            if c.get("schedule") == "pingpong" or c["consumers"] != 2:
                out.append(
                    "split=columns shares each tile's columns between two cooperative consumer warpgroups: it needs "
                    f"consumers=2 and schedule=cooperative, not consumers={c['consumers']}, schedule={c['schedule']}"
                )
            elif not c.get("transposed") and self.wgmma_n(c) % 64:
                out.append(
                    f"split=columns starts the second consumer's B operand at column bn / 2 = {self.wgmma_n(c)}, "
                    "which without transposed=1 must be a whole 64-column box of B (bn=128 or 256)"
                )
            chunk = SWIZZLE_ROW // self.out_bytes
            if c["epilogue"] == "tma" and self.wgmma_n(c) < chunk:
                out.append(
                    f"epilogue=tma stores whole chunks of {chunk} columns of a consumer's part, but split=columns "
                    f"gives each consumer bn / 2 = {self.wgmma_n(c)}: every column would go out as epilogue=direct "
                    "stores them (take epilogue=direct)"
                )
        elif c["bm"] == 192 and c["consumers"] != 3:
            out.append(
                "bm=192 (three m64 tiles) is for split=columns (two consumers each take its every row) or "
                f"consumers=3 (one m64 each), not consumers={c['consumers']}"
            )
        if c.get("schedule") == "pingpong" and c["consumers"] != 2:
            out.append(f"schedule=pingpong alternates tiles between two consumer warpgroups, not {c['consumers']}")
        pool = self.threads(c) * self.launch_registers(c)
        wanted = WARPGROUP * (PRODUCER_REGISTERS + c["consumers"] * self.consumer_registers(c))
        if wanted > pool:
            out.append(
                f"setmaxnreg would hand out {wanted} registers, over the {pool} the block launches with "
                f"({self.threads(c)} threads × {self.launch_registers(c)})"
            )
        smem, limit = self.shared_bytes(c), arch.smem_per_block_optin
        if smem > limit:
            staging = self.staging_bytes(c)
            chunks = c.get("staging", STAGING_CHUNKS)
            plus = f" plus epilogue=tma's staging, consumers × {chunks} × 8192 = {staging} bytes," if staging else ""
            out.append(
                f"shared memory stages × (bm + {self.stage_columns(c)}) × 64 × 2 bytes,{plus} with barriers and "
                f"alignment, = {smem} B "
                f"exceeds the {limit} B a block may opt into on {arch.name}"
            )
        if c.get("transposed") and c["epilogue"] == "tma" and self.fp32_out:
            out.append(
                "transposed=1 with epilogue=tma stages C's chunks by stmatrix .trans, which moves 2-byte elements: "
                "an FP32 C takes epilogue=direct"
            )
        if c.get("staging", STAGING_CHUNKS) != STAGING_CHUNKS and c["epilogue"] != "tma":
            out.append(f"staging={c['staging']} counts epilogue=tma's chunks of C: it needs epilogue=tma, not direct")
        if c.get("pairing", "above") != "above" and not (c["cluster"] == 2 and c["multicast"]):
            out.append(
                f"pairing={c['pairing']} lays out a multicast pair's tiles: it needs cluster=2 and multicast=1, not "
                f"cluster={c['cluster']}, multicast={c['multicast']}"
            )
        if c["multicast"] and c["cluster"] == 1:
            out.append("multicast=1 shares copies between the blocks of a cluster: it needs cluster=2 or 4, not 1")
        if c["cluster"] == 4 and not c["multicast"]:
            out.append("cluster=4 is the 2 × 2 group of tiles whose blocks share A and B: it needs multicast=1")
        stagger = c.get("stagger", 0)
        if stagger:
            needs = [
                f"{knob}={c[knob]}"
                for knob, allowed in (
                    ("consumers", 2), ("schedule", "cooperative"), ("persistent", 1), ("stream_k", 0)
                )
                if c.get(knob, 0) != allowed
            ]  # fmt: skip
            if needs:
                out.append(
                    f"stagger={stagger} starts the second of two cooperative consumers behind the first on the "
                    "tiles of a persistent grid: it needs consumers=2, schedule=cooperative, persistent=1 and "
                    f"stream_k=0, not {', '.join(needs)}"
                )
            if stagger > c["stages"] - 2:
                out.append(
                    f"stagger={stagger} holds that many stages for the second consumer: with stages={c['stages']} "
                    f"the first would read fewer than two ahead (stagger <= stages - 2 = {c['stages'] - 2})"
                )
        if c.get("stream_k"):
            needs = [
                f"{knob}={c[knob]}"
                for knob, allowed in (("persistent", 1), ("schedule", "cooperative"))
                if c[knob] != allowed
            ]
            if needs:
                out.append(
                    "stream_k=1 shares the last wave's k-tiles among the blocks (or clusters) of a persistent grid, "
                    "one block per SM, and splits tiles between the consumers: it needs persistent=1 and "
                    f"schedule=cooperative, not {', '.join(needs)}"
                )
        return out

    def constraint_text(self) -> list[str]:
        return [
            "sm_90a only: wgmma and setmaxnreg are arch-specific Hopper instructions (sm_80, sm_90 and Blackwell are "
            "refused)",
            "bm is a multiple of 64 × consumers (cooperative, split=rows) or of 64 (pingpong, split=columns): each "
            "consumer warpgroup issues whole m64 wgmma tiles",
            "schedule=pingpong needs consumers=2 (with persistent=0 a block has one tile: the second consumer idles)",
            "multicast=1 needs cluster=2 (the pair shares one operand) or 4 (a 2 × 2 group shares one along its rows "
            "and the other along its columns); cluster=4 needs multicast=1",
            "stream_k=1 needs persistent=1 and schedule=cooperative (one block per SM, every one resident while the "
            "blocks wait for each other's partial sums)",
            "transposed=1 with epilogue=tma needs a 2-byte C (stmatrix .trans): an FP32 output takes epilogue=direct",
            "pairing=beside needs cluster=2 and multicast=1 (it lays out a multicast pair's tiles)",
            "split=columns needs consumers=2 and schedule=cooperative, and without transposed=1 bn=128 or 256 (the "
            "second consumer's columns start on a 64-column box of B); bm=192 needs split=columns or consumers=3; "
            "epilogue=tma "
            "needs a consumer width (bn / 2 with split=columns) of at least one chunk of C (64 2-byte or 32 FP32 "
            "columns)",
            "staging=1 needs epilogue=tma (it counts the TMA-store epilogue's chunks of C)",
            "stagger > 0 needs consumers=2, schedule=cooperative, persistent=1, stream_k=0 and stagger <= stages - 2",
            f"(bm / consumers / 64) × bn / 2 (pingpong: bm / 64 × bn / 2) <= {MAX_ACCUMULATORS} FP32 accumulators per "
            f"consumer thread ({STREAM_K_ACCUMULATORS} with stream_k=1, {THREE_CONSUMER_ACCUMULATORS} with three "
            "consumers); with split=columns "
            f"bm / 64 × bn / 4 <= {COLUMNS_ACCUMULATORS} (a 192 × 192 tile's)",
            f"setmaxnreg: 128 × ({PRODUCER_REGISTERS} + consumers × 240, 232 or {THREE_CONSUMER_REGISTERS} for one, "
            "two or three) registers <= threads × the registers the block launches with (240 for 256 threads, 168 "
            "for 384, 128 for 512): always true in this space",
            "shared memory 1024 + stages × ((bm + bn, rounded up to 64 unless transposed=1) × 64 × 2 + 16) bytes "
            "(+ consumers × staging × 8192 bytes with epilogue=tma, + 16 with pingpong) <= the arch's opt-in limit "
            "(227 KB)",
            "any M, N, K: ragged edges are zero-filled by the copy engine and guarded in the stores or clipped by the "
            "tensor store; where K or N is not a multiple of 8 (a tensor map's row pitch is a multiple of 16 bytes) "
            "the variant runs on zero-padded copies (PaddedLauncher: A where K is off, B and C where N is), the "
            "copies timed with it",
        ]

    @staticmethod
    def work_blocks(config: Config, shape: Shape) -> int:
        """The blocks of a grid of one block per work item: a tile, or with multicast a cluster's pair or quad of
        tiles; in whole clusters."""
        cluster = config["cluster"]
        if config["multicast"]:
            return MatmulBF16.cluster_blocks(config, shape)
        return _cdiv(MatmulBF16.tiles(config, shape), cluster) * cluster

    @staticmethod
    def walker_blocks(config: Config, shape: Shape) -> int:
        """The most blocks a persistent grid puts to use, in whole clusters: one per work item, or with stream_k=1
        one per k-tile of the work items (a tile, or a cluster's pair or quad of tiles)."""
        blocks = MatmulBF16.work_blocks(config, shape)
        if not config.get("stream_k"):
            return blocks
        walking = blocks if config["multicast"] else MatmulBF16.tiles(config, shape)
        cluster = config["cluster"]
        return _cdiv(walking * _cdiv(shape["k"], BK), cluster) * cluster

    def launch(self, config: Config, shape: Shape, arch: Arch) -> Launch:
        """The grid on the arch's usual part: with persistent=1 or stream_k=1 no more blocks than it holds at once
        in the variant's clusters (120 of the H100's 132 SMs in 2 × 2 clusters: Arch.resident_blocks); the launcher
        asks the driver and fits the grid to the device it runs on."""
        cluster = config["cluster"]
        blocks = self.work_blocks(config, shape)
        # stream_k=1: every SM, however few tiles (the k-tiles of the work items are shared out)
        if config.get("stream_k") or config["persistent"]:
            blocks = min(self.walker_blocks(config, shape), max(cluster, arch.resident_blocks(cluster)))
        return Launch(blocks, self.threads(config), self.shared_bytes(config), cluster=cluster)

    def template_vars(self, config: Config, shape: Shape) -> dict:
        c = config
        wn = self.wgmma_n(c)
        regs = wn // 2
        names = [f"%{i}" for i in range(regs)]
        rows = [", ".join(names[i : i + 8]) for i in range(0, regs, 8)]
        last = len(rows) - 1
        acc_lines = [("{" if i == 0 else "") + row + ("}," if i == last else ",") for i, row in enumerate(rows)]
        operands = [f'"+f"(d[{i}])' for i in range(regs)]
        acc_operands = [", ".join(operands[i : i + 6]) for i in range(0, regs, 6)]
        acc_operands = [line + ("," if i < len(acc_operands) - 1 else "") for i, line in enumerate(acc_operands)]
        out_half = not self.fp32_out
        return {
            **c,
            "label": ",".join(f"{k}={v}" for k, v in c.items()),
            "acc_regs": regs,
            "acc_lines": acc_lines,
            "acc_operands": acc_operands,
            "in_ptx": self.in_type.ptx,
            "in_name": self.in_type.label,
            "out_half": out_half,  # a 2-byte output, converted by cvt.rn.{in_ptx}x2.f32
            "out_ctype": "unsigned short" if out_half else "float",  # the bits: the kernel includes no header
            "out_name": self.in_type.label if out_half else "FP32",
            "out_bytes": self.out_bytes,
            "chunk_cols": SWIZZLE_ROW // self.out_bytes,  # columns of C in one staging chunk's 128-byte row
            "staging_chunks": c.get("staging", STAGING_CHUNKS),
            # columns past the last whole chunk, stored from registers (none: the kernel has no such code)
            "tail_cols": wn % (SWIZZLE_ROW // self.out_bytes) if c["epilogue"] == "tma" else 0,
            "wn": wn,  # the N of each wgmma: bn, or with split=columns bn / consumers
            "columns": c.get("split") == "columns",
            "producer_registers": PRODUCER_REGISTERS,
            "consumer_registers": self.consumer_registers(c),
            "pingpong": c.get("schedule") == "pingpong",
            "stagger": c.get("stagger", 0),
            "quad": c["cluster"] == 4 and bool(c["multicast"]),
            "beside": self.beside(c),
            # work items per row: pairs or quads of tiles side by side take the tile columns two at a time
            "walk_cols": "cols" if (c["cluster"] == 4 and c["multicast"]) or self.beside(c) else "tiles_n",
            "stream_k": bool(c.get("stream_k")),
            "k_first": "k0" if c.get("stream_k") else "0",  # a segment's k-tiles (stream-K), else the whole K
            "k_end": "k1" if c.get("stream_k") else "k_tiles",
            "transposed": bool(c.get("transposed")),
            # wgmma's imm-trans-a/b: B's k-tile is N-major (transposed from K-major); A's is K-major as wgmma wants
            "trans_a": 1 if c.get("transposed") else 0,
            "trans_b": 0 if c.get("transposed") else 1,
        }

    @staticmethod
    def a_box_rows(config: Config) -> int:
        """Rows of A's tensor-map box: the tile's rows (bm; with transposed=1 its columns, bn), or half of them
        where the two blocks sharing A each copy one half into both: a 2 × 2 cluster's tile row or a pair side by
        side, or with transposed=1 a quad's tile column or a pair one above the other."""
        transposed = bool(config.get("transposed"))
        rows = config["bn"] if transposed else config["bm"]
        beside = MatmulBF16.beside(config)
        halved = config["multicast"] and (config["cluster"] == 4 or beside != transposed)
        return rows // 2 if halved else rows

    @staticmethod
    def tensor_maps(config: Config) -> int:
        """Tensor maps the kernel takes, first among its parameters: A's and B's, and C's with epilogue=tma."""
        return 3 if config["epilogue"] == "tma" else 2

    def build(self, config: Config, shape: Shape, arch: Arch, *, checked: bool = False) -> Variant:
        """CudaFamily's build, then the parameter check for this config's epilogue (the base checks without it)."""
        variant = super().build(config, shape, arch, checked=checked)
        self.check_parameters(
            variant.artifact.ptx or "", shape, maps=self.tensor_maps(config), workspace=bool(config.get("stream_k"))
        )
        return variant

    def check_parameters(self, ptx: str, shape: Shape, maps: int | None = None, workspace: bool | None = None) -> None:
        """The kernel takes `maps` tensor maps (128-byte structs: A's, B's, and C's with epilogue=tma; 2 or 3 where
        not given), then C's pointer, then M, N, K as int, then with stream_k=1 (`workspace`; either where not
        given) the workspace's two pointers: the partial sums' slots and the flags."""
        params = entry_params(ptx, self.kernel_name)
        if params is None:
            raise ConfigError(f"{self.name}: the compiled module has no kernel {self.kernel_name!r}")
        got = [(kind, size) for _, kind, size in params]
        rest = [("int", 8)] + [(SCALAR_TYPES[s.ctype][1], SCALAR_TYPES[s.ctype][0]) for s in self.scalar_params]
        counts = (2, 3) if maps is None else (maps,)
        tails = ((), (("int", 8),) * 2) if workspace is None else ((("int", 8),) * 2 if workspace else (),)
        if not any(
            got == [("bytes", TENSOR_MAP_BYTES)] * count + rest + list(tail) for count in counts for tail in tails
        ):
            which = " or ".join(("two", "three")[count - 2] for count in counts)
            then = {True: ", then the workspace's two pointers", False: "", None: " (and the workspace's pointers)"}
            raise ConfigError(
                f"{self.name}: kernel {self.kernel_name} takes {got}; the launcher passes {which} 128-byte tensor "
                f"maps, C's pointer and M, N, K as int{then[workspace]}"
            )

    # --- correctness and cost ---------------------------------------------------------------------------------
    def make_inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
        m, n, k = shape["m"], shape["n"], shape["k"]
        return {
            "A": rng.uniform(-1.0, 1.0, size=(m, k)).astype(np.float32),
            "B": rng.uniform(-1.0, 1.0, size=(k, n)).astype(np.float32),
        }

    def device_dtype(self, name: str) -> str:
        return self.out_dtype if name == "__out__" else self.in_dtype

    def reference(self, inputs: dict[str, np.ndarray], shape: Shape) -> np.ndarray:
        return inputs["A"].astype(np.float64) @ inputs["B"].astype(np.float64)

    def output_shape(self, shape: Shape) -> tuple[int, ...]:
        return (shape["m"], shape["n"])

    def scalar_args(self, shape: Shape) -> tuple:
        return (shape["m"], shape["n"], shape["k"])

    def tolerance_for(self, shape: Shape) -> float:
        """The products of bf16 (8-bit significands) or fp16 (11-bit) inputs are exact in FP32, so the FP32 result
        errs by its sums alone: FP32's probabilistic bound u·√K (at least 16 u) plus the tensor cores' accumulation
        drift, K · 2^-26 (see CHAIN_DRIFT). A BF16 or FP16 output adds one rounding of each element, at most 2^-8 or
        2^-11 of it, which bounds the relative L2 error of the whole output too."""
        k = shape["k"]
        fp32 = FP32_UNIT * max(math.sqrt(k), 16.0) + k * CHAIN_DRIFT
        return fp32 + (0.0 if self.fp32_out else self.in_type.unit)

    def bytes_moved(self, shape: Shape) -> int:
        m, n, k = shape["m"], shape["n"], shape["k"]
        return BF16 * (m * k + k * n) + self.out_bytes * m * n

    def flops(self, shape: Shape) -> int:
        return 2 * shape["m"] * shape["n"] * shape["k"]

    def check_shape(self, shape: Shape) -> None:
        """A, B and C each within max_elements (any M, N, K runs: see PaddedLauncher for K or N off a 16-byte
        pitch)."""
        m, n, k = shape["m"], shape["n"], shape["k"]
        for name, size in (("A", m * k), ("B", k * n), ("C", m * n)):
            if size > self.max_elements:
                where = shape_words(shape)
                raise ConfigError(f"matrix {name} at {where} would hold {size} elements, over {self.max_elements}")

    # --- baselines, launching, comparison ------------------------------------------------------------------------
    def reference_configs(self) -> list[dict]:
        """The Triton kernels `compare` (and `explain` of a search) puts beside a variant: the persistent TMA matmul's
        configs first, Triton's own Hopper path (tensor copies, wgmma) and the kernel to read a variant's census
        against, then the tutorial matmul's."""
        return self.tma_reference_configs() + self.tutorial_configs()

    def tutorial_configs(self) -> list[dict]:
        """The Triton tutorial's own configs: mage-tune's FP32 list (triton_kernels.MATMUL_CONFIGS) halved the
        tutorial's fp16 BLOCK_K, so doubling it gives them back for 2-byte inputs."""
        tk = gpu.triton_kernels()
        configs = [dict(zip(tk.MATMUL_KEYS, c, strict=True)) for c in tk.MATMUL_CONFIGS]
        return [{**c, "BLOCK_K": 2 * c["BLOCK_K"]} for c in configs]

    def tma_reference_configs(self) -> list[dict]:
        """The persistent TMA matmul's configs (triton_kernels.MATMUL_TMA_CONFIGS) whose shared memory fits a block
        on Hopper (tma_shared_bytes), each marked as this kernel's ("kernel": TMA_KERNEL)."""
        tk = gpu.triton_kernels()
        configs = [dict(zip(tk.MATMUL_KEYS, c, strict=True)) for c in tk.MATMUL_TMA_CONFIGS]
        limit = get_arch(TARGET).smem_per_block_optin - TMA_BARRIER_BYTES
        return [{"kernel": TMA_KERNEL, **c} for c in configs if self.tma_shared_bytes(c) <= limit]

    def tma_shared_bytes(self, config: dict) -> int:
        """Shared memory Triton gives the persistent TMA matmul, barriers aside: num_stages buffers of A's and B's
        boxes, and one BLOCK_M × BLOCK_N tile of C, in C's dtype, that the tensor store reads."""
        bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
        return config["num_stages"] * (bm + bn) * bk * BF16 + bm * bn * self.out_bytes

    def baseline_kernels(self, shape: Shape) -> list[Baseline]:
        """Both Triton matmuls are kind "triton", so that the summary's "vs triton" is the best of them all. Triton's
        tensor descriptors need rows 16 bytes apart as a tensor map does: where K or N is off that pitch, its
        persistent TMA matmul cannot run and is left out (the tutorial matmul's masked loads take any shape)."""
        triton = [
            Baseline("triton[" + ",".join(f"{k}={v}" for k, v in c.items()) + "]", "triton", c)
            for c in self.tutorial_configs()
        ]
        tma = [
            Baseline("triton-tma[" + ",".join(f"{k}={v}" for k, v in c.items() if k != "kernel") + "]", "triton", c)
            for c in self.tma_reference_configs()
            if pitch_padded(shape) == shape
        ]
        label = self.in_type.label
        torch_label = f"torch.mm (cuBLAS {label}→FP32)" if self.fp32_out else f"torch.matmul (cuBLAS {label})"
        return [*triton, *tma, Baseline(torch_label, "torch")]

    def launcher(self, job, shape: Shape):
        m, n, k = shape["m"], shape["n"], shape["k"]
        if job.kind == "variant":
            padded = pitch_padded(shape)
            inner = TensorMapLauncher(
                job, padded, Driver(), _torch_stream, _torch_context, self.out_dtype, _torch_workspace, self.in_dtype,
                b_rows=k,
            )  # fmt: skip
            if padded == shape:
                return inner
            copy = _pitch_copier(get_arch(TARGET)).copy
            return PaddedLauncher(inner, shape, self.out_dtype, _torch_zeros, copy, self.in_dtype)
        if job.kind == "torch":
            torch = gpu.torch()
            # 2-byte inputs, FP32 sums, one rounding out: no split-K partials reduced in the input type (torch
            # allows them by default)
            setattr(torch.backends.cuda.matmul, self.in_type.reduction_switch, False)
            if not self.fp32_out:
                return lambda bufs: torch.matmul(bufs["A"], bufs["B"], out=bufs["__out__"])
            return lambda bufs: torch.mm(bufs["A"], bufs["B"], out_dtype=torch.float32, out=bufs["__out__"])
        if job.kind != "triton":
            return None
        if job.config.get("kernel") == TMA_KERNEL:
            return _tma_launcher(job.config, shape)
        matmul_kernel = gpu.triton_kernels().matmul_kernel
        consts = {key: job.config[key] for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")}
        grid = (_cdiv(m, consts["BLOCK_M"]) * _cdiv(n, consts["BLOCK_N"]),)
        options = {"num_warps": job.config["num_warps"], "num_stages": job.config["num_stages"]}

        def launch(bufs):  # Triton's JIT specializes on the tensors' dtypes: 2-byte loads, the store casts to C's
            matmul_kernel[grid](bufs["A"], bufs["B"], bufs["__out__"], m, n, k, k, 1, n, 1, n, 1, **consts, **options)

        return launch

    def reference_kernels(self, shape: Shape, arch: Arch, specialize: bool = True, **options) -> list:
        """At options["config"] or at every config of reference_configs, in their order: the persistent TMA matmul
        (tma_reference_kernels) at its configs, the tutorial matmul on pointers of the input type (C in the output
        dtype) at its own; Triton compiles both for the plain target (sm_90 for sm_90a)."""
        configs = [dict(options["config"])] if options.get("config") else self.reference_configs()
        tma = [c for c in configs if c.get("kernel") == TMA_KERNEL]
        tutorial = [c for c in configs if c.get("kernel") != TMA_KERNEL]
        kernels = self.tma_reference_kernels(shape, arch, tma) if tma else []
        if not tutorial:
            return kernels
        pointer = "*" + self.in_type.triton
        signature = {**gpu.triton_kernels().MATMUL_SIGNATURE, "A": pointer, "B": pointer}
        signature["C"] = "*fp32" if self.fp32_out else pointer
        return kernels + triton_matmul_kernels(
            shape, arch.plain, tutorial, signature, options.get("num_warps"), specialize
        )

    def tma_reference_kernels(self, shape: Shape, arch: Arch, configs: list[dict] | None = None) -> list:
        """The persistent TMA matmul compiled offline for the plain target at each config (tma_reference_configs
        where none are given), for arch's SM count and grid min(SMs, tiles), as the launcher runs it."""
        tk = gpu.triton_kernels()
        in_type = self.in_type.triton
        out_type = "fp32" if self.fp32_out else in_type
        kernels = []
        for cfg in configs if configs is not None else self.tma_reference_configs():
            bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
            signature = {
                "a_desc": f"tensordesc<{in_type}[{bm}, {bk}]>",
                "b_desc": f"tensordesc<{in_type}[{bk}, {bn}]>",
                "c_desc": f"tensordesc<{out_type}[{bm}, {bn}]>",
                **dict.fromkeys(("M", "N", "K"), "i32"),
                **dict.fromkeys(("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "NUM_SMS"), "constexpr"),
            }
            constexprs = {key: int(cfg[key]) for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")}
            constexprs["NUM_SMS"] = arch.sms
            kernel = compile_jit(
                tk.matmul_tma_persistent_kernel,
                signature,
                constexprs,
                arch.plain,
                int(cfg["num_warps"]),
                int(cfg["num_stages"]),
                "triton",
                None,
                False,
            )
            grid = (min(arch.sms, _cdiv(shape["m"], bm) * _cdiv(shape["n"], bn)), 1, 1)
            kernels.append(dataclasses.replace(kernel, grid=grid))
        return kernels


# --- the GPU side: tensor maps and the launch, through the driver -----------------------------------------------


def _tma_launcher(config: dict, shape: Shape):
    """Triton's JIT launch of the persistent TMA matmul on torch's current stream: host-side tensor descriptors
    (Triton encodes each one's tensor map on the host at every launch and passes it by value, so a CUDA graph
    captures it and no device scratch is allocated), NUM_SMS the device's SM count, min(SMs, tiles) programs."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    torch = gpu.torch()
    kernel = gpu.triton_kernels().matmul_tma_persistent_kernel
    m, n, k = shape["m"], shape["n"], shape["k"]
    bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    grid = (min(sms, _cdiv(m, bm) * _cdiv(n, bn)),)
    consts = {key: config[key] for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")}
    options = {"num_warps": config["num_warps"], "num_stages": config["num_stages"]}

    def launch(bufs):
        a = TensorDescriptor(bufs["A"], [m, k], [k, 1], [bm, bk])
        b = TensorDescriptor(bufs["B"], [k, n], [n, 1], [bk, bn])
        c = TensorDescriptor(bufs["__out__"], [m, n], [n, 1], [bm, bn])
        kernel[grid](a, b, c, m, n, k, **consts, NUM_SMS=sms, **options)

    return launch


_torch_stream = gpu.raw_stream  # torch's current stream, the cheap way (what a launch is enqueued on)


def _torch_context() -> None:
    """Make torch's CUDA context (the device's primary context) current on this thread, as the driver calls that
    load a module need: a synchronize initializes the runtime's state for the thread where nothing has yet."""
    gpu.torch().cuda.synchronize()


def _pitch_copier(arch: Arch):
    """The row-pitch copies' kernels, loaded in torch's context, launched on its current stream."""
    _torch_context()
    return pitch_copy.PitchCopier(arch, _torch_stream)


def _torch_zeros(rows: int, columns: int, dtype: str):
    """A rows × columns matrix of zeros of `dtype` ("bfloat16", "float16", "float32") on torch's current device."""
    torch = gpu.torch()
    return torch.zeros(rows, columns, dtype=getattr(torch, dtype), device="cuda")


def _torch_workspace(slots: int, slot_floats: int) -> tuple:
    """Stream-K's workspace on the current device: `slots` slots of `slot_floats` FP32 partial sums (written before
    they are read, so left uninitialized) and one flag per slot, zero (each launch lowers every flag it raised). A
    ConfigError where the device has fewer SMs than the grid has blocks (the arch's part has 132; an H100 PCIe 114, a
    MIG slice fewer): a block waiting on one that is not resident would never end."""
    torch = gpu.torch()
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    if slots > sms:
        raise ConfigError(
            f"stream_k=1 launches {slots} blocks, at most one per SM, and waits between them; this GPU "
            f"has {sms} SMs, so some would not be resident and a wait could never end: not launched"
        )
    partials = torch.empty(slots * slot_floats, dtype=torch.float32, device="cuda")
    flags = torch.zeros(slots, dtype=torch.int32, device="cuda")
    return partials, flags


# The element types a tensor map here describes: (cuTensorMapEncodeTiled's data type, bytes per element).
TENSOR_MAP_TYPES = {
    "bfloat16": (TENSOR_MAP_BFLOAT16, BF16),
    "float16": (TENSOR_MAP_FLOAT16, BF16),
    "float32": (TENSOR_MAP_FLOAT32, 4),
}


def tensor_map_fields(rows: int, columns: int, box_rows: int, dtype: str = "bfloat16") -> dict:
    """cuTensorMapEncodeTiled's arguments for a row-major matrix of `dtype` moved in boxes of one 128-byte swizzle
    row (64 bf16 or 32 FP32 columns) × box_rows rows, 128-byte swizzled, zero fill outside (innermost dimension
    first)."""
    if dtype not in TENSOR_MAP_TYPES:
        raise ConfigError(f"a tensor map here holds {' or '.join(TENSOR_MAP_TYPES)}, not {dtype!r}")
    code, size = TENSOR_MAP_TYPES[dtype]
    return {
        "dims": (columns, rows),
        "strides": (columns * size,),
        "box": (SWIZZLE_ROW // size, box_rows),
        "element_strides": (1, 1),
        "dtype": code,
        "interleave": TENSOR_MAP_INTERLEAVE_NONE,
        "swizzle": TENSOR_MAP_SWIZZLE_128B,
        "l2_promotion": TENSOR_MAP_L2_PROMOTION_256B,
        "oob_fill": TENSOR_MAP_OOB_FILL_NONE,
    }


def encode_tensor_map(
    driver: Driver, target: int, address: int, rows: int, columns: int, box_rows: int, dtype: str
) -> None:
    """Write at `target` (TENSOR_MAP_BYTES, TENSOR_MAP_ALIGN-aligned) the tensor map of tensor_map_fields over the
    matrix at device `address`."""
    f = tensor_map_fields(rows, columns, box_rows, dtype)
    driver.call(
        "cuTensorMapEncodeTiled",
        ctypes.c_void_p(target),
        f["dtype"],
        2,
        ctypes.c_void_p(address),
        (ctypes.c_uint64 * 2)(*f["dims"]),
        (ctypes.c_uint64 * 1)(*f["strides"]),
        (ctypes.c_uint32 * 2)(*f["box"]),
        (ctypes.c_uint32 * 2)(*f["element_strides"]),
        f["interleave"],
        f["swizzle"],
        f["l2_promotion"],
        f["oob_fill"],
    )


ARGUMENT_SETS = 32  # parameter lists a launcher keeps: the harness rotates a few buffer sets, an operator's recur


def forget_oldest(arguments: dict) -> None:
    """Make room for one more parameter list, dropping the oldest where `arguments` holds ARGUMENT_SETS: an
    operator called on ever new buffers keeps a bounded cache (cuLaunchKernel copied each list when it launched)."""
    if len(arguments) >= ARGUMENT_SETS:
        del arguments[next(iter(arguments))]


class TensorMapLauncher:
    """Launches one variant: its cubin loaded through the driver, A's and B's tensor maps (and C's, for epilogue=tma)
    encoded for each buffer set it meets (kept, so a graph's launches reuse them), then cuLaunchKernel with (A map,
    B map, C, M, N, K), or (A map, B map, C map, C, M, N, K) for epilogue=tma; with stream_k=1 the pointers of its
    workspace follow (one slot of bm × bn partial sums and one flag per block, made by `allocate` once: launches on
    one stream share it, as the harness's and an operator's do; launches of one launcher on two streams at once would
    race on it). `b_rows`: B's rows where the variant runs at a K padded past them (PaddedLauncher).
    """

    def __init__(
        self,
        job,
        shape: Shape,
        driver: Driver,
        stream_of,
        prepare,
        out_dtype: str = "bfloat16",
        allocate=None,
        in_dtype: str = "bfloat16",
        b_rows: int | None = None,
    ):
        self.job, self.shape, self.driver, self.stream_of = job, dict(shape), driver, stream_of
        self.b_rows = b_rows or self.shape["k"]  # fewer than K: a padded K, whose rows past B's the map fills with 0
        self.box_rows = MatmulBF16.a_box_rows(job.config)
        self.in_dtype, self.out_dtype = in_dtype, out_dtype
        self.maps = MatmulBF16.tensor_maps(job.config)
        prepare()
        self.driver.call("cuInit", 0)
        self.module = ctypes.c_void_p()
        self.image = ctypes.create_string_buffer(job.cubin, len(job.cubin))  # kept: the module is read from it
        self.driver.call("cuModuleLoadData", ctypes.byref(self.module), self.image)
        self.function = ctypes.c_void_p()
        self.driver.call("cuModuleGetFunction", ctypes.byref(self.function), self.module, job.kernel_name.encode())
        if job.dynamic_shared:
            self.driver.call("cuFuncSetAttribute", self.function, FUNC_MAX_DYNAMIC_SHARED, job.dynamic_shared)
        self.resident_blocks = self.resident_cluster_blocks(job)
        self.grid = self.launched_grid(job)
        self.arguments: dict[tuple[int, int, int], tuple] = {}
        self.workspace: tuple = ()  # kept alive: the kernel writes into it
        if job.config.get("stream_k"):
            if allocate is None:
                raise ConfigError("stream_k=1 needs a workspace: the launcher was given no way to allocate one")
            self.workspace = allocate(self.grid[0], int(job.config["bm"]) * int(job.config["bn"]))

    def resident_cluster_blocks(self, job) -> int | None:
        """The blocks of a variant in clusters that the device holds at once: cuOccupancyMaxActiveClusters times the
        cluster's size (a cluster's blocks share one GPC, and where the GPCs' SM counts are not multiples of the
        cluster size some SMs stay out). None without clusters, or where the driver does not answer; 0 where not even
        one cluster fits (the launch then says so in the driver's words)."""
        cluster = int(job.config.get("cluster", 1))
        if cluster == 1:
            return None
        config = LaunchConfig(
            (ctypes.c_uint * 3)(*job.grid), (ctypes.c_uint * 3)(*job.block), job.dynamic_shared, None, None, 0
        )
        count = ctypes.c_int()
        try:
            self.driver.call("cuOccupancyMaxActiveClusters", ctypes.byref(count), self.function, ctypes.byref(config))
        except RuntimeError:
            return None
        return count.value * cluster

    def launched_grid(self, job) -> tuple[int, ...]:
        """The grid launched: a persistent grid of clusters as many blocks as the device holds at once in them (the
        variant's was planned on the arch's usual part), up to one per work item (with stream_k=1, per k-tile of
        them) and one per SM, so that none waits for another to finish and no SM a cluster could use idles. The
        blocks walk the tiles (and stream-K's shares) by the grid's size, so any number covers them all; stream-K's
        workspace is made for the grid launched. A grid of one block per tile keeps every tile's block."""
        if self.resident_blocks is None or not job.config.get("persistent"):
            return tuple(job.grid)
        cluster = int(job.config.get("cluster", 1))
        one_per_sm = self.device_sms() // cluster * cluster
        most = max(job.grid[0], min(MatmulBF16.walker_blocks(job.config, self.shape), one_per_sm))
        blocks = min(most, max(cluster, self.resident_blocks))
        return (blocks, *tuple(job.grid)[1:])

    def device_sms(self) -> int:
        """The SMs of the current context's device (0 where the driver does not answer): a persistent grid's one
        block per SM."""
        device, count = ctypes.c_int(), ctypes.c_int()
        try:
            self.driver.call("cuCtxGetDevice", ctypes.byref(device))
            self.driver.call("cuDeviceGetAttribute", ctypes.byref(count), DEVICE_MULTIPROCESSOR_COUNT, device)
        except RuntimeError:
            return 0
        return count.value

    def encode(
        self, target: int, address: int, rows: int, columns: int, box_rows: int, dtype: str = "bfloat16"
    ) -> None:
        encode_tensor_map(self.driver, target, address, rows, columns, box_rows, dtype)

    def parameters(self, a: int, b: int, c: int) -> tuple:
        """The kernel's parameter list for these buffers (encoded once per buffer set): (storage, scalars, void*[]),
        the maps first, 64-byte aligned, one after another."""
        key = (a, b, c)
        if key not in self.arguments:
            forget_oldest(self.arguments)
            for name, address in (("A", a), ("B", b), ("C", c)):
                if address % 16:
                    raise ConfigError(f"{name} at {address:#x} is not 16-byte aligned, as a tensor copy needs")
            m, n, k = self.shape["m"], self.shape["n"], self.shape["k"]
            maps = ctypes.create_string_buffer(self.maps * TENSOR_MAP_BYTES + TENSOR_MAP_ALIGN)
            first = ctypes.addressof(maps) + (-ctypes.addressof(maps)) % TENSOR_MAP_ALIGN
            targets = [first + i * TENSOR_MAP_BYTES for i in range(self.maps)]
            self.encode(targets[0], a, m, k, self.box_rows, self.in_dtype)  # A: M rows of K, boxes 64 × bm (/ 2: quad)
            self.encode(targets[1], b, self.b_rows, n, BK, self.in_dtype)  # B: b_rows of N, boxes 64 × 64
            if self.maps == 3:  # C: M rows of N, boxes of one staging chunk (64 rows × 128 bytes)
                self.encode(targets[2], c, m, n, CHUNK_ROWS, self.out_dtype)
            scalars = (ctypes.c_uint64(c), ctypes.c_int(m), ctypes.c_int(n), ctypes.c_int(k))
            scalars += tuple(ctypes.c_uint64(w.data_ptr()) for w in self.workspace)  # stream-K: slots, flags
            addresses = [*targets, *(ctypes.addressof(s) for s in scalars)]
            pointers = (ctypes.c_void_p * len(addresses))(*addresses)
            self.arguments[key] = (maps, scalars, pointers)
        return self.arguments[key]

    def __call__(self, bufs: dict) -> None:
        _, _, pointers = self.parameters(bufs["A"].data_ptr(), bufs["B"].data_ptr(), bufs["__out__"].data_ptr())
        grid, block = self.grid, self.job.block
        self.driver.call(
            "cuLaunchKernel",
            self.function,
            *grid,
            *block,
            self.job.dynamic_shared,
            ctypes.c_void_p(self.stream_of()),
            pointers,
            None,
        )


def pitch_padded(shape: Shape) -> Shape:
    """The shape a variant runs at: K and N rounded up to multiples of PITCH (8 bf16, 16 bytes), as a tensor map's
    row pitch must be. Zero columns of A and rows of B past K add nothing to the sums; C's columns past N are dropped.
    The grid is the same: tile sizes and BK are multiples of PITCH, so no tile or k-tile is added."""
    return {**shape, "k": _cdiv(shape["k"], PITCH) * PITCH, "n": _cdiv(shape["n"], PITCH) * PITCH}


class PaddedLauncher:
    """A variant for a shape whose K or N is off a 16-byte pitch, run at pitch_padded(shape) by `inner` (its
    launcher for that shape, B's map K rows deep) on copies at the padded pitch made once by `zeros` (rows, columns,
    dtype): A where K is off the pitch (M × KP), B and C where N is (K × NP, M × NP). Each call copies A and B in
    with `copy` (src, dst, rows, width, columns: pitch_copy.PitchCopier's, which writes the padding's zeros too),
    launches, and copies C's first N columns out, all on the current stream: a CUDA graph captures the copies with
    the launch, and a timing counts them. Where K is on the pitch the caller's A is read as it is, and where N is, the
    caller's B, and the variant writes the caller's C (B's rows past K are the map's zero fill). Like stream-K's
    workspace, the copies are one set per launcher: launches of one launcher on two streams at once would race."""

    def __init__(self, inner, shape: Shape, out_dtype: str, zeros, copy, in_dtype: str = "bfloat16"):
        self.m, self.n, self.k = shape["m"], shape["n"], shape["k"]
        padded = pitch_padded(shape)
        self.kp, self.np = padded["k"], padded["n"]
        self.inner, self.copy = inner, copy
        self.a = zeros(self.m, self.kp, in_dtype) if self.kp != self.k else None
        self.b = zeros(self.k, self.np, in_dtype) if self.np != self.n else None
        self.c = zeros(self.m, self.np, out_dtype) if self.np != self.n else None

    @property
    def grid(self) -> tuple[int, ...]:
        return self.inner.grid

    @property
    def resident_blocks(self) -> int | None:
        return self.inner.resident_blocks

    def __call__(self, bufs: dict) -> None:
        m, n, k = self.m, self.n, self.k
        a, b = bufs["A"], bufs["B"]
        if self.a is not None:
            self.copy(a, self.a, m, k, self.kp)
            a = self.a
        if self.b is not None:
            self.copy(b, self.b, k, n, self.np)
            b = self.b
        self.inner({"A": a, "B": b, "__out__": bufs["__out__"] if self.c is None else self.c})
        if self.c is not None:
            self.copy(self.c, bufs["__out__"], m, n, n)


class MatmulBF16F32Out(MatmulBF16):
    """The same kernels with an FP32 output: a run-time choice takes matmul-bf16's tuning data where it has none."""

    tuned_as = "matmul-bf16"


class MatmulF16(MatmulBF16):
    """The same kernels on FP16 inputs and output (wgmma .f16, FLOAT16 tensor maps, cvt.rn.f16x2.f32): the same
    tiles run at the same speed, so a run-time choice takes matmul-bf16's tuning data where it has none."""

    tuned_as = "matmul-bf16"

    def __init__(self, out_dtype: str = "float16"):
        super().__init__(out_dtype, in_dtype="float16")


FAMILY = MatmulBF16("bfloat16")
FP32_OUT = MatmulBF16F32Out("float32")
F16 = MatmulF16()
