/*
 * pbs.hpp: C++ over the C interface of pbs.h (C++11 and later), header only.
 *
 *   pbs::executor exec("pbs", nx, ny);                  // RAII: freed when it goes out of scope
 *   for (int it = 0; it < iters; ++it) {
 *       exec.run_phase([&](std::size_t k) { sweep(k); }); // any callable, capturing what it needs
 *       std::swap(old_field, new_field);
 *       exec.end_iteration();                           // pbs may rebalance here
 *   }
 *   double heat = exec.reduce_sum([&](std::size_t k) { return box_heat(k); });
 *
 * Errors are exceptions: a failing call throws pbs::error (its status() and what(), the message
 * of pbs_last_error()). An exception thrown by a task does not cross the C interface: the
 * first one is kept, every other box of the phase still runs, and run_phase rethrows it,
 * unchanged, once the phase is over; the executor stays usable. A task may also return an int:
 * non-zero fails the phase as in C (pbs::error with PBS_TASK_FAILED).
 */
#ifndef PBS_HPP
#define PBS_HPP

#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "pbs.h"

namespace pbs {

/* A failed call: its pbs_status and the message pbs_last_error() gave. */
class error : public std::runtime_error {
  public:
    error(pbs_status status, const std::string &message) : std::runtime_error(message), status_(status) {}
    pbs_status status() const noexcept { return status_; }

  private:
    pbs_status status_;
};

namespace detail {

inline void check(pbs_status status) {
    if (status != PBS_OK) {
        const char *message = pbs_last_error();
        throw error(status, message ? message : "pbs: a call failed without a message");
    }
}

/* After a constructor returned NULL. */
[[noreturn]] inline void throw_last_error() {
    check(pbs_last_error_status());
    throw error(PBS_INTERNAL_ERROR, "pbs: a constructor failed without recording why");
}

/* The first exception thrown by a callable while the workers call it concurrently. */
class first_exception {
  public:
    void keep() noexcept {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!caught_) caught_ = std::current_exception();
    }
    void rethrow_if_any() {
        if (caught_) std::rethrow_exception(caught_);
    }

  private:
    std::mutex mutex_;
    std::exception_ptr caught_;
};

/* A callable and where its exceptions go: the ctx of the C callbacks below. */
template <class F>
struct bound {
    F &f;
    first_exception thrown;
};

/* f(k) as a task's return code: void callables succeed, int callables return theirs. */
template <class F>
int call_task(F &f, std::size_t k, std::true_type /* returns void */) {
    f(k);
    return 0;
}
template <class F>
int call_task(F &f, std::size_t k, std::false_type) {
    return static_cast<int>(f(k));
}

template <class F>
int call_range(F &f, std::size_t begin, std::size_t end, std::true_type /* returns void */) {
    f(begin, end);
    return 0;
}
template <class F>
int call_range(F &f, std::size_t begin, std::size_t end, std::false_type) {
    return static_cast<int>(f(begin, end));
}

template <class F>
int task_trampoline(void *ctx, std::size_t k) noexcept {
    bound<F> *b = static_cast<bound<F> *>(ctx);
    try {
        return call_task(b->f, k, std::is_void<decltype(b->f(k))>());
    } catch (...) {
        b->thrown.keep();
        return -1;
    }
}

template <class F>
int range_trampoline(void *ctx, std::size_t begin, std::size_t end) noexcept {
    bound<F> *b = static_cast<bound<F> *>(ctx);
    try {
        return call_range(b->f, begin, end, std::is_void<decltype(b->f(begin, end))>());
    } catch (...) {
        b->thrown.keep();
        return -1;
    }
}

template <class F>
double value_trampoline(void *ctx, std::size_t k) noexcept {
    bound<F> *b = static_cast<bound<F> *>(ctx);
    try {
        return static_cast<double>(b->f(k));
    } catch (...) {
        b->thrown.keep();
        return 0.0;
    }
}

struct executor_free {
    void operator()(pbs_executor *e) const noexcept { pbs_executor_free(e); }
};
struct partitioner_free {
    void operator()(pbs_partitioner *p) const noexcept { pbs_partitioner_free(p); }
};

template <class F>
void worker_trampoline(void *ctx, std::size_t worker) noexcept {
    bound<F> *b = static_cast<bound<F> *>(ctx);
    try {
        b->f(worker);
    } catch (...) {
        b->thrown.keep();
    }
}

}  // namespace detail

/* Which threads an executor pins (PBS_PIN_* of pbs.h). */
enum class pinning { off = PBS_PIN_OFF, workers = PBS_PIN_WORKERS, workers_and_caller = PBS_PIN_WORKERS_AND_CALLER };

/* A worker pool running a callable once per box and phase (pbs_executor_* of pbs.h). Movable
   (a moved-from executor throws PBS_NULL_POINTER), not copyable; use it from one thread at a
   time, and not from inside its own tasks. */
class executor {
  public:
    /* `scheduler`: "pbs", "ws", "eager", "static" or a remapper ("rcb", "norcb", …: pbs.h);
       threads = 0 takes PBS_NUM_THREADS or one per core. Throws pbs::error on a bad argument
       or a refused resource. */
    executor(const std::string &scheduler, std::size_t nx, std::size_t ny, std::size_t nz = 1,
             std::size_t threads = 0, pinning pin = pinning::workers)
        : e_(pbs_executor_new(scheduler.c_str(), nx, ny, nz, threads, static_cast<int>(pin))), boxes_(nx * ny * nz) {
        if (!e_) detail::throw_last_error();
    }

    /* The same with pbs's settings in code, "NAME=value" by the names of their environment
       variables ({"PBS_TOL=0.01", "PBS_CRITERION=menon"}), before the environment's
       (pbs_executor_new_with). */
    executor(const std::string &scheduler, const std::vector<std::string> &settings, std::size_t nx, std::size_t ny,
             std::size_t nz = 1, std::size_t threads = 0, pinning pin = pinning::workers)
        : e_(new_with(scheduler, settings, nx, ny, nz, threads, pin)), boxes_(nx * ny * nz) {
        if (!e_) detail::throw_last_error();
    }

    std::size_t threads() const noexcept { return pbs_executor_threads(e_.get()); }
    std::size_t boxes() const noexcept { return boxes_; }

    /* Calls f(k) exactly once for every box k (concurrently: write box k's own data only),
       then returns. f returns void, or an int (non-zero: the phase fails). */
    template <class F>
    pbs_phase_stats run_phase(F &&f) {
        detail::bound<typename std::remove_reference<F>::type> b{f, {}};
        pbs_phase_stats stats{};
        pbs_status status = pbs_executor_run_phase(
            e_.get(), &detail::task_trampoline<typename std::remove_reference<F>::type>, &b, &stats);
        b.thrown.rethrow_if_any();
        detail::check(status);
        return stats;
    }

    /* Calls f(begin, end) for runs of boxes that cover every box once (as the scheduler groups
       them): one call per run for boxes too small for a call each. */
    template <class F>
    pbs_phase_stats run_phase_ranges(F &&f) {
        detail::bound<typename std::remove_reference<F>::type> b{f, {}};
        pbs_phase_stats stats{};
        pbs_status status = pbs_executor_run_phase_ranges(
            e_.get(), &detail::range_trampoline<typename std::remove_reference<F>::type>, &b, &stats);
        b.thrown.rethrow_if_any();
        detail::check(status);
        return stats;
    }

    /* The sum of f(k) over every box, added in box order: the same bits under every
       scheduler and thread count. */
    template <class F>
    double reduce_sum(F &&f, pbs_phase_stats *stats = nullptr) {
        detail::bound<typename std::remove_reference<F>::type> b{f, {}};
        double sum = 0.0;
        pbs_status status = pbs_executor_reduce_sum(
            e_.get(), &detail::value_trampoline<typename std::remove_reference<F>::type>, &b, &sum, stats);
        b.thrown.rethrow_if_any();
        detail::check(status);
        return sum;
    }

    /* Ends an iteration: "pbs" may rebalance. */
    pbs_iteration_end end_iteration() {
        pbs_iteration_end end{};
        detail::check(pbs_executor_end_iteration(e_.get(), &end));
        return end;
    }

    /* The run ends after `iterations` more end_iteration calls: "pbs" and the remappers
       start no rebalancing at the last one's end ("pbs" none the iterations left would not
       repay). */
    void hint_iterations_left(std::uint64_t iterations) {
        detail::check(pbs_executor_hint_iterations_left(e_.get(), iterations));
    }

    /* Calls f(worker) once on every worker thread (first-touch each worker's data). */
    template <class F>
    void on_each_thread(F &&f) {
        detail::bound<typename std::remove_reference<F>::type> b{f, {}};
        pbs_status status =
            pbs_executor_on_each_thread(e_.get(), &detail::worker_trampoline<typename std::remove_reference<F>::type>, &b);
        b.thrown.rethrow_if_any();
        detail::check(status);
    }

    /* Loads known in advance, one per box ("pbs" maps the boxes on them now). */
    void hint_loads(const std::vector<double> &loads) {
        detail::check(pbs_executor_hint_loads(e_.get(), loads.data(), loads.size()));
    }

    /* Motion hints for "norcb": per box, the sum of its particles' velocities (momentum: x, y,
       z of box 0, then of box 1...) and their number (particles). Returns false, telling
       nothing, for the schedulers that have no use for them (PBS_UNSUPPORTED); throws
       pbs::error on a wrong length or a bad value. */
    bool hint_motion(const std::vector<double> &momentum, const std::vector<double> &particles) {
        if (momentum.size() != 3 * particles.size()) {
            throw error(PBS_INVALID_ARGUMENT, "hint_motion: three momentum components per particle count");
        }
        pbs_status s = pbs_executor_hint_motion(e_.get(), momentum.data(), particles.data(), particles.size());
        if (s == PBS_UNSUPPORTED) {
            return false;
        }
        detail::check(s);
        return true;
    }

    /* The worker that runs each box next ("pbs" and "static"; pbs::error with
       PBS_UNSUPPORTED for "ws" and "eager"). */
    std::vector<std::uint32_t> owners() const {
        std::vector<std::uint32_t> owners(boxes_);
        detail::check(pbs_executor_owners(e_.get(), owners.data(), owners.size()));
        return owners;
    }

    /* The C handle, for the functions of pbs.h this class does not wrap. */
    pbs_executor *get() const noexcept { return e_.get(); }

  private:
    static pbs_executor *new_with(const std::string &scheduler, const std::vector<std::string> &settings, std::size_t nx,
                                  std::size_t ny, std::size_t nz, std::size_t threads, pinning pin) {
        std::vector<const char *> c;
        for (const std::string &s : settings) c.push_back(s.c_str());
        c.push_back(nullptr);
        return pbs_executor_new_with(scheduler.c_str(), nx, ny, nz, threads, static_cast<int>(pin), c.data());
    }

    std::unique_ptr<pbs_executor, detail::executor_free> e_;
    std::size_t boxes_;
};

/* The balancer alone: loads in, owners out (pbs_partitioner_* of pbs.h). Movable, not copyable. */
class partitioner {
  public:
    partitioner(std::size_t nx, std::size_t ny, std::size_t nz, std::size_t vcores, const std::string &method = "power-cells",
                std::uint64_t seed = 1)
        : p_(pbs_partitioner_new(nx, ny, nz, vcores, method.c_str(), seed)), boxes_(nx * ny * nz) {
        if (!p_) detail::throw_last_error();
    }

    /* Balances `loads` (one per box), warm-started from the previous call, and writes the
       owner of every box into `owners` (resized to the number of boxes); the first call's
       owners are refined box by box (see pbs_partitioner_balance in pbs.h). */
    pbs_outcome balance(const std::vector<double> &loads, std::vector<std::uint32_t> &owners, double tol = PBS_DEFAULT_TOL,
                        std::size_t max_steps = 1000) {
        owners.resize(boxes_);
        pbs_outcome outcome{};
        detail::check(pbs_partitioner_balance(p_.get(), loads.data(), loads.size(), tol, max_steps, owners.data(), &outcome));
        return outcome;
    }

  private:
    std::unique_ptr<pbs_partitioner, detail::partitioner_free> p_;
    std::size_t boxes_;
};

/* Box k's cells in a domain of cells_x * cells_y cut into tiles of tile_x * tile_y. */
struct tile {
    std::size_t x0, x1, y0, y1;
};

/* The grid of boxes (nx, ny) for such a tiling. */
inline std::pair<std::size_t, std::size_t> tiling_grid(std::size_t cells_x, std::size_t cells_y, std::size_t tile_x,
                                                       std::size_t tile_y) {
    std::size_t nx = 0, ny = 0;
    detail::check(pbs_tiling_grid(cells_x, cells_y, tile_x, tile_y, &nx, &ny));
    return std::make_pair(nx, ny);
}

inline tile tiling_cells(std::size_t cells_x, std::size_t cells_y, std::size_t tile_x, std::size_t tile_y, std::size_t k) {
    tile t{};
    detail::check(pbs_tiling_cells(cells_x, cells_y, tile_x, tile_y, k, &t.x0, &t.x1, &t.y0, &t.y1));
    return t;
}

/* In 3D (x, y, z): box k's cells lo[a] <= c < hi[a] along each axis a. */
struct tile_3d {
    std::array<std::size_t, 3> lo, hi;
};

/* The grid of boxes for cells[0..3] cells in tiles of tile[0..3]. */
inline std::array<std::size_t, 3> tiling_grid_3d(const std::array<std::size_t, 3> &cells,
                                                 const std::array<std::size_t, 3> &tile) {
    std::array<std::size_t, 3> grid{};
    detail::check(pbs_tiling_grid_3d(cells.data(), tile.data(), grid.data()));
    return grid;
}

inline tile_3d tiling_cells_3d(const std::array<std::size_t, 3> &cells, const std::array<std::size_t, 3> &tile,
                               std::size_t k) {
    tile_3d t{};
    detail::check(pbs_tiling_cells_3d(cells.data(), tile.data(), k, t.lo.data(), t.hi.data()));
    return t;
}

}  // namespace pbs

#endif /* PBS_HPP */
