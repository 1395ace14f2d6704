// pbs.hpp from C++: RAII, capturing lambdas as tasks, errors as exceptions. Prints one line
// per check and a checksum line per scheduler and thread count; exits non-zero on a failed
// check. Built and run by c_programs.rs with g++ and clang++, -Wall -Wextra -Werror -pedantic.
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "pbs.hpp"

static int failures = 0;

static void expect(bool ok, const std::string &what) {
    std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
    if (!ok) ++failures;
}

// A Jacobi sweep on nx * ny boxes of s * s cells, as nested vectors a C++ code would keep.
struct field {
    std::size_t nx, ny, s;
    std::vector<std::vector<double>> old_tiles, new_tiles;

    field(std::size_t nx_, std::size_t ny_, std::size_t s_)
        : nx(nx_), ny(ny_), s(s_), old_tiles(nx * ny, std::vector<double>(s * s, 0.0)), new_tiles(old_tiles) {
        for (std::size_t k = 0; k < nx * ny; ++k)
            if (k % nx < 2 && k / nx < 2) old_tiles[k].assign(s * s, 100.0);
    }
    double at(long x, long y) const {
        long w = static_cast<long>(nx * s), h = static_cast<long>(ny * s);
        x = x < 0 ? 0 : (x >= w ? w - 1 : x);
        y = y < 0 ? 0 : (y >= h ? h - 1 : y);
        std::size_t ux = static_cast<std::size_t>(x), uy = static_cast<std::size_t>(y);
        return old_tiles[(uy / s) * nx + ux / s][(uy % s) * s + ux % s];
    }
};

static unsigned long long checksum(const field &f) {
    unsigned long long h = 0xcbf29ce484222325ull;
    for (const auto &tile : f.old_tiles)
        for (double v : tile) {
            unsigned long long bits;
            std::memcpy(&bits, &v, sizeof bits);
            h = (h ^ bits) * 0x100000001b3ull;
        }
    return h;
}

int main() {
    const char *schedulers[] = {"pbs", "ws", "eager", "static"};
    for (const char *name : schedulers)
        for (std::size_t threads = 1; threads <= 3; ++threads) {
            field f(12, 10, 6);
            pbs::executor exec(name, f.nx, f.ny, 1, threads, pbs::pinning::off);
            exec.hint_iterations_left(30);  // every scheduler takes it
            for (int it = 0; it < 30; ++it) {
                exec.run_phase([&f](std::size_t k) {  // captures the field: no context struct
                    long bx = static_cast<long>((k % f.nx) * f.s), by = static_cast<long>((k / f.nx) * f.s);
                    for (std::size_t c = 0; c < f.s * f.s; ++c) {
                        long x = bx + static_cast<long>(c % f.s), y = by + static_cast<long>(c / f.s);
                        f.new_tiles[k][c] = 0.25 * (f.at(x - 1, y) + f.at(x + 1, y) + f.at(x, y - 1) + f.at(x, y + 1));
                    }
                });
                std::swap(f.old_tiles, f.new_tiles);
                exec.end_iteration();
            }
            double heat = exec.reduce_sum([&f](std::size_t k) {
                double sum = 0.0;
                for (double v : f.old_tiles[k]) sum += v;
                return sum;
            });
            double serial = 0.0;
            for (std::size_t k = 0; k < f.nx * f.ny; ++k) {
                double sum = 0.0;
                for (double v : f.old_tiles[k]) sum += v;
                serial += sum;
            }
            std::printf("checksum scheduler=%s threads=%zu value=%016llx heat=%.12e\n", name, exec.threads(),
                        checksum(f), heat);
            expect(heat == serial, std::string(name) + ": reduce_sum adds in box order");
            expect(std::fabs(heat - 4 * 36 * 100.0) < 1e-9 * heat, std::string(name) + ": the walls keep the heat");
        }

    pbs::executor exec("pbs", 8, 8, 1, 2, pbs::pinning::off);
    // An exception from a task: every other box still runs, the same exception comes back.
    std::vector<int> ran(64, 0);
    try {
        exec.run_phase([&ran](std::size_t k) {
            ran[k] = 1;
            if (k == 7 || k == 40) throw std::domain_error("box " + std::to_string(k) + " went wrong");
        });
        expect(false, "a throwing task throws from run_phase");
    } catch (const std::domain_error &e) {
        std::string what = e.what();
        expect(what == "box 7 went wrong" || what == "box 40 went wrong", "the task's own exception: " + what);
    }
    int count = 0;
    for (int r : ran) count += r;
    expect(count == 64, "every other box ran");
    std::vector<int> twice(64, 0);
    exec.run_phase_ranges([&twice](std::size_t begin, std::size_t end) {
        for (std::size_t k = begin; k < end; ++k) twice[k] += 2;
    });
    bool all_twice = true;
    for (int t : twice) all_twice = all_twice && t == 2;
    expect(all_twice, "run_phase_ranges covers every box once");
    expect(exec.run_phase([](std::size_t) {}).efficiency >= 0.0, "the executor is usable after a throwing task");

    // A task returning non-zero fails the phase as in C.
    try {
        exec.run_phase([](std::size_t k) { return k == 3 ? 9 : 0; });
        expect(false, "a failing task throws");
    } catch (const pbs::error &e) {
        expect(e.status() == PBS_TASK_FAILED && std::string(e.what()).find("box 3") != std::string::npos,
               std::string("PBS_TASK_FAILED naming the box: ") + e.what());
    }
    try {
        exec.reduce_sum([](std::size_t k) -> double {
            if (k == 5) throw std::out_of_range("no value for box 5");
            return 1.0;
        });
        expect(false, "a throwing value throws from reduce_sum");
    } catch (const std::out_of_range &e) {
        expect(std::string(e.what()) == "no value for box 5", "reduce_sum rethrows the value's exception");
    }

    // Bad input: pbs::error with the status and message of pbs.h.
    try {
        pbs::executor bad("omp", 4, 4);
        expect(false, "an unknown scheduler throws");
    } catch (const pbs::error &e) {
        expect(e.status() == PBS_INVALID_ARGUMENT && std::string(e.what()).find("unknown executor") != std::string::npos,
               std::string("an unknown scheduler: ") + e.what());
    }
    // Settings in code, by the environment variables' names.
    {
        pbs::executor tuned("pbs", {"PBS_TOL=0.01", "PBS_CRITERION=periodic:4"}, 4, 4, 1, 2, pbs::pinning::off);
        expect(tuned.boxes() == 16 && tuned.threads() == 2, "an executor with settings in code");
    }
    try {
        pbs::executor bad("pbs", {"PBS_CRITERION=sometimes"}, 4, 4, 1, 2, pbs::pinning::off);
        expect(false, "a bad setting throws");
    } catch (const pbs::error &e) {
        expect(e.status() == PBS_INVALID_ARGUMENT && std::string(e.what()).find("PBS_CRITERION") != std::string::npos,
               std::string("a bad setting: ") + e.what());
    }
    // Motion hints: "norcb" takes them, the others say they have no use for them.
    {
        pbs::executor norcb("norcb", 4, 4, 2, 2, pbs::pinning::off);
        pbs::executor ws("ws", 4, 4, 2, 2, pbs::pinning::off);
        std::vector<double> momentum(3 * 32, 0.0), particles(32, 1.0);
        for (std::size_t k = 0; k < 32; ++k) momentum[3 * k] = 0.5;  // all along x
        expect(norcb.hint_motion(momentum, particles), "norcb takes motion hints");
        expect(!ws.hint_motion(momentum, particles), "ws has no use for them");
        try {
            particles.pop_back();
            norcb.hint_motion(momentum, particles);
            expect(false, "motion hints of the wrong length throw");
        } catch (const pbs::error &e) {
            expect(e.status() == PBS_INVALID_ARGUMENT, std::string("motion hints: ") + e.what());
        }
    }
    try {
        pbs::executor ws("ws", 4, 4, 1, 2, pbs::pinning::off);
        ws.owners();
        expect(false, "owners of ws throws");
    } catch (const pbs::error &e) {
        expect(e.status() == PBS_UNSUPPORTED, std::string("owners of ws: ") + e.what());
    }

    // Moves: one owner of the handle at a time, freed once.
    pbs::executor moved = std::move(exec);
    expect(moved.boxes() == 64 && moved.threads() == 2, "a moved executor keeps its pool");
    std::vector<std::uint32_t> owners = moved.owners();
    expect(owners.size() == 64, "owners of every box");
    int seen = 0;
    moved.on_each_thread([&seen](std::size_t) {
        static std::mutex m;
        std::lock_guard<std::mutex> lock(m);
        ++seen;
    });
    expect(seen == 2, "on_each_thread runs once per worker");
    try {
        exec.end_iteration();
        expect(false, "a moved-from executor throws");
    } catch (const pbs::error &e) {
        expect(e.status() == PBS_NULL_POINTER, std::string("a moved-from executor: ") + e.what());
    }

    // The balancer alone, and the tiling helpers.
    pbs::partitioner part(20, 20, 1, 4);
    std::vector<double> loads(400, 1.0);
    for (std::size_t k = 0; k < 40; ++k) loads[k] = 8.0;
    std::vector<std::uint32_t> parts;
    pbs_outcome out = part.balance(loads, parts, 0.05, 500);
    expect(out.converged == 1 && parts.size() == 400, "the partitioner balances a heavy strip");
    std::pair<std::size_t, std::size_t> grid = pbs::tiling_grid(100, 30, 100, 8);
    pbs::tile last = pbs::tiling_cells(100, 30, 100, 8, 3);
    expect(grid.first == 1 && grid.second == 4 && last.y0 == 24 && last.y1 == 30, "whole-row tiles, the last one ragged");
    try {
        pbs::tiling_grid(100, 30, 0, 8);
        expect(false, "a zero tile throws");
    } catch (const pbs::error &e) {
        expect(e.status() == PBS_INVALID_ARGUMENT, std::string("a zero tile: ") + e.what());
    }
    const std::array<std::size_t, 3> cells = {{64, 64, 30}}, tile = {{16, 16, 8}};
    std::array<std::size_t, 3> grid_3d = pbs::tiling_grid_3d(cells, tile);
    pbs::tile_3d deepest = pbs::tiling_cells_3d(cells, tile, 63);
    expect(grid_3d[0] == 4 && grid_3d[1] == 4 && grid_3d[2] == 4 && deepest.lo[2] == 24 && deepest.hi[2] == 30,
           "3D tiles, the last layer ragged");
    try {
        pbs::tiling_cells_3d(cells, tile, 64);
        expect(false, "a box out of range throws");
    } catch (const pbs::error &e) {
        expect(e.status() == PBS_INVALID_ARGUMENT, std::string("box 64 of 64: ") + e.what());
    }

    std::printf("%s\n", failures ? "SOME CHECKS FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
