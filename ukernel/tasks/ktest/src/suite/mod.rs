//! The test table: every test, in the order it runs, grouped by topic.

mod errors;
mod faults;
mod fpu;
mod ipc;
mod irq;
mod lifecycle;
mod linux;
mod mem;
mod prio;
mod sched;
mod virt;

use crate::common::TestResult;
use crate::threads::numbers_in_use;

/// A test: its name (as printed) and the function that runs it.
pub type Test = (&'static str, fn() -> TestResult);

pub static TESTS: &[Test] = &[
    // IPC
    (
        "ipc_send_to_waiting_receiver",
        ipc::send_to_waiting_receiver,
    ),
    (
        "ipc_send_blocks_until_received",
        ipc::send_blocks_until_received,
    ),
    ("ipc_call_and_reply", ipc::call_and_reply),
    (
        "ipc_reply_wait_serves_repeatedly",
        ipc::reply_wait_serves_repeatedly,
    ),
    (
        "ipc_receive_from_specific_sender",
        ipc::receive_from_specific_sender,
    ),
    ("ipc_receive_from_any_sender", ipc::receive_from_any_sender),
    ("ipc_long_message_same_space", ipc::long_message_same_space),
    (
        "ipc_long_message_across_spaces",
        ipc::long_message_across_spaces,
    ),
    ("ipc_between_child_spaces", ipc::ipc_between_child_spaces),
    ("timeout_send_zero", ipc::send_timeout_zero),
    ("timeout_receive_zero", ipc::receive_timeout_zero),
    ("timeout_relative_expires", ipc::relative_timeouts_expire),
    ("timeout_never_completes", ipc::never_timeout_completes),
    // Error paths
    ("err_invalid_destinations", errors::invalid_destinations),
    ("err_malformed_tags", errors::malformed_tags),
    ("err_map_without_acceptor", errors::map_without_acceptor),
    ("err_unknown_syscall", errors::unknown_syscall),
    (
        "err_no_privilege_outside_root",
        errors::no_privilege_outside_root,
    ),
    (
        "err_thread_control_invalid_ids",
        errors::thread_control_invalid_ids,
    ),
    ("err_kdebug_bad_buffers", errors::kdebug_rejects_bad_buffers),
    (
        "err_kdebug_names_only_reachable_threads",
        errors::kdebug_names_only_reachable_threads,
    ),
    (
        "kdebug_reads_write_only_page",
        errors::kdebug_reads_write_only_page,
    ),
    ("kernel_info_and_timebase", errors::kernel_info_and_timebase),
    // Memory
    ("map_child_reads_page", mem::map_child_reads_page),
    ("memops_match_a_byte_loop", mem::memops_match_a_byte_loop),
    (
        "map_shared_writes_both_ways",
        mem::map_shared_writes_both_ways,
    ),
    (
        "map_read_only_write_faults",
        mem::map_read_only_write_faults,
    ),
    ("grant_moves_mapping", mem::grant_moves_mapping),
    (
        "grant_without_kernel_memory_keeps_page",
        mem::grant_without_kernel_memory_keeps_page,
    ),
    ("unmap_revokes_recursively", mem::unmap_revokes_recursively),
    ("unmap_write_downgrades", mem::unmap_write_downgrades),
    ("unmap_flush_own", mem::unmap_flush_own),
    (
        "large_entry_follows_each_page",
        mem::large_entry_follows_each_page,
    ),
    (
        "large_entry_unmapped_page_faults",
        mem::large_entry_unmapped_page_faults,
    ),
    ("pagefault_stack_pages", mem::pagefault_stack_pages),
    (
        "pagefault_message_contents",
        mem::pagefault_message_contents,
    ),
    (
        "pagefault_read_only_region",
        mem::pagefault_read_only_region,
    ),
    ("space_isolation", mem::spaces_are_isolated),
    (
        "space_threads_share_mappings",
        mem::threads_share_their_space,
    ),
    ("space_distinct_pids", mem::spaces_have_distinct_pids),
    // Threads
    ("thread_create_delete", lifecycle::thread_create_delete),
    (
        "thread_delete_cancels_partners",
        lifecycle::delete_cancels_blocked_partners,
    ),
    (
        "exreg_read_blocked_thread",
        lifecycle::exreg_reads_blocked_thread,
    ),
    ("exreg_halt_and_resume", lifecycle::exreg_halt_and_resume),
    (
        "exreg_get_and_set_frame",
        lifecycle::exreg_get_and_set_frame,
    ),
    ("exreg_abort_ipc", lifecycle::exreg_abort_ipc),
    // Scheduling
    ("sched_round_robin_fair", sched::round_robin_is_fair),
    ("sched_priority_order", sched::priority_order),
    (
        "sched_thread_switch_alternates",
        sched::thread_switch_alternates,
    ),
    // Priorities: schedulers and ceilings (issue 9, finding 2)
    (
        "prio_child_cannot_raise_itself",
        prio::child_cannot_raise_itself,
    ),
    (
        "prio_ceiling_bounds_the_scheduler",
        prio::ceiling_bounds_the_scheduler,
    ),
    ("prio_delegation", prio::delegation),
    ("prio_spinner_starves_nobody", prio::spinner_starves_nobody),
    // Interrupts
    ("irq_uart1_thre", irq::uart1_interrupts),
    // Faults
    ("exc_privileged_instruction", faults::privileged_instruction),
    ("exc_illegal_instruction", faults::illegal_instruction),
    ("exc_jump_into_kernel", faults::jump_into_kernel),
    ("exc_store_into_kernel", faults::store_into_kernel),
    (
        "fault_without_pager_stops_thread",
        faults::fault_without_pager_stops_thread,
    ),
    // Virtualization: the root as the VMM of small guests
    ("vcpu_create_and_state", virt::create_and_state),
    ("vcpu_runs_guest_code", virt::runs_guest_code),
    (
        "vcpu_page_fault_second_stage",
        virt::page_fault_second_stage,
    ),
    ("vcpu_trace_points", virt::trace_points),
    ("vcpu_exit_accounting", virt::exit_accounting),
    ("vcpu_transfer_mask", virt::transfer_mask),
    ("vcpu_control_errors", virt::control_errors),
    ("vcpu_guest_kill_isolated", virt::guest_kill_isolated),
    ("vcpu_irq_injection", virt::irq_injection),
    (
        "vcpu_reply_injects_exceptions",
        virt::reply_injects_exceptions,
    ),
    ("vcpu_syscall_reflected", virt::syscall_reflected),
    ("vcpu_idle_fault", virt::idle_fault),
    ("vcpu_mmio_fault", virt::mmio_fault),
    ("vcpu_mmio_above_4g", virt::mmio_above_4g),
    ("vcpu_mmio_fp_transfer", virt::mmio_fp_transfer),
    (
        "vcpu_state_running_decrementer",
        virt::state_running_decrementer,
    ),
    (
        "vcpu_slots_exhausted_and_reused",
        virt::slots_exhausted_and_reused,
    ),
    // The paravirtual interface (Linux's KVM hypercalls and magic page)
    ("pv_hypercalls", virt::pv::hypercalls),
    ("pv_off_is_syscall", virt::pv::off_is_syscall),
    ("pv_idle", virt::pv::idle),
    ("pv_magic_page", virt::pv::magic_page),
    ("pv_critical_section", virt::pv::critical_section),
    // The FPU for native threads
    ("fpu_native_threads_switch", fpu::native_threads_switch_fpu),
    // The Linux personality's reflection path
    ("linux_syscalls_reflected", linux::syscalls_reflected),
    ("linux_root_space_refused", linux::root_space_refused),
    // Last: the tests cleaned up after themselves.
    ("harness_no_leaked_threads", no_leaked_threads),
];

/// Every thread the tests created has been deleted again.
fn no_leaked_threads() -> TestResult {
    let n = numbers_in_use();
    ensure!(
        n == 0,
        "thread numbers are still in use",
        "{n} numbers still taken"
    );
    Ok(())
}
