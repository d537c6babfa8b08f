/* cli/generate: run prompts through the engine on this thread and print the results.
 *
 *   xinfer generate --model DIR --prompt TEXT [sampling flags]    continuation on stdout,
 *                                                                 one stats line on stderr
 *   xinfer generate --model DIR --prompts-file IN.jsonl [--output OUT.jsonl]
 *                                                                 many requests at once */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "hub/hub.h"
#include "xinfer.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct gen_req {
    json_t *in;              /* the input line (prompts-file mode) */
    char *text;              /* accumulated output, owned */
    size_t len, cap;
    json_t *ids;             /* generated ids */
    const char *finish;
    int prompt_tokens, cached_tokens, generated;
    double t_submit, t_first, t_end;
    uint64_t logits_hash;
    int stream;              /* print deltas to stdout as they come */
    int done;
} gen_req;

static void on_output(void *user, const xi_output *o) {
    gen_req *r = user;
    double t = now_s();
    if (o->n_new > 0 && r->t_first == 0) r->t_first = t;
    if (o->text_len) {
        if (r->len + o->text_len + 1 > r->cap) {
            r->cap = (r->len + o->text_len + 1) * 2;
            r->text = realloc(r->text, r->cap);
        }
        memcpy(r->text + r->len, o->text, o->text_len);
        r->len += o->text_len;
        r->text[r->len] = 0;
        if (r->stream) {
            fwrite(o->text, 1, o->text_len, stdout);
            fflush(stdout);
        }
    }
    for (int i = 0; i < o->n_new; i++) json_array_append_new(r->ids, json_integer(o->new_ids[i]));
    r->prompt_tokens = o->prompt_tokens;
    r->cached_tokens = o->cached_prompt_tokens;
    r->generated = o->generated_tokens;
    if (o->n_new) r->logits_hash = o->logits_hash;
    if (o->finish_reason != XI_FINISH_NONE) {
        r->finish = xi_finish_reason_name(o->finish_reason);
        r->t_end = t;
        r->done = 1;
    }
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: xinfer generate --model DIR|ORG/NAME (--prompt TEXT | --prompts-file IN.jsonl [--output OUT.jsonl])\n"
            "  sampling:  --max-tokens N (128)  --temperature T  --top-p P  --top-k K  --min-p P\n"
            "             --seed S  --ignore-eos\n"
            "  model:     --dtype auto|float32|bfloat16|float16  --kv-cache-dtype auto|float32|bfloat16|float16\n"
            "             --quantization auto|awq|int8|none  --load-format auto|mmap  --threads N\n"
            "             --lm-head-quantization none|int8 (lm_head 16-bit as stored, or int8 per row)\n"
            "             -tp N (tensor parallel over N MPI ranks; starts mpirun itself)\n"
            "             --kernel-precision int8|exact (quantized weights with 8-bit, BF16 with bf16 where AVX-512 BF16, or fp32 activations)\n"
            "             --download-dir DIR  --revision REV  (ORG/NAME is pulled on first use)\n"
            "  engine:    --max-num-seqs N  --max-num-batched-tokens N  --max-model-len N  --block-size N\n"
            "             --kv-cache-memory-bytes N  --enable-prefix-caching | --no-enable-prefix-caching\n"
            "             --enable-chunked-prefill | --no-enable-chunked-prefill\n"
            "An empty --prompt means BOS only. Each prompts-file line is a JSON object with \"prompt\"\n"
            "and optionally \"max_tokens\", \"temperature\", \"top_p\", \"top_k\", \"seed\".\n");
}

typedef struct sampling_flags {
    double temperature, top_p, min_p;
    long long top_k, seed, max_tokens;
    int ignore_eos;
} sampling_flags;

static void apply_line(xi_request_params *rp, const sampling_flags *sf, json_t *line) {
    rp->temperature = (float)sf->temperature;
    rp->top_p = (float)sf->top_p;
    rp->min_p = (float)sf->min_p;
    rp->top_k = (int)sf->top_k;
    rp->seed = sf->seed;
    rp->max_tokens = (int)sf->max_tokens;
    rp->ignore_eos = sf->ignore_eos;
    if (!line) return;
    json_t *v;
    if ((v = json_object_get(line, "max_tokens")) && json_is_integer(v)) rp->max_tokens = (int)json_integer_value(v);
    if ((v = json_object_get(line, "temperature")) && json_is_number(v)) rp->temperature = (float)json_number_value(v);
    if ((v = json_object_get(line, "top_p")) && json_is_number(v)) rp->top_p = (float)json_number_value(v);
    if ((v = json_object_get(line, "top_k")) && json_is_integer(v)) rp->top_k = (int)json_integer_value(v);
    if ((v = json_object_get(line, "seed")) && json_is_integer(v)) rp->seed = json_integer_value(v);
    if ((v = json_object_get(line, "ignore_eos")) && json_is_boolean(v)) rp->ignore_eos = json_is_true(v);
}

static int read_prompts(const char *path, gen_req **out, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "xinfer generate: %s: cannot open\n", path);
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int count = 0, lineno = 0;
    gen_req *reqs = NULL;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (len == 0 || strspn(line, " \t\r\n") == (size_t)len) continue;
        json_error_t je;
        json_t *j = json_loads(line, 0, &je);
        if (!j || !json_is_object(j) || !json_is_string(json_object_get(j, "prompt"))) {
            fprintf(stderr, "xinfer generate: %s:%d: expected a JSON object with a \"prompt\" string%s%s\n",
                    path, lineno, j ? "" : ": ", j ? "" : je.text);
            json_decref(j);
            free(line);
            fclose(f);
            for (int i = 0; i < count; i++) json_decref(reqs[i].in);
            free(reqs);
            return -1;
        }
        reqs = realloc(reqs, sizeof *reqs * (size_t)(count + 1));
        memset(&reqs[count], 0, sizeof *reqs);
        reqs[count++].in = j;
    }
    free(line);
    fclose(f);
    *out = reqs;
    *n = count;
    return 0;
}

int cmd_generate(int argc, char **argv) {
    xi_engine_params ep;
    xi_engine_params_default(&ep);
    sampling_flags sf = {-1, -1, -1, -2, -1, 128, 0};
    const char *prompt = NULL, *prompts_file = NULL, *output = NULL, *v;
    const char *download_dir = NULL, *revision = NULL;
    long long ll;
    double d;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r;
#define FLAG(name) ((r = xi_arg_value(argc, argv, &i, name, &v)) != 0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--ignore-eos")) {
            sf.ignore_eos = 1;
        } else if (!strcmp(a, "--enable-prefix-caching")) {
            ep.enable_prefix_caching = 1;
        } else if (!strcmp(a, "--no-enable-prefix-caching")) {
            ep.enable_prefix_caching = 0;
        } else if (!strcmp(a, "--enable-chunked-prefill")) {
            ep.enable_chunked_prefill = 1;
        } else if (!strcmp(a, "--no-enable-chunked-prefill")) {
            ep.enable_chunked_prefill = 0;
        } else if (FLAG("--model")) {
            if (r < 0) goto missing;
            ep.model_dir = v;
        } else if (FLAG("--download-dir")) {
            if (r < 0) goto missing;
            download_dir = v;
        } else if (FLAG("--revision")) {
            if (r < 0) goto missing;
            revision = v;
        } else if (FLAG("--prompt")) {
            if (r < 0) goto missing;
            prompt = v;
        } else if (FLAG("--prompts-file")) {
            if (r < 0) goto missing;
            prompts_file = v;
        } else if (FLAG("--output")) {
            if (r < 0) goto missing;
            output = v;
        } else if (FLAG("--dtype")) {
            if (r < 0) goto missing;
            ep.dtype = v;
        } else if (FLAG("--kv-cache-dtype")) {
            if (r < 0) goto missing;
            ep.kv_cache_dtype = v;
        } else if (FLAG("--quantization") || FLAG("-q")) {
            if (r < 0) goto missing;
            ep.quantization = v;
        } else if (FLAG("--lm-head-quantization")) {
            if (r < 0) goto missing;
            ep.lm_head_quantization = v;
        } else if (FLAG("--load-format")) {
            if (r < 0) goto missing;
            ep.load_format = v;
        } else if (FLAG("--kernels")) {
            if (r < 0) goto missing;
            ep.kernels = v;
        } else if (FLAG("--kernel-precision")) {
            if (r < 0) goto missing;
            ep.kernel_precision = v;
        } else if (FLAG("--max-tokens")) {
            if (r < 0 || xi_parse_int(v, 0, 1 << 30, &sf.max_tokens)) goto bad;
        } else if (FLAG("--temperature")) {
            if (r < 0 || xi_parse_float(v, 0, 100, &sf.temperature)) goto bad;
        } else if (FLAG("--top-p")) {
            if (r < 0 || xi_parse_float(v, 1e-9, 1, &sf.top_p)) goto bad;
        } else if (FLAG("--min-p")) {
            if (r < 0 || xi_parse_float(v, 0, 1, &sf.min_p)) goto bad;
        } else if (FLAG("--top-k")) {
            if (r < 0 || xi_parse_int(v, -1, 1 << 30, &sf.top_k)) goto bad;
        } else if (FLAG("--seed")) {
            if (r < 0 || xi_parse_int(v, 0, INT64_MAX, &sf.seed)) goto bad;
        } else if (FLAG("--tensor-parallel-size") || FLAG("-tp")) {
            if (r < 0 || xi_parse_int(v, 1, 64, &ll)) goto bad;
            ep.tensor_parallel_size = (int)ll;
        } else if (FLAG("--threads")) {
            if (r < 0 || xi_parse_int(v, 1, 1024, &ll)) goto bad;
            ep.n_threads = (int)ll;
        } else if (FLAG("--max-num-seqs")) {
            if (r < 0 || xi_parse_int(v, 1, 1 << 20, &ll)) goto bad;
            ep.max_num_seqs = (int)ll;
        } else if (FLAG("--max-num-batched-tokens")) {
            if (r < 0 || xi_parse_int(v, 1, 1 << 24, &ll)) goto bad;
            ep.max_num_batched_tokens = (int)ll;
        } else if (FLAG("--max-model-len")) {
            if (r < 0 || xi_parse_int(v, 1, 1 << 26, &ll)) goto bad;
            ep.max_model_len = (int)ll;
        } else if (FLAG("--block-size")) {
            if (r < 0 || xi_parse_int(v, 1, 1024, &ll)) goto bad;
            ep.block_size = (int)ll;
        } else if (FLAG("--kv-cache-memory-bytes")) {
            if (r < 0 || xi_parse_int(v, 1, INT64_MAX, &ll)) goto bad;
            ep.kv_cache_memory_bytes = ll;
        } else if (FLAG("--gpu-memory-utilization")) {
            if (r < 0 || xi_parse_float(v, 0.01, 1, &d)) goto bad;
            ep.gpu_memory_utilization = d;
        } else {
            fprintf(stderr, "xinfer generate: unknown flag '%s' (see --help)\n", a);
            return 1;
        }
        continue;
    missing:
        fprintf(stderr, "xinfer generate: %s needs a value\n", a);
        return 1;
    bad:
        fprintf(stderr, "xinfer generate: invalid value for %s\n", a);
        return 1;
#undef FLAG
    }
    if (!ep.model_dir || (!prompt && !prompts_file) || (prompt && prompts_file)) {
        usage(stderr);
        return 1;
    }
    if (ep.tensor_parallel_size > 1 && xi_tp_rank() < 0)
        return xi_cli_tp_spawn("generate", argc, argv, ep.tensor_parallel_size);
    if (ep.tensor_parallel_size > 1 && xi_tp_rank() > 0)
        return xi_cli_tp_other_rank("generate", &ep, download_dir);
    /* a local folder wins; ORG/NAME[@REV] is pulled into the hub cache on first use */
    char err[1024] = "";
    xi_hub_options ho;
    xi_hub_options_default(&ho);
    ho.cache_dir = download_dir;
    ho.revision = revision;
    char *model_dir = xi_hub_resolve(ep.model_dir, &ho, err, sizeof err);
    if (!model_dir) {
        fprintf(stderr, "xinfer generate: %s\n", err);
        return 1;
    }
    ep.model_dir = model_dir;
    gen_req *reqs = NULL;
    int n = 1;
    if (prompts_file) {
        if (read_prompts(prompts_file, &reqs, &n)) {
            free(model_dir);
            return 1;
        }
    } else {
        reqs = calloc(1, sizeof *reqs);
        reqs[0].stream = 1;
    }
    int rc = 1;
    xi_engine *e = xi_engine_open(&ep, err, sizeof err);
    if (!e) {
        fprintf(stderr, "xinfer generate: %s\n", err);
        goto out;
    }
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        xi_request_params rp;
        xi_request_params_default(&rp);
        apply_line(&rp, &sf, reqs[i].in);
        rp.prompt = reqs[i].in ? json_string_value(json_object_get(reqs[i].in, "prompt")) : prompt;
        rp.return_logits_hash = 1;
        reqs[i].ids = json_array();
        reqs[i].t_submit = now_s();
        if (xi_engine_submit(e, &rp, on_output, &reqs[i], err, sizeof err) < 0) {
            if (prompts_file) fprintf(stderr, "xinfer generate: request %d: %s\n", i + 1, err);
            else fprintf(stderr, "xinfer generate: prompt: %s\n", err);
            goto out;
        }
    }
    for (;;) {
        int left = xi_engine_step(e);
        if (left < 0) {
            fprintf(stderr, "xinfer generate: engine error\n");
            goto out;
        }
        if (left == 0) break;
    }
    double t1 = now_s();
    xi_engine_info info;
    xi_engine_get_info(e, &info);
    if (!prompts_file) {
        gen_req *r = &reqs[0];
        putchar('\n');
        double tp = r->t_first > r->t_submit ? r->t_first - r->t_submit : 0;
        double tg = r->t_end > r->t_first ? r->t_end - r->t_first : 0;
        int decode_tokens = r->generated > 1 ? r->generated - 1 : 0;
        double gbs = tg > 0 ? (double)info.weight_bytes * decode_tokens / tg / 1e9 : 0;
        fprintf(stderr,
                "prompt: %d tokens, %.1f tok/s | generated: %d tokens, %.1f tok/s | weights: "
                "%.2f GB/s | finish: %s | logits hash: %016llx\n",
                r->prompt_tokens, tp > 0 ? r->prompt_tokens / tp : 0, r->generated,
                tg > 0 ? decode_tokens / tg : 0, gbs, r->finish ? r->finish : "?",
                (unsigned long long)r->logits_hash);
    } else {
        FILE *f = output ? fopen(output, "w") : stdout;
        if (!f) {
            fprintf(stderr, "xinfer generate: %s: cannot write\n", output);
            goto out;
        }
        long total_gen = 0;
        for (int i = 0; i < n; i++) {
            gen_req *r = &reqs[i];
            json_t *o = json_deep_copy(r->in);
            json_object_set_new(o, "text", json_stringn(r->text ? r->text : "", r->len));
            json_object_set(o, "token_ids", r->ids);
            json_object_set_new(o, "finish_reason", json_string(r->finish ? r->finish : "error"));
            json_object_set_new(o, "prompt_tokens", json_integer(r->prompt_tokens));
            json_object_set_new(o, "cached_prompt_tokens", json_integer(r->cached_tokens));
            json_object_set_new(o, "ttft_s", json_real(r->t_first > 0 ? r->t_first - r->t_submit : 0));
            json_object_set_new(o, "e2e_s", json_real(r->t_end - r->t_submit));
            char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
            fprintf(f, "%s\n", s);
            free(s);
            json_decref(o);
            total_gen += r->generated;
        }
        if (output) fclose(f);
        fprintf(stderr, "%d requests, %ld generated tokens in %.2f s: %.1f tok/s\n", n, total_gen,
                t1 - t0, (t1 - t0) > 0 ? total_gen / (t1 - t0) : 0);
    }
    rc = 0;
out:
    if (e) xi_engine_close(e);
    for (int i = 0; i < n && reqs; i++) {
        json_decref(reqs[i].in);
        json_decref(reqs[i].ids);
        free(reqs[i].text);
    }
    free(reqs);
    free(model_dir);
    return rc;
}
