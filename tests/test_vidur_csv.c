/* test_vidur_csv: Vidur's profiling CSVs into operator rows (calib/vidur_csv.c), on small
 * hand-made files in its format: the per-GPU shapes of an attention row and of the nine
 * operations of an MLP row under tensor parallelism, times in seconds, the held-out split
 * (every 5th row of each operation of a file, whatever was read before it), CRLF, a byte
 * order mark and blank lines at the end, and every malformed input (times below 1 ns or out
 * of order, two models in a file, two attention kinds in a list) as one error naming the
 * file and line, the list left as it was. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "vidur_csv.h"

#define ATTN_HEAD                                                                                  \
    "time_stats.attn_decode.min,time_stats.attn_decode.median,time_stats.attn_decode.max,"        \
    "time_stats.attn_prefill.median,n_embd,n_q_head,n_kv_head,num_tensor_parallel_workers,"       \
    "batch_size,prefill_chunk_size,kv_cache_size,is_prefill,attention_backend,profile_method\n"

#define MLP_HEAD                                                                                   \
    "time_stats.emb.median,time_stats.input_layernorm.median,time_stats.attn_pre_proj.median,"    \
    "time_stats.attn_rope.median,time_stats.attn_post_proj.median,"                               \
    "time_stats.post_attention_layernorm.median,time_stats.mlp_up_proj.median,"                   \
    "time_stats.mlp_act.median,time_stats.mlp_down_proj.median,time_stats.add.median,n_head,"     \
    "n_kv_head,n_embd,n_expanded_embd,use_gated_mlp,num_tokens,num_tensor_parallel_workers\n"

static int parse(const char *text, ws_vidur_rows *r, ws_err *err)
{
    return ws_vidur_parse(text, strlen(text), "p.csv", r, err);
}

Test(vidur_csv, attention_rows_per_gpu)
{
    const char *t = ATTN_HEAD
        "0.014,0.015,0.016,,8192,64,8,2,3,0,512,False,AttentionBackend.FLASH_ATTENTION,"
        "ProfileMethod.KINETO\r\n"
        ",,,2.316,8192,64,8,2,1,4096,128,True,AttentionBackend.FLASH_ATTENTION,"
        "ProfileMethod.KINETO\r\n";
    ws_vidur_rows r = {0};
    ws_err err = {0};
    cr_assert_eq(parse(t, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.n, 2);
    cr_assert_str_eq(r.kind, "attention");
    cr_assert_str_eq(r.backend, "AttentionBackend.FLASH_ATTENTION");
    cr_assert_str_eq(r.method, "ProfileMethod.KINETO");
    /* a blank line closing the file is no row (fuzz/corpus/vidur_profile/regress-*) */
    cr_assert_eq(parse(ATTN_HEAD "0.01,0.01,0.01,,8192,64,8,2,1,0,64,False,x,y\n\n", &r, &err), 0,
                 "%s", err.msg);
    cr_assert_eq(r.n, 3);
    const ws_vidur_row *d = &r.v[0], *p = &r.v[1];
    cr_assert_eq(d->op, WS_VOP_ATTN_DECODE);
    cr_assert_eq(ws_vidur_op_group(d->op), WS_VIDUR_DECODE_ATTN);
    cr_assert_eq(d->q_heads, 32); /* 64 over 2 workers */
    cr_assert_eq(d->kv_heads, 4);
    cr_assert_eq(d->head_dim, 128);
    cr_assert_eq(d->batch, 3);
    cr_assert_eq(d->kv, 512);
    cr_assert_eq(d->line, 2);
    cr_assert_float_eq(d->t, 15e-6, 1e-15);
    cr_assert_float_eq(d->t_min, 14e-6, 1e-15);
    cr_assert_float_eq(d->t_max, 16e-6, 1e-15);
    cr_assert_eq(p->op, WS_VOP_ATTN_PREFILL);
    cr_assert_eq(p->chunk, 4096);
    cr_assert_float_eq(p->t, 2.316e-3, 1e-15);
    cr_assert(isnan(p->t_min), "no prefill min column");
    ws_vidur_rows_free(&r);
}

Test(vidur_csv, mlp_row_is_nine_operations_at_per_gpu_shapes)
{
    /* Llama-3-8B-like: 32 q / 8 kv heads of 128, hidden 4096, MLP 14336, 2 workers, 64
     * tokens, with a byte order mark and no newline at the end */
    const char *t = "\xEF\xBB\xBF" MLP_HEAD
                    "0.1,0.01,0.02,0.005,0.012,0.011,0.05,0.006,0.03,0.004,32,8,4096,14336,True,64,2";
    ws_vidur_rows r = {0};
    ws_err err = {0};
    cr_assert_eq(parse(t, &r, &err), 0, "%s", err.msg);
    cr_assert_str_eq(r.kind, "mlp");
    cr_assert_eq(r.n, 9, "four GEMMs, five memory-bound ops; the embedding is read past");
    static const struct {
        int op;
        double K, N, t;
    } want[] = {{WS_VOP_QKV, 4096, (16 + 8) * 128.0, 0.02},
                {WS_VOP_OPROJ, 16 * 128.0, 4096, 0.012},
                {WS_VOP_UP, 4096, 2 * 7168.0, 0.05},
                {WS_VOP_DOWN, 7168, 4096, 0.03},
                {WS_VOP_NORM_IN, 4096, 0, 0.01},
                {WS_VOP_NORM_POST, 4096, 0, 0.011},
                {WS_VOP_ROPE, 16 + 4, 128, 0.005},
                {WS_VOP_ACT, 7168, 0, 0.006},
                {WS_VOP_ADD, 4096, 0, 0.004}};
    for (int i = 0; i < 9; i++) {
        const ws_vidur_row *w = &r.v[i];
        cr_assert_eq(w->op, want[i].op, "row %d: %s", i, ws_vidur_op_name(w->op));
        cr_assert_eq(w->M, 64);
        cr_assert_eq(w->K, want[i].K, "%s K %g", ws_vidur_op_name(w->op), w->K);
        cr_assert_eq(w->N, want[i].N, "%s N %g", ws_vidur_op_name(w->op), w->N);
        cr_assert_float_eq(w->t, want[i].t * 1e-3, 1e-15);
        cr_assert_eq(w->tp, 2);
    }
    ws_vidur_rows_free(&r);
}

Test(vidur_csv, every_fifth_row_of_each_operation_is_held_out)
{
    char t[8192] = ATTN_HEAD;
    for (int i = 0; i < 12; i++) {
        char row[256];
        snprintf(row, sizeof row, "0.01,0.01,0.01,,8192,64,8,2,%d,0,64,False,x,y\n"
                                  ",,,0.02,8192,64,8,2,1,64,%d,True,x,y\n", i + 1, 32 * i);
        strcat(t, row);
    }
    ws_vidur_rows r = {0};
    ws_err err = {0};
    cr_assert_eq(parse(t, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.n, 24);
    int seen[2] = {0}, held[2] = {0};
    for (int i = 0; i < r.n; i++) {
        const int k = r.v[i].op == WS_VOP_ATTN_PREFILL;
        cr_assert_eq(r.v[i].heldout, seen[k] % 5 == 4, "row %d", i);
        held[k] += r.v[i].heldout;
        seen[k]++;
    }
    cr_assert_eq(held[0], 2); /* rows 5 and 10 of 12 */
    cr_assert_eq(held[1], 2);
    ws_vidur_rows_free(&r);
}

/* The held-out rows are a property of the file and the row: a file parsed after others holds
 * out the rows it holds out alone (`calib check` of one file of a folder imported whole
 * judges the rows the import never fitted). */
Test(vidur_csv, heldout_rows_are_the_files_own)
{
    char a[4096] = ATTN_HEAD, b[4096] = ATTN_HEAD;
    for (int i = 0; i < 7; i++) {
        char row[128];
        snprintf(row, sizeof row, "0.01,0.01,0.01,,8192,64,8,2,%d,0,64,False,x,y\n", i + 1);
        strcat(i < 3 ? a : b, row);
        if (i >= 3)
            strcat(a, row); /* a: 7 rows, b: its last 4 */
    }
    strcat(b, "0.01,0.01,0.01,,8192,64,8,2,9,0,64,False,x,y\n"); /* b: 5 rows */
    ws_vidur_rows alone = {0}, after = {0};
    ws_err err = {0};
    cr_assert_eq(parse(b, &alone, &err), 0, "%s", err.msg);
    cr_assert_eq(parse(a, &after, &err), 0, "%s", err.msg);
    cr_assert_eq(parse(b, &after, &err), 0, "%s", err.msg);
    cr_assert_eq(alone.n, 5);
    cr_assert_eq(after.n, 12);
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(after.v[7 + i].line, alone.v[i].line);
        cr_assert_eq(after.v[7 + i].heldout, alone.v[i].heldout, "line %d of b", alone.v[i].line);
        cr_assert_eq(alone.v[i].heldout, i == 4, "the 5th row of b");
    }
    ws_vidur_rows_free(&alone);
    ws_vidur_rows_free(&after);
}

/* Blank lines closing a file are its end, however many; one between rows is an error. */
Test(vidur_csv, trailing_blank_lines_end_the_file)
{
    ws_vidur_rows r = {0};
    ws_err err = {0};
    cr_assert_eq(parse(ATTN_HEAD "0.01,0.01,0.01,,8192,64,8,2,1,0,64,False,x,y\n\n\n \r\n\t\n",
                       &r, &err),
                 0, "%s", err.msg);
    cr_assert_eq(r.n, 1);
    ws_vidur_rows_free(&r);
}

/* One malformed input: an error naming the file (and line), nothing added. */
static void bad(const char *text, const char *needle)
{
    ws_vidur_rows r = {0};
    ws_err err = {0};
    cr_assert_eq(parse(ATTN_HEAD "0.01,0.01,0.01,,8192,64,8,2,1,0,64,False,x,y\n", &r, &err), 0,
                 "%s", err.msg);
    cr_assert_neq(ws_vidur_parse(text, strlen(text), "p.csv", &r, &err), 0, "accepted: %s", text);
    cr_assert_eq(err.code, WS_EPARSE, "%s", err.msg);
    cr_assert_neq(strstr(err.msg, "p.csv"), NULL, "%s", err.msg);
    cr_assert_neq(strstr(err.msg, needle), NULL, "'%s' lacks '%s'", err.msg, needle);
    cr_assert_null(strchr(err.msg, '\n'), "one line: %s", err.msg);
    cr_assert_eq(r.n, 1, "the list is as it was");
    ws_vidur_rows_free(&r);
}

Test(vidur_csv, malformed_files_are_one_line_errors)
{
    bad("", "empty file");
    bad("a,b,c\n1,2,3\n", "neither Vidur's attention profile");
    bad(ATTN_HEAD, "a header and no rows");
    bad("time_stats.attn_decode.median,n_embd\n0.01,8\n", "no 'n_q_head' column");
    bad(MLP_HEAD "0.1,0.01,0.02,0.005,0.012,0.011,0.05,0.006,0.03,0.004,32,8,4096,14336,True,64\n",
        "p.csv:2: 16 fields, the header has 17");
    bad(ATTN_HEAD "0.01,abc,0.01,,8192,64,8,2,1,0,64,False,x,y\n",
        "p.csv:2: time_stats.attn_decode.median 'abc'");
    bad(ATTN_HEAD "0.01,0,0.01,,8192,64,8,2,1,0,64,False,x,y\n", "median time of 0");
    bad(ATTN_HEAD "0,1e-300,0.01,,8192,64,8,2,1,0,64,False,x,y\n",
        "p.csv:2: time_stats.attn_decode.median '1e-300': a median below 1 ns");
    bad(ATTN_HEAD "0.02,0.01,0.03,,8192,64,8,2,1,0,64,False,x,y\n",
        "p.csv:2: time_stats.attn_decode: min 0.02, median 0.01, max 0.03 ms are not in order");
    bad(ATTN_HEAD "0.01,0.04,0.03,,8192,64,8,2,1,0,64,False,x,y\n",
        "p.csv:2: time_stats.attn_decode: min 0.01, median 0.04, max 0.03 ms are not in order");
    bad(ATTN_HEAD "0.01,0.01,0.01,,8192,64,8,2,1,0,64,False,x,y\n\n"
                  "0.01,0.01,0.01,,8192,64,8,2,1,0,64,False,x,y\n",
        "p.csv:3: a blank line between rows");
    /* one model per file: its kind and shapes are not its first row's alone */
    bad(ATTN_HEAD "0.01,0.01,0.01,,8192,64,8,2,1,0,64,False,x,y\n"
                  "0.01,0.01,0.01,,8192,64,64,2,1,0,64,False,x,y\n",
        "p.csv:3: n_embd 8192 with 64 q / 64 kv heads, where line 2 has 8192 with 64 / 8: one "
        "model per file");
    bad(MLP_HEAD "0.1,0.01,0.02,0.005,0.012,0.011,0.05,0.006,0.03,0.004,32,8,4096,14336,True,64,2\n"
                 "0.1,0.01,0.02,0.005,0.012,0.011,0.05,0.006,0.03,0.004,32,32,4096,11008,True,64,2\n",
        "p.csv:3: n_embd 4096 with 32 q / 32 kv heads, where line 2 has 4096 with 32 / 8");
    /* one attention kind per list: bad() reads a GQA file first */
    bad(ATTN_HEAD "0.01,0.01,0.01,,8192,64,64,2,1,0,64,False,x,y\n",
        "p.csv:2: MHA attention (64 q / 64 kv heads), where the files before hold GQA attention");
    bad(ATTN_HEAD "0.01,-1,0.01,,8192,64,8,2,1,0,64,False,x,y\n", "not a time");
    bad(ATTN_HEAD "0.01,nan,0.01,,8192,64,8,2,1,0,64,False,x,y\n", "not a time");
    bad(ATTN_HEAD "0.01,0.01,0.01,,8192,64,8,3,1,0,64,False,x,y\n", "do not split over 3 workers");
    bad(ATTN_HEAD "0.01,0.01,0.01,,8192,64,8,2,1.5,0,64,False,x,y\n", "batch_size '1.5'");
    bad(ATTN_HEAD "0.01,0.01,0.01,,8192,64,8,2,0,0,64,False,x,y\n", "batch_size 0: outside");
    bad(ATTN_HEAD "0.01,0.01,0.01,,8192,64,8,2,99999999999,0,64,False,x,y\n", "outside");
    bad(ATTN_HEAD "0.01,0.01,0.01,,8192,64,8,2,1,0,64,maybe,x,y\n", "is_prefill 'maybe'");
    bad(ATTN_HEAD ",,,,8192,64,8,2,1,0,64,False,x,y\n", "without time_stats.attn_decode.median");
    bad(ATTN_HEAD "0.01,0.01,0.01,,8192,64,8,2,1,0,0,False,x,y\n", "kv_cache_size 0");
    bad(ATTN_HEAD ",,,0.02,8192,64,8,2,1,0,64,True,x,y\n", "prefill_chunk_size 0");
    bad(ATTN_HEAD "0.01,0.01,0.01,,8192,64,8,2,1,0,64,False,\"x\",y\n", "quoted field");
    bad("n_embd,n_embd,time_stats.attn_decode.median\n", "given twice");
    bad(MLP_HEAD "0.1,0.01,0.02,0.005,0.012,0.011,,0.006,0.03,0.004,32,8,4096,14336,True,64,2\n",
        "time_stats.mlp_up_proj.median is empty");
    bad(MLP_HEAD "0.1,0.01,0.02,0.005,0.012,0.011,0.05,0.006,0.03,0.004,32,8,4096,14335,True,64,2\n",
        "n_expanded_embd 14335 does not split");
    const char nul[] = ATTN_HEAD "0.01,0.01\0,0.01,,8192,64,8,2,1,0,64,False,x,y\n";
    ws_vidur_rows r = {0};
    ws_err err = {0};
    cr_assert_neq(ws_vidur_parse(nul, sizeof nul - 1, "p.csv", &r, &err), 0);
    cr_assert_neq(strstr(err.msg, "NUL byte"), NULL, "%s", err.msg);
    ws_vidur_rows_free(&r);
}
