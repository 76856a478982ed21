/*
 * Passive OpenMP waiting for the weft executables. libgomp's threads spin for about 3 ms after each
 * parallel region (GOMP_SPINCOUNT 300000) before they sleep. With another process on one of the
 * cores, a spinning worker has used its share of that core when the next region wakes it, so the
 * scheduler lets the other process finish its time slice first and every region waits milliseconds
 * at its barrier: `weft demo` took 108 ms a training step by default against 0.53 ms with --threads 1
 * (2 cores, one running a busy loop), 0.35-0.50 ms with OMP_WAIT_POLICY=PASSIVE. A thread that slept
 * is run at once when woken. libgomp reads its settings once, in its constructor, before main and
 * before any constructor of a library that links it, so this runs from the executable's
 * .preinit_array, which the dynamic loader calls before every shared library's initialisers. A user's
 * own OMP_WAIT_POLICY or GOMP_SPINCOUNT is left as it is. Programs that link libweft themselves set
 * OMP_WAIT_POLICY=PASSIVE in their environment for the same effect (README, "Threads").
 */
#include <stdlib.h>

static void weft_omp_passive(int argc, char **argv, char **envp)
{
    (void)argc, (void)argv, (void)envp;
    if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT")) setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
}

__attribute__((section(".preinit_array"), used)) static void (*const weft_omp_passive_entry)(int, char **, char **) =
    weft_omp_passive;
