//! The caller's floating-point modes on every worker.
//!
//! Rounding mode, flush-to-zero and denormals-are-zero are per thread, and a thread starts with
//! its creator's. A program that sets them after creating an executor (`fesetround`,
//! `_MM_SET_FLUSH_ZERO_MODE`) changed them on the caller, which runs worker 0's boxes, and not
//! on the other workers: a box's result then depended on the thread that ran it, and a checksum
//! on the scheduler. So each phase carries the caller's modes and a worker whose own differ
//! takes them before it runs a task (LLVM's OpenMP runtime does the same for its teams,
//! `KMP_INHERIT_FP_CONTROL`; libgomp does not). Reading them takes about 6 ns on this 2-core
//! VM (`stmxcsr` and `fnstcw`; once on the caller and once on each worker a phase, against the
//! pool's 0.25 µs of its own a phase); setting them happens only when they changed.
//!
//! x86-64: MXCSR's control bits (rounding, flush-to-zero, denormals-are-zero, exception masks;
//! not its sticky status flags) and the x87 control word. AArch64: FPCR. Elsewhere, and under
//! Miri, nothing is carried.

/// The calling thread's floating-point modes, packed (0 where none are carried).
#[inline]
pub(crate) fn current() -> u64 {
    imp::current()
}

/// Gives the calling thread the modes `modes`, which [`current`] read on some thread of this
/// process, if its own differ.
#[inline]
pub(crate) fn adopt(modes: u64) {
    imp::adopt(modes)
}

#[cfg(all(target_arch = "x86_64", not(miri)))]
mod imp {
    use std::arch::asm;

    /// MXCSR's sticky exception flags (bits 0-5), which computations set: not a mode.
    const MXCSR_FLAGS: u32 = 0x3f;

    pub fn mxcsr() -> u32 {
        let mut csr: u32 = 0;
        // SAFETY: stmxcsr stores the 32-bit MXCSR to the valid, aligned `csr`; SSE is part of
        // x86-64.
        unsafe { asm!("stmxcsr [{}]", in(reg) &mut csr, options(nostack, preserves_flags)) };
        csr
    }

    pub fn x87_control() -> u16 {
        let mut cw: u16 = 0;
        // SAFETY: fnstcw stores the 16-bit x87 control word to the valid `cw`, raising nothing.
        unsafe { asm!("fnstcw [{}]", in(reg) &mut cw, options(nostack, preserves_flags)) };
        cw
    }

    pub fn current() -> u64 {
        u64::from(mxcsr() & !MXCSR_FLAGS) | u64::from(x87_control()) << 32
    }

    pub fn adopt(modes: u64) {
        let (csr, cw) = (mxcsr(), x87_control());
        let (want_csr, want_cw) = (modes as u32, (modes >> 32) as u16);
        if csr & !MXCSR_FLAGS != want_csr {
            let new = want_csr | (csr & MXCSR_FLAGS);
            // SAFETY: ldmxcsr loads a value whose reserved bits are zero (they were in the
            // caller's MXCSR, read by stmxcsr) from the valid `new`.
            unsafe { asm!("ldmxcsr [{}]", in(reg) &new, options(nostack, preserves_flags)) };
        }
        if cw != want_cw {
            // SAFETY: fldcw loads a control word read from another thread by fnstcw, from the
            // valid `want_cw`.
            unsafe { asm!("fldcw [{}]", in(reg) &want_cw, options(nostack, preserves_flags)) };
        }
    }
}

#[cfg(all(target_arch = "aarch64", not(miri)))]
mod imp {
    use std::arch::asm;

    pub fn current() -> u64 {
        let fpcr: u64;
        // SAFETY: reading FPCR has no side effect.
        unsafe { asm!("mrs {}, fpcr", out(reg) fpcr, options(nomem, nostack, preserves_flags)) };
        fpcr
    }

    pub fn adopt(modes: u64) {
        if current() != modes {
            // SAFETY: writes back an FPCR value read from another thread by `current`.
            unsafe { asm!("msr fpcr, {}", in(reg) modes, options(nomem, nostack, preserves_flags)) };
        }
    }
}

#[cfg(not(any(all(target_arch = "x86_64", not(miri)), all(target_arch = "aarch64", not(miri)))))]
mod imp {
    pub fn current() -> u64 {
        0
    }
    pub fn adopt(_modes: u64) {}
}

#[cfg(all(test, target_arch = "x86_64", not(miri)))]
mod tests {
    use super::*;

    #[test]
    fn a_thread_takes_the_modes_of_another() {
        let default = current();
        let upward_ftz = std::thread::spawn(|| {
            // Round upward (RC = 10) and flush to zero (FTZ, bit 15).
            adopt((current() & !(0b11 << 13)) | 0b10 << 13 | 1 << 15);
            let modes = current();
            let third = std::hint::black_box(1.0f64) / std::hint::black_box(3.0f64);
            (modes, third)
        })
        .join()
        .unwrap();
        assert_ne!(upward_ftz.0, default);
        assert!(upward_ftz.1 > 1.0 / 3.0, "1/3 rounded upward is above the nearest");
        let here = std::thread::spawn(move || {
            adopt(upward_ftz.0);
            let modes = current();
            adopt(default);
            (modes, current())
        })
        .join()
        .unwrap();
        assert_eq!(here, (upward_ftz.0, default));
    }

    /// The x87 control word travels with MXCSR (its rounding bits are 10-11, its precision
    /// bits 8-9), and adopting modes keeps the sticky exception flags a computation raised.
    #[test]
    fn the_x87_control_word_travels_and_sticky_flags_stay() {
        let default = current();
        let x87_default = (default >> 32) as u16;
        assert_eq!(x87_default, imp::x87_control(), "the x87 word is the upper half");
        assert_ne!(x87_default, 0, "the x87 word has its exception masks set");
        // Round toward zero (RC = 11) and 53-bit precision (PC = 10); flush to zero (MXCSR bit
        // 15), so that MXCSR is written too.
        let x87 = (x87_default & !(0b1111 << 8)) | 0b11 << 10 | 0b10 << 8;
        let wanted = (default & 0xffff_ffff) | 1 << 15 | u64::from(x87) << 32;
        assert_ne!(wanted & 0xffff_ffff, default & 0xffff_ffff, "flush to zero is off by default");
        let (read, flags_kept) = std::thread::spawn(move || {
            // Division by zero raises MXCSR's sticky ZE flag (bit 2).
            std::hint::black_box(std::hint::black_box(1.0f64) / std::hint::black_box(0.0f64));
            assert_ne!(imp::mxcsr() & 0b100, 0, "1/0 raised ZE");
            adopt(wanted);
            let read = (current(), imp::x87_control());
            adopt(default);
            (read, imp::mxcsr() & 0b100 != 0)
        })
        .join()
        .unwrap();
        assert_eq!(read, (wanted, x87));
        assert!(flags_kept, "adopting modes does not clear what computations raised");
    }
}
