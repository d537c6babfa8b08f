/* loadgen/svg: a self-contained SVG chart of a sweep, for a browser or a report. Two panels
 * share the concurrency axis: output throughput on top, TTFT p50 and p99 below. Two panels
 * rather than two y axes on one plot, because tokens/s and milliseconds on one plot invite
 * reading crossings that mean nothing. Levels are spaced evenly (sweeps are usually 1,2,4,...,
 * which a log axis would space evenly too) and labelled with their concurrency, or with their
 * request rate when the sweep is over rates (then that is the shared axis). A level
 * without successful requests leaves a gap in the lines and is marked "no data"; one where
 * some requests failed is marked "N failed", since its points stand for fewer requests. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loadgen/loadgen.h"

#define W 820
#define H 660
#define LEFT 90
#define RIGHT 30
#define PANEL_H 220

/* Axis maximum and tick step: the step is 1, 2, 2.5 or 5 times a power of ten, giving 4 to 6
 * ticks, and the maximum a whole number of steps at or above vmax. */
static void nice_axis(double vmax, double *axis_max, double *step) {
    if (!(vmax > 0) || !isfinite(vmax)) vmax = 1;
    double raw = vmax / 5, p = pow(10, floor(log10(raw))), f = raw / p;
    double s = f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10;
    *step = s * p;
    *axis_max = ceil(vmax / *step - 1e-9) * *step;
}

static void xml_text(xi_buf *b, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&': xi_buf_printf(b, "&amp;"); break;
        case '<': xi_buf_printf(b, "&lt;"); break;
        case '>': xi_buf_printf(b, "&gt;"); break;
        case '"': xi_buf_printf(b, "&quot;"); break;
        default: xi_buf_append(b, s, 1);
        }
    }
}

static double x_at(int i, int n) {
    double x0 = LEFT + 30, x1 = W - RIGHT - 30;
    return n <= 1 ? (x0 + x1) / 2 : x0 + (x1 - x0) * i / (n - 1);
}

typedef struct series {
    const char *label, *color, *dash;
    double v[64];   /* values per level, NaN for none; sweeps longer than 64 levels are cut */
} series;

/* A sweep over request rates is drawn against the rate; any other against concurrency. */
static int by_rate(const xi_loadgen_level *lv, int n) {
    for (int i = 1; i < n; i++)
        if (lv[i].request_rate != lv[0].request_rate) return 1;
    return 0;
}

/* A level's x label: its concurrency, or on a rate axis its request rate ("inf" for a
 * closed loop). */
static void x_label(char *out, size_t len, const xi_loadgen_level *l, int rate_axis) {
    if (!rate_axis) snprintf(out, len, "%d", l->concurrency);
    else if (isfinite(l->request_rate)) snprintf(out, len, "%g", l->request_rate);
    else snprintf(out, len, "inf");
}

/* One panel: frame, grid, y ticks, x ticks with the concurrency of each level, series lines
 * broken at missing values, markers with a tooltip, and a legend. */
static void panel(xi_buf *b, const xi_loadgen_level *lv, int n, int top, const char *title,
                  const char *ylabel, const series *s, int ns) {
    double vmax = 0;
    for (int k = 0; k < ns; k++)
        for (int i = 0; i < n; i++)
            if (isfinite(s[k].v[i]) && s[k].v[i] > vmax) vmax = s[k].v[i];
    double amax, step;
    nice_axis(vmax * 1.05, &amax, &step);   /* headroom: the top point stays off the frame */
    int bottom = top + PANEL_H;
    xi_buf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"title\">", LEFT, top - 12);
    xml_text(b, title);
    xi_buf_printf(b, "</text>\n");
    xi_buf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fff\" stroke=\"#999\"/>\n",
                  LEFT, top, W - LEFT - RIGHT, PANEL_H);
    for (double t = 0; t <= amax + step * 1e-6; t += step) {
        double y = bottom - (t / amax) * PANEL_H;
        xi_buf_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n",
                      LEFT, y, W - RIGHT, y);
        xi_buf_printf(b, "<text x=\"%d\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">%g</text>\n",
                      LEFT - 6, y + 4, t);
    }
    xi_buf_printf(b, "<text transform=\"translate(%d,%d) rotate(-90)\" class=\"axis\" "
                     "text-anchor=\"middle\">", 22, top + PANEL_H / 2);
    xml_text(b, ylabel);
    xi_buf_printf(b, "</text>\n");
    const int rate_axis = by_rate(lv, n);
    char xl[32];
    for (int i = 0; i < n; i++) {
        double x = x_at(i, n);
        xi_buf_printf(b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#999\"/>\n",
                      x, bottom, x, bottom + 5);
        x_label(xl, sizeof xl, &lv[i], rate_axis);
        xi_buf_printf(b, "<text x=\"%.1f\" y=\"%d\" class=\"tick\" text-anchor=\"middle\">%s</text>\n",
                      x, bottom + 19, xl);
        if (lv[i].completed == 0)
            xi_buf_printf(b, "<text x=\"%.1f\" y=\"%d\" class=\"nodata\" text-anchor=\"middle\">"
                             "no data</text>\n", x, bottom - 8);
        else if (lv[i].n_errors)
            xi_buf_printf(b, "<text x=\"%.1f\" y=\"%d\" class=\"nodata\" text-anchor=\"middle\">"
                             "%d failed</text>\n", x, bottom - 8, lv[i].n_errors);
    }
    xi_buf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"axis\" text-anchor=\"middle\">%s</text>\n",
                  (LEFT + W - RIGHT) / 2, bottom + 38,
                  rate_axis ? "request rate (requests/s)" : "concurrency (requests in flight)");
    for (int k = 0; k < ns; k++) {
        /* One polyline per run of consecutive levels with data. */
        int open = 0;
        for (int i = 0; i <= n; i++) {
            int has = i < n && isfinite(s[k].v[i]);
            if (has && !open) {
                xi_buf_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s%s%s points=\"",
                              s[k].color, s[k].dash ? " stroke-dasharray=\"" : "",
                              s[k].dash ? s[k].dash : "", s[k].dash ? "\"" : "");
                open = 1;
            }
            if (has) xi_buf_printf(b, "%.1f,%.1f ", x_at(i, n), bottom - s[k].v[i] / amax * PANEL_H);
            if (!has && open) {
                xi_buf_printf(b, "\"/>\n");
                open = 0;
            }
        }
        for (int i = 0; i < n; i++) {
            if (!isfinite(s[k].v[i])) continue;
            xi_buf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"><title>",
                          x_at(i, n), bottom - s[k].v[i] / amax * PANEL_H, s[k].color);
            xml_text(b, s[k].label);
            x_label(xl, sizeof xl, &lv[i], rate_axis);
            xi_buf_printf(b, " at %s %s: %.4g</title></circle>\n",
                          rate_axis ? "request rate" : "concurrency", xl, s[k].v[i]);
        }
        /* Legend in the panel's heading row, right-aligned, so it never covers a point. */
        int lx = W - RIGHT - 120 * (ns - k), ly = top - 12;
        xi_buf_printf(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"%s%s%s/>\n",
                      lx, ly - 4, lx + 24, ly - 4, s[k].color, s[k].dash ? " stroke-dasharray=\"" : "",
                      s[k].dash ? s[k].dash : "", s[k].dash ? "\"" : "");
        xi_buf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"legend\">", lx + 30, ly);
        xml_text(b, s[k].label);
        xi_buf_printf(b, "</text>\n");
    }
}

char *xi_loadgen_svg(const xi_loadgen_level *lv, int n, const char *title) {
    if (n > 64) n = 64;
    series thr = {"output tokens/s", "#1f77b4", NULL, {0}};
    series ttft[2] = {{"TTFT p50", "#2ca02c", NULL, {0}}, {"TTFT p99", "#d62728", "6 4", {0}}};
    for (int i = 0; i < n; i++) {
        thr.v[i] = lv[i].completed ? lv[i].output_throughput : NAN;
        ttft[0].v[i] = lv[i].ttft.p50;
        ttft[1].v[i] = lv[i].ttft.p99;
    }
    xi_buf b = {0};
    xi_buf_printf(&b,
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n"
        "<style>text{font-family:sans-serif;fill:#222}.title{font-size:15px;font-weight:bold}"
        ".tick{font-size:11px}.axis{font-size:12px}.legend{font-size:12px}"
        ".nodata{font-size:11px;fill:#d62728}.head{font-size:15px;font-weight:bold}</style>\n"
        "<rect width=\"100%%\" height=\"100%%\" fill=\"#fafafa\"/>\n", W, H, W, H);
    xi_buf_printf(&b, "<text x=\"%d\" y=\"28\" class=\"head\">", LEFT);
    /* Long titles (model paths) are cut to the width of the chart. */
    const char *t = title && *title ? title : "xinfer bench";
    char cut[96];
    if (strlen(t) >= sizeof cut) {
        snprintf(cut, sizeof cut, "%.*s...", (int)sizeof cut - 4, t);
        t = cut;
    }
    xml_text(&b, t);
    xi_buf_printf(&b, "</text>\n");
    panel(&b, lv, n, 70, "Output token throughput", "tokens/s", &thr, 1);
    panel(&b, lv, n, 70 + PANEL_H + 100, "Time to first token", "TTFT (ms)", ttft, 2);
    xi_buf_printf(&b, "</svg>\n");
    return b.data;
}
