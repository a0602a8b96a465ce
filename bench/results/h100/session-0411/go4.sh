. build-gpu/lib.sh
nvidia-smi > $O/gpu.txt 2>&1
AVG="--ops avgpool2d_fwd,avgpool2d_bwd --shape 128x512x28/k3s1p1,64x64x112/k3s1p1,64x256x56/k3s2p1,64x256x112"
MAXP="--ops maxpool2d_fwd,maxpool2d_bwd --shape 64x64x112/k3s2p1,64x256x112"
ADA="--ops adaptive_avgpool2d_fwd,adaptive_avgpool2d_bwd --shape 256x512x28/o7,64x512x56/o1"
sec avg_torch 120 python3 bench/compare_torch.py $B/rumus-bench --reps 10 --warmup 2 --out $O/avg -- $AVG --no-peer --device NVIDIA
sec ada_torch 100 python3 bench/compare_torch.py $B/rumus-bench --reps 10 --warmup 2 --out $O/ada -- $ADA --no-peer --device NVIDIA
sec maxp_torch 100 python3 bench/compare_torch.py $B/rumus-bench --reps 10 --warmup 2 --out $O/maxp -- $MAXP --no-peer --device NVIDIA
for r in 1 2; do
sec avg_quads_$r 60 env RUMUS_AVGPOOL_BAND=0 $B/rumus-bench --reps 10 --warmup 2 $AVG --no-peer --device NVIDIA
sec avg_rep1_$r 60 env RUMUS_AVGPOOL_BAND_REP=1 $B/rumus-bench --reps 10 --warmup 2 $AVG --no-peer --device NVIDIA
sec avg_rep4_$r 60 env RUMUS_AVGPOOL_BAND_REP=4 $B/rumus-bench --reps 10 --warmup 2 $AVG --no-peer --device NVIDIA
sec avg_rep8_$r 60 env RUMUS_AVGPOOL_BAND_REP=8 $B/rumus-bench --reps 10 --warmup 2 $AVG --no-peer --device NVIDIA
sec avg_ls128_$r 60 env RUMUS_POOL_LS=128 $B/rumus-bench --reps 10 --warmup 2 $AVG --no-peer --device NVIDIA
done
sec avg_k 60 $B/rumus-bench --reps 10 --warmup 2 $AVG --no-peer --device NVIDIA --kernels
sec ada_k 60 $B/rumus-bench --reps 10 --warmup 2 $ADA --no-peer --device NVIDIA --kernels
pack 4
sec chk 200 env CHECK_INFO=0 CHECK_SPLIT=1 CHECK_ONLY=check_pool sh scripts/check-device.sh $B $O/chk NVIDIA
pack 4
