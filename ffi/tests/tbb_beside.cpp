/*
 * pbs beside oneTBB in one process, through pbs.hpp: each iteration runs a pbs phase over
 * 64 x 64 boxes (a band of rows three times heavier), then a second loop over the boxes, either
 * as another pbs phase or as a tbb::parallel_for. TBB's threads start at its first loop, after
 * the executor, from the thread that drives it.
 *
 *   tbb_beside check
 *     Both loops give the same checksum, pinned and not; after a pinned executor TBB still
 *     counts every CPU of the process, and a thread of its own beside the caller may run on
 *     all of them, as the caller may (pbs pins its caller during phases only). Prints "all
 *     checks passed" last.
 *   tbb_beside compare [rounds=9] [iterations=400]
 *     Interleaved rounds of four variants, unpinned and pinned: the pure pbs program, and with the
 *     TBB loop, each under pbs's default wait policy and PBS_WAIT_POLICY=passive. Prints the
 *     medians and the medians of the per-round ratios to the pure pbs program; exit status 1
 *     when the program with the TBB loop under PBS_WAIT_POLICY=passive takes over 1.1 x the
 *     pure pbs program's time under the default policy (docs/coexistence.md).
 */
#include <sched.h>
#include <stdlib.h> /* setenv, unsetenv */

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pbs.hpp"

namespace {

const std::size_t N = 64;

/* About `units` x 0.04 us of arithmetic that the optimiser cannot remove. */
double work(unsigned units, double x) {
    volatile double v = x;
    for (unsigned i = 0; i < units * 10; ++i) v = v * 1.0000001 + (i & 7) * 1e-9;
    return v;
}

struct state {
    std::vector<double> field = std::vector<double>(N * N, 1.0);
    std::vector<double> diag = std::vector<double>(N * N, 0.0);
};

void first(state &s, std::size_t k) {
    std::size_t y = k / N;
    s.field[k] = work(y >= 16 && y < 37 ? 12 : 4, s.field[k]);
}

void second(state &s, std::size_t k) { s.diag[k] += work(2, s.field[k]) * 1e-6; }

/* Milliseconds per iteration, the second loop through TBB or pbs. */
double run(pbs::executor &exec, state &s, int iterations, bool tbb_loop) {
    auto start = std::chrono::steady_clock::now();
    for (int it = 0; it < iterations; ++it) {
        exec.run_phase([&](std::size_t k) { first(s, k); });
        if (tbb_loop)
            tbb::parallel_for(std::size_t(0), N * N, [&](std::size_t k) { second(s, k); });
        else
            exec.run_phase([&](std::size_t k) { second(s, k); });
        exec.end_iteration();
    }
    std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
    return ms.count() / iterations;
}

std::uint64_t checksum(const state &s) {
    std::uint64_t h = 1469598103934665603ull;
    for (double d : s.diag) {
        std::uint64_t bits;
        std::memcpy(&bits, &d, sizeof bits);
        h = (h ^ bits) * 1099511628211ull;
    }
    return h;
}

std::size_t cpus_of_this_thread() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    return static_cast<std::size_t>(CPU_COUNT(&set));
}

int failures = 0;

void expect(bool ok, const std::string &what) {
    std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
    if (!ok) ++failures;
}

int check() {
    std::size_t process = cpus_of_this_thread();
    // First, before anything else of TBB runs in this process: TBB sizes its arena and starts
    // its threads from the thread that calls it first, which a pinned executor leaves on every
    // CPU of the process between phases.
    pbs::executor pinned("pbs", N, N, 1, 2, pbs::pinning::workers);
    state before;
    run(pinned, before, 3, false);
    int concurrency = tbb::info::default_concurrency();
    std::mutex lock;
    std::set<std::size_t> widths;
    std::set<std::thread::id> ran;
    // Two bodies, the first waiting (2 s at most) for the second to start: a thread of TBB's
    // other than the caller must take it.
    std::atomic<int> started{0};
    tbb::parallel_for(
        tbb::blocked_range<int>(0, 2, 1),
        [&](const tbb::blocked_range<int> &) {
            started.fetch_add(1);
            auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
            while (started.load() < 2 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
            std::size_t w = cpus_of_this_thread();
            std::lock_guard<std::mutex> g(lock);
            widths.insert(w);
            ran.insert(std::this_thread::get_id());
        },
        tbb::simple_partitioner());
    std::printf("process_cpus=%zu tbb_default_concurrency=%d tbb_threads=%zu tbb_thread_cpus=", process, concurrency,
                ran.size());
    for (std::size_t w : widths) std::printf("%zu ", w);
    std::printf("\n");
    expect(concurrency == static_cast<int>(process), "TBB counts every CPU of the process after a pinned executor");
    expect(process < 2 || ran.size() == 2, "a thread of TBB's ran a body beside the caller");
    expect(widths.size() == 1 && *widths.begin() == process, "every thread of TBB may run on every CPU of the process");

    std::set<std::uint64_t> sums;
    for (int pin = 0; pin <= 1; ++pin) {
        for (bool tbb_loop : {false, true}) {
            state s;
            pbs::executor exec("pbs", N, N, 1, 2, static_cast<pbs::pinning>(pin));
            run(exec, s, 20, tbb_loop);
            std::printf("checksum pin=%d loop=%s value=%016llx\n", pin, tbb_loop ? "tbb" : "pbs",
                        static_cast<unsigned long long>(checksum(s)));
            sums.insert(checksum(s));
        }
    }
    expect(sums.size() == 1, "one checksum with the second loop in pbs or TBB, pinned or not");

    if (failures == 0) std::printf("all checks passed\n");
    return failures == 0 ? 0 : 1;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int compare(int rounds, int iterations) {
    const double limit = 1.1;
    tbb::global_control threads(tbb::global_control::max_allowed_parallelism, 2);
    int status = 0;
    for (int pin = 0; pin <= 1; ++pin) {
        // Two executors, pbs's default wait policy and PBS_WAIT_POLICY=passive (read when an
        // executor starts), taking turns with the other loop in pbs or in TBB.
        unsetenv("PBS_WAIT_POLICY");
        pbs::executor spinning("pbs", N, N, 1, 2, static_cast<pbs::pinning>(pin));
        setenv("PBS_WAIT_POLICY", "passive", 1);
        pbs::executor passive("pbs", N, N, 1, 2, static_cast<pbs::pinning>(pin));
        unsetenv("PBS_WAIT_POLICY");
        state s;
        run(spinning, s, iterations / 4, true); // TBB's threads started, the first mappings measured
        run(passive, s, iterations / 4, true);
        // Variants: 0 pure pbs, 1 with the TBB loop, 2 and 3 the same under the passive policy.
        std::vector<std::vector<double>> ms(4);
        std::vector<double> mixed_over_pure, passive_over_pure;
        for (int r = 0; r < rounds; ++r) {
            double t[4];
            for (int i = 0; i < 4; ++i) {
                int v = (i + r) % 4;
                t[v] = run(v < 2 ? spinning : passive, s, iterations, v % 2 == 1);
                ms[v].push_back(t[v]);
            }
            mixed_over_pure.push_back(t[1] / t[0]);
            passive_over_pure.push_back(t[3] / t[0]);
        }
        // What docs/coexistence.md recommends beside TBB's loops, PBS_WAIT_POLICY=passive,
        // is what the check holds to, against the pure program under pbs's default policy.
        double passive_ratio = median(passive_over_pure);
        bool over = passive_ratio > limit;
        std::printf("%s: pure pbs %.4f ms/iteration; with the TBB loop %.4f (%.3f x pure); under "
                    "PBS_WAIT_POLICY=passive %.4f (%.3f x pure pbs%s; pure under passive %.4f)\n",
                    pin ? "pinned" : "unpinned", median(ms[0]), median(ms[1]), median(mixed_over_pure),
                    median(ms[3]), passive_ratio, over ? ", OVER 1.1" : "", median(ms[2]));
        if (over) status = 1;
    }
    return status;
}

} // namespace

int main(int argc, char **argv) {
    std::string mode = argc > 1 ? argv[1] : "check";
    try {
        if (mode == "check") return check();
        if (mode == "compare")
            return compare(argc > 2 ? std::atoi(argv[2]) : 9, argc > 3 ? std::atoi(argv[3]) : 400);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "tbb_beside: %s\n", e.what());
        return 1;
    }
    std::fprintf(stderr, "usage: tbb_beside check | compare [rounds] [iterations]\n");
    return 2;
}
