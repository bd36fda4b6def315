/* A qemu TCG plugin (plugin API version 1, as qemu 7.2 has it) that counts the
   instructions a program executes between two marker functions.

       qemu-system-arm ... -plugin ./insn_count.so,begin=0x1234,end=0x1240

   Every executed instruction adds one to a counter (an inline add qemu emits in
   the translated code); executing the instruction at `begin` snapshots the
   counter, executing the one at `end` adds the difference since the snapshot to
   the total and prints `tdsl-insns TOTAL` on standard error. Instruction counts
   do not depend on the host or its load: the same program always gives the same
   count.

   Debian's qemu ships neither the plugins nor qemu-plugin.h, so the few
   declarations this plugin uses are written out here, as that header has them. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;

typedef struct {
    const char *target_name;
    struct {
        int min;
        int cur;
    } version;
    bool system_emulation;
    union {
        struct {
            int smp_vcpus;
            int max_vcpus;
        } system;
    };
} qemu_info_t;

struct qemu_plugin_tb;
struct qemu_plugin_insn;

enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };

typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn,
                                                enum qemu_plugin_op op, void *ptr, uint64_t imm);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
                                            qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);

#define EXPORT __attribute__((visibility("default")))

EXPORT int qemu_plugin_version = 1;

static uint64_t executed;      /* instructions executed so far */
static uint64_t since;         /* `executed` when `begin` last ran */
static uint64_t counted;       /* the total between the markers */
static uint64_t begin_at, end_at;

static void at_begin(unsigned int vcpu, void *data) {
    (void)vcpu;
    (void)data;
    since = executed;
}

static void at_end(unsigned int vcpu, void *data) {
    (void)vcpu;
    (void)data;
    counted += executed - since;
    fprintf(stderr, "tdsl-insns %llu\n", (unsigned long long)counted);
    fflush(stderr);
}

static void translated(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint64_t at = qemu_plugin_insn_vaddr(insn);
        qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &executed, 1);
        if (at == begin_at) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, at_begin, QEMU_PLUGIN_CB_NO_REGS, NULL);
        }
        if (at == end_at) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, at_end, QEMU_PLUGIN_CB_NO_REGS, NULL);
        }
    }
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                               char **argv) {
    (void)info;
    bool have_begin = false, have_end = false;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "begin=", 6) == 0) {
            begin_at = strtoull(argv[i] + 6, NULL, 0);
            have_begin = true;
        } else if (strncmp(argv[i], "end=", 4) == 0) {
            end_at = strtoull(argv[i] + 4, NULL, 0);
            have_end = true;
        } else {
            fprintf(stderr, "insn_count: unknown argument %s (give begin=ADDR,end=ADDR)\n", argv[i]);
            return 1;
        }
    }
    if (!have_begin || !have_end) {
        fprintf(stderr, "insn_count: give begin=ADDR,end=ADDR\n");
        return 1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, translated);
    return 0;
}
