/* Start-up for an RV32 core (qemu -M virt -bios none, which starts at the first
   byte of RAM): the stack and global pointers, .data copied, .bss cleared, main
   called, then `tdsl_exit` stops the emulator with main's result. A trap reports
   and stops too. */
    .section .text.start, "ax"
    .globl _start
_start:
    .option push
    .option norelax
    la gp, __global_pointer$
    .option pop
    la sp, __stack_top
    la t0, trap_handler
    .option push
    .option arch, +zicsr
    csrw mtvec, t0
    .option pop
    la t0, __data_load
    la t1, __data_start
    la t2, __data_end
1:  bgeu t1, t2, 2f
    lw t3, 0(t0)
    sw t3, 0(t1)
    addi t0, t0, 4
    addi t1, t1, 4
    j 1b
2:  la t1, __bss_start
    la t2, __bss_end
3:  bgeu t1, t2, 4f
    sw zero, 0(t1)
    addi t1, t1, 4
    j 3b
4:  call main
    call tdsl_exit
5:  j 5b

    .balign 4
trap_handler:
    call tdsl_trap
6:  j 6b
