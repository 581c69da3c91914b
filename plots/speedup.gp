# speedup.gp: writescope's decode throughput over each baseline's, one panel per model and
# hardware (the paper's grid): the geometric mean over the closed-batch points where both
# were served without running out of memory (bars, value on top) and each point (dots).
# All modeled (simulation). `writescope plot speedup` runs
# `gnuplot -c speedup.gp DATADIR OUTFILE TERM N` (plots/README.md):
#   DATADIR/panels.tsv  line i: panel title, number of baselines
#   DATADIR/i.bars      baseline index, geometric mean, baseline name, points note
# Each bar's label: the baseline, the geometric mean, how many points it is over.
#   DATADIR/i.pts       x (index, spread), speedup of one point, point label
datadir = ARG1
outfile = ARG2
term = ARG3
n = ARG4 + 0
ncols = n < 2 ? n : 2
nrows = ceil(n / 2.0)
cw = 680.0
ch = 430.0
head = 50.0
W = cw * ncols
H = ch * nrows + head
if (term eq 'svg') {
    set terminal svg size W, H dynamic font 'sans,11'
} else {
    if (term eq 'pdfcairo') {
        set terminal pdfcairo size W / 100.0, H / 100.0 font 'sans,10'
    } else {
        set terminal pngcairo size W, H font 'sans,10'
    }
}
set output outfile
set datafile separator "\t"
panels = datadir . '/panels.tsv'
set multiplot title "Decode tokens/s of writescope over each baseline (modeled by the simulator)\ngeometric mean over the points both served (bars) and each batch x prompt point (dots)"
set style fill solid 0.55 border -1
set boxwidth 0.6
set grid ytics
set ylabel 'speedup (writescope / baseline)'
set yrange [0:*]
set xtics nomirror font ',9'
unset key
do for [i = 1:n] {
    stats panels every ::(i - 1)::(i - 1) using (t = strcol(1), nb = column(2), 0) nooutput
    c = (i - 1) % ncols
    r = int((i - 1) / ncols)
    x0 = c * cw / W
    ytop = 1 - (head + r * ch) / H
    ybot = 1 - (head + (r + 1) * ch) / H
    set lmargin at screen x0 + 70 / W
    set rmargin at screen x0 + (cw - 20) / W
    set tmargin at screen ytop - 45 / H
    set bmargin at screen ybot + 62 / H
    set title t noenhanced
    set xrange [-0.6:nb - 0.4]
    b = sprintf('%s/%d.bars', datadir, i)
    p = sprintf('%s/%d.pts', datadir, i)
    plot b using 1:2:xticlabels(strcol(3) . "\n" . (valid(2) ? sprintf('%.2fx', $2) : 'none') . "\n" . strcol(4)) \
           with boxes lc rgb '#4c78a8', \
         p using 1:2 with points pt 7 ps 0.5 lc rgb '#222222', \
         1 with lines dt 2 lc rgb '#d62728'
}
unset multiplot
