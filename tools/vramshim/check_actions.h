/* `vramshim check`'s checks of the threshold actions' programs (issue 26). */
#ifndef VS_CHECK_ACTIONS_H
#define VS_CHECK_ACTIONS_H
#include "config.h"
/* How many programs named by on_warn / on_refuse may not be run (each said
 * on stderr as "vramshim: FILE:LINE: ..."). */
int vs_check_actions(const vs_config *cfg);
#endif
