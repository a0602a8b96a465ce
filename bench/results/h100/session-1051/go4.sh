. build-gpu/lib.sh
D="--no-peer --device NVIDIA"
OPS="--ops layernorm_fwd,layernorm_bwd,rmsnorm_bwd,gelu_fwd,gelu_bwd,bias_add,bias_grad,softmax_fwd,xent_fwd_bwd,adamw --reps 10 $D"
for r in 1 2; do
  sec ab-new-$r 150 $B/rumus-bench $OPS --dtype bf16
  sec ab-ln-$r 150 env RUMUS_KERNEL_DIR=build-gpu/cl-ln $B/rumus-bench $OPS --dtype bf16
  pack 4
done
sec t16-bf16 200 python3 bench/compare_torch.py $B/rumus-bench --reps 10 --warmup 2 --out $O/t16-bf16 -- --ops layernorm_fwd,layernorm_bwd,gelu_fwd,gelu_bwd --dtype bf16 --no-peer --device NVIDIA
pack 4
