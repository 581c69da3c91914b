# calib.gp: measured samples and the fitted roofline of every fit of one calibration run,
# one panel per (device, op, attention kind, dtype), log-log time against bytes moved;
# the model's time for each measured operation is an open circle beside its measurement.
# Rendered by `writescope plot calib`, which writes the data files and runs
# `gnuplot -c calib.gp DATADIR N TITLES OUTFILE TERM`. Arguments are plain strings that
# gnuplot never evaluates, so nothing read from the database can become gnuplot code:
#   DATADIR  folder with 1.dat .. N.dat (bytes, t_median, t_min, t_max, t_model, flops)
#   N        number of panels
#   TITLES   space-separated panel titles, one word each
#   OUTFILE  output path; TERM  pngcairo or svg
datadir = ARG1
n = ARG2 + 0
titles = ARG3
outfile = ARG4
term = ARG5
if (term eq 'svg') {
    set terminal svg size 1400, 350 * ceil(n / 3.0) dynamic font 'sans,10'
} else {
    set terminal pngcairo size 1400, 350 * ceil(n / 3.0) font 'sans,9'
}
set output outfile
set multiplot layout ceil(n / 3.0), 3 title 'WriteScope calibration: measured (points, min-max bars) and fitted model (circles)'
set logscale xy
set format x '%.0s%cB'
set format y '%.0s%cs'
set grid
set key top left box opaque
do for [i = 1:n] {
    t = word(titles, i)
    set title t noenhanced
    f = sprintf('%s/%d.dat', datadir, i)
    plot f using 1:2:3:4 with yerrorbars pt 7 ps 0.6 lc rgb '#1f77b4' title 'measured', \
         f using 1:5 with points pt 6 ps 1.2 lw 1.5 lc rgb '#d62728' title 'fitted model'
}
unset multiplot
