! The Fortran module (ffi/include/pbs.f90) against the library: every call, its errors, the
! layout of the shared types, and per-box work through a context pointer. Prints the status
! values and the types' layout as abi_probe.c does (c_programs.rs compares both with the Rust
! side), one line per check ("ok: ..." or "FAILED: ..."), a checksum line per scheduler and
! thread count, and "all checks passed" last; exits 1 on a failed check.
module fortran_checks
    use, intrinsic :: iso_c_binding, only: c_associated, c_double, c_f_pointer, c_int, c_int32_t, c_intptr_t, c_ptr, &
                                           c_size_t
    use pbs, only: pbs_current_worker
    implicit none
    integer :: failures = 0

    ! What the tasks of one phase write: a context reached through `ctx`.
    type :: marks
        integer(c_int), allocatable :: runs(:), worker(:)
        integer(c_int) :: failing = -1
    end type marks

contains

    subroutine expect(ok, what)
        logical, intent(in) :: ok
        character(len=*), intent(in) :: what
        if (ok) then
            write (*, '(a,a)') 'ok: ', what
        else
            write (*, '(a,a)') 'FAILED: ', what
            failures = failures + 1
        end if
    end subroutine expect

    ! Marks box `box` as run, by which worker; fails on the box `failing` names.
    recursive integer(c_int) function mark(ctx, box) bind(C) result(status)
        type(c_ptr), value :: ctx
        integer(c_size_t), value :: box
        type(marks), pointer :: m
        call c_f_pointer(ctx, m)
        m%runs(box + 1) = m%runs(box + 1) + 1
        m%worker(box + 1) = pbs_current_worker()
        status = merge(3, 0, int(box) == m%failing)
    end function mark

    ! Marks the boxes first .. past - 1.
    recursive integer(c_int) function mark_range(ctx, first, past) bind(C) result(status)
        type(c_ptr), value :: ctx
        integer(c_size_t), value :: first, past
        integer(c_size_t) :: k
        status = 0
        do k = first, past - 1
            status = max(status, mark(ctx, k))
        end do
    end function mark_range

    ! A value per box whose sum depends on the order of the additions.
    recursive real(c_double) function uneven(ctx, box) bind(C) result(v)
        type(c_ptr), value :: ctx
        integer(c_size_t), value :: box
        v = 1.0_c_double/real(box + 1, c_double) + merge(1e10_c_double, 0.0_c_double, mod(box, 7_c_size_t) == 0)
        if (c_associated(ctx)) continue
    end function uneven

    ! Counts the workers on_each_thread visits.
    recursive subroutine visit(ctx, worker) bind(C)
        type(c_ptr), value :: ctx
        integer(c_size_t), value :: worker
        type(marks), pointer :: m
        call c_f_pointer(ctx, m)
        m%runs(worker + 1) = m%runs(worker + 1) + 1
    end subroutine visit

    ! A line `NAME OFFSET SIZE` of a field at `at` in a value at `base`, as abi_probe.c prints.
    subroutine field_line(name, base, at, bytes)
        character(len=*), intent(in) :: name
        type(c_ptr), intent(in) :: base, at
        integer(c_size_t), intent(in) :: bytes
        write (*, '(a,1x,i0,1x,i0)') name, transfer(at, 0_c_intptr_t) - transfer(base, 0_c_intptr_t), bytes
    end subroutine field_line

    ! Whether `owners` holds `n` ids in 0 .. parts - 1.
    logical function in_range(owners, parts)
        integer(c_int32_t), intent(in) :: owners(:)
        integer(c_size_t), intent(in) :: parts
        in_range = all(owners >= 0 .and. owners < parts)
    end function in_range
end module fortran_checks

program fortran_api
    use, intrinsic :: iso_c_binding, only: c_associated, c_double, c_funloc, c_int, c_int32_t, c_int64_t, c_loc, &
                                           c_null_ptr, c_ptr, c_size_t, c_sizeof
    use pbs
    use fortran_checks
    implicit none
    character(len=8), parameter :: schedulers(4) = [character(len=8) :: 'pbs', 'ws', 'eager', 'static']
    integer(c_size_t), parameter :: nx = 12, ny = 10, n = nx*ny
    type(marks), target :: m
    type(c_ptr) :: e, p, mapper
    type(pbs_phase_stats), target :: stats
    type(pbs_iteration_end), target :: end
    type(pbs_outcome), target :: outcome
    integer(c_int32_t) :: owners(n), victims(2)
    real(c_double) :: loads(n), motion(3 * n), total, expected
    integer(c_size_t) :: threads, k, gx, gy, x0, x1, y0, y1, grid(3), lo(3), hi(3)
    integer :: s, status, it
    integer(c_int) :: why
    character(len=:), allocatable :: msg

    ! The status values and the shared types' layout, for c_programs.rs to compare with Rust's.
    write (*, '(a,9(1x,i0))') 'pbs_status', c_sizeof(why), PBS_OK, PBS_INVALID_ARGUMENT, PBS_NULL_POINTER, &
        PBS_UNSUPPORTED, PBS_INTERNAL_ERROR, PBS_TASK_FAILED, PBS_BUSY, PBS_OUT_OF_RESOURCES
    write (*, '(a,3(1x,i0))') 'pbs_pin', PBS_PIN_OFF, PBS_PIN_WORKERS, PBS_PIN_WORKERS_AND_CALLER
    write (*, '(a,1x,i0)') 'pbs_outcome', c_sizeof(outcome)
    call field_line('pbs_outcome.steps', c_loc(outcome), c_loc(outcome%steps), c_sizeof(outcome%steps))
    call field_line('pbs_outcome.converged', c_loc(outcome), c_loc(outcome%converged), c_sizeof(outcome%converged))
    call field_line('pbs_outcome.max_avg', c_loc(outcome), c_loc(outcome%max_avg), c_sizeof(outcome%max_avg))
    call field_line('pbs_outcome.lower_bound', c_loc(outcome), c_loc(outcome%lower_bound), c_sizeof(outcome%lower_bound))
    call field_line('pbs_outcome.dol_max', c_loc(outcome), c_loc(outcome%dol_max), c_sizeof(outcome%dol_max))
    call field_line('pbs_outcome.dol_min', c_loc(outcome), c_loc(outcome%dol_min), c_sizeof(outcome%dol_min))
    call field_line('pbs_outcome.edge_cut', c_loc(outcome), c_loc(outcome%edge_cut), c_sizeof(outcome%edge_cut))
    call field_line('pbs_outcome.migrations', c_loc(outcome), c_loc(outcome%migrations), c_sizeof(outcome%migrations))
    call field_line('pbs_outcome.elapsed_ms', c_loc(outcome), c_loc(outcome%elapsed_ms), c_sizeof(outcome%elapsed_ms))
    write (*, '(a,1x,i0)') 'pbs_phase_stats', c_sizeof(stats)
    call field_line('pbs_phase_stats.wall_ms', c_loc(stats), c_loc(stats%wall_ms), c_sizeof(stats%wall_ms))
    call field_line('pbs_phase_stats.efficiency', c_loc(stats), c_loc(stats%efficiency), c_sizeof(stats%efficiency))
    call field_line('pbs_phase_stats.affinity', c_loc(stats), c_loc(stats%affinity), c_sizeof(stats%affinity))
    write (*, '(a,1x,i0)') 'pbs_iteration_end', c_sizeof(end)
    call field_line('pbs_iteration_end.rebalanced', c_loc(end), c_loc(end%rebalanced), c_sizeof(end%rebalanced))
    call field_line('pbs_iteration_end.rebalance_ms', c_loc(end), c_loc(end%rebalance_ms), c_sizeof(end%rebalance_ms))
    call field_line('pbs_iteration_end.migrations', c_loc(end), c_loc(end%migrations), c_sizeof(end%migrations))
    call field_line('pbs_iteration_end.max_avg', c_loc(end), c_loc(end%max_avg), c_sizeof(end%max_avg))

    ! The library this program runs with is the module's version.
    msg = pbs_library_version()
    call expect(msg == PBS_VERSION_STRING, 'the library is version '//PBS_VERSION_STRING//': '//msg)

    ! Errors come back as a null handle or a status, with a message naming the cause.
    ! (Fortran's .and. may skip an operand that is a function call: each message is read first.)
    e = pbs_executor_create('no-such-scheduler', nx, ny, 1_c_size_t, 2_c_size_t, PBS_PIN_OFF)
    why = pbs_last_error_status()
    msg = pbs_error_message()
    call expect(.not. c_associated(e) .and. why == PBS_INVALID_ARGUMENT .and. index(msg, 'no-such-scheduler') > 0, &
                'an unknown scheduler is named: '//msg)
    e = pbs_executor_create('pbs', 0_c_size_t, ny, 1_c_size_t, 2_c_size_t, PBS_PIN_OFF)
    msg = pbs_error_message()
    call expect(.not. c_associated(e) .and. len(msg) > 0, 'an empty grid is refused: '//msg)
    e = pbs_executor_create_with('pbs', [character(len=24) :: 'PBS_TOL=0.01', 'PBS_STEAL=sometimes'], nx, ny, &
                                 1_c_size_t, 2_c_size_t, PBS_PIN_OFF)
    msg = pbs_error_message()
    call expect(.not. c_associated(e) .and. index(msg, 'PBS_STEAL') > 0, 'a bad setting is named: '//msg)
    e = pbs_executor_create('static', -1, 10)
    msg = pbs_error_message()
    call expect(.not. c_associated(e) .and. len(msg) > 0, 'a negative size is refused: '//msg)

    ! The short forms: default-kind sizes, nz 1, threads from PBS_NUM_THREADS or the cores, and
    ! pinning PBS_PIN_WORKERS unless given.
    e = pbs_executor_create('static', 12, 10, threads=2, pin=PBS_PIN_OFF)
    call expect(c_associated(e), 'default-kind sizes')
    if (c_associated(e)) then
        call expect(pbs_executor_threads(e) == 2, 'threads by keyword')
        status = pbs_executor_owners(e, owners, n)
        call expect(status == PBS_OK, 'as many boxes as 12 x 10')
        call pbs_executor_free(e)
    end if
    e = pbs_executor_create_with('pbs', [character(len=12) :: 'PBS_TOL=0.02'], 12, 10, 1, 1)
    call expect(c_associated(e), 'default-kind sizes with settings, the pinning left to its default')
    if (c_associated(e)) then
        call expect(pbs_executor_threads(e) == 1, 'its one thread')
        call pbs_executor_free(e)
    end if
    call expect(pbs_executor_run_phase(c_null_ptr, c_funloc(mark), c_null_ptr) == PBS_NULL_POINTER, &
                'a null executor is refused')

    ! Every scheduler and thread count runs every box once; the sum over the boxes has the same
    ! bits everywhere, that of the additions in box order.
    expected = 0
    do k = 0, n - 1
        expected = expected + uneven(c_null_ptr, k)
    end do
    allocate (m%runs(n), m%worker(n))
    do s = 1, size(schedulers)
        do threads = 1, 3
            e = pbs_executor_create_with(trim(schedulers(s)), [character(len=12) :: 'PBS_TOL=0.02'], nx, ny, &
                                         threads=threads, pin=PBS_PIN_OFF)
            call expect(c_associated(e), trim(schedulers(s))//' starts')
            if (.not. c_associated(e)) cycle
            call expect(pbs_executor_threads(e) == threads, 'its threads')
            do it = 1, 5
                m%runs = 0
                m%worker = -1
                status = pbs_executor_run_phase(e, c_funloc(mark), c_loc(m), stats)
                call expect(status == PBS_OK .and. all(m%runs == 1) .and. all(m%worker >= 0 .and. m%worker < threads), &
                            'every box once, on one of the workers')
                call expect(stats%wall_ms >= 0 .and. stats%efficiency >= 0, 'phase statistics')
                status = pbs_executor_end_iteration(e, end)
                ! Only "pbs" measures its threads' loads (max_avg 0 elsewhere).
                call expect(status == PBS_OK .and. (end%max_avg >= 1 .or. schedulers(s) /= 'pbs'), 'an iteration ends')
            end do
            m%runs = 0
            status = pbs_executor_run_phase_ranges(e, c_funloc(mark_range), c_loc(m))
            call expect(status == PBS_OK .and. all(m%runs == 1), 'ranges cover every box once')
            total = -1
            status = pbs_executor_reduce_sum(e, c_funloc(uneven), c_null_ptr, total)
            call expect(status == PBS_OK .and. transfer(total, 0_c_int64_t) == transfer(expected, 0_c_int64_t), &
                        'the sum in box order')
            write (*, '(a,a,a,i0,a,z16.16)') 'checksum scheduler=', trim(schedulers(s)), ' threads=', threads, &
                ' value=', transfer(total, 0_c_int64_t)
            m%runs = 0
            status = pbs_executor_on_each_thread(e, c_funloc(visit), c_loc(m))
            call expect(status == PBS_OK .and. all(m%runs(1:threads) == 1), 'once on each thread')
            ! A failing task fails the phase and names its box; every other box still ran.
            m%runs = 0
            m%failing = 37
            status = pbs_executor_run_phase(e, c_funloc(mark), c_loc(m))
            msg = pbs_error_message()
            call expect(status == PBS_TASK_FAILED .and. index(msg, '37') > 0 .and. all(m%runs == 1), &
                        'a failing box is named: '//msg)
            m%failing = -1
            status = pbs_executor_owners(e, owners, n)
            if (schedulers(s) == 'pbs' .or. schedulers(s) == 'static') then
                call expect(status == PBS_OK .and. in_range(owners, threads), 'planned owners')
            else
                call expect(status == PBS_UNSUPPORTED, 'no planned owners for '//trim(schedulers(s)))
            end if
            loads = 1
            loads(1:n/4) = 3
            status = pbs_executor_hint_loads(e, loads, n)
            call expect(merge(PBS_OK, PBS_UNSUPPORTED, schedulers(s) == 'pbs') == status, 'cost hints')
            call expect(pbs_executor_hint_loads(e, loads, n - 1) == PBS_INVALID_ARGUMENT, 'hints of the wrong length')
            motion = 0.5
            call expect(pbs_executor_hint_motion(e, motion, loads, n) == PBS_UNSUPPORTED, 'no use for motion hints')
            call pbs_executor_free(e)
        end do
    end do
    call expect(pbs_current_worker() == -1, 'no worker outside a phase')

    ! The balancer alone.
    p = pbs_partitioner_create(nx, ny, 1_c_size_t, 4_c_size_t, '', 7_c_int64_t)
    call expect(c_associated(p), 'a partitioner')
    loads = 1
    loads(1:30) = 2
    status = pbs_partitioner_balance(p, loads, n, PBS_DEFAULT_TOL, 500_c_size_t, owners, outcome)
    call expect(status == PBS_OK .and. outcome%converged == 1 .and. outcome%max_avg <= 1.05 .and. &
                in_range(owners, 4_c_size_t), 'balanced')
    loads(1) = -1
    status = pbs_partitioner_balance(p, loads, n, PBS_DEFAULT_TOL, 500_c_size_t, owners)
    msg = pbs_error_message()
    call expect(status == PBS_INVALID_ARGUMENT .and. index(msg, 'load') > 0, 'a negative load is named: '//msg)
    call pbs_partitioner_free(p)
    p = pbs_partitioner_create(nx, ny, 1_c_size_t, 4_c_size_t, 'no-such-method', 7_c_int64_t)
    msg = pbs_error_message()
    call expect(.not. c_associated(p) .and. index(msg, 'no-such-method') > 0, 'an unknown method: '//msg)

    ! The mapper, for a runtime that runs the tasks itself.
    mapper = pbs_mapper_new(nx, ny, 1_c_size_t, 3_c_size_t, 1_c_int64_t)
    call expect(c_associated(mapper), 'a mapper')
    loads = 1
    loads(1:30) = 5
    do it = 1, 4
        status = pbs_mapper_end_iteration(mapper, loads, n, end)
    end do
    call expect(status == PBS_OK, 'the mapper takes loads')
    status = pbs_mapper_owners(mapper, owners, n)
    call expect(status == PBS_OK .and. in_range(owners, 3_c_size_t), 'mapper owners')
    status = pbs_mapper_victims(mapper, 0_c_size_t, victims, 2_c_size_t)
    call expect(status == PBS_OK .and. all(victims == 1 .or. victims == 2) .and. victims(1) /= victims(2), &
                'mapper victims')
    call pbs_mapper_free(mapper)

    ! Cells to boxes, ragged edges included.
    status = pbs_tiling_grid(100_c_size_t, 70_c_size_t, 16_c_size_t, 16_c_size_t, gx, gy)
    call expect(status == PBS_OK .and. gx == 7 .and. gy == 5, 'a 7 x 5 grid of tiles')
    status = pbs_tiling_cells(100_c_size_t, 70_c_size_t, 16_c_size_t, 16_c_size_t, 34_c_size_t, x0, x1, y0, y1)
    call expect(status == PBS_OK .and. x0 == 96 .and. x1 == 100 .and. y0 == 64 .and. y1 == 70, 'the last, ragged tile')
    status = pbs_tiling_grid_3d([10_c_size_t, 10_c_size_t, 10_c_size_t], [4_c_size_t, 5_c_size_t, 10_c_size_t], grid)
    call expect(status == PBS_OK .and. all(grid == [3, 2, 1]), 'a 3D grid of tiles')
    status = pbs_tiling_cells_3d([10_c_size_t, 10_c_size_t, 10_c_size_t], [4_c_size_t, 5_c_size_t, 10_c_size_t], &
                                 5_c_size_t, lo, hi)
    call expect(status == PBS_OK .and. all(lo == [8, 5, 0]) .and. all(hi == [10, 10, 10]), 'a 3D tile')
    call expect(pbs_tiling_grid(0_c_size_t, 70_c_size_t, 16_c_size_t, 16_c_size_t, gx, gy) == PBS_INVALID_ARGUMENT, &
                'an empty domain is refused')

    deallocate (msg) ! the main program's variables outlive it: freed for AddressSanitizer's leak check
    if (failures > 0) then
        write (*, '(i0,a)') failures, ' checks failed'
        stop 1
    end if
    write (*, '(a)') 'all checks passed'
end program fortran_api
