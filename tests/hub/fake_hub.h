/* A fake model hub on loopback for the hub tests: serves a model folder through the URL
 * shapes and headers of the Hugging Face and ModelScope APIs.
 *
 * Repos: xi-test/stories260K (public, the folder given), xi-test/gated (the same files, but
 * only with "Authorization: Bearer hf_secret"), xi-test/bin-only (config.json and
 * pytorch_model.bin, no safetensors), xi-test/renamed (relative 307 redirects to
 * xi-test/stories260K on the Hugging Face routes). Any other repo: 401 RepoNotFound, as
 * Hugging Face answers an anonymous client.
 *
 * Hugging Face routes:
 *   GET  /api/models/ORG/NAME/revision/REV[?blobs=true]  {"sha", "siblings": [{"rfilename",
 *        "size", "blobId", "lfs": {"sha256", "size"}}]}; REV is "main" or the commit
 *   HEAD|GET /ORG/NAME/resolve/REV/FILE  X-Repo-Commit, ETag; *.safetensors are LFS files:
 *        302 to /cdn/SHA256 with X-Linked-Etag and X-Linked-Size
 *   GET  /cdn/SHA256  the bytes, with Range
 * ModelScope routes:
 *   GET  /api/v1/models/ORG/NAME/repo/files?Revision=REV&Recursive=true
 *        {"Code": 200, "Data": {"Files": [{"Name", "Path", "Type", "Size", "Sha256",
 *        "Revision"}]}, "Success": true}
 *   GET  /api/v1/models/ORG/NAME/repo?Revision=REV&FilePath=FILE  the bytes, with Range */
#ifndef XI_TEST_FAKE_HUB_H
#define XI_TEST_FAKE_HUB_H

typedef struct fake_hub fake_hub;

/* Start on 127.0.0.1 at a free port, serving the files of model_dir. NULL on failure. */
fake_hub *fake_hub_start(const char *model_dir);
void fake_hub_stop(fake_hub *h);

const char *fake_hub_url(const fake_hub *h);     /* "http://127.0.0.1:PORT" */
const char *fake_hub_commit(const fake_hub *h);  /* the Hugging Face commit of every repo */
const char *fake_hub_ms_commit(const fake_hub *h);
/* sha256 of a served file (its LFS oid), or NULL. */
const char *fake_hub_sha256(const fake_hub *h, const char *file);

/* Faults, each used once: close the connection after `after` body bytes of file; or flip
 * one byte in the next transfer of file. */
void fake_hub_cut_once(fake_hub *h, const char *file, long after);
void fake_hub_corrupt_once(fake_hub *h, const char *file);
/* Point "main" at another commit (the files stay the same). */
void fake_hub_set_commit(fake_hub *h, const char *commit40);
/* Leave size / blobId / lfs out of the listing (a mirror without ?blobs=true). */
void fake_hub_listing_without_blobs(fake_hub *h);

/* Counters: body transfers of file (any route), HEAD requests, all requests. */
int fake_hub_downloads(fake_hub *h, const char *file);
int fake_hub_heads(fake_hub *h);
int fake_hub_requests(fake_hub *h);
/* Start of the Range of the last transfer of file (-1: none asked). */
long fake_hub_last_range(fake_hub *h, const char *file);
/* 1 when some request path started with prefix and (if non-NULL) had query arg=value. */
int fake_hub_saw(fake_hub *h, const char *prefix, const char *arg, const char *value);

#endif
