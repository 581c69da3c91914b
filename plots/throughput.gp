# throughput.gp: decode tokens/s against prompt length per policy, for one model on one GPU
# and host profile, one panel per batch size. All modeled (simulation). A point is missing
# where its policy ran out of memory. `writescope plot throughput` runs
# `gnuplot -c throughput.gp DATADIR OUTFILE TERM N` (plots/README.md):
#   DATADIR/labels.tsv  line 1: the figure's title; line 2: writescope's policy number k
#   DATADIR/panels.tsv  line i: panel title, the policies' numbers present (k ...)
#   DATADIR/i-k.dat     policy k in panel i: a header (policy name), then prompt, tokens/s
#   DATADIR/policies.tsv  line k: policy k's name (one key under the panels)
datadir = ARG1
outfile = ARG2
term = ARG3
n = ARG4 + 0
ncols = n < 3 ? n : 3
nrows = ceil(n / 3.0)
cw = 560.0
ch = 420.0
head = 55.0
W = cw * ncols
keyh = 40.0
H = ch * nrows + head + keyh
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
stats datadir . '/labels.tsv' every ::0::0 using (title = strcol(1), 0) nooutput
stats datadir . '/labels.tsv' every ::1::1 using (kws = column(1), 0) nooutput
pf = datadir . '/policies.tsv'
array pname[kws]
do for [k = 1:kws] {
    stats pf every ::(k - 1)::(k - 1) using (tmp = strcol(1), 0) nooutput
    pname[k] = tmp
}
set multiplot title title . "\nmissing point: that policy ran out of memory" noenhanced
set logscale x 2
set format x '%.0f'
set xlabel 'prompt length (tokens)'
set ylabel 'decode tokens/s (modeled)'
set yrange [0:*]
set grid
unset key
set offsets graph 0.04, graph 0.04, 0, 0
do for [i = 1:n] {
    stats panels every ::(i - 1)::(i - 1) using (t = strcol(1), ks = strcol(2), 0) nooutput
    c = (i - 1) % ncols
    r = int((i - 1) / ncols)
    x0 = c * cw / W
    ytop = 1 - (head + r * ch) / H
    ybot = 1 - (head + (r + 1) * ch) / H
    set lmargin at screen x0 + 75 / W
    set rmargin at screen x0 + (cw - 25) / W
    set tmargin at screen ytop - 30 / H
    set bmargin at screen ybot + 55 / H
    set title t noenhanced
    plot for [k in ks] sprintf('%s/%d-%s.dat', datadir, i, k) using 1:2 \
         with linespoints lw ((k + 0) == kws ? 3 : 1.5) pt 7 ps 0.8 lc (k + 0) notitle
}
# the key: every policy, under the panels
unset title
unset xlabel
unset ylabel
unset border
unset tics
unset grid
unset logscale
set offsets 0, 0, 0, 0
set xrange [0:1]
set yrange [0:1]
set lmargin at screen 0.02
set rmargin at screen 0.98
set tmargin at screen keyh / H
set bmargin at screen 0
set key center center horizontal noenhanced font ',10'
plot NaN notitle, for [k = 1:kws] keyentry with linespoints lw (k == kws ? 3 : 1.5) pt 7 lc k title pname[k]
unset multiplot
