#!/bin/bash
# hot-cache estimate of the whole LoRA (both phases) on one core from the ci qlen-128 expert sizes: sum over experts of us/call
bin=$1
declare -A cnt
for m in 15 14 13 12 12 12 11 11 10 10 10 10 10 10 10 10 9 9 9 9 9 9 9 8 8 8 8 8 8 8 8 8 8 8 8 8 7 7 7 7 7 7 7 7 7 7 7 7 7 7 6 6 6 6 5 5 5 5 5 5 4 4 3 2; do cnt[$m]=$(( ${cnt[$m]:-0} + 1 )); done
tot=0
for m in "${!cnt[@]}"; do
  out=$(taskset -c 0 $bin $m ${2:-4} 1500)
  g=$(echo "$out" | awk '/GU3/{print $3}'); d=$(echo "$out" | awk '/D4/{print $3}')
  tot=$(python3 -c "print($tot + ${cnt[$m]}*($g+$d))")
done
python3 -c "print('$bin', 'sum us (1 core):', round($tot,1), '-> 2 cores ms:', round($tot/2000,3))"
