! pbs.f90: the Fortran interface to pbs (module pbs), over the C interface of pbs.h through
! ISO_C_BINDING. Compile it with your code; a .mod file belongs to one compiler version, so
! none is shipped:
!
!     gfortran -O2 -c pbs.f90          (then your files, which `use pbs`)
!     gfortran ... -lpbs_ffi           (the build tree's library; an installed copy, libpbs,
!                                       is $(pkg-config --libs pbs), or CMake's find_package(pbs)
!                                       with pbs_FORTRAN_SOURCE: ffi/examples/cmake-fortran)
!
! Everything is as in pbs.h (read it for what each call does), with these Fortran rules:
!
! * Sizes and box indices are integer(c_size_t) and handles type(c_ptr), as in C (the
!   constructors pbs_executor_create and pbs_executor_create_with take default integers too,
!   with nz, threads and pin optional). Box k is the C index, from 0: in 2D, column
!   i = mod(k, nx) + 1 and row j = k / nx + 1 of a Fortran array indexed from 1.
! * A task is a bind(C) function called by several threads at once. Declare it RECURSIVE
!   (or compile with -frecursive or -fopenmp): gfortran otherwise may give its large local
!   arrays one static copy that the threads share. Its local arrays then live on the stack of
!   the thread that runs it: the calling thread's (ulimit -s) and the workers' (PBS_STACKSIZE
!   or OMP_STACKSIZE, else ulimit -s); large ones need both raised, as under OpenMP, or an
!   overflow ends the program with a segmentation fault (16 MB of locals did, at 8 MB). Do
!   not initialise a local variable in its declaration (that makes it SAVE: one copy for all
!   threads). Each call writes only box k's data. Pass it with c_funloc(task), its data as
!   c_loc(x) of a TARGET (ctx), or reach module variables and pass c_null_ptr. A task returns
!   0, or non-zero to fail the phase.
! * Strings go in as Fortran strings (pbs_executor_create, pbs_executor_create_with,
!   pbs_partitioner_create); pbs_error_message() returns the last error as a Fortran string,
!   pbs_library_version() the library's version (PBS_VERSION_STRING is this module's).
! * pbs_status values are integer(c_int); owners are integer(c_int32_t) holding C's uint32_t.
!
! Example: ffi/examples/heat.f90. Tested with gfortran -std=f2018 -Wall -Wextra -Werror and
! LLVM Flang 19 -std=f2018 (ffi/tests/fortran_api.f90).
module pbs
    use, intrinsic :: iso_c_binding, only: c_associated, c_char, c_double, c_f_pointer, c_funptr, &
                                           c_int, c_int32_t, c_int64_t, c_loc, c_null_char, c_null_ptr, &
                                           c_ptr, c_size_t
    implicit none
    private

    ! pbs_status
    integer(c_int), parameter, public :: PBS_OK = 0, PBS_INVALID_ARGUMENT = 1, PBS_NULL_POINTER = 2, &
                                         PBS_UNSUPPORTED = 3, PBS_INTERNAL_ERROR = 4, PBS_TASK_FAILED = 5, &
                                         PBS_BUSY = 6, PBS_OUT_OF_RESOURCES = 7
    ! The `pin` argument of pbs_executor_create.
    integer(c_int), parameter, public :: PBS_PIN_OFF = 0, PBS_PIN_WORKERS = 1, PBS_PIN_WORKERS_AND_CALLER = 2
    real(c_double), parameter, public :: PBS_DEFAULT_TOL = 0.05_c_double
    ! The version of this module, as pbs.h's PBS_VERSION_*.
    integer, parameter, public :: PBS_VERSION_MAJOR = 0, PBS_VERSION_MINOR = 1, PBS_VERSION_PATCH = 0
    character(len=*), parameter, public :: PBS_VERSION_STRING = '0.1.0'

    ! How a balancing ended.
    type, bind(C), public :: pbs_outcome
        integer(c_size_t) :: steps
        integer(c_int) :: converged
        real(c_double) :: max_avg, lower_bound, dol_max, dol_min
        integer(c_size_t) :: edge_cut, migrations
        real(c_double) :: elapsed_ms
    end type pbs_outcome

    ! What one phase did.
    type, bind(C), public :: pbs_phase_stats
        real(c_double) :: wall_ms, efficiency, affinity
    end type pbs_phase_stats

    ! What happened between two iterations.
    type, bind(C), public :: pbs_iteration_end
        integer(c_int) :: rebalanced
        real(c_double) :: rebalance_ms
        integer(c_size_t) :: migrations
        real(c_double) :: max_avg
    end type pbs_iteration_end

    ! The procedures c_funloc may hand to pbs, by the C type they stand for.
    abstract interface
        ! pbs_task: box `box` of the phase; 0, or non-zero on failure.
        integer(c_int) function pbs_task(ctx, box) bind(C)
            import :: c_int, c_ptr, c_size_t
            type(c_ptr), value :: ctx
            integer(c_size_t), value :: box
        end function pbs_task
        ! pbs_range_task: boxes first .. past - 1.
        integer(c_int) function pbs_range_task(ctx, first, past) bind(C)
            import :: c_int, c_ptr, c_size_t
            type(c_ptr), value :: ctx
            integer(c_size_t), value :: first, past
        end function pbs_range_task
        ! The value of box `box` that pbs_executor_reduce_sum adds up.
        real(c_double) function pbs_box_value(ctx, box) bind(C)
            import :: c_double, c_ptr, c_size_t
            type(c_ptr), value :: ctx
            integer(c_size_t), value :: box
        end function pbs_box_value
        ! What pbs_executor_on_each_thread runs on worker `worker`.
        subroutine pbs_worker_task(ctx, worker) bind(C)
            import :: c_ptr, c_size_t
            type(c_ptr), value :: ctx
            integer(c_size_t), value :: worker
        end subroutine pbs_worker_task
    end interface
    public :: pbs_task, pbs_range_task, pbs_box_value, pbs_worker_task

    public :: pbs_error_message, pbs_library_version, pbs_executor_create, pbs_executor_create_with, &
              pbs_partitioner_create

    ! pbs_executor_new and pbs_executor_new_with, as pbs.hpp's constructors:
    !     e = pbs_executor_create(scheduler, nx, ny [, nz, threads, pin])
    !     e = pbs_executor_create_with(scheduler, settings, nx, ny [, nz, threads, pin])
    ! nz 1, threads 0 (PBS_NUM_THREADS, else a worker per core) and pin PBS_PIN_WORKERS where
    ! not given; the sizes of the default integer kind or all of kind c_size_t; `settings` the
    ! "pbs" scheduler's settings as "NAME=value" strings (trailing blanks dropped), e.g.
    ! [character(len=16) :: 'PBS_TOL=0.01', 'PBS_STEAL=never']. A null pointer (c_associated
    ! is false) on error: pbs_error_message() says why.
    interface pbs_executor_create
        module procedure executor_create, executor_create_default_kind
    end interface pbs_executor_create
    interface pbs_executor_create_with
        module procedure executor_create_with, executor_create_with_default_kind
    end interface pbs_executor_create_with
    public :: pbs_last_error_status, pbs_partitioner_balance, pbs_partitioner_free
    public :: pbs_executor_threads, pbs_executor_run_phase, pbs_executor_run_phase_ranges, &
              pbs_executor_reduce_sum, pbs_executor_end_iteration, pbs_executor_hint_iterations_left, &
              pbs_executor_on_each_thread, &
              pbs_executor_hint_loads, pbs_executor_hint_motion, pbs_executor_owners, pbs_current_worker, &
              pbs_executor_free
    public :: pbs_mapper_new, pbs_mapper_owners, pbs_mapper_victims, pbs_mapper_end_iteration, pbs_mapper_free, &
              pbs_mapper_hint_iterations_left
    public :: pbs_tiling_grid, pbs_tiling_cells, pbs_tiling_grid_3d, pbs_tiling_cells_3d

    interface
        integer(c_int) function pbs_last_error_status() bind(C, name="pbs_last_error_status")
            import :: c_int
        end function pbs_last_error_status

        integer(c_int) function pbs_partitioner_balance(p, loads, n_loads, tol, max_steps, owners, outcome) &
            bind(C, name="pbs_partitioner_balance")
            import :: c_int, c_ptr, c_size_t, c_double, c_int32_t, pbs_outcome
            type(c_ptr), value :: p
            real(c_double), intent(in) :: loads(*)
            integer(c_size_t), value :: n_loads, max_steps
            real(c_double), value :: tol
            integer(c_int32_t), intent(out) :: owners(*)
            type(pbs_outcome), intent(out), optional :: outcome
        end function pbs_partitioner_balance

        subroutine pbs_partitioner_free(p) bind(C, name="pbs_partitioner_free")
            import :: c_ptr
            type(c_ptr), value :: p
        end subroutine pbs_partitioner_free

        integer(c_size_t) function pbs_executor_threads(e) bind(C, name="pbs_executor_threads")
            import :: c_ptr, c_size_t
            type(c_ptr), value :: e
        end function pbs_executor_threads

        integer(c_int) function pbs_executor_run_phase(e, task, ctx, stats) bind(C, name="pbs_executor_run_phase")
            import :: c_int, c_ptr, c_funptr, pbs_phase_stats
            type(c_ptr), value :: e, ctx
            type(c_funptr), value :: task
            type(pbs_phase_stats), intent(out), optional :: stats
        end function pbs_executor_run_phase

        integer(c_int) function pbs_executor_run_phase_ranges(e, task, ctx, stats) &
            bind(C, name="pbs_executor_run_phase_ranges")
            import :: c_int, c_ptr, c_funptr, pbs_phase_stats
            type(c_ptr), value :: e, ctx
            type(c_funptr), value :: task
            type(pbs_phase_stats), intent(out), optional :: stats
        end function pbs_executor_run_phase_ranges

        integer(c_int) function pbs_executor_reduce_sum(e, value, ctx, sum, stats) &
            bind(C, name="pbs_executor_reduce_sum")
            import :: c_int, c_ptr, c_funptr, c_double, pbs_phase_stats
            type(c_ptr), value :: e, ctx
            type(c_funptr), value :: value
            real(c_double), intent(out) :: sum
            type(pbs_phase_stats), intent(out), optional :: stats
        end function pbs_executor_reduce_sum

        integer(c_int) function pbs_executor_end_iteration(e, end) bind(C, name="pbs_executor_end_iteration")
            import :: c_int, c_ptr, pbs_iteration_end
            type(c_ptr), value :: e
            type(pbs_iteration_end), intent(out), optional :: end
        end function pbs_executor_end_iteration

        ! The run ends after `iterations` more end_iteration calls (0 forgets it): "pbs" and the
        ! remappers start no rebalancing at the last one's end ("pbs" none the iterations left
        ! would not repay).
        integer(c_int) function pbs_executor_hint_iterations_left(e, iterations) &
                bind(C, name="pbs_executor_hint_iterations_left")
            import :: c_int, c_ptr, c_int64_t
            type(c_ptr), value :: e
            integer(c_int64_t), value :: iterations
        end function pbs_executor_hint_iterations_left

        integer(c_int) function pbs_executor_on_each_thread(e, f, ctx) bind(C, name="pbs_executor_on_each_thread")
            import :: c_int, c_ptr, c_funptr
            type(c_ptr), value :: e, ctx
            type(c_funptr), value :: f
        end function pbs_executor_on_each_thread

        integer(c_int) function pbs_executor_hint_loads(e, loads, n) bind(C, name="pbs_executor_hint_loads")
            import :: c_int, c_ptr, c_double, c_size_t
            type(c_ptr), value :: e
            real(c_double), intent(in) :: loads(*)
            integer(c_size_t), value :: n
        end function pbs_executor_hint_loads

        ! momentum(3, n): x, y, z of each box's summed particle velocities; particles(n).
        integer(c_int) function pbs_executor_hint_motion(e, momentum, particles, n) &
                bind(C, name="pbs_executor_hint_motion")
            import :: c_int, c_ptr, c_double, c_size_t
            type(c_ptr), value :: e
            real(c_double), intent(in) :: momentum(*), particles(*)
            integer(c_size_t), value :: n
        end function pbs_executor_hint_motion

        integer(c_int) function pbs_executor_owners(e, owners, n) bind(C, name="pbs_executor_owners")
            import :: c_int, c_ptr, c_int32_t, c_size_t
            type(c_ptr), value :: e
            integer(c_int32_t), intent(out) :: owners(*)
            integer(c_size_t), value :: n
        end function pbs_executor_owners

        integer(c_int) function pbs_current_worker() bind(C, name="pbs_current_worker")
            import :: c_int
        end function pbs_current_worker

        subroutine pbs_executor_free(e) bind(C, name="pbs_executor_free")
            import :: c_ptr
            type(c_ptr), value :: e
        end subroutine pbs_executor_free

        type(c_ptr) function pbs_mapper_new(nx, ny, nz, workers, seed) bind(C, name="pbs_mapper_new")
            import :: c_ptr, c_size_t, c_int64_t
            integer(c_size_t), value :: nx, ny, nz, workers
            integer(c_int64_t), value :: seed
        end function pbs_mapper_new

        integer(c_int) function pbs_mapper_owners(m, owners, n) bind(C, name="pbs_mapper_owners")
            import :: c_int, c_ptr, c_int32_t, c_size_t
            type(c_ptr), value :: m
            integer(c_int32_t), intent(out) :: owners(*)
            integer(c_size_t), value :: n
        end function pbs_mapper_owners

        integer(c_int) function pbs_mapper_victims(m, worker, victims, n) bind(C, name="pbs_mapper_victims")
            import :: c_int, c_ptr, c_int32_t, c_size_t
            type(c_ptr), value :: m
            integer(c_size_t), value :: worker, n
            integer(c_int32_t), intent(out) :: victims(*)
        end function pbs_mapper_victims

        integer(c_int) function pbs_mapper_end_iteration(m, loads, n, end) bind(C, name="pbs_mapper_end_iteration")
            import :: c_int, c_ptr, c_double, c_size_t, pbs_iteration_end
            type(c_ptr), value :: m
            real(c_double), intent(in) :: loads(*)
            integer(c_size_t), value :: n
            type(pbs_iteration_end), intent(out), optional :: end
        end function pbs_mapper_end_iteration

        ! The run ends after `iterations` more pbs_mapper_end_iteration calls (0 forgets it).
        integer(c_int) function pbs_mapper_hint_iterations_left(m, iterations) &
                bind(C, name="pbs_mapper_hint_iterations_left")
            import :: c_int, c_ptr, c_int64_t
            type(c_ptr), value :: m
            integer(c_int64_t), value :: iterations
        end function pbs_mapper_hint_iterations_left

        subroutine pbs_mapper_free(m) bind(C, name="pbs_mapper_free")
            import :: c_ptr
            type(c_ptr), value :: m
        end subroutine pbs_mapper_free

        integer(c_int) function pbs_tiling_grid(cells_x, cells_y, tile_x, tile_y, nx, ny) &
            bind(C, name="pbs_tiling_grid")
            import :: c_int, c_size_t
            integer(c_size_t), value :: cells_x, cells_y, tile_x, tile_y
            integer(c_size_t), intent(out) :: nx, ny
        end function pbs_tiling_grid

        integer(c_int) function pbs_tiling_cells(cells_x, cells_y, tile_x, tile_y, k, x0, x1, y0, y1) &
            bind(C, name="pbs_tiling_cells")
            import :: c_int, c_size_t
            integer(c_size_t), value :: cells_x, cells_y, tile_x, tile_y, k
            integer(c_size_t), intent(out) :: x0, x1, y0, y1
        end function pbs_tiling_cells

        integer(c_int) function pbs_tiling_grid_3d(cells, tile, grid) bind(C, name="pbs_tiling_grid_3d")
            import :: c_int, c_size_t
            integer(c_size_t), intent(in) :: cells(3), tile(3)
            integer(c_size_t), intent(out) :: grid(3)
        end function pbs_tiling_grid_3d

        integer(c_int) function pbs_tiling_cells_3d(cells, tile, k, lo, hi) bind(C, name="pbs_tiling_cells_3d")
            import :: c_int, c_size_t
            integer(c_size_t), intent(in) :: cells(3), tile(3)
            integer(c_size_t), value :: k
            integer(c_size_t), intent(out) :: lo(3), hi(3)
        end function pbs_tiling_cells_3d
    end interface

    ! The C calls that take or give strings, wrapped by the procedures below.
    interface
        type(c_ptr) function c_last_error() bind(C, name="pbs_last_error")
            import :: c_ptr
        end function c_last_error

        type(c_ptr) function c_version() bind(C, name="pbs_version")
            import :: c_ptr
        end function c_version

        type(c_ptr) function c_executor_new(scheduler, nx, ny, nz, threads, pin) bind(C, name="pbs_executor_new")
            import :: c_ptr, c_char, c_size_t, c_int
            character(kind=c_char), intent(in) :: scheduler(*)
            integer(c_size_t), value :: nx, ny, nz, threads
            integer(c_int), value :: pin
        end function c_executor_new

        type(c_ptr) function c_executor_new_with(scheduler, nx, ny, nz, threads, pin, settings) &
            bind(C, name="pbs_executor_new_with")
            import :: c_ptr, c_char, c_size_t, c_int
            character(kind=c_char), intent(in) :: scheduler(*)
            integer(c_size_t), value :: nx, ny, nz, threads
            integer(c_int), value :: pin
            type(c_ptr), intent(in) :: settings(*)
        end function c_executor_new_with

        type(c_ptr) function c_partitioner_new(nx, ny, nz, vcores, method, seed) bind(C, name="pbs_partitioner_new")
            import :: c_ptr, c_char, c_size_t, c_int64_t
            integer(c_size_t), value :: nx, ny, nz, vcores
            character(kind=c_char), intent(in) :: method(*)
            integer(c_int64_t), value :: seed
        end function c_partitioner_new

        integer(c_size_t) function c_strlen(s) bind(C, name="strlen")
            import :: c_ptr, c_size_t
            type(c_ptr), value :: s
        end function c_strlen
    end interface

contains

    ! The message of the last failed call on this thread, or '' if none failed.
    function pbs_error_message() result(message)
        character(len=:), allocatable :: message
        message = fortran_string(c_last_error())
    end function pbs_error_message

    ! The library's version, "MAJOR.MINOR.PATCH" (pbs_version).
    function pbs_library_version() result(version)
        character(len=:), allocatable :: version
        version = fortran_string(c_version())
    end function pbs_library_version

    ! A C string as a Fortran string ('' for a null pointer).
    function fortran_string(p) result(text)
        type(c_ptr), intent(in) :: p
        character(len=:), allocatable :: text
        character(kind=c_char), pointer :: chars(:)
        integer(c_size_t) :: i, n
        if (.not. c_associated(p)) then
            text = ''
            return
        end if
        n = c_strlen(p)
        call c_f_pointer(p, chars, [n])
        allocate (character(len=n) :: text)
        do i = 1, n
            text(i:i) = chars(i)
        end do
    end function fortran_string

    ! pbs_executor_new (generic pbs_executor_create, sizes of kind c_size_t).
    function executor_create(scheduler, nx, ny, nz, threads, pin) result(e)
        character(len=*), intent(in) :: scheduler
        integer(c_size_t), intent(in) :: nx, ny
        integer(c_size_t), intent(in), optional :: nz, threads
        integer(c_int), intent(in), optional :: pin
        type(c_ptr) :: e
        integer(c_size_t) :: depth, workers
        call sizes_or_defaults(nz, threads, depth, workers)
        e = c_executor_new(c_string(scheduler), nx, ny, depth, workers, pin_or_default(pin))
    end function executor_create

    ! pbs_executor_new (generic pbs_executor_create, sizes of the default integer kind).
    function executor_create_default_kind(scheduler, nx, ny, nz, threads, pin) result(e)
        character(len=*), intent(in) :: scheduler
        integer, intent(in) :: nx, ny
        integer, intent(in), optional :: nz, threads
        integer(c_int), intent(in), optional :: pin
        type(c_ptr) :: e
        integer(c_size_t) :: depth, workers
        call default_kind_sizes(nz, threads, depth, workers)
        e = executor_create(scheduler, int(nx, c_size_t), int(ny, c_size_t), depth, workers, pin)
    end function executor_create_default_kind

    ! pbs_executor_new_with (generic pbs_executor_create_with, sizes of kind c_size_t).
    function executor_create_with(scheduler, settings, nx, ny, nz, threads, pin) result(e)
        character(len=*), intent(in) :: scheduler
        character(len=*), intent(in) :: settings(:)
        integer(c_size_t), intent(in) :: nx, ny
        integer(c_size_t), intent(in), optional :: nz, threads
        integer(c_int), intent(in), optional :: pin
        type(c_ptr) :: e
        character(kind=c_char), allocatable, target :: text(:, :)
        type(c_ptr), allocatable :: entries(:)
        integer(c_size_t) :: depth, workers
        integer :: i, c, n
        allocate (text(len(settings) + 1, size(settings)), entries(size(settings) + 1))
        do i = 1, size(settings)
            n = len_trim(settings(i))
            do c = 1, n
                text(c, i) = settings(i) (c:c)
            end do
            text(n + 1, i) = c_null_char
            entries(i) = c_loc(text(1, i))
        end do
        entries(size(settings) + 1) = c_null_ptr
        call sizes_or_defaults(nz, threads, depth, workers)
        e = c_executor_new_with(c_string(scheduler), nx, ny, depth, workers, pin_or_default(pin), entries)
    end function executor_create_with

    ! pbs_executor_new_with (generic pbs_executor_create_with, sizes of the default kind).
    function executor_create_with_default_kind(scheduler, settings, nx, ny, nz, threads, pin) result(e)
        character(len=*), intent(in) :: scheduler
        character(len=*), intent(in) :: settings(:)
        integer, intent(in) :: nx, ny
        integer, intent(in), optional :: nz, threads
        integer(c_int), intent(in), optional :: pin
        type(c_ptr) :: e
        integer(c_size_t) :: depth, workers
        call default_kind_sizes(nz, threads, depth, workers)
        e = executor_create_with(scheduler, settings, int(nx, c_size_t), int(ny, c_size_t), depth, workers, pin)
    end function executor_create_with_default_kind

    ! `nz` and `threads` where given, else 1 and 0 (PBS_NUM_THREADS or a worker per core).
    subroutine sizes_or_defaults(nz, threads, depth, workers)
        integer(c_size_t), intent(in), optional :: nz, threads
        integer(c_size_t), intent(out) :: depth, workers
        depth = 1
        workers = 0
        if (present(nz)) depth = nz
        if (present(threads)) workers = threads
    end subroutine sizes_or_defaults

    ! `pin` where given, else PBS_PIN_WORKERS (as pbs.hpp's default).
    integer(c_int) function pin_or_default(pin)
        integer(c_int), intent(in), optional :: pin
        pin_or_default = PBS_PIN_WORKERS
        if (present(pin)) pin_or_default = pin
    end function pin_or_default

    ! sizes_or_defaults for sizes of the default kind (a negative one becomes a size past any
    ! grid or thread count, which the library refuses by name).
    subroutine default_kind_sizes(nz, threads, depth, workers)
        integer, intent(in), optional :: nz, threads
        integer(c_size_t), intent(out) :: depth, workers
        call sizes_or_defaults(depth=depth, workers=workers)
        if (present(nz)) depth = int(nz, c_size_t)
        if (present(threads)) workers = int(threads, c_size_t)
    end subroutine default_kind_sizes

    ! pbs_partitioner_new; `method` '' means the default ("power-cells").
    function pbs_partitioner_create(nx, ny, nz, vcores, method, seed) result(p)
        integer(c_size_t), intent(in) :: nx, ny, nz, vcores
        character(len=*), intent(in) :: method
        integer(c_int64_t), intent(in) :: seed
        type(c_ptr) :: p
        character(len=:), allocatable :: name
        name = method
        if (len_trim(name) == 0) name = 'power-cells'
        p = c_partitioner_new(nx, ny, nz, vcores, c_string(name), seed)
    end function pbs_partitioner_create

    ! `s` without its trailing blanks, ended by a NUL, for a `const char *`.
    pure function c_string(s) result(c)
        character(len=*), intent(in) :: s
        character(kind=c_char, len=:), allocatable :: c
        c = trim(s)//c_null_char
    end function c_string
end module pbs
