/* What a service answers a hook: VS_MEM_DONE, the request was served (or
 * refused) without the program's own driver call; VS_MEM_PASS, the hook
 * calls the driver. Shared by every folder that answers hooks. */
#ifndef VS_SERVED_H
#define VS_SERVED_H

enum { VS_MEM_PASS = 0, VS_MEM_DONE = 1 };

#endif
