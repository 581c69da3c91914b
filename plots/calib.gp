# calib.gp: every fit of one calibration run, one panel each: the achieved rate (GB/s, or
# GFLOP/s for a compute-bound operation) of the measured samples against their size, with
# the fitted model's curve, and below it the model's error in percent of each measured time,
# so a poor fit shows as a curve that leaves the points and residuals far from zero.
# `writescope plot calib` runs `gnuplot -c calib.gp DATADIR OUTFILE TERM N` (plots/README.md):
#   DATADIR/i.dat  size, rate (median), rate at t_max, rate at t_min, model error %
#   DATADIR/i.fit  size, model rate (a smooth curve through the measured range, or the
#                  model at each sample when the samples mix shapes: drawn as circles)
#   DATADIR/titles.tsv  line i: key, fitted parameters, y label, x label, curve|points
# The residual axis is symmetric about zero, so a bias shows as points on one side.
datadir = ARG1
outfile = ARG2
term = ARG3
n = ARG4 + 0
ncols = n < 3 ? n : 3
nrows = ceil(n / 3.0)
cw = 560.0
ch = 490.0
head = 40.0
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
titles = datadir . '/titles.tsv'
set multiplot title 'Calibration: achieved rate per call, measured (median, min-max bars) and the fitted model'
set logscale x
set grid
set key bottom right box opaque font ',9' spacing 1.1
do for [i = 1:n] {
    stats titles every ::(i - 1)::(i - 1) using (t = strcol(1), t2 = strcol(2), yl = strcol(3), xl = strcol(4), how = strcol(5), 0) nooutput
    c = (i - 1) % ncols
    r = int((i - 1) / ncols)
    x0 = c * cw / W
    ytop = 1 - (head + r * ch) / H
    ybot = 1 - (head + (r + 1) * ch) / H
    f = sprintf('%s/%d.dat', datadir, i)
    g = sprintf('%s/%d.fit', datadir, i)
    set lmargin at screen x0 + 80 / W
    set ytics autofreq
    set rmargin at screen x0 + (cw - 20) / W
    # the rate panel
    set tmargin at screen ytop - 52 / H
    set bmargin at screen ybot + 0.38 * ch / H
    set title t . "\n" . t2 noenhanced font ',10'
    set format x ''
    unset xlabel
    set ylabel yl noenhanced
    set format y '%g'
    set yrange [0:*]
    set key
    if (how eq 'curve') {
        plot f using 1:2:3:4 with yerrorbars pt 7 ps 0.7 lc rgb '#1f77b4' title 'measured', \
             g using 1:2 with lines lw 2 lc rgb '#d62728' title 'fitted model'
    } else {
        plot f using 1:2:3:4 with yerrorbars pt 7 ps 0.7 lc rgb '#1f77b4' title 'measured', \
             g using 1:2 with points pt 6 ps 1.2 lw 1.5 lc rgb '#d62728' title 'fitted model'
    }
    # the residuals panel
    unset title
    set tmargin at screen ybot + 0.36 * ch / H
    set bmargin at screen ybot + 60 / H
    set format x '%.0s%c'
    set xlabel xl noenhanced
    set ylabel "model - measured\ntime (%)"
    set yrange [*:*]
    stats f using 5 name 'res' nooutput
    m = abs(res_min) > abs(res_max) ? abs(res_min) : abs(res_max)
    m = m < 1 ? 1 : m
    # about two ticks each side: m / 2 rounded up to 1, 2 or 5 times a power of ten
    e = 10.0 ** floor(log10(m / 2.0))
    q = m / 2.0 / e
    step = q <= 1 ? e : (q <= 2 ? 2 * e : (q <= 5 ? 5 * e : 10 * e))
    set yrange [-1.2 * m:1.2 * m]
    set ytics step
    unset key
    set arrow 1 from graph 0, first 0 to graph 1, first 0 nohead lc rgb 'black' lw 1
    plot f using 1:5 with impulses lw 2 lc rgb '#555555', \
         f using 1:5 with points pt 7 ps 0.6 lc rgb '#555555'
    unset arrow 1
}
unset multiplot
