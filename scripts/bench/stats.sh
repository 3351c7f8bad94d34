# Sourced by the shell benchmarks of scripts/bench: small statistics on
# numbers read one per line (machines here are noisy: quote medians).

# median: the median of the numbers on standard input.
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# ratio A B: A / B.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {print a / b}'; }
