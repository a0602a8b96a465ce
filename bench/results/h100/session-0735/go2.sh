. build-gpu/lib.sh
mkdir -p /tmp/b2; tar xJf build-gpu/b2.txz -C /tmp/b2
D="--no-peer --device NVIDIA"
XE="--ops xent_fwd_bwd --shape 128x10,4096x1024,65536x1024,8192x32000 --reps 10 $D"
OT="--ops sum_squares,bias_grad --reps 10 $D"
for r in 1 2; do for k in b b2; do
  sec xe-$k-$r 90 env LD_LIBRARY_PATH=/tmp/$k/lib /tmp/$k/rumus-bench $XE
  sec xe16-$k-$r 90 env LD_LIBRARY_PATH=/tmp/$k/lib /tmp/$k/rumus-bench $XE --dtype f16
  sec ot-$k-$r 90 env LD_LIBRARY_PATH=/tmp/$k/lib /tmp/$k/rumus-bench $OT
done; done
pack 2
for k in b2 B; do
  sec fence-$k 120 env LD_LIBRARY_PATH=/tmp/b2/lib RUMUS_KERNEL_DIR=build-gpu/cl-$k /tmp/b2/rumus-bench --ops xent_fwd_bwd,sum_squares,bias_grad,batchnorm2d_fwd,batchnorm2d_bwd,channel_bias_grad --reps 10 $D
done
pack 2
for k in b b2; do
  sec at-$k 120 env LD_LIBRARY_PATH=/tmp/$k/lib /tmp/$k/rumus-bench --ops attention_fwd_bwd --shape 64x6x256x64,8x16x1024x64 --reps 5 $D
  sec cv-$k 120 env LD_LIBRARY_PATH=/tmp/$k/lib /tmp/$k/rumus-bench --ops conv2d_bwd_weight --reps 5 $D
done
pack 2
for k in b b2; do
  sec gpt-$k 120 env LD_LIBRARY_PATH=/tmp/$k/lib /tmp/$k/rumus-train --device NVIDIA --model gpt --preset h200 --steps 200 --data /tmp/b2/data/fortunes
done
sec gpt-torch 150 python3 bench/train_gpt_torch.py --preset h200 --steps 200 --data /tmp/b2/data/fortunes
pack 2
