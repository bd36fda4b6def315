/* What startup_rv32.S calls after main and on a trap: stop the emulator. */
#include "semihost.h"

void tdsl_exit(int status);
void tdsl_trap(void);

void tdsl_exit(int status) {
    semihost_exit(status);
}

void tdsl_trap(void) {
    semihost_puts("tdsl-fault: the processor took a trap\n");
    semihost_exit(99);
}
