cd /work/main/build
B=./rumus-bench
O=/tmp/pb2
date -u > $O/start
$B --json $O/rumus.json --csv $O/rumus.csv > $O/rumus-bench.txt 2>$O/rumus-bench.err
date -u > $O/t1
python3 ../bench/targets.py $O/rumus.json > $O/targets.md 2>&1
for d in f16 bf16; do $B --dtype $d --ops add,relu_fwd,gelu_fwd,adamw,softmax_fwd,softmax_bwd,xent_fwd_bwd,dropout_fwd,layernorm_fwd --shape 16777216,16384x1024 --reps 5 > $O/dtype-$d.txt 2>&1; done
$B --ops cast_f32_f16,cast_f16_f32,cast_f32_bf16,cast_bf16_f32 --reps 5 > $O/casts.txt 2>&1
date -u > $O/DONE
