/* The runner child's launcher on AWS Lambda (docs/security.md, "The Lambda runtime API"):
 * `launcher <program> [args...]` sets no_new_privs, installs a seccomp filter and execs
 * <program>. Under the filter, which the program and everything it starts inherit and cannot
 * remove, the process has no network of its own:
 *
 * - socket() and socketpair() fail with EACCES for every domain but AF_UNIX, so no TCP or UDP
 *   socket (and so no connection to the runtime API on 127.0.0.1:9001) can be made;
 * - io_uring_setup/enter/register fail with ENOSYS (io_uring's operations are not seen by
 *   seccomp; libuv falls back to its thread pool);
 * - ptrace, process_vm_readv/writev and pidfd_getfd fail with EPERM: ways to act through, or
 *   take a socket from, another process of the same user (lambda.mjs holds the runtime API's);
 * - setsid and setpgid fail with EPERM: whatever the program forks stays in the process group
 *   lambda.mjs started it in (group.mjs), which the stop between invocations and the kill reach;
 * - any other architecture (i386's int 0x80, whose socketcall() multiplexes socket()) kills the
 *   process, and so does an x32 syscall number.
 *
 * Everything else is allowed. Exit 125 (before exec) when the filter cannot be installed:
 * lambda.mjs then runs no component code. A hand-written classic BPF program: no libseccomp. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#if !defined(__x86_64__)
#error "the launcher's filter is written for x86_64 (template.yaml: Architectures [x86_64])"
#endif

#define SECCOMP_FAILED 125
#define X32_SYSCALL_BIT 0x40000000u

#define LOAD(field) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, field))
#define RET(action) BPF_STMT(BPF_RET | BPF_K, (action))
/* if (A == nr) goto the next instruction, else skip it */
#define IS(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1)
#define FAIL(err) RET(SECCOMP_RET_ERRNO | ((err) & SECCOMP_RET_DATA))

static struct sock_filter filter[] = {
    LOAD(arch),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
    RET(SECCOMP_RET_KILL_PROCESS),
    LOAD(nr),
    BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, X32_SYSCALL_BIT, 0, 1),
    RET(SECCOMP_RET_KILL_PROCESS),
    /* socket(domain, ...), socketpair(domain, ...): AF_UNIX only. The kernel reads `domain` as
     * an int: the low 32 bits of the argument are what it acts on. */
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 1, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socketpair, 0, 3),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 0, 1),
    RET(SECCOMP_RET_ALLOW),
    /* a socket() or socketpair() of another domain comes here too, its domain in A */
    LOAD(nr),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 1, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socketpair, 0, 1),
    FAIL(EACCES),
    IS(__NR_io_uring_setup), FAIL(ENOSYS),
    IS(__NR_io_uring_enter), FAIL(ENOSYS),
    IS(__NR_io_uring_register), FAIL(ENOSYS),
    IS(__NR_ptrace), FAIL(EPERM),
    IS(__NR_process_vm_readv), FAIL(EPERM),
    IS(__NR_process_vm_writev), FAIL(EPERM),
    IS(__NR_pidfd_getfd), FAIL(EPERM),
    IS(__NR_setsid), FAIL(EPERM),
    IS(__NR_setpgid), FAIL(EPERM),
    RET(SECCOMP_RET_ALLOW),
};

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s <program> [args...]\n", argv[0]);
    return 2;
  }
  struct sock_fprog prog = {.len = sizeof(filter) / sizeof(filter[0]), .filter = filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    fprintf(stderr, "launcher: PR_SET_NO_NEW_PRIVS: %s\n", strerror(errno));
    return SECCOMP_FAILED;
  }
  if (syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
    fprintf(stderr, "launcher: seccomp filter: %s\n", strerror(errno));
    return SECCOMP_FAILED;
  }
  execv(argv[1], argv + 1);
  fprintf(stderr, "launcher: exec %s: %s\n", argv[1], strerror(errno));
  return 127;
}
