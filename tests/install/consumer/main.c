/* A program that uses the optional in-process API of the installed shim. */
#include <stdio.h>
#include <vramshim.h>

int main(void) {
  vramshim_card_stats s;
  if (vramshim_stats(0, &s) != 0) return 1;
  printf("vramshim %s, card 0 live %llu bytes\n", vramshim_version(), (unsigned long long)s.live_bytes);
  return 0;
}
