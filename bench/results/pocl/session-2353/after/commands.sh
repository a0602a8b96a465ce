cd /work/main/build
B=./rumus-bench
O=/tmp/pb3
date -u > $O/start
for r in 1 2; do
RUMUS_GEMM_CPU_NV=4 $B --ops gemm --shape 2048x2048x2048,1024x1024x1024,512x512x512,128x256x784:nt,256x784x128:tn --reps 5 > $O/gemm-old-$r.txt 2>&1
$B --ops gemm --shape 2048x2048x2048,1024x1024x1024,512x512x512,128x256x784:nt,256x784x128:tn --reps 5 > $O/gemm-new-$r.txt 2>&1
RUMUS_CONV2D_CPU_TILE=16x16x4 $B --ops conv2d_fwd,conv2d_bwd_data,conv2d_bwd_weight --reps 3 > $O/conv-old-$r.txt 2>&1
$B --ops conv2d_fwd,conv2d_bwd_data,conv2d_bwd_weight --reps 3 > $O/conv-new-$r.txt 2>&1
RUMUS_Q8_CPU_NR=wide $B --ops matmul_q8 --shape 1x4096x4096,8x4096x4096,4x4096x4096,64x4096x4096,1x11008x4096 --reps 5 > $O/q8-old-$r.txt 2>&1
$B --ops matmul_q8 --shape 1x4096x4096,8x4096x4096,4x4096x4096,64x4096x4096,1x11008x4096 --reps 5 > $O/q8-new-$r.txt 2>&1
$B --ops transpose,permute_0213,embedding_bwd --reps 5 > $O/layout-$r.txt 2>&1
done
date -u > $O/DONE
