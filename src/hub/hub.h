/* hub: models by name. `ORG/NAME[@REVISION]` resolves to a local folder in the Hugging Face
 * hub-cache layout, downloaded from Hugging Face or ModelScope on first use:
 *
 *   CACHE/models--ORG--NAME/blobs/ETAG                 file contents, named by sha256 (LFS) or
 *                                                      the hub's blob id; ETAG.incomplete while
 *                                                      a download is in flight (resumable)
 *   CACHE/models--ORG--NAME/snapshots/COMMIT/FILE      symlinks to ../../blobs/ETAG
 *   CACHE/models--ORG--NAME/refs/REVISION              the commit REVISION pointed to
 *
 * CACHE is --download-dir, else HF_HUB_CACHE, else $HF_HOME/hub (HF_HOME defaults to
 * ~/.cache/huggingface), so folders written by Python's huggingface_hub are reused and the
 * other way round. Library code: errors are one line in err, never exit().
 * Thread-safe as long as two threads do not pull the same repo into the same cache. */
#ifndef XI_HUB_H
#define XI_HUB_H

#include <stddef.h>
#include <stdint.h>

typedef enum xi_hub_source {
    XI_HUB_SOURCE_AUTO = 0,     /* XINFER_SOURCE=modelscope|huggingface, VLLM_USE_MODELSCOPE=1,
                                   else Hugging Face */
    XI_HUB_SOURCE_HF,
    XI_HUB_SOURCE_MODELSCOPE,
} xi_hub_source;

typedef struct xi_hub_options {
    xi_hub_source source;
    const char *endpoint;       /* NULL: HF_ENDPOINT / MODELSCOPE_ENDPOINT, else the public hub */
    const char *token;          /* NULL: HF_TOKEN (HUGGING_FACE_HUB_TOKEN) / MODELSCOPE_API_TOKEN */
    const char *cache_dir;      /* NULL: HF_HUB_CACHE, else $HF_HOME/hub */
    const char *revision;       /* NULL: the name's @REVISION, else "main" (HF) / "master" (MS) */
    int offline;                /* -1: HF_HUB_OFFLINE; 1: resolve from the cache only */
    int progress;               /* -1: a progress bar when stderr is a terminal; 0: log lines */
    int verify;                 /* 1: re-hash cached weights against their sha256 before use */
    int retries;                /* -1: default (5); transfers that break resume this often */
    int quiet;                  /* 1: no log lines (errors still come back in err) */
} xi_hub_options;

/* All fields "auto": source, endpoint, token, cache from the environment. */
void xi_hub_options_default(xi_hub_options *o);

/* What a pull did, for the CLI's summary line and for tests. */
typedef struct xi_hub_result {
    char *path;                 /* the snapshot folder (owned) */
    char commit[256];           /* the commit the revision resolved to */
    int n_files;                /* files in the snapshot that inference needs */
    int n_downloaded;           /* files fetched over the network in this call */
    int64_t bytes_downloaded;   /* bytes received in this call (resumed parts not counted) */
    int from_cache_offline;     /* 1: the network was not used (offline, or unreachable) */
    char *gguf;                 /* a GGUF pull: the (first part's) file in path, owned; else NULL */
} xi_hub_result;

void xi_hub_result_free(xi_hub_result *r);

/* 1 when s has the shape ORG/NAME[:TAG][@REVISION] (letters, digits, '-', '_', '.'),
 * whether or not such a repo exists. TAG picks a GGUF quantization (Q4_K_M). */
int xi_hub_is_repo_name(const char *s);

/* Download (or complete, or just verify) ORG/NAME[@REVISION] into the cache: the files
 * inference needs (config.json, generation_config.json, tokenizer files, *.safetensors and
 * their index, the first README). Returns 0 and fills r (r may be NULL), or -1 with err. */
int xi_hub_pull(const char *name, const xi_hub_options *o, xi_hub_result *r, char *err,
                size_t errlen);

/* The entry point for serve, generate, plan and inspect: an existing local folder is
 * returned as is (always wins); ORG/NAME[@REVISION] is pulled on first use and its snapshot
 * folder returned. A hub that cannot be reached falls back to a cached snapshot. Returns a
 * heap string the caller frees, or NULL with err. o may be NULL (all defaults). */
char *xi_hub_resolve(const char *name_or_dir, const xi_hub_options *o, char *err, size_t errlen);

/* `xinfer pull --local-dir DIR`: the files of a pulled snapshot folder as regular files in
 * DIR (hard links to the cache's blobs on the same file system, copies elsewhere), a plain
 * model folder to carry to an offline box. Files DIR already shares with the snapshot are
 * kept. Returns 0 with the file count and how many were copied, or -1 with err. */
int xi_hub_export_dir(const char *snapshot, const char *dir, int *n_files, int *n_copied,
                      char *err, size_t errlen);

/* ---- GGUF files by name (gguf_files.c) ----
 * A repo whose name carries :TAG, or that has no safetensors, is pulled as GGUF: the file (all
 * split parts) whose path holds TAG as a word, case-insensitively; without a tag Q4_K_M, else
 * the first GGUF by name (mmproj files never). */
int xi_hub_is_gguf_path(const char *path);
/* Indices into paths of the chosen files, in name order (the first part first); returns their
 * count, or -1 with err naming the GGUF files there are. */
int xi_hub_gguf_pick(const char *const *paths, int n, const char *tag, int *chosen, char *err,
                     size_t errlen);
/* ollama:NAME[:TAG] (TAG defaults to latest) → the GGUF model blob of Ollama's manifest under
 * OLLAMA_MODELS (default ~/.ollama/models), used in place. Heap path, or NULL with err. */
char *xi_hub_ollama_resolve(const char *name, char *err, size_t errlen);

/* sha256 of a file as 64 lowercase hex digits + NUL. Returns 0, or -1 with err. */
int xi_hub_sha256_file(const char *path, char hex[65], char *err, size_t errlen);

#endif
