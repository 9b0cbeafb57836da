/*
 * plot.c - kvtier replay --plot FILE: one self-contained SVG (no script,
 * no external resource) with two charts: the block hit ratio against the
 * capacity replayed (one line per SSD size of a sweep, the unlimited
 * cache's ideal dashed), and the modelled time-to-first-token of each
 * what-if scenario of the last run.
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "replay.h"

#define W 960
#define H 440
#define PAD 60

static const char *const colours[] = { "#1f77b4", "#d62728", "#2ca02c", "#9467bd",
				       "#ff7f0e", "#8c564b", "#e377c2", "#17becf" };

static void size_label(char *b, size_t n, uint64_t v)
{
	static const char *const u[] = { "B", "K", "M", "G", "T" };
	int i = 0;
	double d = (double)v;
	while (d >= 1024 && i < 4)
		d /= 1024, i++;
	snprintf(b, n, "%.*f%s", d == floor(d) ? 0 : 1, d, u[i]);
}

int rp_plot_svg(const char *path, const char *title, const struct rp_plot_point *pts, unsigned n,
		double ideal, const struct rp_whatif *w, int nw)
{
	FILE *f = fopen(path, "w");
	const double x0 = PAD, x1 = W / 2.0 - 20, y0 = H - PAD, y1 = 50;
	double lmin = INFINITY, lmax = -INFINITY, tmax = 0;
	char a[32];

	char t[256];
	size_t tl = 0;
	if (!f)
		return -1;
	/* The title is a file name: nothing in it may read as markup. */
	for (; title[tl] && tl < sizeof(t) - 1; tl++)
		t[tl] = strchr("<>&\"'", title[tl]) ? '_' : title[tl];
	t[tl] = 0;
	title = t;
	for (unsigned i = 0; i < n; i++) {
		double l = log2((double)(pts[i].dram + pts[i].ssd));
		lmin = l < lmin ? l : lmin;
		lmax = l > lmax ? l : lmax;
	}
	if (n == 0 || lmax - lmin < 1e-9)
		lmin -= 1, lmax += 1;
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		   "font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
	fprintf(f, "<title>kvtier replay: %s</title>\n<rect width=\"100%%\" height=\"100%%\" "
		   "fill=\"white\"/>\n", title);
	fprintf(f, "<text x=\"%d\" y=\"22\" font-size=\"15\">kvtier replay: %s</text>\n", PAD,
		title);

	/* Left: hit ratio against capacity. */
	fprintf(f, "<text x=\"%g\" y=\"42\">block hit ratio (measured) against DRAM+SSD "
		   "capacity</text>\n", x0);
	fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", x0, y0,
		x1, y0);
	fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", x0, y0,
		x0, y1);
	for (int p = 0; p <= 100; p += 20) {
		double y = y0 - (y0 - y1) * p / 100.0;
		fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%d%%</text>\n", x0 - 6,
			y + 4, p);
		fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#ddd\"/>\n", x0,
			y, x1, y);
	}
	{
		double y = y0 - (y0 - y1) * ideal;
		fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"gray\" "
			   "stroke-dasharray=\"6 4\"/>\n", x0, y, x1, y);
		fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"end\" fill=\"gray\">ideal "
			   "(unlimited) %.1f%%</text>\n", x1, y - 4, ideal * 100);
	}
	/* One line per SSD size, points in DRAM order. */
	unsigned series = 0;
	for (unsigned i = 0; i < n; i++) {
		bool seen = false;
		for (unsigned k = 0; k < i; k++)
			seen |= pts[k].ssd == pts[i].ssd;
		if (seen)
			continue;
		const char *col = colours[series++ % 8];
		fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
		for (unsigned k = i; k < n; k++)
			if (pts[k].ssd == pts[i].ssd)
				fprintf(f, "%.1f,%.1f ",
					x0 + (x1 - x0) * (log2((double)(pts[k].dram + pts[k].ssd)) - lmin) /
						     (lmax - lmin) * 0.9 + (x1 - x0) * 0.05,
					y0 - (y0 - y1) * pts[k].block_hit);
		fprintf(f, "\"/>\n");
		for (unsigned k = i; k < n; k++) {
			if (pts[k].ssd != pts[i].ssd)
				continue;
			double x = x0 + (x1 - x0) * (log2((double)(pts[k].dram + pts[k].ssd)) - lmin) /
						(lmax - lmin) * 0.9 + (x1 - x0) * 0.05;
			double y = y0 - (y0 - y1) * pts[k].block_hit;
			size_label(a, sizeof a, pts[k].dram);
			fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"><title>DRAM %s",
				x, y, col, a);
			size_label(a, sizeof a, pts[k].ssd);
			fprintf(f, " SSD %s: %.2f%% of blocks</title></circle>\n", a,
				pts[k].block_hit * 100);
			size_label(a, sizeof a, pts[k].dram + pts[k].ssd);
			fprintf(f, "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%s</text>\n", x,
				y0 + 16, a);
		}
		size_label(a, sizeof a, pts[i].ssd);
		fprintf(f, "<text x=\"%g\" y=\"%g\" fill=\"%s\">SSD %s</text>\n", x0 + 10,
			y1 + 14 * series, col, pts[i].ssd ? a : "none");
	}

	/* Right: modelled TTFT per scenario, bars. */
	const double bx0 = W / 2.0 + 120, bx1 = W - 30;
	fprintf(f, "<text x=\"%g\" y=\"42\">time to first token, mean (MODELLED)</text>\n",
		W / 2.0 + 20);
	for (int i = 0; i < nw; i++)
		tmax = w[i].ttft_mean_s > tmax ? w[i].ttft_mean_s : tmax;
	for (int i = 0; i < nw; i++) {
		double y = y1 + 20 + i * 44, len = tmax > 0 ? (bx1 - bx0) * w[i].ttft_mean_s / tmax : 0;
		fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%s</text>\n", bx0 - 8,
			y + 16, w[i].name);
		fprintf(f, "<rect x=\"%g\" y=\"%g\" width=\"%.1f\" height=\"24\" fill=\"%s\"/>\n",
			bx0, y, len, colours[i % 8]);
		fprintf(f, "<text x=\"%g\" y=\"%g\">%.1f ms, %.2fx</text>\n",
			bx0 + len + 4 > bx1 - 90 ? bx1 - 90 : bx0 + len + 4, y + 16,
			w[i].ttft_mean_s * 1e3, w[i].speedup);
	}
	fprintf(f, "<text x=\"%g\" y=\"%d\" fill=\"gray\">modelled from the measured hits; "
		   "assumptions: doc/replay.md</text>\n", W / 2.0 + 20, H - 20);
	fprintf(f, "</svg>\n");
	return fclose(f) == 0 ? 0 : -1;
}
