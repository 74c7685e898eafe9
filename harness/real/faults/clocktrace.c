/*
 * clocktrace: run a program under a wall clock the clock nemesis controls, without libc's help.
 *
 *   clocktrace [--file PATH] [--check-ms N] [--quiet] [--] PROGRAM [ARG...]
 *
 * libfaketime moves the wall clock of programs that read it through libc. Go programs (etcd) read it
 * through the vDSO from their own assembly, so libfaketime cannot reach them, and setting the real clock
 * in a container would move the host's. clocktrace makes the program ask the kernel instead and answers
 * for the kernel:
 *
 * 1. It forks a tracer and becomes the program itself (same pid, same process group: the harness's
 *    pidfile, kill -9 and SIGSTOP/SIGCONT of the group reach the program as before). The tracer starts a
 *    session of its own, so a SIGSTOP of the group never freezes it, and PTRACE_SEIZEs its parent with
 *    EXITKILL (the program dies if the tracer does) and follows every thread, fork and exec.
 * 2. Before exec, the program installs a seccomp filter that stops only the wall-clock reads:
 *    clock_gettime(CLOCK_REALTIME | CLOCK_REALTIME_COARSE, …), gettimeofday and time. Everything else,
 *    CLOCK_MONOTONIC included, runs without a stop.
 * 3. At the exec stop the tracer rewrites the new image's auxiliary vector on its stack: AT_SYSINFO_EHDR
 *    becomes AT_IGNORE, so neither Go's runtime nor ld.so find the vDSO and both fall back to the
 *    clock_gettime system call (Go: vdsoClockgettimeSym stays 0 and time.now / walltime take their
 *    SYSCALL path).
 * 4. At each seccomp stop the tracer writes the virtual time into the caller's buffer, skips the system
 *    call (orig_rax = -1) and makes it return 0.
 *
 * The virtual clock follows libfaketime's relative mode and reads the same control file the harness writes
 * for libfaketime (FAKETIME_TIMESTAMP_FILE unless --file): "+12.5s", "-0.3s", "+0", "+0s x1.02", with
 * the suffixes s, m, h, d, y. time = start + (real - start) × rate + offset, where start is the moment
 * clocktrace started (so changing the rate restarts the faked timeline from the process start, as in
 * libfaketime). The file is stat()ed at most every --check-ms (default 1) and re-read when it changed; a
 * missing file means real time. The libfaketime variables are removed from the program's environment
 * (its libc calls are faked here, once). Only x86_64.
 *
 * Signals pass through; group-stops are held with PTRACE_LISTEN so SIGCONT resumes the program. The tracer
 * exits with the program's status once every thread is gone. Diagnostics (each clock change, the vDSO
 * rewrite) go to stderr, prefixed "clocktrace:", unless --quiet.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef __x86_64__
#error "clocktrace emulates x86_64 system calls only"
#endif

#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif

static const char *ctl_path;
static int64_t check_ns = 1000000;
static int quiet;
static int64_t start_ns;          /* real CLOCK_REALTIME when clocktrace started */
static long double offset_ns;     /* from the control file */
static long double rate = 1.0L;
static int64_t last_check = INT64_MIN;
static struct stat last_st;
static int have_st, have_spec;
static char last_text[256] = "(none)";
static unsigned long answered; /* wall-clock reads answered */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    if (quiet)
        return;
    char buf[512];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    int n = snprintf(buf, sizeof buf, "clocktrace: %04d-%02d-%02dT%02d:%02d:%02d.%06ldZ (real) ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, now.tv_nsec / 1000);
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof buf - 2)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    if (write(2, buf, (size_t)n) < 0) {
        /* nothing to do: the log is gone */
    }
}

static int64_t ns_of(const struct timespec *t) { return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec; }

static int64_t now_ns(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return ns_of(&t);
}

/* libfaketime's relative spec: [+-]NUMBER[smhdy] [xRATE]. 0 if understood. */
static int parse_spec(const char *s, long double *off, long double *r) {
    while (*s == ' ' || *s == '\t')
        s++;
    if (*s == '\0' || *s == '\n') {
        *off = 0;
        *r = 1;
        return 0;
    }
    if (*s != '+' && *s != '-')
        return -1; /* absolute times ("@…", dates) are not what the harness writes */
    char *end;
    long double v = strtold(s, &end);
    if (end == s)
        return -1;
    switch (*end) {
    case 's': end++; break;
    case 'm': v *= 60; end++; break;
    case 'h': v *= 3600; end++; break;
    case 'd': v *= 86400; end++; break;
    case 'y': v *= 86400 * 365; end++; break;
    default: break;
    }
    long double rr = 1.0L;
    const char *x = strchr(end, 'x');
    if (x != NULL) {
        char *e2;
        rr = strtold(x + 1, &e2);
        if (e2 == x + 1 || !(rr > 0))
            return -1;
    }
    *off = v * 1e9L;
    *r = rr;
    return 0;
}

static void set_clock(long double off, long double r, const char *text) {
    if (have_spec && off == offset_ns && r == rate)
        return;
    offset_ns = off;
    rate = r;
    have_spec = 1;
    say("clock offset %+.6Lf s, rate %.6Lf (%s)", off / 1e9L, r, text);
}

/* Re-read the control file if it changed, at most every check_ns. */
static void refresh(void) {
    if (ctl_path == NULL)
        return;
    int64_t mono = now_ns(CLOCK_MONOTONIC);
    if (last_check != INT64_MIN && mono - last_check < check_ns)
        return;
    last_check = mono;
    struct stat st;
    if (stat(ctl_path, &st) != 0) {
        if (have_st || !have_spec)
            set_clock(0, 1, "no control file: real time");
        have_st = 0;
        return;
    }
    if (have_st && st.st_ino == last_st.st_ino && st.st_dev == last_st.st_dev && st.st_size == last_st.st_size &&
        st.st_mtim.tv_sec == last_st.st_mtim.tv_sec && st.st_mtim.tv_nsec == last_st.st_mtim.tv_nsec)
        return;
    last_st = st;
    have_st = 1;
    FILE *f = fopen(ctl_path, "r");
    if (f == NULL)
        return;
    char line[256];
    const char *spec = "";
    while (fgets(line, sizeof line, f) != NULL) {
        if (line[0] == '#' || line[0] == ';' || line[0] == '\n')
            continue;
        line[strcspn(line, "\r\n")] = '\0';
        spec = line;
        break;
    }
    fclose(f);
    long double off, r;
    if (parse_spec(spec, &off, &r) != 0) {
        if (strcmp(spec, last_text) != 0)
            say("cannot use %s: %s (the clock stays as it was)", ctl_path, spec);
        snprintf(last_text, sizeof last_text, "%s", spec);
        return;
    }
    snprintf(last_text, sizeof last_text, "%s", spec);
    set_clock(off, r, spec);
}

static struct timespec virtual_time(clockid_t real_clock) {
    refresh();
    int64_t real = now_ns(real_clock);
    long double v = (long double)start_ns + (long double)(real - start_ns) * rate + offset_ns;
    int64_t ns = (int64_t)llroundl(v);
    struct timespec t = {ns / 1000000000LL, ns % 1000000000LL};
    if (t.tv_nsec < 0) {
        t.tv_nsec += 1000000000LL;
        t.tv_sec -= 1;
    }
    return t;
}

static int write_mem(pid_t pid, unsigned long addr, const void *data, size_t len) {
    struct iovec local = {(void *)data, len}, remote = {(void *)addr, len};
    if (process_vm_writev(pid, &local, 1, &remote, 1, 0) == (ssize_t)len)
        return 0;
    /* process_vm_writev refused (a seccomp profile?): word by word */
    for (size_t i = 0; i < len; i += sizeof(long)) {
        long word = 0;
        size_t n = len - i < sizeof(long) ? len - i : sizeof(long);
        if (n < sizeof(long)) {
            errno = 0;
            word = ptrace(PTRACE_PEEKDATA, pid, (void *)(addr + i), NULL);
            if (errno != 0)
                return -1;
        }
        memcpy(&word, (const char *)data + i, n);
        if (ptrace(PTRACE_POKEDATA, pid, (void *)(addr + i), (void *)word) != 0)
            return -1;
    }
    return 0;
}

/* A seccomp stop: answer the wall-clock read for the kernel. */
static void emulate(pid_t pid) {
    struct user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, pid, NULL, &regs) != 0)
        return;
    long result = 0;
    switch (regs.orig_rax) {
    case SYS_clock_gettime: {
        clockid_t clk = (clockid_t)regs.rdi;
        struct timespec t = virtual_time(clk == CLOCK_REALTIME_COARSE ? CLOCK_REALTIME_COARSE : CLOCK_REALTIME);
        if (write_mem(pid, regs.rsi, &t, sizeof t) != 0)
            result = -EFAULT;
        break;
    }
    case SYS_gettimeofday: {
        struct timespec t = virtual_time(CLOCK_REALTIME);
        if (regs.rdi != 0) {
            struct timeval tv = {t.tv_sec, t.tv_nsec / 1000};
            if (write_mem(pid, regs.rdi, &tv, sizeof tv) != 0)
                result = -EFAULT;
        }
        if (regs.rsi != 0 && result == 0) {
            int tz[2] = {0, 0}; /* struct timezone: minutes west, dst */
            if (write_mem(pid, regs.rsi, &tz, sizeof tz) != 0)
                result = -EFAULT;
        }
        break;
    }
    case SYS_time: {
        struct timespec t = virtual_time(CLOCK_REALTIME);
        result = t.tv_sec;
        if (regs.rdi != 0 && write_mem(pid, regs.rdi, &t.tv_sec, sizeof t.tv_sec) != 0)
            result = -EFAULT;
        break;
    }
    default:
        return; /* not ours: let it run */
    }
    answered++;
    regs.orig_rax = (unsigned long long)-1; /* skip the system call … */
    regs.rax = (unsigned long long)result;  /* … and return this */
    ptrace(PTRACE_SETREGS, pid, NULL, &regs);
}

/* The exec stop: hide the vDSO from the new image (AT_SYSINFO_EHDR → AT_IGNORE in its auxv). */
static void hide_vdso(pid_t pid) {
    struct user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, pid, NULL, &regs) != 0)
        return;
    unsigned long p = regs.rsp;
    errno = 0;
    long argc = ptrace(PTRACE_PEEKDATA, pid, (void *)p, NULL);
    if (errno != 0)
        return;
    p += 8 * (unsigned long)(argc + 2); /* argc, argv[], NULL */
    for (int i = 0; i < 1 << 16; i++, p += 8) { /* envp[], NULL */
        errno = 0;
        long w = ptrace(PTRACE_PEEKDATA, pid, (void *)p, NULL);
        if (errno != 0)
            return;
        if (w == 0)
            break;
    }
    p += 8;
    for (int i = 0; i < 256; i++, p += 16) {
        errno = 0;
        long tag = ptrace(PTRACE_PEEKDATA, pid, (void *)p, NULL);
        if (errno != 0 || tag == AT_NULL)
            break;
        if (tag == AT_SYSINFO_EHDR) {
            if (ptrace(PTRACE_POKEDATA, pid, (void *)p, (void *)(long)AT_IGNORE) == 0)
                say("pid %d: vDSO hidden (auxv entry %d), wall-clock reads trapped", pid, i);
            else
                say("pid %d: cannot rewrite the auxv: %s", pid, strerror(errno));
            return;
        }
    }
    say("pid %d: no AT_SYSINFO_EHDR in the auxv (no vDSO to hide)", pid);
}

static int install_filter(void) {
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clock_gettime, 0, 5),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])), /* clockid (low word) */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, CLOCK_REALTIME, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, CLOCK_REALTIME_COARSE, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_gettimeofday, 1, 0), /* the accumulator still holds nr */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_time, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof filter / sizeof filter[0]), filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

/* The program's environment: libfaketime's variables out (its libc calls are faked here already). */
static void clean_environment(void) {
    const char *pre = getenv("LD_PRELOAD");
    if (pre != NULL && strstr(pre, "faketime") != NULL) {
        char kept[4096] = "";
        char copy[4096];
        snprintf(copy, sizeof copy, "%s", pre);
        for (char *save, *tok = strtok_r(copy, ": ", &save); tok; tok = strtok_r(NULL, ": ", &save)) {
            if (strstr(tok, "faketime") != NULL)
                continue;
            if (kept[0])
                strncat(kept, ":", sizeof kept - strlen(kept) - 1);
            strncat(kept, tok, sizeof kept - strlen(kept) - 1);
        }
        if (kept[0])
            setenv("LD_PRELOAD", kept, 1);
        else
            unsetenv("LD_PRELOAD");
    }
    for (;;) {
        extern char **environ;
        char name[128] = "";
        for (char **e = environ; *e; e++)
            if (strncmp(*e, "FAKETIME", 8) == 0) {
                size_t n = strcspn(*e, "=");
                snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), *e);
                break;
            }
        if (!name[0])
            break;
        unsetenv(name);
    }
}

/* The tracer: follow every thread of `target` until none is left; the program's exit status. */
static int trace(pid_t target) {
    int result = 0;
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, __WALL);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            if (errno == ECHILD)
                return result;
            say("waitpid: %s", strerror(errno));
            return 125;
        }
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
            if (pid == target) {
                result = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                say("pid %d %s %d (%lu wall-clock reads answered)", pid,
                    WIFEXITED(status) ? "exited with status" : "killed by signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), answered);
            }
            continue;
        }
        if (!WIFSTOPPED(status))
            continue;
        int sig = WSTOPSIG(status), event = status >> 16;
        switch (event) {
        case PTRACE_EVENT_SECCOMP:
            emulate(pid);
            ptrace(PTRACE_CONT, pid, NULL, NULL);
            break;
        case PTRACE_EVENT_EXEC:
            hide_vdso(pid);
            ptrace(PTRACE_CONT, pid, NULL, NULL);
            break;
        case PTRACE_EVENT_STOP:
            if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU)
                ptrace(PTRACE_LISTEN, pid, NULL, NULL); /* group-stop: stay stopped until SIGCONT */
            else
                ptrace(PTRACE_CONT, pid, NULL, NULL); /* a new thread's first stop */
            break;
        case 0:
            ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig); /* a signal: deliver it */
            break;
        default: /* clone, fork, vfork, exit events */
            ptrace(PTRACE_CONT, pid, NULL, NULL);
            break;
        }
    }
}

static void usage(void) {
    fprintf(stderr, "usage: clocktrace [--file PATH] [--check-ms N] [--quiet] [--] PROGRAM [ARG...]\n");
    exit(254);
}

int main(int argc, char **argv) {
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        } else if (strcmp(argv[i], "--file") == 0 && i + 1 < argc) {
            ctl_path = argv[++i];
        } else if (strcmp(argv[i], "--check-ms") == 0 && i + 1 < argc) {
            char *end;
            double ms = strtod(argv[++i], &end);
            if (*end != '\0' || !(ms >= 0)) {
                fprintf(stderr, "clocktrace: bad --check-ms %s\n", argv[i]);
                exit(254);
            }
            check_ns = (int64_t)(ms * 1e6);
        } else if (strcmp(argv[i], "--quiet") == 0) {
            quiet = 1;
        } else {
            fprintf(stderr, "clocktrace: unknown option %s\n", argv[i]);
            usage();
        }
    }
    if (i >= argc)
        usage();
    if (ctl_path == NULL)
        ctl_path = getenv("FAKETIME_TIMESTAMP_FILE");
    start_ns = now_ns(CLOCK_REALTIME);

    int go[2], allowed[2]; /* tracer → program: attached; program → tracer: you may attach (Yama) */
    if (pipe(go) != 0 || pipe(allowed) != 0) {
        perror("clocktrace: pipe");
        return 126;
    }
    pid_t program = getpid();
    pid_t tracer = fork();
    if (tracer < 0) {
        perror("clocktrace: fork");
        return 126;
    }
    if (tracer == 0) {
        /* the tracer: out of the program's session and process group (a SIGSTOP of the group must not
           freeze it), attached to its parent before the parent execs */
        close(go[0]);
        close(allowed[1]);
        setsid();
        char ok = 1;
        if (read(allowed[0], &ok, 1) != 1)
            _exit(126); /* the program is gone */
        close(allowed[0]);
        long opts = PTRACE_O_TRACESECCOMP | PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |
                    PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL;
        if (ptrace(PTRACE_SEIZE, program, NULL, (void *)opts) != 0) {
            fprintf(stderr, "clocktrace: cannot trace pid %d: %s\n", program, strerror(errno));
            ok = 0;
        }
        if (write(go[1], &ok, 1) != 1 || !ok)
            _exit(126);
        close(go[1]);
        refresh();
        _exit(trace(program));
    }
    /* the program: let the tracer attach (Yama), wait for it, filter, exec */
    close(go[1]);
    close(allowed[0]);
    prctl(PR_SET_PTRACER, tracer, 0, 0, 0); /* under Yama a child may not trace its parent unless allowed */
    char ok = 1;
    if (write(allowed[1], &ok, 1) != 1) {
        perror("clocktrace: the tracer is gone");
        return 126;
    }
    close(allowed[1]);
    ok = 0;
    ssize_t n;
    do
        n = read(go[0], &ok, 1);
    while (n < 0 && errno == EINTR);
    close(go[0]);
    if (n != 1 || !ok) {
        fprintf(stderr, "clocktrace: the tracer could not attach; not starting %s\n", argv[i]);
        return 126;
    }
    if (install_filter() != 0) {
        fprintf(stderr, "clocktrace: cannot install the seccomp filter: %s\n", strerror(errno));
        return 126;
    }
    clean_environment();
    execvp(argv[i], argv + i);
    fprintf(stderr, "clocktrace: cannot run %s: %s\n", argv[i], strerror(errno));
    return 127;
}
