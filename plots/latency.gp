# latency.gp: the distribution (CDF) of time to first token and of time per output token
# over the served requests, one line per policy on the same workload. All modeled
# (simulation). `writescope plot latency` runs
# `gnuplot -c latency.gp DATADIR OUTFILE TERM N` (plots/README.md):
#   DATADIR/k.ttft, k.tpot  policy k: a header (policy name), then TTFT (s) or TPOT (ms),
#                           cumulative fraction
#   DATADIR/labels.tsv      title, workload, a note on policies that served nothing ('-': none)
datadir = ARG1
outfile = ARG2
term = ARG3
n = ARG4 + 0
if (term eq 'svg') {
    set terminal svg size 1300, 560 dynamic font 'sans,11'
} else {
    if (term eq 'pdfcairo') {
        set terminal pdfcairo size 1300 / 100.0, 560 / 100.0 font 'sans,10'
    } else {
        set terminal pngcairo size 1300, 560 font 'sans,10'
    }
}
set output outfile
set datafile separator "\t"
lab = datadir . '/labels.tsv'
stats lab every ::0::0 using (title = strcol(1), 0) nooutput
stats lab every ::1::1 using (sub = strcol(1), 0) nooutput
stats lab every ::2::2 using (foot = strcol(1), 0) nooutput
set multiplot layout 1, 2 title title . "\n" . sub noenhanced
if (foot ne '-') {
    set label 1 foot at screen 0.5, 0.03 center noenhanced
}
set logscale x
set grid
set ylabel 'fraction of served requests'
set yrange [0:1.02]
set key bottom right box opaque noenhanced font ',9'
set bmargin 5
set title 'time to first token (modeled)'
set xlabel 'TTFT (s)'
plot for [k = 1:n] sprintf('%s/%d.ttft', datadir, k) using 1:2 with steps lw 2 lc k title columnheader(1)
set title 'time per output token after the first (modeled)'
set xlabel 'TPOT (ms)'
plot for [k = 1:n] sprintf('%s/%d.tpot', datadir, k) using 1:2 with steps lw 2 lc k title columnheader(1)
unset multiplot
