! A grid code in Fortran on the pbs runtime: Jacobi heat diffusion on nx x ny boxes of s x s
! cells, insulated walls, a hot square in one corner, the field in a module array of two time
! levels as a Fortran code keeps it (a box is a square tile of it, which keeps the example
! short: tiles long along the first, contiguous index read longer runs, docs/tiles.md). Each
! box also does extra work in proportion to its temperature, so the load follows the heat. The
! sweep is a pbs phase over the boxes; `serial` runs the same sweep in a plain DO loop, and,
! built with -fopenmp, omp-static, omp-dynamic or omp-guided (with an optional chunk:
! omp-dynamic:16) in an OpenMP loop, for comparison (scripts/openmp_compare.sh times them side
! by side).
!
!   cargo build --release -p pbs-ffi
!   gfortran -O2 [-fopenmp] -Jtarget ffi/include/pbs.f90 ffi/examples/heat.f90 -Ltarget/release \
!       -lpbs_ffi -Wl,-rpath,$PWD/target/release -o heat-f
!   ./heat-f [scheduler=pbs|ws|eager|static|...|serial|omp-...] [threads=0: all cores] [iterations=200]
!
! Prints the time per iteration, the mean phase efficiency (pbs's schedulers; 0 for the loops),
! the rebalancings and a checksum: the bits of the field's sum, added box by box in box order
! (pbs_executor_reduce_sum, or a DO loop), the same under every scheduler, thread count, OpenMP
! schedule and the serial loop.
module heat_field
    use, intrinsic :: iso_c_binding, only: c_associated, c_double, c_int, c_ptr, c_size_t
    use, intrinsic :: ieee_arithmetic, only: ieee_is_nan
    implicit none
    integer, parameter :: nx = 24, ny = 24, s = 16
    ! u(:, :, src) is the field of the last iteration, u(:, :, dst) the one being computed.
    real(c_double), allocatable :: u(:, :, :), sink(:)
    integer :: src = 0, dst = 1
contains

    ! One Jacobi sweep over box `box` (0-based, as pbs counts): reads level `src`, writes the
    ! box's cells of level `dst` and its own `sink` entry only. RECURSIVE: several threads run
    ! it at once.
    recursive integer(c_int) function sweep(ctx, box) bind(C) result(status)
        type(c_ptr), value :: ctx
        integer(c_size_t), value :: box
        integer :: i, j, i0, j0, units, step
        real(c_double) :: heat, z
        call origin(box, i0, j0)
        heat = 0
        do j = j0 + 1, j0 + s
            do i = i0 + 1, i0 + s
                u(i, j, dst) = 0.25_c_double*(u(max(i - 1, 1), j, src) + u(min(i + 1, nx*s), j, src) &
                                              + u(i, max(j - 1, 1), src) + u(i, min(j + 1, ny*s), src))
                heat = heat + u(i, j, dst)
            end do
        end do
        ! Extra work in proportion to the box's mean temperature: a hot box is an expensive one.
        units = int(20*heat/(s*s))
        z = 0.5_c_double
        do step = 1, units
            z = 3.9_c_double*z*(1 - z)
        end do
        sink(box + 1) = z
        status = merge(1, 0, ieee_is_nan(heat)) ! a NaN fails the phase, naming the box
        if (c_associated(ctx)) continue ! ctx is not used: the field is in this module
    end function sweep

    ! The cells of box `box` (0-based, as pbs counts) are i0 + 1 .. i0 + s by j0 + 1 .. j0 + s.
    ! RECURSIVE as the tasks that call it are: the threads call it at once.
    recursive pure subroutine origin(box, i0, j0)
        integer(c_size_t), intent(in) :: box
        integer, intent(out) :: i0, j0
        i0 = int(mod(box, int(nx, c_size_t)))*s
        j0 = int(box/nx)*s
    end subroutine origin

    ! Fills both time levels of box `box`: hot in the corner, cold elsewhere. Run as the first
    ! loop over the boxes, the way the sweeps run, it is the first touch: it places the box's
    ! pages on the NUMA node of the thread that ran it, its owner unless a thief took it (a
    ! phase of equal boxes leaves little to steal). A page here holds columns of several
    ! boxes; heat.c, whose boxes have tiles of their own, has each owner touch its boxes.
    recursive integer(c_int) function fill(ctx, box) bind(C) result(status)
        type(c_ptr), value :: ctx
        integer(c_size_t), value :: box
        integer :: i0, j0
        call origin(box, i0, j0)
        u(i0 + 1:i0 + s, j0 + 1:j0 + s, :) = merge(100, 0, i0 < nx*s/4 .and. j0 < ny*s/4)
        status = 0
        if (c_associated(ctx)) continue
    end function fill

    ! The heat of box `box` in level `src`, for the checksum.
    recursive real(c_double) function box_heat(ctx, box) bind(C) result(heat)
        type(c_ptr), value :: ctx
        integer(c_size_t), value :: box
        integer :: i0, j0
        call origin(box, i0, j0)
        heat = sum(u(i0 + 1:i0 + s, j0 + 1:j0 + s, src))
        if (c_associated(ctx)) continue
    end function box_heat
end module heat_field

program heat
    use, intrinsic :: iso_c_binding, only: c_associated, c_double, c_funloc, c_int, c_int64_t, c_null_ptr, &
                                           c_ptr, c_size_t
    use, intrinsic :: iso_fortran_env, only: error_unit, int64
    use pbs
    use heat_field
    !$ use omp_lib, only: omp_set_num_threads, omp_set_schedule, omp_get_max_threads, omp_sched_static, &
    !$                    omp_sched_dynamic, omp_sched_guided
    implicit none
    character(len=32) :: scheduler
    integer :: threads, iterations, it, rebalancings, status
    integer(int64) :: started, finished, rate
    integer(c_size_t) :: k
    type(c_ptr) :: e
    type(pbs_phase_stats) :: stats
    type(pbs_iteration_end) :: end
    real(c_double) :: total, efficiency
    logical :: openmp, on_pbs
    !$ integer :: colon, chunk

    scheduler = 'pbs'
    threads = 0
    iterations = 200
    do it = 1, command_argument_count()
        call get_command_argument(it, scheduler)
        if (scheduler == '-h' .or. scheduler == '--help') then
            write (*, '(a)') 'usage: heat-f [scheduler=pbs|ws|eager|static|serial|omp-static|omp-dynamic|omp-guided[:chunk]]', &
                '              [threads=0: all cores] [iterations=200]', &
                'Jacobi heat diffusion, the sweep a pbs phase or a plain or OpenMP loop; prints the time per', &
                'iteration, the phases'' efficiency, the rebalancings and a checksum of the field.'
            stop
        end if
    end do
    scheduler = 'pbs'
    if (command_argument_count() >= 1) call get_command_argument(1, scheduler)
    call read_count(2, 'threads', threads)
    call read_count(3, 'iterations', iterations)

    openmp = scheduler(1:4) == 'omp-'
    on_pbs = .not. openmp .and. scheduler /= 'serial'
    if (openmp) then
        status = 1
        !$ colon = index(scheduler, ':')
        !$ chunk = 0
        !$ if (colon > 0) read (scheduler(colon + 1:), *) chunk
        !$ if (colon == 0) colon = len_trim(scheduler) + 1
        !$ status = 0
        !$ select case (scheduler(5:colon - 1))
        !$ case ('static')
        !$     call omp_set_schedule(omp_sched_static, chunk)
        !$ case ('dynamic')
        !$     call omp_set_schedule(omp_sched_dynamic, chunk)
        !$ case ('guided')
        !$     call omp_set_schedule(omp_sched_guided, chunk)
        !$ case default
        !$     status = 2
        !$ end select
        !$ if (threads > 0) call omp_set_num_threads(threads)
        if (status == 1) write (error_unit, '(a,a,a)') 'heat: ', trim(scheduler), ' needs a build with -fopenmp'
        if (status == 2) write (error_unit, '(a,a,a)') 'heat: unknown OpenMP schedule ', trim(scheduler), &
            ': expected omp-static, omp-dynamic or omp-guided, optionally :chunk'
        if (status /= 0) stop 1
    end if
    allocate (u(nx*s, ny*s, 0:1), sink(nx*ny)) ! not touched yet: `fill` does it, box by box
    e = c_null_ptr
    if (on_pbs) then
        e = pbs_executor_create(scheduler, nx, ny, threads=threads)
        if (.not. c_associated(e)) then
            write (error_unit, '(a)') pbs_error_message()
            stop 1
        end if
    end if
    call each_box(fill)

    rebalancings = 0
    efficiency = 0
    ! No rebalancing at the last iteration's end, which no iteration would run on.
    if (on_pbs) status = pbs_executor_hint_iterations_left(e, int(iterations, c_int64_t))
    call system_clock(started, rate)
    do it = 1, iterations
        call each_box(sweep)
        if (on_pbs) then
            efficiency = efficiency + stats%efficiency
            status = pbs_executor_end_iteration(e, end)
            rebalancings = rebalancings + end%rebalanced
        end if
        src = dst
        dst = 1 - src
    end do
    call system_clock(finished)

    if (.not. on_pbs) then
        threads = 1
        !$ if (openmp) threads = omp_get_max_threads()
        total = 0
        do k = 0, nx*ny - 1
            total = total + box_heat(c_null_ptr, k)
        end do
    else
        status = pbs_executor_reduce_sum(e, c_funloc(box_heat), c_null_ptr, total)
        if (status /= PBS_OK) then
            write (error_unit, '(a)') pbs_error_message()
            stop 1
        end if
        threads = int(pbs_executor_threads(e))
        call pbs_executor_free(e)
    end if
    write (*, '(a,a,a,i0,a,a,a,a,a,i0,a,z16.16)') 'scheduler=', trim(scheduler), ' threads=', threads, &
        ' ms_per_iteration=', decimal(1e3_c_double*real(finished - started, c_double)/real(rate, c_double)/iterations), &
        ' efficiency=', decimal(efficiency/iterations), ' rebalancings=', rebalancings, &
        ' checksum=', transfer(total, 0_c_int64_t)
contains
    ! Runs `task` once for every box: a pbs phase (its statistics in `stats`), the OpenMP loop,
    ! or the serial loop.
    subroutine each_box(task)
        procedure(pbs_task) :: task
        if (on_pbs) then
            if (pbs_executor_run_phase(e, c_funloc(task), c_null_ptr, stats) /= PBS_OK) then
                write (error_unit, '(a)') pbs_error_message()
                stop 1
            end if
        else
            !$omp parallel do schedule(runtime) private(status) if(openmp)
            do k = 0, nx*ny - 1
                status = task(c_null_ptr, k)
            end do
            !$omp end parallel do
        end if
    end subroutine each_box

    ! Argument `position` into `value` where given: a whole number, or the program stops (status
    ! 2) naming it.
    subroutine read_count(position, name, value)
        integer, intent(in) :: position
        character(len=*), intent(in) :: name
        integer, intent(inout) :: value
        character(len=32) :: text
        integer :: status
        if (command_argument_count() < position) return
        call get_command_argument(position, text)
        read (text, *, iostat=status) value
        if (status /= 0 .or. verify(trim(text), '0123456789') /= 0) then
            write (error_unit, '(a,a,a,a,a)') 'heat: ', name, " must be a whole number, got '", trim(text), "'"
            stop 2
        end if
    end subroutine read_count

    ! `x` with four decimals and its leading zero ("0.1346", where f0.4 writes ".1346").
    function decimal(x) result(text)
        real(c_double), intent(in) :: x
        character(len=:), allocatable :: text
        character(len=32) :: buffer
        write (buffer, '(f0.4)') x
        text = trim(buffer)
        if (text(1:1) == '.') text = '0'//text
    end function decimal
end program heat
