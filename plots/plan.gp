# plan.gp: a capacity plan (`writescope plan`): per GPU profile, goodput against load per
# policy (left) and the share within the SLOs against load (right) with the attainment
# threshold the plan searched for; every number is modeled by the simulator.
# Rendered by ws_plan_plot, which writes the data files and runs
# `gnuplot -c plan.gp DATADIR GPUS POLICIES PCT LOAD TITLE OUTFILE TERM`.
# Arguments are plain strings gnuplot never evaluates:
#   DATADIR   folder with g<i>_p<j>.dat (load, goodput, attainment %, met 0/1)
#   GPUS, POLICIES  names, one word each
#   PCT       the SLO attainment threshold, percent
#   LOAD      rate (requests/s; goodput in requests/s) or users (decode tokens/s)
#   TITLE     the figure's title; OUTFILE output path; TERM pngcairo, svg or pdfcairo
datadir = ARG1
gpus = ARG2
pols = ARG3
pct = ARG4 + 0
users = ARG5 eq 'users'
title = ARG6
outfile = ARG7
term = ARG8
ng = words(gpus)
np = words(pols)
xlab = users ? 'concurrent users' : 'arrival rate (requests/s, log scale)'
ylab = users ? 'decode tokens/s within the SLO' : 'goodput (requests/s within the SLO)'
if (term eq 'svg') {
    set terminal svg size 1400, 120 + 420 * ng dynamic font 'sans,11'
} else {
    if (term eq 'pdfcairo') {
        set terminal pdfcairo size 1400 / 100.0, (120 + 420 * ng) / 100.0 font 'sans,11'
    } else {
        set terminal pngcairo size 1400, 120 + 420 * ng font 'sans,11'
    }
}
set output outfile
set multiplot layout ng, 2 title title noenhanced font ',13'
set logscale x
set grid
set key outside right top box opaque noenhanced
set xlabel xlab noenhanced
set style data linespoints
# Policies drawn last-first so the first (writescope) lies on top; the key is inverted back.
# Filled points met the SLOs, open ones did not.
set key invert
do for [g = 1:ng] {
    gname = word(gpus, g)
    set title sprintf('%s: goodput against load (modeled); filled: met the SLO', gname) noenhanced
    set ylabel ylab noenhanced
    set yrange [0:*]
    plot for [p = np:1:-1] sprintf('%s/g%d_p%d.dat', datadir, g, p) using 1:2:($4 > 0 ? 7 : 6) \
         with linespoints pt variable ps 1.1 lw (p == 1 ? 3 : 1.5) lc p title word(pols, p)
    set title sprintf('%s: SLO attainment (modeled); dashed: %g%% threshold', gname, pct) noenhanced
    set ylabel 'within the SLO (%)'
    set yrange [0:105]
    plot pct with lines dt 2 lw 2 lc rgb 'black' title sprintf('%g%% threshold', pct), \
         for [p = np:1:-1] sprintf('%s/g%d_p%d.dat', datadir, g, p) using 1:3:($4 > 0 ? 7 : 6) \
         with linespoints pt variable ps 1.1 lw (p == 1 ? 3 : 1.5) lc p title word(pols, p)
}
unset multiplot
