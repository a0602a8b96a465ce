cd /work/main/build
B=./rumus-bench
for r in 1 2; do
RUMUS_DROPOUT_CPU=vec $B --ops dropout_fwd,dropout_bwd --shape 16777216,67108864 --reps 5 > /tmp/pb/drop-vec-$r.txt 2>&1
$B --ops dropout_fwd,dropout_bwd --shape 16777216,67108864 --reps 5 > /tmp/pb/drop-u64-$r.txt 2>&1
RUMUS_POOL_CPU=old $B --ops maxpool2d_fwd,maxpool2d_bwd,avgpool2d_bwd --reps 5 > /tmp/pb/pool-old-$r.txt 2>&1
$B --ops maxpool2d_fwd,maxpool2d_bwd,avgpool2d_bwd --reps 5 > /tmp/pb/pool-new-$r.txt 2>&1
done
for d in f16 bf16; do $B --dtype $d --ops dropout_fwd,dropout_bwd --shape 16777216,67108864 --reps 5 > /tmp/pb/drop-u64-$d.txt 2>&1; done
echo done > /tmp/pb/DONE
