. build-gpu/lib.sh
D="--no-peer --device NVIDIA"
BN="--ops batchnorm2d_fwd,batchnorm2d_bwd --shape 64x256x56,64x64x112,32x128x56,128x32x28 --reps 5 --warmup 1 --device NVIDIA"
for lag in 0 1 2; do sec bnC-lag$lag 120 env RUMUS_BATCHNORM_ONE=1 RUMUS_BATCHNORM_LAG=$lag $B/rumus-bench $BN; done
LG="--ops xent_fwd_bwd,sum_squares,bias_grad,batchnorm2d_fwd,batchnorm2d_bwd,channel_bias_grad --reps 10 $D"
for r in 1 2; do
  sec lgC-$r 150 $B/rumus-bench $LG
  sec lgA-$r 150 env RUMUS_KERNEL_DIR=build-gpu/cl-A $B/rumus-bench $LG
done
pack 3
BG="--ops bias_grad --shape 4096x4096,65536x1024,16384x4096 --reps 20 $D"
for r in 1 2; do for k in bg2 bg4; do for t in f32 f16 bf16; do
  sec bg-$k-$t-$r 60 env RUMUS_KERNEL_DIR=build-gpu/cl-$k $B/rumus-bench $BG --dtype $t
done; done; done
pack 3
for t in f16 bf16; do
  sec t16-$t 240 python3 bench/compare_torch.py $B/rumus-bench --reps 10 --warmup 2 --out $O/t16-$t -- --ops add,bias_add,bias_grad,gelu_fwd,gelu_bwd,adamw,softmax_fwd,softmax_bwd,xent_fwd_bwd,layernorm_fwd,layernorm_bwd --dtype $t --no-peer --device NVIDIA
  pack 3
done
for t in check_batchnorm check_elementwise check_xent check_optim; do
  sec chk-$t 200 env CHECK_INFO=0 CHECK_SPLIT=1 CHECK_ONLY=$t sh scripts/check-device.sh $B $O/chk-$t NVIDIA
done
pack 3
