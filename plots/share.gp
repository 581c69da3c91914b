# share.gp: the policy's target CPU share r* and the realised share over one run, and below
# it the mean context per sequence L, step by step over the steps where the policy sets r*
# (those with a decode: prefill-only steps have no target). From a simulation run (all modeled) or a
# live run (`--live`: the realised share counted from placed pages, r* computed from the
# measured A and B); the labels say which. `writescope plot share` runs
# `gnuplot -c share.gp DATADIR OUTFILE TERM N` (plots/README.md):
#   DATADIR/steps.dat   t_start, t_end, context per sequence, r*, r, busy % x 4, step
#   DATADIR/labels.tsv  title, workload, r* label, r label, x label
datadir = ARG1
outfile = ARG2
term = ARG3
if (term eq 'svg') {
    set terminal svg size 1000, 680 dynamic font 'sans,11'
} else {
    if (term eq 'pdfcairo') {
        set terminal pdfcairo size 1000 / 100.0, 680 / 100.0 font 'sans,10'
    } else {
        set terminal pngcairo size 1000, 680 font 'sans,10'
    }
}
set output outfile
set datafile separator "\t"
lab = datadir . '/labels.tsv'
stats lab every ::0::0 using (title = strcol(1), 0) nooutput
stats lab every ::1::1 using (sub = strcol(1), 0) nooutput
stats lab every ::2::2 using (l1 = strcol(1), 0) nooutput
stats lab every ::3::3 using (l2 = strcol(1), 0) nooutput
stats lab every ::4::4 using (xl = strcol(1), 0) nooutput
f = datadir . '/steps.dat'
set multiplot title title . "\n" . sub noenhanced
set lmargin at screen 0.09
set rmargin at screen 0.97
set grid
set tmargin at screen 0.86
set bmargin at screen 0.42
set format x ''
set ylabel 'CPU share of the spilled KV'
set yrange [0:1.05]
set key at screen 0.53, 0.895 center center horizontal noenhanced
plot f using 10:4 with steps lw 2 lc rgb '#d62728' title l1, \
     f using 10:5 with steps lw 2 lc rgb '#1f77b4' title l2
set tmargin at screen 0.38
set bmargin at screen 0.09
set format x '%.0f'
set xlabel xl noenhanced
set ylabel "context per\nsequence (tokens)"
set yrange [*:*]
unset key
plot f using 10:3 with steps lw 2 lc rgb '#555555'
unset multiplot
