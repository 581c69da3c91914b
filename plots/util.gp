# util.gp: how busy the GPU, the H2D and D2H copy engines and the CPU were over one run,
# one strip each (busy seconds over step duration, consecutive steps merged into at most a
# few hundred time-weighted bins); each strip's title gives the busy share of the whole run.
# From a simulation run (all modeled) or a live run (`--live`: CPU measured, GPU and copies
# measured or modeled as the run says); the labels say which. `writescope plot util` runs
# `gnuplot -c util.gp DATADIR OUTFILE TERM N` (plots/README.md):
#   DATADIR/util.dat    t_start, t_end, context per sequence, r*, r, busy % GPU, H2D, D2H, CPU
#   DATADIR/labels.tsv  title, workload, the four resources' labels, x label
datadir = ARG1
outfile = ARG2
term = ARG3
if (term eq 'svg') {
    set terminal svg size 1000, 820 dynamic font 'sans,11'
} else {
    if (term eq 'pdfcairo') {
        set terminal pdfcairo size 1000 / 100.0, 820 / 100.0 font 'sans,10'
    } else {
        set terminal pngcairo size 1000, 820 font 'sans,10'
    }
}
set output outfile
set datafile separator "\t"
lab = datadir . '/labels.tsv'
f = datadir . '/util.dat'
stats lab every ::0::0 using (title = strcol(1), 0) nooutput
stats lab every ::1::1 using (sub = strcol(1), 0) nooutput
stats lab every ::6::6 using (xl = strcol(1), 0) nooutput
stats f using ($2 - $1) name 'span' nooutput
set multiplot title title . "\n" . sub noenhanced
set lmargin at screen 0.09
set rmargin at screen 0.97
set grid
set yrange [0:105]
set ytics 0, 25, 100
set ylabel 'busy (%)'
unset key
colors = '#4c78a8 #f58518 #54a24b #b279a2'
top = 0.905
h = 0.215
do for [k = 1:4] {
    stats lab every ::(k + 1)::(k + 1) using (name = strcol(1), 0) nooutput
    stats f using (valid(5 + k) ? column(5 + k) * ($2 - $1) / 100 : 0) name 'b' nooutput
    set title sprintf('%s: busy %.0f%% of the run', name, 100 * b_sum / span_sum) noenhanced offset 0, -0.6
    set tmargin at screen top - (k - 1) * h
    set bmargin at screen top - k * h + 0.035
    if (k < 4) {
        set format x ''
        unset xlabel
    } else {
        set format x '%g'
        set xlabel xl noenhanced
    }
    plot f using 1:(column(5 + k)) with steps lw 1.5 lc rgb word(colors, k)
}
unset multiplot
