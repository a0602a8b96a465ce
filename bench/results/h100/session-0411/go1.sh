. build-gpu/lib.sh
nvidia-smi > $O/gpu.txt 2>&1
date -u > $O/start.txt
sec fill 60 build-gpu/fill
sec tfill 60 python3 build-gpu/tfill.py
POOL="--ops avgpool2d_fwd,avgpool2d_bwd --shape 128x512x28/k3s1p1,64x64x112/k3s1p1,64x256x56/k3s2p1"
ADA="--ops adaptive_avgpool2d_fwd,adaptive_avgpool2d_bwd --shape 256x512x28/o7,64x512x56/o1"
sec pool_new 150 python3 bench/compare_torch.py $B/rumus-bench --reps 10 --warmup 2 --out $O/pool -- $POOL --no-peer --device NVIDIA
sec ada_new 100 python3 bench/compare_torch.py $B/rumus-bench --reps 10 --warmup 2 --out $O/ada -- $ADA --no-peer --device NVIDIA
sec pool_old 60 env RUMUS_AVGPOOL_BAND=0 $B/rumus-bench --reps 10 --warmup 2 $POOL --no-peer --device NVIDIA
sec ada_old 60 env RUMUS_AVGPOOL_BAND=0 $B/rumus-bench --reps 10 --warmup 2 $ADA --no-peer --device NVIDIA
sec pool_new2 60 $B/rumus-bench --reps 10 --warmup 2 $POOL --no-peer --device NVIDIA --kernels
sec bn 60 $B/rumus-bench --reps 10 --warmup 2 --ops batchnorm2d_fwd,batchnorm2d_bwd --shape 64x64x112 --no-peer --device NVIDIA --kernels
pack 1
sec gpt_rumus 120 $B/rumus-train --device NVIDIA --model gpt --preset h200 --steps 200 --data $B/data/fortunes
sec gpt_torch 60 python3 bench/train_gpt_torch.py --preset h200 --steps 200 --data $B/data/fortunes
pack 1
sec att 150 env REPS=10 sh bench/attn-sweep-h200.sh $B NVIDIA $O/att default
date -u > $O/end.txt
pack 1
