# space.gp: a configuration search (`writescope plan --search --plot`): every configuration
# searched to the end as a point, goodput against the longest context one sequence's KV fits
# (or against $/h with prices), the Pareto frontier as a line; every number is modeled.
# Rendered by ws_space_plot, which writes the data files and runs
# `gnuplot -c space.gp DATADIR XKIND YLABEL TITLE OUTFILE TERM`.
# Arguments are plain strings gnuplot never evaluates:
#   DATADIR   folder with all.dat and frontier.dat (x, goodput)
#   XKIND     context | price
#   YLABEL    the goodput's unit
#   TITLE     the figure's title; OUTFILE output path; TERM pngcairo, svg or pdfcairo
datadir = ARG1
xkind = ARG2
ylab = ARG3
title = ARG4
outfile = ARG5
term = ARG6
if (term eq 'svg') {
    set terminal svg size 1000, 640 dynamic font 'sans,11'
} else {
    if (term eq 'pdfcairo') {
        set terminal pdfcairo size 10, 6.4 font 'sans,11'
    } else {
        set terminal pngcairo size 1000, 640 font 'sans,11'
    }
}
set output outfile
set title title noenhanced font ',13'
set grid
set key outside right top box opaque noenhanced
if (xkind eq 'price') {
    set xlabel 'GPU price ($/h)'
} else {
    set xlabel "longest context one sequence's KV fits (K tokens, log scale)" noenhanced
    set logscale x
}
set ylabel ylab noenhanced
set yrange [0:*]
plot sprintf('%s/all.dat', datadir) using 1:2 with points pt 6 ps 0.8 lc rgb '#888888' \
         title 'searched to the end', \
     sprintf('%s/frontier.dat', datadir) using 1:2 with linespoints pt 7 ps 1.3 lw 2 \
         lc rgb '#c0392b' title 'Pareto frontier'
