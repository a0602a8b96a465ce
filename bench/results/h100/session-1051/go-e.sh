. build-gpu/lib.sh
D="--no-peer --device NVIDIA"
OPS="--ops layernorm_fwd,layernorm_bwd,softmax_fwd,xent_fwd_bwd,gelu_fwd,adamw --reps 10 $D"
for t in bf16 f16; do
  sec ab-u4-$t 80 $B/rumus-bench $OPS --dtype $t
  sec ab-prev-$t 80 env RUMUS_KERNEL_DIR=build-gpu/cl-prev $B/rumus-bench $OPS --dtype $t
  pack 2
done
for t in bf16 f16; do
  sec k-$t 40 $B/rumus-bench --ops layernorm_bwd --shape 65536x1024 --kernels --reps 10 $D --dtype $t
done
pack 2
