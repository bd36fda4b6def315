/* Start-up for a Cortex-M4 (qemu -M mps2-an386): the vector table, the reset
   handler (FPU on, .data copied, .bss cleared, main called, the emulator stopped
   with main's result) and a fault handler that reports and stops. */
#include <stdint.h>

#include "semihost.h"

extern uint32_t __data_load[], __data_start[], __data_end[], __bss_start[], __bss_end[];
extern uint32_t __stack_top[];
int main(void);

void reset_handler(void);
void fault_handler(void);

__attribute__((section(".vectors"), used))
static void (*const vectors[16])(void) = {
    (void (*)(void))__stack_top, /* initial stack pointer */
    reset_handler,
    fault_handler, /* NMI */
    fault_handler, /* HardFault */
    fault_handler, /* MemManage */
    fault_handler, /* BusFault */
    fault_handler, /* UsageFault */
    0, 0, 0, 0,
    fault_handler, /* SVCall */
    fault_handler, /* DebugMonitor */
    0,
    fault_handler, /* PendSV */
    fault_handler, /* SysTick */
};

void reset_handler(void) {
    volatile uint32_t *cpacr = (volatile uint32_t *)0xE000ED88u;
    *cpacr |= 0xFu << 20; /* full access to coprocessors 10 and 11: the FPU */
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    for (uint32_t *src = __data_load, *dst = __data_start; dst < __data_end;) {
        *dst++ = *src++;
    }
    for (uint32_t *dst = __bss_start; dst < __bss_end;) {
        *dst++ = 0;
    }
    semihost_exit(main());
}

void fault_handler(void) {
    semihost_puts("tdsl-fault: the processor took a fault\n");
    semihost_exit(99);
}
