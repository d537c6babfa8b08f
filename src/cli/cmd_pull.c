/* xinfer pull: download a model by name into the hub cache and print its folder.
 *
 *   xinfer pull Qwen/Qwen2.5-0.5B-Instruct            → ~/.cache/huggingface/hub/...
 *   xinfer serve "$(xinfer pull ORG/NAME)"            the folder on stdout, the rest on stderr
 *   xinfer pull ORG/NAME --local-dir /mnt/usb/NAME     a plain folder for an offline box
 *
 * Re-running an interrupted pull resumes it; re-running a finished one re-checks every
 * cached weight file against its sha256 (--no-verify skips that). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "hub/hub.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: xinfer pull ORG/NAME[@REVISION] [options]\n\n"
            "Download a model's config, tokenizer and safetensors weights into the Hugging Face\n"
            "hub cache ($HF_HOME/hub, default ~/.cache/huggingface/hub) and print its folder.\n\n"
            "  --revision REV        branch, tag or commit (default main; ModelScope: master)\n"
            "  --source SRC          huggingface or modelscope (default: XINFER_SOURCE, or\n"
            "                        modelscope when VLLM_USE_MODELSCOPE=1)\n"
            "  --download-dir DIR    cache folder instead of $HF_HOME/hub\n"
            "  --local-dir DIR       also write the model to DIR as plain files (no symlinks),\n"
            "                        to copy to a box without a network and serve there\n"
            "  --endpoint URL        hub or mirror (default: HF_ENDPOINT / MODELSCOPE_ENDPOINT)\n"
            "  --no-verify           trust cached files without re-hashing them\n"
            "  --quiet               no progress or log lines\n\n"
            "Environment: HF_TOKEN (gated and private models), MODELSCOPE_API_TOKEN,\n"
            "HF_HUB_OFFLINE=1 (use the cache only, never the network).\n");
}

int cmd_pull(int argc, char **argv) {
    xi_hub_options o;
    xi_hub_options_default(&o);
    o.verify = 1;
    const char *name = NULL, *local_dir = NULL, *v;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--no-verify")) {
            o.verify = 0;
        } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            o.quiet = 1;
            o.progress = 0;
        } else if ((r = xi_arg_value(argc, argv, &i, "--revision", &v))) {
            if (r < 0) goto missing;
            o.revision = v;
        } else if ((r = xi_arg_value(argc, argv, &i, "--download-dir", &v))) {
            if (r < 0) goto missing;
            o.cache_dir = v;
        } else if ((r = xi_arg_value(argc, argv, &i, "--local-dir", &v))) {
            if (r < 0) goto missing;
            local_dir = v;
        } else if ((r = xi_arg_value(argc, argv, &i, "--endpoint", &v))) {
            if (r < 0) goto missing;
            o.endpoint = v;
        } else if ((r = xi_arg_value(argc, argv, &i, "--source", &v))) {
            if (r < 0) goto missing;
            if (!strcasecmp(v, "modelscope") || !strcasecmp(v, "ms")) {
                o.source = XI_HUB_SOURCE_MODELSCOPE;
            } else if (!strcasecmp(v, "huggingface") || !strcasecmp(v, "hf")) {
                o.source = XI_HUB_SOURCE_HF;
            } else {
                fprintf(stderr, "xinfer pull: --source %s: expected huggingface or modelscope\n", v);
                return 2;
            }
        } else if (a[0] == '-' || name) {
            fprintf(stderr, "xinfer pull: unexpected argument '%s'\n", a);
            usage(stderr);
            return 2;
        } else {
            name = a;
        }
        continue;
    missing:
        fprintf(stderr, "xinfer pull: %s needs a value\n", a);
        return 2;
    }
    if (!name) {
        usage(stderr);
        return 2;
    }
    char err[1024] = "";
    xi_hub_result r;
    if (xi_hub_pull(name, &o, &r, err, sizeof err)) {
        fprintf(stderr, "xinfer pull: %s\n", err);
        return 1;
    }
    if (!o.quiet) {
        double mib = (double)r.bytes_downloaded / (1024.0 * 1024.0);
        fprintf(stderr, "%s: commit %.12s, %d files, %d downloaded (%.1f MiB)%s\n", name,
                r.commit, r.n_files, r.n_downloaded, mib,
                r.from_cache_offline ? ", from the cache without the network" : "");
    }
    int n_files, n_copied;
    if (local_dir && xi_hub_export_dir(r.path, local_dir, &n_files, &n_copied, err, sizeof err)) {
        fprintf(stderr, "xinfer pull: --local-dir %s: %s\n", local_dir, err);
        xi_hub_result_free(&r);
        return 1;
    }
    if (local_dir && !o.quiet)
        fprintf(stderr, "%s: %d files in %s (%d copied, %d linked to the cache)\n", name, n_files,
                local_dir, n_copied, n_files - n_copied);
    printf("%s\n", local_dir ? local_dir : r.gguf ? r.gguf : r.path); /* GGUF: the file */
    xi_hub_result_free(&r);
    return 0;
}
