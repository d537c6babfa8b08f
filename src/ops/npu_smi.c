/* ops/npu_smi: parse the `npu-smi info` table (reference §3.4). Rows are '|'-separated
 * cells; a metric row is recognised by its Bus-Id cell, a header row by a numeric NPU id
 * followed by a name and a health word. The process table that follows the NPU blocks is
 * ignored. Memory: with two "a / b" pairs the second is HBM, otherwise the first is DDR. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "ops/env.h"
#include "ops/rootfs.h"

#define MAX_CELLS 8

/* Split one line into trimmed cells between '|' characters; returns the count. */
static int split_cells(const char *line, size_t len, char cells[MAX_CELLS][128]) {
    int n = 0;
    const char *p = line, *end = line + len;
    if (p < end && *p == '|') p++;
    while (p < end && n < MAX_CELLS) {
        const char *q = memchr(p, '|', (size_t)(end - p));
        if (!q) break; /* text after the last '|' is not a cell */
        while (p < q && isspace((unsigned char)*p)) p++;
        const char *e = q;
        while (e > p && isspace((unsigned char)e[-1])) e--;
        size_t m = (size_t)(e - p);
        if (m > 127) m = 127;
        memcpy(cells[n], p, m);
        cells[n][m] = 0;
        n++;
        p = q + 1;
    }
    return n;
}

/* "0000:C1:00.0": hex domain, bus, device and function. */
static int is_bus_id(const char *s) {
    unsigned a, b, c, d;
    char tail;
    return sscanf(s, "%x:%x:%x.%x%c", &a, &b, &c, &d, &tail) == 4;
}

/* Largest memory figure (MB) taken from the table: far beyond any device, and small enough
 * that sums over chips and NPUs (and their bytes) cannot overflow int64_t. */
#define MAX_MB (1LL << 40)

/* Every "a / b" pair in s, in order; returns the count (at most max). A pair with a figure
 * past MAX_MB is corrupt and skipped. */
static int mem_pairs(const char *s, int64_t used[], int64_t total[], int max) {
    int n = 0;
    for (const char *p = s; *p && n < max; p++) {
        if (*p != '/') continue;
        const char *a = p;
        while (a > s && a[-1] == ' ') a--;
        const char *a0 = a;
        while (a0 > s && isdigit((unsigned char)a0[-1])) a0--;
        const char *b = p + 1;
        while (*b == ' ') b++;
        if (a0 == a || !isdigit((unsigned char)*b)) continue;
        long long u = strtoll(a0, NULL, 10), t = strtoll(b, NULL, 10);
        if (u > MAX_MB || t > MAX_MB) continue;
        used[n] = u;
        total[n] = t;
        n++;
    }
    return n;
}

static xi_npu *find_or_add(xi_npu_smi *s, int id) {
    for (int i = 0; i < s->n_npus; i++)
        if (s->npus[i].id == id) return &s->npus[i];
    if (s->n_npus == XI_NPU_MAX) return NULL;
    xi_npu *n = &s->npus[s->n_npus++];
    memset(n, 0, sizeof *n);
    n->id = id;
    return n;
}

int xi_npu_smi_parse(const char *text, xi_npu_smi *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (!text || !strstr(text, "npu-smi"))
        return xi_errf(err, errlen, "npu-smi output: no 'npu-smi <version>' banner");
    const char *v = strstr(text, "Version:");
    if (v) sscanf(v + 8, " %31s", out->version);

    xi_npu *cur = NULL;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char cells[MAX_CELLS][128];
        int nc = line[0] == '|' ? split_cells(line, len, cells) : 0;
        if (nc >= 2 && (strstr(cells[1], "Process id") || strstr(cells[0], "No running")))
            break; /* the process table: its rows look like NPU rows */
        if (nc >= 3 && is_bus_id(cells[1])) {
            /* metric row: "<chip>" or "<chip> <device>", bus id, "aicore  mem pairs" */
            if (!cur) goto next;
            if (cur->n_chips == XI_NPU_MAX_CHIPS) goto next;
            xi_npu_chip *c = &cur->chips[cur->n_chips++];
            c->chip = c->device = -1;
            sscanf(cells[0], "%d %d", &c->chip, &c->device);
            xi_copy_str(c->bus_id, sizeof c->bus_id, cells[1]);
            int64_t used[2], total[2];
            int np = mem_pairs(cells[2], used, total, 2);
            if (np > 0) {
                c->mem_used_mb = used[np - 1];
                c->mem_total_mb = total[np - 1];
                cur->mem_used_mb += c->mem_used_mb;
                cur->mem_total_mb += c->mem_total_mb;
            }
        } else if (nc >= 3 && isdigit((unsigned char)cells[0][0])) {
            int id;
            char name[64] = "";
            int got = sscanf(cells[0], "%d %63s", &id, name);
            /* "<id> <name>" starts a block; "<chip> <device>" + health is an extra chip row
             * newer drivers print inside a block: nothing new in it, so it is merged away. */
            if (got == 2 && name[strspn(name, "0123456789")] != 0) {
                cur = find_or_add(out, id);
                if (!cur) return xi_errf(err, errlen, "npu-smi output: more than %d NPUs", XI_NPU_MAX);
                xi_copy_str(cur->name, sizeof cur->name, name);
                char health[32] = "";
                sscanf(cells[1], "%31s", health);
                /* A block repeated for a second chip must not hide an unhealthy first one. */
                if (!cur->health[0] || !strcmp(cur->health, "OK"))
                    xi_copy_str(cur->health, sizeof cur->health, health);
            }
        }
    next:
        line = end ? end + 1 : line + len;
    }
    if (out->n_npus == 0 && !strstr(text, "NPU"))
        return xi_errf(err, errlen, "npu-smi output: no NPU table found");
    return out->n_npus;
}
