//! M2 and C7 (copies): a copy moves its bytes through a bounded buffer, not a temporary as large
//! as the copy, and overlapping ranges copy as memmove does. In a file of its own: it reads the
//! process's peak resident set, which other tests running beside it would disturb.

mod common;

use common::status_kib;
use pipefence::*;
use std::time::Duration;

const T: Duration = Duration::from_secs(60);

/// A 256 MiB copy from a lazily initialized buffer: before, the engine collected the whole
/// copy into a vector (256 MiB more at its peak; a 2 GiB copy aborted under a 6 GB address
/// space limit); now the peak grows by the destination's pages and one chunk.
#[test]
fn c7_a_copy_needs_no_temporary_as_large_as_the_copy() {
    const SIZE: u64 = 256 << 20;
    let d = Device::new(DeviceDesc::default()).unwrap();
    let src = d
        .create_buffer(&BufferDesc::new(SIZE, Heap::DeviceLocal).named("src"))
        .unwrap();
    let dst = d
        .create_buffer(&BufferDesc::new(SIZE, Heap::Readback).named("dst"))
        .unwrap();
    // The source is zero pages, read without being backed.
    let q = d
        .create_queue(&QueueDesc::new(QueueKind::Copy, "copy"))
        .unwrap();
    let mut l = d
        .create_command_list(&CommandListDesc::new(QueueKind::Copy, "l"))
        .unwrap();
    l.copy_buffer_region(dst.gpu_address(), src.gpu_address(), SIZE);
    l.close().unwrap();
    let Some(before) = status_kib("VmHWM:") else {
        eprintln!("no /proc/self/status: skipped");
        return;
    };
    q.execute_command_lists(&[&l]).unwrap();
    d.wait_idle(T).unwrap();
    let after = status_kib("VmHWM:").unwrap();
    let grown = after.saturating_sub(before);
    // The destination's 256 MiB are written (resident); a whole-copy temporary would add as
    // much again.
    assert!(
        grown < (SIZE >> 10) * 3 / 2,
        "peak resident set grew by {grown} KiB for a {} KiB copy",
        SIZE >> 10
    );
    assert_eq!(dst.read_u32(SIZE - 4).unwrap(), 0);
}

/// Copies within one buffer whose ranges overlap, longer than the copy's chunk, in both
/// directions and on both drivers (and strict mode): the result is that of memmove.
#[test]
fn c7_overlapping_copies_move_as_memmove_does() {
    const WORDS: u64 = 40_000;
    for desc in [
        DeviceDesc::default(),
        explore::deterministic_desc(&DeviceDesc::default(), 1),
        DeviceDesc {
            memory_model: MemoryModel::Strict,
            ..explore::deterministic_desc(&DeviceDesc::default(), 2)
        },
    ] {
        for (src_word, dst_word) in [(0u64, 4099u64), (4099, 0), (0, 17), (17, 0)] {
            let d = Device::new(desc.clone()).unwrap();
            let b = d
                .create_buffer(&BufferDesc::new(WORDS * 4 * 2, Heap::Shared).named("b"))
                .unwrap();
            for i in 0..WORDS * 2 {
                b.write_u32(i * 4, i as u32).unwrap();
            }
            let q = d
                .create_queue(&QueueDesc::new(QueueKind::Direct, "q"))
                .unwrap();
            let mut l = d
                .create_command_list(&CommandListDesc::new(QueueKind::Direct, "l"))
                .unwrap();
            l.copy_buffer_region(b.address(dst_word * 4), b.address(src_word * 4), WORDS * 4);
            // Strict mode keeps the copy's writes in the queue's cache until a flush.
            l.write_value32_bottom_of_pipe(
                b.address(WORDS * 8 - 4),
                0,
                Flush::L2_WRITEBACK,
                WriteSource::Value,
            );
            l.close().unwrap();
            q.execute_command_lists(&[&l]).unwrap();
            d.wait_idle(T).unwrap();
            for i in 0..WORDS {
                let got = b.read_u32((dst_word + i) * 4).unwrap();
                assert_eq!(
                    got,
                    (src_word + i) as u32,
                    "{:?} copy {src_word} -> {dst_word}: word {i}",
                    desc.driver
                );
            }
        }
    }
}
