/* Semihosting: the program talks to the emulator (qemu -semihosting-config
   enable=on,target=native) through a breakpoint the emulator traps, no UART and
   no C library needed. Arm: `bkpt 0xAB` (Thumb); RISC-V: `ebreak` between two
   marker instructions (the RISC-V semihosting specification). */
#ifndef TDSL_SEMIHOST_H
#define TDSL_SEMIHOST_H

#include <stdint.h>

enum {
    SEMIHOST_SYS_WRITE0 = 0x04,        /* print a NUL-terminated string */
    SEMIHOST_SYS_EXIT_EXTENDED = 0x20, /* stop, with an exit status */
};

static inline uintptr_t semihost_call(uintptr_t op, uintptr_t arg) {
#if defined(__arm__)
    register uintptr_t r0 __asm__("r0") = op;
    register uintptr_t r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
#elif defined(__riscv)
    register uintptr_t a0 __asm__("a0") = op;
    register uintptr_t a1 __asm__("a1") = arg;
    __asm__ volatile(
        ".option push\n"
        ".option norvc\n"
        "slli zero, zero, 0x1f\n"
        "ebreak\n"
        "srai zero, zero, 7\n"
        ".option pop\n"
        : "+r"(a0) : "r"(a1) : "memory");
    return a0;
#else
#error "semihosting needs an Arm or RISC-V target"
#endif
}

/* Print a string on the emulator's standard output. */
static inline void semihost_puts(const char *s) {
    semihost_call(SEMIHOST_SYS_WRITE0, (uintptr_t)s);
}

/* Stop the emulator; `status` becomes its exit status. */
static inline void semihost_exit(int status) {
    uintptr_t block[2] = {0x20026u /* ADP_Stopped_ApplicationExit */, (uintptr_t)status};
    semihost_call(SEMIHOST_SYS_EXIT_EXTENDED, (uintptr_t)block);
    for (;;) {
    }
}

#endif /* TDSL_SEMIHOST_H */
