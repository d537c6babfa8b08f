/* xinfer tokenize: text to a JSON array of ids, or ids back to text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "hub/hub.h"
#include "tokenizer/tokenizer_gguf.h"

static void usage(FILE *f) {
    fprintf(f, "usage: xinfer tokenize --model DIR|FILE.gguf|NAME (--text TEXT | --ids 1,2,3) [--no-special]\n\n"
               "  --model DIR    folder with tokenizer.json (or vocab.json + merges.txt)\n"
               "  --text TEXT    print the ids of TEXT as a JSON array\n"
               "  --ids LIST     print the text of comma-separated ids\n"
               "  --no-special   encode: no BOS and no special-token parsing;\n"
               "                 decode: drop special tokens\n");
}

/* "1, 2,3" or "[1,2,3]" -> ids; -1 with a message naming the bad entry. */
static int parse_ids(const char *s, int32_t **ids, char *err, size_t errlen) {
    size_t cap = strlen(s) / 2 + 1;
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) return xi_errf(err, errlen, "out of memory");
    int n = 0;
    const char *p = s;
    while (*p == ' ' || *p == '[') p++;
    while (*p && *p != ']') {
        char *end;
        long id = strtol(p, &end, 10);
        if (end == p || id < 0 || id > INT32_MAX) {
            free(v);
            return xi_errf(err, errlen, "--ids: '%s' is not a token id", p);
        }
        v[n++] = (int32_t)id;
        p = end;
        while (*p == ' ') p++;
        if (*p == ',') p++;
        while (*p == ' ') p++;
    }
    *ids = v;
    return n;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *text = NULL, *id_list = NULL;
    int special = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--no-special")) {
            special = 0;
        } else if (i + 1 < argc && !strcmp(a, "--model")) {
            model = argv[++i];
        } else if (i + 1 < argc && !strcmp(a, "--text")) {
            text = argv[++i];
        } else if (i + 1 < argc && !strcmp(a, "--ids")) {
            id_list = argv[++i];
        } else {
            fprintf(stderr, "xinfer tokenize: unknown or incomplete argument '%s'\n", a);
            return 1;
        }
    }
    if (!model || !text == !id_list) {
        usage(stderr);
        return 1;
    }
    char err[512] = "";
    char *resolved = xi_hub_resolve(model, NULL, err, sizeof err);
    xi_tokenizer *t = resolved ? xi_tokenizer_load_model(resolved, err, sizeof err) : NULL;
    free(resolved);
    if (!t) {
        fprintf(stderr, "xinfer tokenize: %s\n", err);
        return 1;
    }
    int rc = 0;
    int32_t *ids = NULL;
    if (text) {
        int n = xi_tokenizer_encode(t, text, strlen(text), special, special, &ids, err, sizeof err);
        if (n < 0) {
            rc = 1;
        } else {
            xi_buf b = {0};
            int bad = xi_buf_append(&b, "[", 1);
            for (int i = 0; i < n; i++) bad |= xi_buf_printf(&b, i ? ", %d" : "%d", ids[i]);
            bad |= xi_buf_append(&b, "]\n", 2);
            if (bad) {
                xi_errf(err, sizeof err, "out of memory");
                rc = 1;
            } else {
                fwrite(b.data, 1, b.len, stdout);
            }
            xi_buf_free(&b);
        }
    } else {
        int n = parse_ids(id_list, &ids, err, sizeof err);
        size_t len = 0;
        char *out = n < 0 ? NULL : xi_tokenizer_decode(t, ids, n, !special, &len, err, sizeof err);
        if (!out) {
            rc = 1;
        } else {
            fwrite(out, 1, len, stdout);
            fputc('\n', stdout);
            free(out);
        }
    }
    if (rc) fprintf(stderr, "xinfer tokenize: %s\n", err);
    free(ids);
    xi_tokenizer_free(t);
    return rc;
}
