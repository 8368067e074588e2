#include "card_ident.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "ledger_mailbox.h"

/* Entry `ordinal` of the list ([*at, *at + *len)), blanks trimmed; 0, or -1
 * when the list is shorter (the driver would not have shown that card). */
static int entry_of(const char *cvd, int ordinal, const char **at, size_t *len) {
  const char *p = cvd;
  for (int k = 0;; k++) {
    while (*p == ' ') p++;
    size_t n = strcspn(p, ",");
    size_t l = n;
    while (l && p[l - 1] == ' ') l--;
    if (k == ordinal) {
      if (!l) return -1;
      *at = p;
      *len = l;
      return 0;
    }
    if (!p[n]) return -1;
    p += n + 1;
  }
}

int vs_card_index(int ordinal, const char *uuid, const char *cvd, const char *ledger_dir) {
  if (ordinal < 0) return -1;
  if (!cvd) return ordinal;
  const char *e;
  size_t n;
  if (entry_of(cvd, ordinal, &e, &n)) return -1;
  int digits = n <= 3;
  for (size_t i = 0; i < n && digits; i++) digits = isdigit((unsigned char)e[i]) != 0;
  if (digits) return atoi(e);
  /* a UUID entry (GPU-..., MIG-..., a prefix): the index the card's ledger
   * header holds, written by a process that knew it */
  if (!uuid || !*uuid || !ledger_dir || !*ledger_dir) return -1;
  vs_mailbox_map m;
  char err[256];
  if (vs_mailbox_map_open(ledger_dir, uuid, &m, err, sizeof err)) return -1;
  int idx = m.card_index;
  vs_mailbox_map_close(&m);
  return idx >= 0 ? idx : -1;
}
