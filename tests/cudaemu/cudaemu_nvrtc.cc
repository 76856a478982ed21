/*
 * weft's CUDA emulator (tests/cudaemu): NVRTC and the runtime's library API, so that a kernel the CUDA
 * plugin writes at run time runs on the CPU. nvrtcCompileProgram compiles the source with the build's
 * C++ compiler (CUEMU_HOST_CXX) against the emulator's device header into a shared object that has an
 * entry point per `extern "C" __global__ void NAME(` kernel; its "CUBIN" is that object behind a small
 * header, which cudaLibraryLoadData (in this process or another) writes to a temporary file and dlopens.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "cudaemu_impl.h"
#include "nvrtc.h"

extern char **environ;

#if !defined(CUEMU_HOST_CXX) || !defined(CUEMU_INCLUDE_DIR)
#error "cmake/cudaemu.cmake defines CUEMU_HOST_CXX (the C++ compiler) and CUEMU_INCLUDE_DIR (tests/cudaemu/include)"
#endif

struct _nvrtcProgram {
    std::string src, name;
    std::string log;
    std::vector<char> image; /* after a successful compilation: ImageHeader, then the shared object */
    bool virtual_arch;       /* compiled for compute_NN: no CUBIN, only "PTX" */
};

struct CUkern_st {
    cudaLibrary_t lib;
    std::string name;
    __cuemu_entry_fn entry;
};

struct CUlib_st {
    void *dl;
    const __cuemu_module_kernel *table; /* what the module's __cuemu_module_bind listed */
    std::vector<cudaKernel_t> kernels;  /* handed out by cudaLibraryGetKernel, freed at unload */
};

namespace {

/* ---- the module image: what nvrtcGetCUBIN gives and cudaLibraryLoadData takes ---------------------------- */

const char IMAGE_MAGIC[8] = {'C', 'U', 'E', 'M', 'U', 'S', 'O', '1'};
struct ImageHeader {
    char magic[8];
    uint32_t api_version; /* CUEMU_MODULE_API_VERSION of the headers it was compiled against */
    uint32_t reserved;
    uint64_t bytes; /* of the shared object that follows */
};
const uint64_t IMAGE_MAX = (uint64_t)1 << 30;
const size_t LOG_MAX = (size_t)4 << 20;

std::string tmp_base(void)
{
    const char *t = getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

std::string errstr(int e)
{
    char buf[128];
    return strerror_r(e, buf, sizeof buf); /* the GNU strerror_r: thread-safe, returns the message */
}

bool write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

bool read_file(const std::string &path, std::vector<char> *out, size_t skip)
{
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st;
    bool ok = fstat(fd, &st) == 0 && (uint64_t)st.st_size <= IMAGE_MAX;
    if (ok) out->resize(skip + (size_t)st.st_size);
    for (size_t got = 0; ok && got < (size_t)st.st_size;) {
        ssize_t r = read(fd, out->data() + skip + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) ok = false;
        else got += (size_t)r;
    }
    close(fd);
    return ok;
}

/* A fresh temporary directory and the files made in it, all removed when it goes. */
struct TmpDir {
    std::string path;
    std::vector<std::string> files;
    bool make(void)
    {
        std::string t = tmp_base() + "/cuemu-nvrtc-XXXXXX";
        if (!mkdtemp(&t[0])) return false;
        path = t;
        return true;
    }
    std::string file(const char *name)
    {
        files.push_back(path + "/" + name);
        return files.back();
    }
    ~TmpDir()
    {
        for (auto &f : files) unlink(f.c_str());
        if (!path.empty()) rmdir(path.c_str());
    }
};

/* Runs args[0] (searched on PATH if it has no slash), stdout and stderr into *out (up to LOG_MAX bytes),
 * stdin from /dev/null: its exit status, or -1 with the reason in *out when it could not run. posix_spawn,
 * not system(): no shell parses the arguments, and no fork of a big multithreaded process. */
int run_capture(const std::vector<std::string> &args, std::string *out)
{
    std::vector<char *> argv;
    for (auto &a : args) argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(NULL);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) { /* close-on-exec: children other threads spawn do not inherit it */
        *out += "cudaemu nvrtc: cannot make a pipe: " + errstr(errno) + "\n";
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    pid_t pid;
    int e = posix_spawnp(&pid, argv[0], &fa, NULL, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (e) {
        close(fds[0]);
        *out += "cudaemu nvrtc: cannot run the host compiler " + args[0] + ": " + errstr(e) + "\n";
        return -1;
    }
    char buf[4096];
    for (;;) {
        ssize_t r = read(fds[0], buf, sizeof buf);
        if (r > 0) {
            if (out->size() < LOG_MAX) out->append(buf, (size_t)r);
        } else if (r == 0 || errno != EINTR) {
            break;
        }
    }
    close(fds[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR) {
            *out += "cudaemu nvrtc: waiting for the host compiler: " + errstr(errno) + "\n";
            return -1;
        }
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* ---- programs ------------------------------------------------------------------------------------------- */

/* NVRTC lets threads compile different programs at once, and programs share nothing: this lock only
 * guards the set of live handles (a destroyed or foreign one is NVRTC_ERROR_INVALID_PROGRAM). It is not
 * the emulator's lock, as NVRTC needs no device; no lock is held while the compiler runs. */
pthread_mutex_t g_prog_mu = PTHREAD_MUTEX_INITIALIZER;
std::set<nvrtcProgram> g_progs;

bool prog_live(nvrtcProgram p)
{
    pthread_mutex_lock(&g_prog_mu);
    bool live = p && g_progs.count(p);
    pthread_mutex_unlock(&g_prog_mu);
    return live;
}

/* WEFT_CUDAEMU_NVRTC=0, read at each call: NVRTC is absent */
bool nvrtc_off(void)
{
    const char *e = getenv("WEFT_CUDAEMU_NVRTC");
    return e && *e == '0';
}

bool prefix(const char *s, const char *p, const char **rest)
{
    size_t n = strlen(p);
    if (strncmp(s, p, n)) return false;
    *rest = s + n;
    return true;
}

/* sm_NN or compute_NN (an a or f suffix allowed), any number */
bool parse_arch(const char *v, bool *virt)
{
    const char *d;
    if (prefix(v, "sm_", &d)) *virt = false;
    else if (prefix(v, "compute_", &d)) *virt = true;
    else return false;
    if (!isdigit((unsigned char)*d)) return false;
    while (isdigit((unsigned char)*d)) d++;
    if (*d == 'a' || *d == 'f') d++;
    return *d == 0;
}

struct Options {
    bool virtual_arch = false;
    bool fmad = true;
    const char *std = "-std=c++17";
};

/* The options the plugin passes; anything else is NVRTC_ERROR_INVALID_OPTION, named in the log. */
nvrtcResult parse_options(int n, const char *const *opts, Options *o, std::string *log)
{
    for (int i = 0; i < n; i++) {
        const char *s = opts[i], *v;
        if (!s) return NVRTC_ERROR_INVALID_INPUT;
        bool ok = true;
        if (prefix(s, "--gpu-architecture=", &v) || prefix(s, "-arch=", &v)) {
            ok = parse_arch(v, &o->virtual_arch);
        } else if (prefix(s, "--fmad=", &v) || prefix(s, "-fmad=", &v)) {
            ok = !strcmp(v, "true") || !strcmp(v, "false");
            o->fmad = !strcmp(v, "true");
        } else if (prefix(s, "--std=", &v) || prefix(s, "-std=", &v)) {
            /* the emulator's device header needs C++17: older dialects compile as C++17 */
            ok = !strcmp(v, "c++11") || !strcmp(v, "c++14") || !strcmp(v, "c++17") || !strcmp(v, "c++20");
            o->std = !strcmp(v, "c++20") ? "-std=c++20" : "-std=c++17";
        } else if (strcmp(s, "-default-device") && strcmp(s, "--device-as-default-execution-space")) {
            *log += std::string("nvrtc: error: unrecognized option '") + s +
                    "' (the emulator takes --gpu-architecture=/-arch=, --fmad=, --std=, -default-device)\n";
            return NVRTC_ERROR_INVALID_OPTION;
        }
        if (!ok) {
            *log += std::string("nvrtc: error: invalid value in option '") + s + "'\n";
            return NVRTC_ERROR_INVALID_OPTION;
        }
    }
    return NVRTC_SUCCESS;
}

bool ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

struct KernelDecl {
    std::string name;
    int line;
};

/* The kernels a module exports: each `extern "C" __global__ void [__launch_bounds__(...)] NAME(` outside
 * comments, once. */
std::vector<KernelDecl> scan_kernels(const std::string &src)
{
    std::string s = src;
    for (size_t i = 0; i < s.size();) { /* comments to blanks (newlines kept); string literals skipped */
        if (!s.compare(i, 2, "//")) {
            while (i < s.size() && s[i] != '\n') s[i++] = ' ';
        } else if (!s.compare(i, 2, "/*")) {
            size_t e = s.find("*/", i + 2);
            e = e == std::string::npos ? s.size() : e + 2;
            for (; i < e; i++)
                if (s[i] != '\n') s[i] = ' ';
        } else if (s[i] == '"' || s[i] == '\'') {
            char q = s[i++];
            while (i < s.size() && s[i] != q && s[i] != '\n') i += s[i] == '\\' ? 2 : 1;
            i++;
        } else {
            i++;
        }
    }
    auto ws = [&](size_t &i) {
        while (i < s.size() && isspace((unsigned char)s[i])) i++;
    };
    auto word = [&](size_t &i, const char *w) {
        size_t n = strlen(w);
        if (s.compare(i, n, w) || (i + n < s.size() && ident_char(s[i + n]))) return false;
        i += n;
        return true;
    };
    std::vector<KernelDecl> ks;
    for (size_t p = s.find("extern"); p != std::string::npos; p = s.find("extern", p + 1)) {
        size_t i = p;
        if ((p && ident_char(s[p - 1])) || !word(i, "extern")) continue;
        ws(i);
        if (s.compare(i, 3, "\"C\"")) continue;
        i += 3;
        ws(i);
        if (!word(i, "__global__")) continue;
        ws(i);
        if (!word(i, "void")) continue;
        ws(i);
        if (word(i, "__launch_bounds__")) {
            ws(i);
            if (i >= s.size() || s[i] != '(') continue;
            int depth = 0;
            for (; i < s.size(); i++) {
                depth += s[i] == '(' ? 1 : s[i] == ')' ? -1 : 0;
                if (!depth) break;
            }
            i++;
            ws(i);
        }
        size_t b = i;
        while (i < s.size() && ident_char(s[i])) i++;
        if (b == i || isdigit((unsigned char)s[b])) continue;
        std::string name = s.substr(b, i - b);
        ws(i);
        if (i >= s.size() || s[i] != '(') continue;
        bool seen = false;
        for (auto &k : ks) seen |= k.name == name;
        if (!seen) ks.push_back({name, 1 + (int)std::count(s.begin(), s.begin() + (long)p, '\n')});
    }
    return ks;
}

/* The program's name as diagnostics and launch errors show it (inside a string literal and #line). */
std::string literal_safe(const std::string &name)
{
    std::string r = name;
    for (char &c : r)
        if (!(isalnum((unsigned char)c) || strchr("._-+/ ", c))) c = '_';
    return r;
}

/* Appended to the source: an entry point per kernel that launches it from cudaLaunchKernel's argument
 * array through __cuemu_launch_argv (as a <<<>>> launch goes through __cuemu_launch), the table of
 * kernels, and __cuemu_module_bind, which cudaLibraryLoadData calls with the emulator's entry points. */
std::string trailer(const std::vector<KernelDecl> &ks, const std::string &file)
{
    std::string t = "\n#line 1 \"<cudaemu: module entry points>\"\n"
                    "extern \"C\" { const struct __cuemu_module_api *__cuemu_api; }\n";
    for (auto &k : ks)
        t += "extern \"C\" __attribute__((visibility(\"default\"))) cudaError_t __cuemu_entry_" + k.name +
             "(const char *__n, dim3 __g, dim3 __b, size_t __sh, cudaStream_t __s, void **__a)\n{\n"
             "    return __cuemu_launch_argv(__n, \"" + file + "\", " + std::to_string(k.line) +
             ", __g, __b, __sh, __s, " + k.name + ", __a);\n}\n";
    t += "static const struct __cuemu_module_kernel __cuemu_kernels[] = {";
    for (auto &k : ks) t += "{\"" + k.name + "\", __cuemu_entry_" + k.name + "}, ";
    t += "{0, 0}};\n"
         "extern \"C\" __attribute__((visibility(\"default\"))) const struct __cuemu_module_kernel *\n"
         "__cuemu_module_bind(const struct __cuemu_module_api *api)\n{\n"
         "    if (!api || api->version != CUEMU_MODULE_API_VERSION || api->size != sizeof *api) return 0;\n"
         "    __cuemu_api = api;\n"
         "    return __cuemu_kernels;\n}\n";
    return t;
}

nvrtcResult compile(nvrtcProgram prog, const Options &o)
{
    TmpDir dir;
    if (!dir.make()) {
        prog->log += "cudaemu nvrtc: cannot make a directory in " + tmp_base() + ": " + errstr(errno) + "\n";
        return NVRTC_ERROR_INTERNAL_ERROR;
    }
    std::string src = dir.file("module.cc"), so = dir.file("module.so"), file = literal_safe(prog->name);
    /* #line: the compiler's diagnostics name the program, as NVRTC's do, not the temporary file */
    std::string text = "#line 1 \"" + file + "\"\n" + prog->src + trailer(scan_kernels(prog->src), file);
    int fd = open(src.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    bool wrote = fd >= 0 && write_all(fd, text.data(), text.size());
    if (fd >= 0 && close(fd) != 0) wrote = false;
    if (!wrote) {
        prog->log += "cudaemu nvrtc: cannot write " + src + ": " + errstr(errno) + "\n";
        return NVRTC_ERROR_INTERNAL_ERROR;
    }
    /* -z defs: a module that would need an emulator symbol (not reached through the table) fails here,
     * not at load; x86-64's baseline has no FMA, so --fmad=true contracts nothing either */
    std::vector<std::string> args = {CUEMU_HOST_CXX, o.std, "-O2", "-fPIC", "-shared", "-fno-math-errno",
                                     "-fvisibility=hidden", "-fdiagnostics-color=never", "-D__CUEMU_MODULE=1",
                                     "-include", CUEMU_INCLUDE_DIR "/cuda_runtime.h", "-I" CUEMU_INCLUDE_DIR,
                                     "-Wl,-z,defs", "-o", so, src};
    if (!o.fmad) args.insert(args.begin() + 2, "-ffp-contract=off");
    int st = run_capture(args, &prog->log);
    if (st < 0) return NVRTC_ERROR_INTERNAL_ERROR;
    if (st != 0) {
        prog->log += "cudaemu nvrtc: " + prog->name + ": the host compiler failed (exit status " +
                     std::to_string(st) + ")\n";
        return NVRTC_ERROR_COMPILATION;
    }
    std::vector<char> image;
    if (!read_file(so, &image, sizeof(ImageHeader))) {
        prog->log += "cudaemu nvrtc: cannot read back " + so + "\n";
        return NVRTC_ERROR_INTERNAL_ERROR;
    }
    ImageHeader h;
    memcpy(h.magic, IMAGE_MAGIC, sizeof h.magic);
    h.api_version = CUEMU_MODULE_API_VERSION;
    h.reserved = 0;
    h.bytes = image.size() - sizeof h;
    memcpy(image.data(), &h, sizeof h);
    prog->image.swap(image);
    prog->virtual_arch = o.virtual_arch;
    return NVRTC_SUCCESS;
}

/* ---- libraries ------------------------------------------------------------------------------------------ */

/* The emulator's entry points, handed to each module (see __cuemu_module_api in cudaemu_device.h). */
const __cuemu_module_api g_module_api = {
    CUEMU_MODULE_API_VERSION, sizeof(__cuemu_module_api), &threadIdx, &blockIdx, &blockDim, &gridDim,
    __cuemu_dynsmem, __syncthreads, __syncthreads_count, __syncthreads_and, __syncthreads_or, __syncwarp,
    __activemask, __ballot_sync, __cuemu_shfl, __cuemu_trap, __cuemu_launch_begin, __cuemu_check_arg,
    __cuemu_launch_fail, __cuemu_run,
};

/* under the emulator's lock */
std::set<cudaLibrary_t> g_libs;
std::set<const void *> g_kernels;

struct EmuLock {
    EmuLock() { cuemu__lock(); }
    ~EmuLock() { cuemu__unlock(); }
};

} // namespace

extern "C" {

const char *nvrtcGetErrorString(nvrtcResult r)
{
    switch (r) {
#define N(x) case x: return #x;
    N(NVRTC_SUCCESS) N(NVRTC_ERROR_OUT_OF_MEMORY) N(NVRTC_ERROR_PROGRAM_CREATION_FAILURE)
    N(NVRTC_ERROR_INVALID_INPUT) N(NVRTC_ERROR_INVALID_PROGRAM) N(NVRTC_ERROR_INVALID_OPTION)
    N(NVRTC_ERROR_COMPILATION) N(NVRTC_ERROR_BUILTIN_OPERATION_FAILURE)
    N(NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION) N(NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION)
    N(NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID) N(NVRTC_ERROR_INTERNAL_ERROR) N(NVRTC_ERROR_TIME_FILE_WRITE_FAILED)
    N(NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED) N(NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED) N(NVRTC_ERROR_PCH_CREATE)
    N(NVRTC_ERROR_CANCELLED) N(NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED)
#undef N
    }
    return "NVRTC_ERROR unknown";
}

nvrtcResult nvrtcVersion(int *major, int *minor)
{
    if (nvrtc_off()) return NVRTC_ERROR_INTERNAL_ERROR;
    if (!major || !minor) return NVRTC_ERROR_INVALID_INPUT;
    *major = CUDART_VERSION / 1000;
    *minor = CUDART_VERSION % 1000 / 10;
    return NVRTC_SUCCESS;
}

static const int k_archs[] = {75, 80, 86, 89, 90, 100, 120};

nvrtcResult nvrtcGetNumSupportedArchs(int *n)
{
    if (nvrtc_off()) return NVRTC_ERROR_INTERNAL_ERROR;
    if (!n) return NVRTC_ERROR_INVALID_INPUT;
    *n = (int)(sizeof k_archs / sizeof k_archs[0]);
    return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetSupportedArchs(int *archs)
{
    if (nvrtc_off()) return NVRTC_ERROR_INTERNAL_ERROR;
    if (!archs) return NVRTC_ERROR_INVALID_INPUT;
    memcpy(archs, k_archs, sizeof k_archs);
    return NVRTC_SUCCESS;
}

nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog, const char *src, const char *name, int numHeaders,
                               const char *const *headers, const char *const *includeNames)
{
    (void)headers;
    (void)includeNames;
    if (nvrtc_off()) return NVRTC_ERROR_INTERNAL_ERROR;
    if (!prog) return NVRTC_ERROR_INVALID_PROGRAM;
    if (!src || numHeaders < 0) return NVRTC_ERROR_INVALID_INPUT;
    if (numHeaders > 0) {
        cuemu__diag("nvrtcCreateProgram: %d headers given; the emulator takes none (numHeaders must be 0)", numHeaders);
        return NVRTC_ERROR_INVALID_INPUT;
    }
    nvrtcProgram p = NULL;
    try {
        p = new _nvrtcProgram{src, name && *name ? name : "default_program", "", {}, false};
        pthread_mutex_lock(&g_prog_mu);
        try {
            g_progs.insert(p);
        } catch (...) {
            pthread_mutex_unlock(&g_prog_mu);
            throw;
        }
        pthread_mutex_unlock(&g_prog_mu);
    } catch (const std::bad_alloc &) {
        delete p;
        return NVRTC_ERROR_OUT_OF_MEMORY;
    }
    *prog = p;
    return NVRTC_SUCCESS;
}

nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog)
{
    if (!prog) return NVRTC_ERROR_INVALID_PROGRAM;
    pthread_mutex_lock(&g_prog_mu);
    bool live = *prog && g_progs.erase(*prog);
    pthread_mutex_unlock(&g_prog_mu);
    if (!live) return NVRTC_ERROR_INVALID_PROGRAM;
    delete *prog;
    *prog = NULL;
    return NVRTC_SUCCESS;
}

nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int numOptions, const char *const *options)
{
    if (nvrtc_off()) return NVRTC_ERROR_INTERNAL_ERROR;
    if (!prog_live(prog)) return NVRTC_ERROR_INVALID_PROGRAM;
    if (numOptions < 0 || (numOptions > 0 && !options)) return NVRTC_ERROR_INVALID_INPUT;
    try {
        prog->log.clear();
        std::vector<char>().swap(prog->image);
        Options o;
        nvrtcResult r = parse_options(numOptions, options, &o, &prog->log);
        return r ? r : compile(prog, o);
    } catch (const std::bad_alloc &) {
        std::vector<char>().swap(prog->image);
        return NVRTC_ERROR_OUT_OF_MEMORY;
    }
}

nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t *size)
{
    if (!prog_live(prog)) return NVRTC_ERROR_INVALID_PROGRAM;
    if (!size) return NVRTC_ERROR_INVALID_INPUT;
    *size = prog->log.size() + 1;
    return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char *log)
{
    if (!prog_live(prog)) return NVRTC_ERROR_INVALID_PROGRAM;
    if (!log) return NVRTC_ERROR_INVALID_INPUT;
    memcpy(log, prog->log.c_str(), prog->log.size() + 1);
    return NVRTC_SUCCESS;
}

/* The "PTX" is the image and a NUL (NVRTC's PTX size counts one); no output before a successful compilation. */
nvrtcResult nvrtcGetPTXSize(nvrtcProgram prog, size_t *size)
{
    if (!prog_live(prog) || prog->image.empty()) return NVRTC_ERROR_INVALID_PROGRAM;
    if (!size) return NVRTC_ERROR_INVALID_INPUT;
    *size = prog->image.size() + 1;
    return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetPTX(nvrtcProgram prog, char *ptx)
{
    if (!prog_live(prog) || prog->image.empty()) return NVRTC_ERROR_INVALID_PROGRAM;
    if (!ptx) return NVRTC_ERROR_INVALID_INPUT;
    memcpy(ptx, prog->image.data(), prog->image.size());
    ptx[prog->image.size()] = 0;
    return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t *size)
{
    if (!prog_live(prog) || prog->image.empty()) return NVRTC_ERROR_INVALID_PROGRAM;
    if (!size) return NVRTC_ERROR_INVALID_INPUT;
    *size = prog->virtual_arch ? 0 : prog->image.size();
    return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char *cubin)
{
    if (!prog_live(prog) || prog->image.empty()) return NVRTC_ERROR_INVALID_PROGRAM;
    if (!cubin) return NVRTC_ERROR_INVALID_INPUT;
    if (!prog->virtual_arch) memcpy(cubin, prog->image.data(), prog->image.size());
    return NVRTC_SUCCESS;
}

cudaError_t cudaLibraryLoadData(cudaLibrary_t *library, const void *code, enum cudaJitOption *jitOptions,
                                void **jitOptionsValues, unsigned int numJitOptions,
                                enum cudaLibraryOption *libraryOptions, void **libraryOptionValues,
                                unsigned int numLibraryOptions)
{
    {
        EmuLock l;
        if (cudaError_t e = cuemu__context_error()) return cuemu__fail(e);
    }
    if (!library || !code || (numJitOptions && (!jitOptions || !jitOptionsValues)) ||
        (numLibraryOptions && (!libraryOptions || !libraryOptionValues)))
        return cuemu__fail(cudaErrorInvalidValue);
    *library = NULL;
    /* the magic first, so that a short buffer of something else is read no further */
    ImageHeader h;
    if (memcmp(code, IMAGE_MAGIC, sizeof IMAGE_MAGIC)) {
        cuemu__diag("cudaLibraryLoadData: not a module from the emulator's NVRTC (a real CUBIN, PTX or fatbin "
                    "cannot run here)");
        return cuemu__fail(cudaErrorInvalidKernelImage);
    }
    memcpy(&h, code, sizeof h);
    if (h.api_version != CUEMU_MODULE_API_VERSION || !h.bytes || h.bytes > IMAGE_MAX) {
        cuemu__diag("cudaLibraryLoadData: a module for emulator module API %u (%llu bytes); this emulator has %u",
                    h.api_version, (unsigned long long)h.bytes, CUEMU_MODULE_API_VERSION);
        return cuemu__fail(cudaErrorInvalidKernelImage);
    }
    std::string path = tmp_base() + "/cuemu-module-XXXXXX";
    int fd = mkostemp(&path[0], O_CLOEXEC);
    if (fd < 0) {
        cuemu__diag("cudaLibraryLoadData: cannot make a file in %s: %s", tmp_base().c_str(), errstr(errno).c_str());
        return cuemu__fail(cudaErrorMemoryAllocation);
    }
    bool wrote = write_all(fd, (const char *)code + sizeof h, (size_t)h.bytes);
    if (close(fd) != 0) wrote = false;
    /* the real dlopen: the emulator's own refuses names with "libcuda.so" in them */
    void *dl = wrote ? cuemu__real_dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) : NULL;
    const char *why = wrote ? (dl ? NULL : dlerror()) : "cannot write the module";
    unlink(path.c_str()); /* the mapping stays */
    typedef const __cuemu_module_kernel *(*bind_fn)(const __cuemu_module_api *);
    bind_fn bind = NULL;
    if (dl) {
        void *sym = dlsym(dl, "__cuemu_module_bind");
        memcpy(&bind, &sym, sizeof sym);
    }
    const __cuemu_module_kernel *table = bind ? bind(&g_module_api) : NULL;
    if (!table) {
        cuemu__diag("cudaLibraryLoadData: %s", why ? why : "the module does not bind to this emulator");
        if (dl) dlclose(dl);
        return cuemu__fail(cudaErrorInvalidKernelImage);
    }
    CUlib_st *lib = new CUlib_st{dl, table, {}};
    {
        EmuLock l;
        g_libs.insert(lib);
    }
    *library = lib;
    return cudaSuccess;
}

cudaError_t cudaLibraryGetKernel(cudaKernel_t *pKernel, cudaLibrary_t library, const char *name)
{
    EmuLock l;
    if (cudaError_t e = cuemu__context_error()) return cuemu__fail(e);
    if (!pKernel || !name) return cuemu__fail(cudaErrorInvalidValue);
    if (!g_libs.count(library)) return cuemu__fail(cudaErrorInvalidResourceHandle);
    for (cudaKernel_t k : library->kernels)
        if (k->name == name) {
            *pKernel = k;
            return cudaSuccess;
        }
    for (const __cuemu_module_kernel *t = library->table; t->name; t++)
        if (!strcmp(t->name, name)) {
            cudaKernel_t k = new CUkern_st{library, name, t->entry};
            library->kernels.push_back(k);
            g_kernels.insert(k);
            *pKernel = k;
            return cudaSuccess;
        }
    cuemu__diag("cudaLibraryGetKernel: the module has no kernel %s (its kernels are the `extern \"C\" __global__ "
                "void NAME(` of its source)", name);
    return cuemu__fail(cudaErrorSymbolNotFound);
}

cudaError_t cudaLibraryUnload(cudaLibrary_t library)
{
    {
        EmuLock l;
        if (!g_libs.erase(library)) return cuemu__fail(cudaErrorInvalidResourceHandle);
        for (cudaKernel_t k : library->kernels) {
            g_kernels.erase(k);
            delete k;
        }
    }
    dlclose(library->dl); /* outside the lock: it takes the loader's, and runs the module's destructors */
    delete library;
    return cudaSuccess;
}

/* The entry point runs outside the emulator's lock, which __cuemu_launch_begin takes as a <<<>>> launch
 * does; a library unloaded by another thread meanwhile is the caller's race, as on a GPU. */
cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t sharedMem,
                             cudaStream_t stream)
{
    __cuemu_entry_fn entry;
    const char *name;
    {
        EmuLock l;
        if (!func || !g_kernels.count(func)) {
            cuemu__diag("cudaLaunchKernel: %p is not a kernel of a loaded library (the emulator launches only "
                        "cudaKernel_t handles this way)", func);
            return cuemu__fail(cudaErrorInvalidDeviceFunction);
        }
        cudaKernel_t k = (cudaKernel_t)const_cast<void *>(func);
        entry = k->entry;
        name = k->name.c_str();
    }
    return entry(name, grid, block, sharedMem, stream, args);
}

} // extern "C"
