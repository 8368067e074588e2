/* The config's default folders on Windows come from the platform layer, not
 * from Linux paths: dump_dir is GetTempPathW's folder + "vramshim" (it was
 * "/var/tmp/vramshim" until the dump folder's default moved to dir.h), the
 * ledger folder is %ProgramData%\vramshim. */
#include <stdio.h>
#include <string.h>
#include <windows.h>

#include "config.h"

int main(void) {
  static vs_config cfg;
  vs_config_defaults(&cfg);
  wchar_t w[MAX_PATH];
  char temp[MAX_PATH * 3], want[MAX_PATH * 3 + 16];
  DWORD n = GetTempPathW(MAX_PATH, w);
  if (!n || !WideCharToMultiByte(CP_UTF8, 0, w, -1, temp, (int)sizeof temp, NULL, NULL)) {
    printf("FAIL: GetTempPathW\n");
    return 1;
  }
  snprintf(want, sizeof want, "%svramshim", temp);
  printf("dump_dir %s\nledger_dir %s\n", cfg.dump_dir, cfg.ledger_dir);
  if (strcmp(cfg.dump_dir, want)) {
    printf("FAIL: dump_dir is %s, expected %s\n", cfg.dump_dir, want);
    return 1;
  }
  if (cfg.dump_dir[0] == '/' || cfg.ledger_dir[0] == '/') {
    printf("FAIL: a POSIX path as a Windows default\n");
    return 1;
  }
  const char *pd = getenv("ProgramData");
  if (pd && *pd) {
    char lw[MAX_PATH * 3 + 16];
    snprintf(lw, sizeof lw, "%s\\vramshim", pd);
    if (strcmp(cfg.ledger_dir, lw)) {
      printf("FAIL: ledger_dir is %s, expected %s\n", cfg.ledger_dir, lw);
      return 1;
    }
  }
  printf("ok\n");
  return 0;
}
