# validate.gp: a `writescope validate` comparison, one panel per quantity: the simulator's
# prediction (y) against the live runtime (x) for every (step, layer) point of every repeat,
# with the y = x line and +-10% bands (warm-up steps are not in the data). The runtime's CPU times are measured; its GPU times are
# MODELED under gpu = modeled:<profile> (the panel's x label says so). Rendered by
# `writescope validate --plot` and `writescope plot validate`, which write the data files and
# run `gnuplot -c validate.gp DATADIR OUTFILE TERM HEADER P1 .. P5`. Arguments are plain
# strings that gnuplot never evaluates:
#   DATADIR  folder with 1.dat .. 5.dat (measured, predicted, repeat), ms or percent
#   OUTFILE  output path; TERM pngcairo, svg or pdfcairo
#   HEADER   the figure's title (may hold a newline)
#   P1..P5   per panel "title|x label|y label" (the title may hold a newline)
datadir = ARG1
outfile = ARG2
term = ARG3
header = ARG4
if (term eq 'svg') {
    set terminal svg size 1500, 950 dynamic font 'sans,11'
} else {
    if (term eq 'pdfcairo') {
        set terminal pdfcairo size 1500 / 100.0, 950 / 100.0 font 'sans,10'
    } else {
        set terminal pngcairo size 1500, 950 font 'sans,10'
    }
}
set output outfile
legend = 'dots: one point (step, or step x layer), colour = runtime repeat; solid line: y = x; dashed: +-10%'
set multiplot layout 2, 3 title header . "\n" . legend noenhanced font ',11'
set grid
unset key
set size ratio -1
part(s, k) = (k == 1) ? s[1:strstrt(s, '|') - 1] : \
             (k == 2) ? s[strstrt(s, '|') + 1:strstrt(s, '|') + strstrt(s[strstrt(s, '|') + 1:], '|') - 1] : \
             s[strstrt(s, '|') + strstrt(s[strstrt(s, '|') + 1:], '|') + 1:]
do for [i = 1:5] {
    spec = (i == 1) ? ARG5 : (i == 2) ? ARG6 : (i == 3) ? ARG7 : (i == 4) ? ARG8 : ARG9
    f = sprintf('%s/%d.dat', datadir, i)
    set xrange [*:*]
    set yrange [*:*]
    stats f using 1:2 nooutput
    lo = STATS_min_x < STATS_min_y ? STATS_min_x : STATS_min_y
    hi = STATS_max_x > STATS_max_y ? STATS_max_x : STATS_max_y
    pad = (hi - lo) > 0 ? 0.08 * (hi - lo) : (hi > 0 ? 0.1 * hi : 1)
    lo = lo - pad
    hi = hi + pad
    set xrange [lo:hi]
    set yrange [lo:hi]
    set title part(spec, 1) noenhanced
    set xlabel part(spec, 2) noenhanced
    set ylabel part(spec, 3) noenhanced
    plot f using 1:2:(column(3) + 1) with points pt 7 ps 0.8 lc variable notitle, \
         x with lines lw 1.5 lc rgb '#222222' notitle, \
         1.1 * x with lines dt 2 lc rgb '#888888' notitle, \
         0.9 * x with lines dt 2 lc rgb '#888888' notitle
}
unset multiplot
