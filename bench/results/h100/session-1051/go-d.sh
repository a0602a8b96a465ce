. build-gpu/lib.sh
D="--no-peer --device NVIDIA"
chmod +x build-gpu/ptxdump
BASE="-cl-std=CL3.0 -DRUMUS_NV_SM=90 -DWG=128 -DRUMUS_ALIGN4=1 -DCACHE_V4=8 -DLN_WLS=512 -DLN_WV=8 -DLN_WBLS=512 -DLN_WBV=8 -DLN_WBB=2 -DLN_WBR=1 -DLN_BR=4 -DLN_BLK_UNROLL=1 -DLN_PARAM=F32 -DLN_FOLD_LS=32 -cl-nv-maxrregcount=128 -cl-nv-verbose"
for t in F16 BF16; do
  x=""; [ $t = F16 ] && x="-DRUMUS_F16_BITS=1"
  build-gpu/ptxdump build-gpu/cl-new layernorm.cl "$BASE -DRUMUS_STORAGE=$t $x -DRUMUS_ALIGN8=1" > $O/ptx-$t.ptx 2> $O/ptxlog-$t.txt
  build-gpu/ptxdump build-gpu/cl-new layernorm.cl "$BASE -DRUMUS_STORAGE=$t $x -DRUMUS_ALIGN8=0" > $O/ptx-$t-a4.ptx 2> $O/ptxlog-$t-a4.txt
done
pack 1
L="--ops layernorm_bwd --reps 10 $D"
sec bw-f16 60 $B/rumus-bench $L --dtype f16
sec bw-bf16 60 $B/rumus-bench $L --dtype bf16
sec bw-bf16-2u 60 env RUMUS_LN_BLK=2u $B/rumus-bench $L --dtype bf16
sec bw-bf16-4 60 env RUMUS_LN_BLK=4 $B/rumus-bench $L --dtype bf16
sec bw-bf16-r0 60 env RUMUS_LN_MAXRREG=0 $B/rumus-bench $L --dtype bf16
sec bw-f16-2u 60 env RUMUS_LN_BLK=2u $B/rumus-bench $L --dtype f16
pack 1
