/* `vramshim dump`: reads a dump (a file, or a live process's fresh dump)
 * and shows it as text, SVG, JSON, or the diff of two dumps. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file.h"
#include "commands.h"
#include "dump_json.h"
#include "dump_views.h"
#include "render.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: vramshim dump FILE [--json | --svg OUT.svg]\n"
          "       vramshim dump --pid PID | --tenant NAME | --all [--json | --svg OUT.svg]\n"
          "                     [--timeout SECONDS] [--ledger-dir DIR]\n"
          "       vramshim dump --diff A.json B.json\n"
          "\n"
          "Shows a dump: summary figures, the free-extent histogram, size classes,\n"
          "one line per region of the memory map, and the timeline.\n"
          "  --json       print the dump itself (normalised JSON) to stdout; with\n"
          "               --tenant or --all one document: {schema_version, dumps: [...]}\n"
          "  --svg OUT    write a picture: memory map and timeline plot\n"
          "  --diff A B   what changed from dump A to dump B (reserved, live,\n"
          "               fragmentation, histogram buckets, size classes)\n"
          "  --pid P, --tenant T, --all   ask live processes under the shim for a\n"
          "               fresh dump (through the ledger; answered by the shim's\n"
          "               background thread, even while the program is blocked)\n"
          "  --timeout S  how long to wait for the answers (default 2 s)\n"
          "  --ledger-dir DIR  where the ledgers are (default: the config's ledger_dir)\n");
}

static int load(const char *path, vs_dump *d) {
  char err[512];
  if (vs_dump_read_file(path, d, err, sizeof err)) {
    fprintf(stderr, "vramshim: dump %s: %s\n", path, err);
    return -1;
  }
  return 0;
}

static int write_svg(const vs_dump *d, const char *out, size_t count) {
  char path[4096];
  /* Several dumps (--tenant, --all): OUT.svg becomes OUT-<pid>.svg. */
  if (count > 1) {
    const char *dot = strrchr(out, '.');
    int stem = dot ? (int)(dot - out) : (int)strlen(out);
    snprintf(path, sizeof path, "%.*s-%lld%s", stem, out, (long long)d->pid, dot ? dot : ".svg");
  } else {
    snprintf(path, sizeof path, "%s", out);
  }
  size_t len;
  char *svg = vs_render_svg(d, &len);
  if (!svg) {
    fprintf(stderr, "vramshim: out of memory drawing the SVG\n");
    return -1;
  }
  FILE *f = vs_plat_fopen_regular(path, "w");
  if (!f) {
    fprintf(stderr, "vramshim: cannot write %s: %s\n", path, vs_plat_open_strerror(errno));
    free(svg);
    return -1;
  }
  size_t w = fwrite(svg, 1, len, f);
  int closed = fclose(f);
  int rc = (w == len && closed == 0) ? 0 : -1;
  free(svg);
  if (rc) fprintf(stderr, "vramshim: writing %s failed\n", path);
  else fprintf(stderr, "vramshim: wrote %s\n", path);
  return rc;
}

static int show(const vs_dump *d, int json, const char *svg, size_t n) {
  if (svg) return write_svg(d, svg, n);
  if (json) {
    vs_jw w;
    vs_jw_init(&w, 0);
    vs_dump_write_json(&w, d);
    return vs_jw_print(&w, stdout);
  }
  return vs_render_text(stdout, d);
}

/* `dump --tenant T --json`, `dump --all --json`: one document, the dumps in
 * a list (docs/dump-format.md, "Lists of dumps"; docs/schemas/dump-list.schema.json). */
#define DUMP_LIST_SCHEMA_VERSION "1.0"

static int print_list(const vs_dump *dumps, size_t n) {
  vs_jw w;
  vs_jw_init(&w, 0);
  vs_jw_object(&w, VS_JSON_BLOCK);
  vs_jw_kstr(&w, "schema_version", DUMP_LIST_SCHEMA_VERSION);
  vs_jw_kstr(&w, "generator", "vramshim");
  vs_jw_key(&w, "dumps");
  vs_jw_array(&w, VS_JSON_BLOCK);
  for (size_t i = 0; i < n; i++) vs_dump_write_json(&w, &dumps[i]);
  vs_jw_end(&w);
  vs_jw_end(&w);
  if (vs_jw_print(&w, stdout)) {
    fprintf(stderr, "vramshim: dump: out of memory writing the JSON\n");
    return -1;
  }
  return 0;
}

int cmd_dump(int argc, char **argv) {
  int json = 0, all = 0;
  const char *svg = NULL, *tenant = NULL, *file = NULL, *diff_a = NULL, *diff_b = NULL;
  long pid = 0;
  double timeout_s = 2.0;
  const char *ledger_dir = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--json")) {
      json = 1;
    } else if (!strcmp(a, "--all")) {
      all = 1;
    } else if (!strcmp(a, "--svg") || !strcmp(a, "--pid") || !strcmp(a, "--tenant") || !strcmp(a, "--timeout") ||
               !strcmp(a, "--ledger-dir")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "vramshim: dump: %s needs a value\n", a);
        return 2;
      }
      const char *v = argv[++i];
      if (!strcmp(a, "--svg")) {
        svg = v;
      } else if (!strcmp(a, "--tenant")) {
        tenant = v;
      } else if (!strcmp(a, "--ledger-dir")) {
        ledger_dir = v;
      } else if (!strcmp(a, "--timeout")) {
        char *end;
        errno = 0;
        timeout_s = strtod(v, &end);
        if (*end || errno || !(timeout_s > 0 && timeout_s <= 3600)) {
          fprintf(stderr, "vramshim: dump: --timeout wants seconds (0 < S <= 3600), not '%s'\n", v);
          return 2;
        }
      } else {
        char *end;
        errno = 0;
        pid = strtol(v, &end, 10);
        if (*end || errno || pid <= 0) {
          fprintf(stderr, "vramshim: dump: --pid wants a process id, not '%s'\n", v);
          return 2;
        }
      }
    } else if (!strcmp(a, "--diff")) {
      if (i + 2 >= argc) {
        fprintf(stderr, "vramshim: dump: --diff needs two dump files\n");
        return 2;
      }
      diff_a = argv[++i];
      diff_b = argv[++i];
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "vramshim: dump: unknown option '%s'\n", a);
      usage(stderr);
      return 2;
    } else if (!file) {
      file = a;
    } else {
      fprintf(stderr, "vramshim: dump: one dump file at a time ('%s' and '%s'); for two, use --diff\n", file, a);
      return 2;
    }
  }
  int sources = (file != NULL) + (pid > 0) + (tenant != NULL) + all + (diff_a != NULL);
  if (sources != 1) {
    fprintf(stderr, "vramshim: dump: give exactly one of FILE, --pid, --tenant, --all, --diff\n");
    usage(stderr);
    return 2;
  }
  if (json && svg) {
    fprintf(stderr, "vramshim: dump: --json and --svg are exclusive\n");
    return 2;
  }

  if (diff_a) {
    if (json || svg) {
      fprintf(stderr, "vramshim: dump: --diff prints text only\n");
      return 2;
    }
    vs_dump a, b;
    if (load(diff_a, &a)) return 1;
    if (load(diff_b, &b)) {
      vs_dump_free(&a);
      return 1;
    }
    int rc = vs_render_diff(stdout, &a, &b);
    vs_dump_free(&a);
    vs_dump_free(&b);
    return rc ? 1 : 0;
  }

  if (file) {
    vs_dump d;
    if (load(file, &d)) return 1;
    int rc = show(&d, json, svg, 1);
    vs_dump_free(&d);
    return rc ? 1 : 0;
  }

  dump_target t = {pid, tenant, all, timeout_s, ledger_dir};
  vs_dump *dumps = NULL;
  size_t n = 0;
  char err[512];
  if (dump_request_live(&t, &dumps, &n, err, sizeof err)) {
    fprintf(stderr, "vramshim: dump: %s\n", err);
    return 1;
  }
  int rc = 0;
  /* JSON of --pid: the dump itself; of --tenant, --all: one document listing them. */
  int list = json && (tenant || all);
  if (list && n && print_list(dumps, n)) rc = 1;
  for (size_t i = 0; i < n; i++) {
    if (!list && show(&dumps[i], json, svg, n)) rc = 1;
    vs_dump_free(&dumps[i]);
  }
  free(dumps);
  if (!n) {
    fprintf(stderr, "vramshim: dump: no process under the shim has used a card (ledger_dir of the config, or --ledger-dir DIR)\n");
    rc = 1;
  }
  return rc;
}
