/* A Node-API module lambda.mjs loads at start (process.dlopen; no Node headers needed): it makes
 * the runner's own process non-dumpable. Its child runs component code as the same user, and the
 * child's seccomp filter (launcher.c) refuses ptrace and process_vm_readv, but /proc/<pid>/mem,
 * environ and the rest of the parent's /proc would still open for it: a same-user process may
 * read a dumpable one's. A non-dumpable process's /proc is root's, and reading it asks for
 * CAP_SYS_PTRACE, which a Lambda function has not (docs/security.md, "The Lambda runtime API").
 * The flag is reset by execve, so the child (the runner's node, through the launcher) stays
 * dumpable, and this process can still watch it. */
#include <sys/prctl.h>

typedef struct napi_env__ *napi_env;
typedef struct napi_value__ *napi_value;
typedef int napi_status;
extern napi_status napi_throw_error(napi_env env, const char *code, const char *msg);

__attribute__((visibility("default"))) napi_value napi_register_module_v1(napi_env env, napi_value exports) {
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 || prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0) {
        napi_throw_error(env, "UNDUMPABLE", "could not make the runner process non-dumpable");
        return 0;
    }
    return exports;
}
