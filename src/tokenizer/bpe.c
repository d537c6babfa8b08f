/* tokenizer BPE: merge the symbols of one pre-tokenised word by merge rank.
 *
 * The word's characters form a doubly linked list; every adjacent pair that has a merge sits in
 * a binary heap ordered by (rank, position), so the lowest-ranked, leftmost pair merges first,
 * exactly as the Hugging Face BPE model does. Heap entries are validated lazily: a pair whose
 * symbols changed since it was pushed is dropped when popped. O(n log n) per word. */
#define XI_TOKENIZER_INTERNAL
#include "tokenizer/tokenizer.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t id; /* token id; -2 once merged into its left neighbour */
    int32_t prev, next;
} bpe_sym;

typedef struct {
    int32_t rank, left, lid, rid;
} bpe_pair;

static int pair_less(const bpe_pair *a, const bpe_pair *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->left < b->left;
}

static void heap_push(bpe_pair *h, int *n, bpe_pair p) {
    int i = (*n)++;
    h[i] = p;
    while (i > 0) {
        int up = (i - 1) / 2;
        if (!pair_less(&h[i], &h[up])) break;
        bpe_pair tmp = h[i];
        h[i] = h[up];
        h[up] = tmp;
        i = up;
    }
}

static bpe_pair heap_pop(bpe_pair *h, int *n) {
    bpe_pair top = h[0];
    h[0] = h[--(*n)];
    for (int i = 0;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && pair_less(&h[l], &h[m])) m = l;
        if (r < *n && pair_less(&h[r], &h[m])) m = r;
        if (m == i) break;
        bpe_pair tmp = h[i];
        h[i] = h[m];
        h[m] = tmp;
        i = m;
    }
    return top;
}

static void try_pair(const xi_tokenizer *t, const bpe_sym *s, int32_t left, bpe_pair *heap,
                     int *nh) {
    int32_t right = s[left].next;
    if (right < 0) return;
    const xi_merge_slot *m = xi_merges_get(t, s[left].id, s[right].id);
    if (m) heap_push(heap, nh, (bpe_pair){m->rank, left, s[left].id, s[right].id});
}

static int push_id(int32_t **ids, int *n, int *cap, int32_t id) {
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 64;
        int32_t *p = realloc(*ids, (size_t)nc * sizeof *p);
        if (!p) return -1;
        *ids = p;
        *cap = nc;
    }
    (*ids)[(*n)++] = id;
    return 0;
}

static int utf8_char_len(unsigned char c) {
    return c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
}

int xi_bpe_word(const xi_tokenizer *t, const char *word, size_t len, int32_t **ids, int *n,
                int *cap) {
    if (!len) return 0;
    if (t->ignore_merges) {
        int32_t whole = xi_strmap_get(&t->vocab, word, len);
        if (whole >= 0) return push_id(ids, n, cap, whole);
    }
    /* At most one symbol per byte (byte fallback); the heap holds at most the initial pairs
     * plus two per merge. */
    bpe_sym *s = malloc(len * sizeof *s);
    bpe_pair *heap = malloc(3 * len * sizeof *heap);
    if (!s || !heap) {
        free(s);
        free(heap);
        return -1;
    }
    int ns = 0;
    for (size_t i = 0; i < len;) {
        size_t cl = (size_t)utf8_char_len((unsigned char)word[i]);
        if (cl > len - i) cl = len - i;
        int32_t id = xi_strmap_get(&t->vocab, word + i, cl);
        if (id < 0 && t->byte_fallback) {
            size_t b = 0;
            while (b < cl && t->byte_ids[(unsigned char)word[i + b]] >= 0) b++;
            if (b == cl) {
                for (b = 0; b < cl; b++) s[ns++].id = t->byte_ids[(unsigned char)word[i + b]];
                i += cl;
                continue;
            }
        }
        if (id < 0) {
            id = t->unk_id;
            /* Without an unknown token the character cannot be represented: drop it, as the
             * Hugging Face model does when unk_token is null. */
            if (id < 0 || (t->fuse_unk && ns > 0 && s[ns - 1].id == id)) {
                i += cl;
                continue;
            }
        }
        s[ns++].id = id;
        i += cl;
    }
    for (int i = 0; i < ns; i++) {
        s[i].prev = i - 1;
        s[i].next = i + 1 < ns ? i + 1 : -1;
    }
    int nh = 0;
    for (int i = 0; i + 1 < ns; i++) try_pair(t, s, i, heap, &nh);
    while (nh > 0) {
        bpe_pair p = heap_pop(heap, &nh);
        int32_t right = s[p.left].next;
        if (s[p.left].id != p.lid || right < 0 || s[right].id != p.rid) continue;
        s[p.left].id = xi_merges_get(t, p.lid, p.rid)->id;
        s[p.left].next = s[right].next;
        if (s[right].next >= 0) s[s[right].next].prev = p.left;
        s[right].id = -2;
        if (s[p.left].prev >= 0) try_pair(t, s, s[p.left].prev, heap, &nh);
        try_pair(t, s, p.left, heap, &nh);
    }
    int rc = 0;
    for (int i = 0; i >= 0 && i < ns && !rc; i = s[i].next) rc = push_id(ids, n, cap, s[i].id);
    free(s);
    free(heap);
    return rc;
}
